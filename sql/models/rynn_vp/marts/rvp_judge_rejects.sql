-- Judge answers that made no valid judgment record, each once (its first sight), with the
-- raw answer and why. The evaluation stays unscored unless a later attempt (a `retry`, sent
-- with the next sample index) is accepted. `source_file` is the journal that noted it.
SELECT 'judge/calls/' || dagster_run_id || '.jsonl' AS source_file, judge_run_id,
       evaluation_id, case_id, role, attempt, sample, reason, raw, request_key, logged_at
FROM {{ ref('stg_rvp_judge_rejects') }}
