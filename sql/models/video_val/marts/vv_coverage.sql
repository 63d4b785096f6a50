-- Per run, checkpoint and data_source: how many of the source's questions have a response
-- (the same under every policy).
SELECT run_id, step, data_source, n_rows, n_responded, n_rows - n_responded AS n_missing,
       n_responded / nullif(n_rows, 0) AS coverage
FROM {{ ref('vv_scores') }}
WHERE data_source <> 'macro'
  AND policy = (SELECT policy FROM {{ ref('vv_scoring_policies') }} WHERE is_default)
ORDER BY run_id, step, data_source
