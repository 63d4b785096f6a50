-- Every response scored under extraction policy v1 (see README): `extracted` letter,
-- `extraction_method` (boxed_answer / fallback / none), `correct`, `format_ok`, and
-- `composite` = 0.8·correct + 0.2·format_ok.
SELECT run_id, step, uid, sample_idx, data_source, extracted, extraction_method, correct,
       format_ok, composite, option_letters, ground_truth, policy
FROM stg_vv_scored_responses
