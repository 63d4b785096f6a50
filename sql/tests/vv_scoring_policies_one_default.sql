-- Exactly one policy is the default: views and reports pick it with
-- (SELECT policy ... WHERE is_default), which must be one row. Returns a row when it is not.
SELECT count(*) FILTER (WHERE is_default) AS n_default
FROM {{ ref('vv_scoring_policies') }}
HAVING count(*) FILTER (WHERE is_default) <> 1
