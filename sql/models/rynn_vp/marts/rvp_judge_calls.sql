-- The ledger of `benchlake judge`: one row per request, cache hits included (nothing sent,
-- cost 0), each HTTP try of a request its own row (a 429 then an answer: two rows), in the
-- order they ended. A killed run's requests are here too: every request is journaled as it ends.
SELECT judge_run_id, evaluation_id, case_id, role, attempt, sample, try_no, cache_hit, status,
       http_status, request_id, request_key, model, input_tokens, output_tokens, latency_s,
       cost, detail, logged_at, dagster_run_id
FROM {{ ref('stg_rvp_judge_calls') }}
