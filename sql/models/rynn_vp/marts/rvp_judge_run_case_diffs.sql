-- Two judge runs of the same system side by side, per profile, system and case: the scores of
-- judge_run_id against base_judge_run_id's, the per-case differences (run - base run), the cases
-- where the order of the two runs flips against their mean difference, and the hallucinations one
-- run found and the other did not. Every ordered pair of runs, over the cases both scored.
-- The rules are shared with rvp_case_diffs: macros/rvp_case_diffs.sql.
{{ rvp_case_diffs('judge_run_id') }}
