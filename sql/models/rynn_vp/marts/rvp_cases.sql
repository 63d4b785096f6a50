-- One row per accepted case. `task_matches_instruction` compares the annotation's task text with
-- the instruction after whitespace normalization: the card asks consistency checks to ignore the
-- trailing whitespace some annotation tasks carry, without modifying the source.
SELECT
    case_id, instruction, source_group, scene, room_id, room_no, task_no, variant_no,
    instance_no, has_explicit_plan, plan, n_intervals,
    annotation_task_raw, annotation_task_normalized, annotation_video,
    annotation_task_normalized = regexp_replace(trim(instruction), '\s+', ' ', 'g')
        AS task_matches_instruction
FROM {{ ref('stg_rvp_cases') }}
