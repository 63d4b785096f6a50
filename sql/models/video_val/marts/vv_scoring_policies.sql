-- DATA, not logic: one row per scoring policy. A policy chooses a format rule (implemented in
-- dagster_project/video_val/scoring.py, each response is scored under every rule) and the
-- composite's weights; a new policy is a new row here and nothing else re-runs.
-- `card` reads the dataset card literally (the four tags in order, text around them allowed,
-- >= 100 non-whitespace characters in the first think block) and is the default. `strict` is
-- the earlier benchlake rule: the response must be exactly <think>..</think><answer>..</answer>
-- (text before, between or after the blocks fails), which the system prompt asks for but the
-- card's format reward does not require.
SELECT policy, format_rule, CAST(accuracy_weight AS DOUBLE) AS accuracy_weight,
       CAST(format_weight AS DOUBLE) AS format_weight, is_default, description
FROM (VALUES
    ('card', 'card', 0.8, 0.2, true,
     'Dataset card: letter from \boxed{} in <answer>, else lmms-eval fallback; format = the four '
     || 'tags in order with >= 100 non-whitespace characters of thinking; 0.8 acc + 0.2 format'),
    ('strict', 'exact', 0.8, 0.2, false,
     'As card, but format requires exactly <think>T</think><answer>A</answer> and nothing around')
) AS p(policy, format_rule, accuracy_weight, format_weight, is_default, description)
