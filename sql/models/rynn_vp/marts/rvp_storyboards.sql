-- Five 2x3 storyboards per video candidate (fewer when the candidate is truncated).
SELECT b.evaluation_id, b.system, b.case_id, b.storyboard_no, b.image_path, b.image_abspath,
       b.panel_count,
       b.first_panel, b.last_panel, b.width, b.height
FROM {{ ref('stg_rvp_storyboards') }} AS b
JOIN {{ ref('stg_rvp_cases') }} USING (case_id)
