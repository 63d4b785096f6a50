-- Intermediate: what vv_run_pairs shows, kept up to date pair by pair (an incremental table).
-- A pair is compared when it is wanted (int_vv_wanted_pairs) and not held yet on the same parts
-- of both sides; the pre_hook deletes every row no longer wanted on the current parts (a side
-- rewritten by a late file, a best checkpoint that changed). So a new checkpoint costs its own
-- pairs: against the other runs at its step, and, when it changes its run's best, the pairs of
-- that best: O(runs + steps) pairs, whatever the number of pairs in all. Only the questions of
-- the checkpoints compared are read (their parts, by name: macros/vv_question_parts.sql).
{%- set todo -%}
SELECT * FROM {{ ref('int_vv_wanted_pairs') }}
{%- if is_incremental() %}
ANTI JOIN (SELECT DISTINCT policy, run_id, step, base_run_id, base_step, part, base_part
           FROM {{ this }}) AS held
     USING (policy, run_id, step, base_run_id, base_step, part, base_part)
{%- endif %}
{%- endset %}
{%- set parts = none -%}
{%- if is_incremental() and execute -%}
  {%- set parts = run_query("SELECT part FROM (" ~ todo ~ ") UNION SELECT base_part FROM ("
                            ~ todo ~ ") ORDER BY 1").columns[0].values() -%}
{%- endif %}
WITH pairs AS MATERIALIZED ({{ todo }})
SELECT c.*, p.part, p.base_part
FROM {{ vv_paired_comparisons('pairs', parts) }} AS c
JOIN pairs AS p USING (policy, run_id, step, base_run_id, base_step)
