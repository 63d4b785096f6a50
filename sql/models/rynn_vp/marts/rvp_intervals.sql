-- Planning intervals of accepted cases with the card's derived properties.
-- * is_done_label: only `Done` and `Done.` are terminal labels. The release's single final
--   `Down.` is preserved as written and NOT reclassified (dataset card, integrity notes).
-- * overlap_prev_s: how far the interval starts before its predecessor ends (raw timestamps are
--   retained upstream; three real intervals overlap by 0.1, 0.3 and 0.1 s).
-- * *_excess_s: how far an endpoint lies beyond the metadata-derived duration.
-- * extract_*_s: the endpoint clamped into the decodable range [first frame, last frame], for
--   frame extraction; the raw start_s/end_s stay beside it as provenance.
SELECT
    i.case_id,
    i.ordinal,
    i."interval",
    i.start_s,
    i.end_s,
    i.label,
    i.label IN ('Done', 'Done.') AS is_done_label,
    i.ordinal = max(i.ordinal) OVER (PARTITION BY i.case_id) AS is_final,
    lag(i."interval") OVER w AS prev_interval,
    greatest(lag(i.end_s) OVER w - i.start_s, 0) AS overlap_prev_s,
    m.duration_s,
    greatest(i.start_s - m.duration_s, 0) AS start_excess_s,
    greatest(i.end_s - m.duration_s, 0) AS end_excess_s,
    least(greatest(i.start_s, m.first_frame_s), m.last_frame_s) AS extract_start_s,
    least(greatest(i.end_s, m.first_frame_s), m.last_frame_s) AS extract_end_s
FROM {{ ref('stg_rvp_intervals') }} AS i
JOIN {{ ref('stg_rvp_cases') }} AS c USING (case_id)
LEFT JOIN {{ ref('rvp_media') }} AS m USING (case_id)
WINDOW w AS (PARTITION BY i.case_id ORDER BY i.ordinal)
