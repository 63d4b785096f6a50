-- Intermediate: where "first record wins" is decided, once. A key (run_id, step, uid, sample_idx)
-- read more than once is answered by its first record in (source_file, file_version, line)
-- order; this lists every other record of such a key, with that first record (where it was read
-- and its response digest). int_vv_response_status (duplicate / conflict) and
-- int_vv_accepted_scores (the scores the views count) both read it, so they agree by
-- construction. Only keys read more than once are ranked: they are found through a hash of the
-- key (one BIGINT to group on, 11 M rows in about a second), then ranked on the key itself, so a
-- hash collision costs nothing but a comparison and a campaign without repeats costs one
-- aggregation. A uid that is no question is listed like any other; int_vv_response_status calls
-- it unknown_uid first, and it is never scored.
WITH keyed AS (
    SELECT run_id, step, uid, sample_idx, source_file, file_version, line, response_digest,
           hash(run_id, step, uid, sample_idx) AS key_hash
    FROM {{ ref('stg_vv_responses') }}
),
repeated AS (SELECT key_hash FROM keyed GROUP BY key_hash HAVING count(*) > 1),
ranked AS (
    SELECT run_id, step, uid, sample_idx, source_file, file_version, line, response_digest,
           row_number() OVER by_key AS n,
           first_value(struct_pack(source_file, file_version, line, response_digest)) OVER by_key
               AS first
    FROM keyed
    WHERE key_hash IN (SELECT key_hash FROM repeated)
    WINDOW by_key AS (PARTITION BY run_id, step, uid, sample_idx
                      ORDER BY source_file, file_version, line)
)
SELECT run_id, step, uid, sample_idx, source_file, file_version, line, response_digest, first
FROM ranked
WHERE n > 1
