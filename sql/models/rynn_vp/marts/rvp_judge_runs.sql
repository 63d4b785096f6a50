-- Totals per judge run over every `benchlake judge` that worked for it: requests sent (HTTP
-- tries) and answered from the cache, tokens, cost, and the budget they count against.
SELECT judge_run_id,
       count(DISTINCT dagster_run_id) AS invocations,
       count(*) FILTER (WHERE NOT cache_hit) AS requests_sent,
       count(*) FILTER (WHERE cache_hit) AS cache_hits,
       -- a try that got no usable answer: an HTTP error, a timeout, an empty answer, a refusal
       count(*) FILTER (WHERE status NOT IN ('ok', 'cached')) AS failed_tries,
       CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
       CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens,
       coalesce(sum(cost ORDER BY cost), 0) AS cost,
       min(logged_at) AS first_at, max(logged_at) AS last_at
FROM {{ ref('stg_rvp_judge_calls') }}
GROUP BY judge_run_id
ORDER BY judge_run_id
