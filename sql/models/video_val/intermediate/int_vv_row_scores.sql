-- Intermediate: one row per (policy, run, step, question): the mean over its samples (a single
-- sample is itself), so a question weighs the same whatever its number of samples. The samples
-- are counted once per question, when its checkpoint's responses arrived
-- (stg_vv_question_scores), then each policy weighs the counts: its composite, the mean of
-- accuracy_weight·correct + format_weight·format_ok over the samples, is the same weighted sum
-- of the two means. Each format rule's column (vv_format_rules) is averaged under its own name.
-- `part`: the file of raw_vv_question_scores the checkpoint's rows come from (a filter on it
-- opens only those files: macros/raw_parts.sql).
WITH questions AS (
    SELECT run_id, step, part, uid, data_source, k, n_correct / k AS accuracy
           {%- for column in vv_format_columns() %},
           n_{{ column }} / k AS {{ column }}
           {%- endfor %}
    FROM {{ ref('stg_vv_question_scores') }}
),
rated AS (
    SELECT p.policy, q.run_id, q.step, q.part, q.uid, q.data_source,
           coalesce(v.video_uri, q.uid) AS video, q.k, q.accuracy,
           {{ vv_format_ok('p.format_rule', 'q') }} AS format_rate, p.accuracy_weight,
           p.format_weight
    FROM questions AS q
    LEFT JOIN {{ ref('stg_vv_questions') }} AS v USING (uid)
    CROSS JOIN {{ ref('vv_scoring_policies') }} AS p
)
SELECT policy, run_id, step, uid, data_source, video, k, accuracy, format_rate,
       accuracy_weight * accuracy + format_weight * format_rate AS composite, part
FROM rated
