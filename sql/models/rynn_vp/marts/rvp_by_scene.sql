-- Leaderboard per scene label (means over scored cases of that scene; denominators shown), with
-- error bars as in rvp_leaderboard (the macro rvp_scores_by).
{{ rvp_scores_by(['profile', 'judge_run_id', 'system', 'modality', 'scene']) }}
ORDER BY m.profile, m.judge_run_id, m.system, m.modality, m.scene
