-- Staging: the rvp_judgments table as written by its asset (a part per segment of files), and
-- which attempt of each (system, case, judge run) is final: the highest manager review, else
-- the highest attempt (accepted attempts of a judge run have distinct numbers).
-- Kept part by part (an incremental table: macros/raw_parts.sql). A build reads the parts it
-- does not hold yet and decides `is_final` again for the (system, case, judge run) groups they
-- hold rows of, and for the groups left without a final attempt by the pre_hook's delete of the
-- parts gone (a group that lost another attempt keeps its final one): every other row stays as
-- it is. `delete+insert` on the group replaces the held rows of each group decided again.
WITH new_rows AS (
    SELECT *, parse_filename(filename) AS part
    FROM {{ source('rynn_vp_raw', 'rvp_judgments') }}
    WHERE {{ new_parts('rvp_judgments', 'parse_filename(filename)') }}
),
attempts AS (
    SELECT * FROM new_rows
    {%- if is_incremental() %}
    UNION ALL BY NAME
    SELECT held.* EXCLUDE (is_final)
    FROM {{ this }} AS held
    SEMI JOIN (SELECT system, case_id, judge_run_id FROM new_rows
               UNION
               SELECT system, case_id, judge_run_id FROM {{ this }}
               GROUP BY ALL HAVING NOT bool_or(is_final)) AS decided
           USING (system, case_id, judge_run_id)
    {%- endif %}
)
SELECT system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind,
       row_number() OVER (
           PARTITION BY system, case_id, judge_run_id
           ORDER BY coalesce(attempt_kind = 'manager_review', false) DESC, attempt DESC) = 1
           AS is_final,
       * EXCLUDE (system, case_id, evaluation_id, judge_run_id, attempt, attempt_kind)
FROM attempts
