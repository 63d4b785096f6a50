-- Every case of the snapshot, accepted or refused: the case folders read and the cases its
-- SHA256SUMS.txt names. The leaderboard shows their count beside n_cases and n_scored, so cases
-- refused at ingest never shrink the denominators out of sight.
SELECT case_id, bool_or(accepted) AS accepted
FROM (
    SELECT case_id, true AS accepted FROM {{ ref('stg_rvp_cases') }}
    UNION ALL
    -- the stages that refuse a case as a whole (rynn_vp.ingest.CASE_STAGES; a candidate's
    -- stage names only the candidate)
    SELECT case_id, false FROM {{ ref('stg_rvp_rejects') }}
    WHERE case_id IS NOT NULL AND stage IN ('rvp_checksums', 'rvp_media', 'rvp_cases')
) AS c
GROUP BY case_id
