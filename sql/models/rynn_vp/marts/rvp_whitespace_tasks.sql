-- Anomaly: annotation `task` strings with extra trailing whitespace (source left unmodified).
SELECT case_id, annotation_task_raw, annotation_task_normalized, task_matches_instruction
FROM {{ ref('rvp_cases') }}
WHERE regexp_matches(annotation_task_raw, '\s$')
ORDER BY case_id
