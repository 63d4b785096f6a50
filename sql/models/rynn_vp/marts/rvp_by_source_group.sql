-- Leaderboard per source group (source identifiers, not participant counts; denominators
-- shown), with error bars as in rvp_leaderboard (the macro rvp_scores_by).
{{ rvp_scores_by(['profile', 'judge_run_id', 'system', 'modality', 'source_group']) }}
ORDER BY m.profile, m.judge_run_id, m.system, m.modality, m.source_group
