-- System × case: is there a usable candidate? Missing candidates get no evidence and, later,
-- no score (never a 0).
WITH systems AS (SELECT DISTINCT system FROM {{ ref('stg_rvp_candidates') }})
SELECT s.system, c.case_id,
       CASE WHEN k.case_id IS NULL THEN 'missing'
            WHEN NOT k.ok THEN 'unusable'
            ELSE 'present' END AS status,
       k.modality, k.problem
FROM systems AS s
CROSS JOIN {{ ref('rvp_cases') }} AS c
LEFT JOIN {{ ref('stg_rvp_candidates') }} AS k ON k.system = s.system AND k.case_id = c.case_id
ORDER BY s.system, c.case_id
