-- Intermediate: where "first record wins" is read from. A key (run_id, step, uid, sample_idx)
-- read more than once is answered by its first record in (source_file, file_version, line)
-- order; this lists every other record of such a key, with that first record (where it was read
-- and its response digest). A key repeats only inside its own checkpoint, so this is decided
-- once per checkpoint, when its question scores are counted, over the responses of known
-- questions (stg_vv_later_records; dagster_project/video_val/question_scores.py): no view
-- groups the keys of the whole campaign. int_vv_response_status (duplicate / conflict) and
-- int_vv_accepted_scores (the scores the views count) both read it, so they agree by
-- construction; a response of a uid that is no question is refused as unknown_uid whatever its
-- key, and is never scored.
SELECT run_id, step, uid, sample_idx, source_file, file_version, line, response_digest,
       struct_pack(source_file := first_source_file, file_version := first_file_version,
                   line := first_line, response_digest := first_response_digest) AS first
FROM {{ ref('stg_vv_later_records') }}
