-- Per case: the current GT fingerprint and whether a compilation for it is cached. A cached GT
-- leaves five candidate stages; without one, the first evaluation runs six.
SELECT f.case_id, f.fingerprint, f.prompt_version, f.prompt_source,
       count(g.case_id) > 0 AS cached,
       min(g.source_file) AS compilation_file,
       (SELECT count(*) FROM {{ ref('stg_rvp_gt_compilations') }} s
        WHERE s.case_id = f.case_id AND NOT s.is_current) AS stale_compilations
FROM {{ ref('stg_rvp_gt_fingerprints') }} AS f
LEFT JOIN {{ ref('stg_rvp_gt_compilations') }} AS g
       ON g.case_id = f.case_id AND g.fingerprint = f.fingerprint
GROUP BY ALL
ORDER BY f.case_id
