-- Staging: the rvp_gt_fingerprints table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_gt_fingerprints.parquet')
