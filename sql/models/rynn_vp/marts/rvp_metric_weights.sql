-- DATA, not logic: per profile, the weight of each metric within its axis.
-- plan_rule: 'without_plan' / 'with_plan' apply to cases without / with an explicit plan (only a
-- task supplying an explicit plan activates PI-5, which reweights PI-1..PI-4); 'any' always.
-- Weight 0 marks a diagnostic metric (PI-6, VQ-D1..VQ-D7): recorded, never scored. VQ is
-- holistic: the VQ axis is the VQ score itself, not an average of its diagnostics.
SELECT profile, axis, metric, plan_rule, CAST(weight AS DOUBLE) AS weight
FROM (VALUES
    ('current', 'PI', 'PI-1', 'without_plan', 0.50),
    ('current', 'PI', 'PI-2', 'without_plan', 0.20),
    ('current', 'PI', 'PI-3', 'without_plan', 0.15),
    ('current', 'PI', 'PI-4', 'without_plan', 0.15),
    ('current', 'PI', 'PI-1', 'with_plan', 0.40),
    ('current', 'PI', 'PI-2', 'with_plan', 0.20),
    ('current', 'PI', 'PI-3', 'with_plan', 0.15),
    ('current', 'PI', 'PI-4', 'with_plan', 0.15),
    ('current', 'PI', 'PI-5', 'with_plan', 0.10),
    ('current', 'PI', 'PI-6', 'any', 0.0),
    ('current', 'VR', 'VR-1', 'any', 0.20),
    ('current', 'VR', 'VR-2', 'any', 0.20),
    ('current', 'VR', 'VR-3', 'any', 0.15),
    ('current', 'VR', 'VR-4', 'any', 0.15),
    ('current', 'VR', 'VR-5', 'any', 0.10),
    ('current', 'VR', 'VR-6', 'any', 0.10),
    ('current', 'VR', 'VR-7', 'any', 0.07),
    ('current', 'VR', 'VR-8', 'any', 0.03),
    ('current', 'VQ', 'VQ', 'any', 1.0),
    ('current', 'VQ', 'VQ-D1', 'any', 0.0),
    ('current', 'VQ', 'VQ-D2', 'any', 0.0),
    ('current', 'VQ', 'VQ-D3', 'any', 0.0),
    ('current', 'VQ', 'VQ-D4', 'any', 0.0),
    ('current', 'VQ', 'VQ-D5', 'any', 0.0),
    ('current', 'VQ', 'VQ-D6', 'any', 0.0),
    ('current', 'VQ', 'VQ-D7', 'any', 0.0)
) AS w(profile, axis, metric, plan_rule, weight)
