-- Staging: the PyAV probe of every gt.mp4 (and the size of initial.png), accepted or not.
SELECT * FROM read_parquet('{{tables}}/rvp_media.parquet')
