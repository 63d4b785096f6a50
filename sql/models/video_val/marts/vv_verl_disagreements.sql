-- Where verl's own recorded verdict on a row of a verl validation dump differs from benchlake's
-- scoring of the same output under the default policy: verl's `acc` against `correct`, verl's
-- `pred` against the extracted letter (an empty pred and no letter agree). Rows whose reward
-- recorded neither `acc` nor `pred` are never listed.
WITH verl AS (
    SELECT run_id, step, uid, sample_idx, data_source, response, verl_score, source_file,
           file_version, line,
           TRY_CAST(json_extract(verl_extras, '$.acc') AS DOUBLE) AS verl_acc,
           json_extract_string(verl_extras, '$.pred') AS verl_pred
    FROM {{ ref('vv_responses') }}
    WHERE verl_extras IS NOT NULL
),
compared AS (
    SELECT v.*, p.policy, p.extracted, p.extraction_method, p.correct, p.format_ok, p.composite,
           v.verl_acc IS NOT NULL AND v.verl_acc <> CAST(p.correct AS DOUBLE) AS acc_differs,
           v.verl_pred IS NOT NULL AND v.verl_pred <> coalesce(p.extracted, '') AS pred_differs
    FROM verl AS v
    JOIN {{ ref('int_vv_policy_responses') }} AS p USING (run_id, step, uid, sample_idx)
    JOIN {{ ref('vv_scoring_policies') }} AS d ON d.policy = p.policy AND d.is_default
)
SELECT run_id, step, uid, sample_idx, data_source, policy, verl_score, verl_acc, verl_pred,
       extracted, extraction_method, correct, format_ok, composite,
       concat_ws(', ', CASE WHEN acc_differs THEN 'acc' END,
                 CASE WHEN pred_differs THEN 'pred' END) AS differs_on,
       response, source_file, file_version, line
FROM compared
WHERE acc_differs OR pred_differs
