-- Intermediate: the scored responses the views count: the first record of each (run_id, step,
-- uid, sample_idx) in (source_file, file_version, line) order, as int_vv_response_status
-- accepts it; duplicates and conflicts are left out. Repeated keys are found through a hash
-- of the key (one BIGINT to group on, 11 M rows in about a second), then ranked on the key
-- itself, so a hash collision costs nothing but a comparison. One column per format rule
-- (vv_format_rules).
WITH scored AS (
    SELECT *, hash(run_id, step, uid, sample_idx) AS key_hash
    FROM {{ ref('stg_vv_scored_responses') }}
),
repeated AS (SELECT key_hash FROM scored GROUP BY key_hash HAVING count(*) > 1),
later AS (
    SELECT source_file, file_version, line
    FROM scored WHERE key_hash IN (SELECT key_hash FROM repeated)
    QUALIFY row_number() OVER (PARTITION BY run_id, step, uid, sample_idx
                               ORDER BY source_file, file_version, line) > 1
)
SELECT s.run_id, s.step, s.uid, s.sample_idx, s.data_source, s.option_letters, s.ground_truth,
       s.extracted, s.extraction_method, s.correct
       {%- for column in vv_format_columns() %}, s.{{ column }}{% endfor %}
FROM scored AS s
ANTI JOIN later AS l USING (source_file, file_version, line)
