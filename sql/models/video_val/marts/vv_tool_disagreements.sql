-- Where another tool's own recorded verdict on a response (a verl validation dump, an lmms-eval
-- sample log) differs from benchlake's scoring of the same output under the default policy: its
-- accuracy (verl's `acc`, lmms-eval's `score`) against `correct`, its letter (verl's `pred`,
-- lmms-eval's `pred_answer`) against the extracted letter (an empty letter and none agree). Rows
-- whose tool recorded neither are never listed.
WITH recorded AS (
    SELECT run_id, step, uid, sample_idx, data_source, response, tool, tool_score, source_file,
           file_version, line,
           coalesce(TRY_CAST(json_extract(tool_extras, '$.acc') AS DOUBLE),
                    CASE WHEN tool = 'lmms-eval' THEN tool_score END) AS tool_acc,
           coalesce(json_extract_string(tool_extras, '$.pred'),
                    json_extract_string(tool_extras, '$.pred_answer')) AS tool_pred
    FROM {{ ref('vv_responses') }}
    WHERE tool IS NOT NULL
),
compared AS (
    SELECT r.*, p.policy, p.extracted, p.extraction_method, p.correct, p.format_ok, p.composite,
           r.tool_acc IS NOT NULL AND r.tool_acc <> CAST(p.correct AS DOUBLE) AS acc_differs,
           r.tool_pred IS NOT NULL AND r.tool_pred <> coalesce(p.extracted, '') AS pred_differs
    FROM recorded AS r
    JOIN {{ ref('int_vv_policy_responses') }} AS p USING (run_id, step, uid, sample_idx)
    JOIN {{ ref('vv_scoring_policies') }} AS d ON d.policy = p.policy AND d.is_default
)
SELECT run_id, step, uid, sample_idx, data_source, tool, policy, tool_score, tool_acc, tool_pred,
       extracted, extraction_method, correct, format_ok, composite,
       concat_ws(', ', CASE WHEN acc_differs THEN 'acc' END,
                 CASE WHEN pred_differs THEN 'pred' END) AS differs_on,
       response, source_file, file_version, line
FROM compared
WHERE acc_differs OR pred_differs
