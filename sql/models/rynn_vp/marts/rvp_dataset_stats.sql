-- The dataset card's statistics, one row per property (values as DOUBLE), computed from the
-- accepted cases. On the real release these read exactly the card's figures (200 cases,
-- 2,215 intervals, ...). Durations are the metadata-derived durations (rvp_media.duration_s).
-- "Endpoints" are interval starts and ends alike (see rvp_endpoint_excesses).
WITH
cases AS (SELECT * FROM {{ ref('rvp_cases') }}),
media AS (SELECT * FROM {{ ref('rvp_media') }}),
intervals AS (SELECT * FROM {{ ref('rvp_intervals') }}),
interval_overlaps AS (SELECT * FROM {{ ref('rvp_interval_overlaps') }}),
whitespace_tasks AS (SELECT * FROM {{ ref('rvp_whitespace_tasks') }}),
per_case AS (SELECT case_id, count(*) AS n FROM intervals GROUP BY case_id),
finals AS (SELECT label FROM intervals WHERE is_final),
excess AS (SELECT excess_s FROM {{ ref('rvp_endpoint_excesses') }}),
props(ord, property, value) AS (
    SELECT 1, 'task_instances', (SELECT count(*) FROM cases)
    UNION ALL SELECT 2, 'unique_instructions', (SELECT count(DISTINCT instruction) FROM cases)
    UNION ALL SELECT 3, 'gt_videos', (SELECT count(*) FROM media)
    UNION ALL SELECT 4, 'initial_images',
        (SELECT count(*) FROM media WHERE initial_width IS NOT NULL)
    UNION ALL SELECT 5, 'annotation_files', (SELECT count(*) FROM cases)
    UNION ALL SELECT 6, 'planning_intervals', (SELECT count(*) FROM intervals)
    UNION ALL SELECT 7, 'non_done_intervals',
        (SELECT count(*) FROM intervals WHERE NOT is_done_label)
    UNION ALL SELECT 8, 'intervals_per_case_min', (SELECT min(n) FROM per_case)
    UNION ALL SELECT 9, 'intervals_per_case_max', (SELECT max(n) FROM per_case)
    UNION ALL SELECT 10, 'intervals_per_case_mean', (SELECT avg(n) FROM per_case)
    UNION ALL SELECT 11, 'intervals_per_case_median', (SELECT median(n) FROM per_case)
    UNION ALL SELECT 12, 'gt_width_min', (SELECT min(width) FROM media)
    UNION ALL SELECT 13, 'gt_width_max', (SELECT max(width) FROM media)
    UNION ALL SELECT 14, 'gt_height_min', (SELECT min(height) FROM media)
    UNION ALL SELECT 15, 'gt_height_max', (SELECT max(height) FROM media)
    UNION ALL SELECT 16, 'gt_duration_min_s', (SELECT min(duration_s) FROM media)
    UNION ALL SELECT 17, 'gt_duration_max_s', (SELECT max(duration_s) FROM media)
    UNION ALL SELECT 18, 'gt_duration_mean_s',
        (SELECT avg(duration_s ORDER BY duration_s) FROM media)
    UNION ALL SELECT 19, 'gt_duration_median_s', (SELECT median(duration_s) FROM media)
    UNION ALL SELECT 20, 'gt_duration_total_min',
        (SELECT sum(duration_s ORDER BY duration_s) / 60 FROM media)
    UNION ALL SELECT 21, 'gt_videos_le_60s',
        (SELECT count(*) FROM media WHERE duration_s <= 60)
    UNION ALL SELECT 22, 'distinct_source_scene_room',
        (SELECT count(DISTINCT (source_group, scene, room_id)) FROM cases)
    UNION ALL SELECT 23, 'distinct_scene_room',
        (SELECT count(DISTINCT (scene, room_id)) FROM cases)
    UNION ALL SELECT 24, 'overlapping_intervals', (SELECT count(*) FROM interval_overlaps)
    UNION ALL SELECT 25, 'endpoints_exceeding_duration', (SELECT count(*) FROM excess)
    UNION ALL SELECT 26, 'endpoints_exceeding_duration_by_over_0_2s',
        (SELECT count(*) FROM excess WHERE excess_s > 0.2)
    UNION ALL SELECT 27, 'max_endpoint_excess_s', (SELECT max(excess_s) FROM excess)
    UNION ALL SELECT 28, 'terminal_done', (SELECT count(*) FROM finals WHERE label = 'Done')
    UNION ALL SELECT 29, 'terminal_done_period',
        (SELECT count(*) FROM finals WHERE label = 'Done.')
    UNION ALL SELECT 30, 'nonstandard_final_labels',
        (SELECT count(*) FROM finals WHERE label NOT IN ('Done', 'Done.'))
    UNION ALL SELECT 31, 'task_text_trailing_whitespace',
        (SELECT count(*) FROM whitespace_tasks)
),
groups AS (
    SELECT 100 AS ord, 'scene:' || scene AS property, count(*) AS value
    FROM cases GROUP BY scene
    UNION ALL
    SELECT 200, 'source_group:' || source_group, count(*) FROM cases GROUP BY source_group
)
SELECT property, CAST(value AS DOUBLE) AS value
FROM (SELECT * FROM props UNION ALL SELECT * FROM groups)
ORDER BY ord, property
