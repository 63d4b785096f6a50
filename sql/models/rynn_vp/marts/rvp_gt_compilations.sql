-- Recorded GT compilations (entity correspondence, goal predicates, necessary process evidence,
-- allowed alternatives, uncertainties) keyed by fingerprint. `is_current` is false when the
-- case's inputs or the prompt version changed since: the cache entry no longer applies.
SELECT case_id, fingerprint, is_current, prompt_version, judge_run_id, compilation_json,
       judge_model, source_file, file_version, line
FROM {{ ref('stg_rvp_gt_compilations') }}
