-- DATA, not logic: one row per reporting profile. Scores are recomputed for every profile here,
-- so a new profile is a new row (plus its rows in rvp_metric_weights) and nothing else: changing
-- reporting weights is not a new visual evaluation (dataset card).
-- legacy_final_score is the frozen native total 0.55 PI + 0.45 VR, the same for every profile.
SELECT profile, CAST(w_pi AS DOUBLE) AS w_pi, CAST(w_vr AS DOUBLE) AS w_vr,
       CAST(w_vq AS DOUBLE) AS w_vq, CAST(legacy_w_pi AS DOUBLE) AS legacy_w_pi,
       CAST(legacy_w_vr AS DOUBLE) AS legacy_w_vr, description
FROM (VALUES
    ('current', 0.50, 0.40, 0.10, 0.55, 0.45,
     'Dataset card current profile: Overall = 0.50 PI + 0.40 VR + 0.10 VQ')
) AS p(profile, w_pi, w_vr, w_vq, legacy_w_pi, legacy_w_vr, description)
