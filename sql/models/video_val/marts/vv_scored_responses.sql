-- Every response scored under every scoring policy (vv_scoring_policies): `extracted`,
-- `extraction_method` (boxed_answer / fallback / none), `correct`, and the policy's
-- `format_ok` and `composite`. Filter one policy with WHERE policy = 'card' (the default).
SELECT policy, run_id, step, uid, sample_idx, data_source, extracted, extraction_method,
       correct, format_ok, composite, option_letters, ground_truth
FROM {{ ref('int_vv_policy_responses') }}
