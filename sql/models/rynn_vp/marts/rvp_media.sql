-- GT media of accepted cases. `duration_s` is the metadata-derived duration (what the card's
-- statistics use); `first_frame_s`/`last_frame_s` bound the decodable range used for clamping.
SELECT
    m.case_id, m.duration_s, m.fps, m.width, m.height, m.frame_count, m.codec,
    m.first_frame_s, m.last_frame_s, m.first_frame_decodes, m.last_frame_decodes,
    m.size_bytes, m.initial_width, m.initial_height, m.initial_size_bytes
FROM {{ ref('stg_rvp_media') }} AS m
JOIN {{ ref('stg_rvp_cases') }} AS c USING (case_id)
WHERE m.ok
