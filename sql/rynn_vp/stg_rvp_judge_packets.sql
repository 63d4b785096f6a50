-- Staging: the rvp_judge_packets table as written by its asset.
SELECT * FROM read_parquet('{{tables}}/rvp_judge_packets.parquet')
