-- Staging: the rvp_judgments table as written by its asset (a part per segment of files), and
-- which attempt of each (system, case, judge run) is final: the highest manager review, else
-- the highest attempt (accepted attempts of a judge run have distinct numbers).
-- Kept part by part (an incremental table: macros/raw_parts.sql). A build reads the parts it
-- does not hold yet and decides `is_final` again in the (system, case, judge run) groups they
-- hold rows of, and in the groups left without a final attempt by the pre_hook's delete of the
-- parts gone (a group that lost another attempt keeps its final one). It writes the new rows and
-- the held rows whose `is_final` changed (`delete+insert` on the attempt's key): a group with
-- many attempts in other parts costs reading them, not writing them again.
WITH new_rows AS (
    SELECT *, parse_filename(filename) AS part
    FROM {{ source('rynn_vp_raw', 'rvp_judgments') }}
    WHERE {{ new_parts('rvp_judgments', 'parse_filename(filename)') }}
),
{%- if is_incremental() %}
held AS (
    SELECT held.*
    FROM {{ this }} AS held
    SEMI JOIN (SELECT system, case_id, judge_run_id FROM new_rows
               UNION
               SELECT system, case_id, judge_run_id FROM {{ this }}
               GROUP BY ALL HAVING NOT bool_or(is_final)) AS decided
           USING (system, case_id, judge_run_id)
),
attempts AS (
    SELECT * FROM new_rows
    UNION ALL BY NAME
    SELECT * EXCLUDE (is_final) FROM held
),
{%- else %}
attempts AS (SELECT * FROM new_rows),
{%- endif %}
ranked AS (
    SELECT system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind,
           row_number() OVER (
               PARTITION BY system, case_id, judge_run_id
               ORDER BY coalesce(attempt_kind = 'manager_review', false) DESC, attempt DESC) = 1
               AS is_final,
           * EXCLUDE (system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind)
    FROM attempts
)
{%- if is_incremental() %}
SELECT r.*
FROM ranked AS r
LEFT JOIN held AS h
       ON h.system = r.system AND h.case_id = r.case_id AND h.judge_run_id = r.judge_run_id
      AND h.attempt = r.attempt
WHERE h.is_final IS DISTINCT FROM r.is_final
{%- else %}
SELECT * FROM ranked
{%- endif %}
