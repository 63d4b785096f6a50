-- Intermediate: the scored responses the views count: the first record of each (run_id, step,
-- uid, sample_idx) in (source_file, file_version, line) order, as int_vv_response_status
-- accepts it; duplicates and conflicts are left out.
WITH repeated AS (
    SELECT run_id, step, uid, sample_idx,
           min(struct_pack(source_file, file_version, line)) AS first
    FROM {{ ref('stg_vv_scored_responses') }}
    GROUP BY run_id, step, uid, sample_idx HAVING count(*) > 1
)
SELECT s.run_id, s.step, s.uid, s.sample_idx, s.data_source, s.option_letters, s.ground_truth,
       s.extracted, s.extraction_method, s.correct, s.format_card, s.format_exact
FROM {{ ref('stg_vv_scored_responses') }} AS s
LEFT JOIN repeated AS k USING (run_id, step, uid, sample_idx)
WHERE k.first IS NULL OR k.first = struct_pack(s.source_file, s.file_version, s.line)
