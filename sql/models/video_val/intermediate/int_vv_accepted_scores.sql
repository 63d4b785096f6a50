-- Intermediate: the scored responses the views count: the first record of each (run_id, step,
-- uid, sample_idx), the one int_vv_response_status accepts (both leave out the records of
-- int_vv_later_records); duplicates and conflicts are left out. One column per format rule
-- (vv_format_rules).
SELECT s.run_id, s.step, s.uid, s.sample_idx, s.data_source, s.option_letters, s.ground_truth,
       s.extracted, s.extraction_method, s.correct
       {%- for column in vv_format_columns() %}, s.{{ column }}{% endfor %}
FROM {{ ref('stg_vv_scored_responses') }} AS s
ANTI JOIN {{ ref('int_vv_later_records') }} AS l USING (source_file, file_version, line)
