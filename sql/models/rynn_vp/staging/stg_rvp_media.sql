-- Staging: the PyAV probe of every gt.mp4 (and the size of initial.png), accepted or not.
SELECT * FROM {{ source('rynn_vp_raw', 'rvp_media') }}
