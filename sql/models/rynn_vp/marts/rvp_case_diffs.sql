-- Two systems of the same modality side by side, per profile, judge run and case: both systems'
-- scores, the per-case differences (system - base_system), the cases where their order flips,
-- and the hallucinations one has and the other does not. Every ordered pair, over the cases both
-- scored (a case missing on one side is no diff: the pair's n_common is rvp_system_pairs').
-- The rules are shared with rvp_judge_run_case_diffs: macros/rvp_case_diffs.sql.
{{ rvp_case_diffs('system') }}
