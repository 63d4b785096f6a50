-- Staging: the rvp_gt_compilations table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_gt_compilations.parquet')
