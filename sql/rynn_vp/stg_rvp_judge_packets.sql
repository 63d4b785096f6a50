-- Staging: the rvp_judge_packets table as written by its asset.
SELECT *, {{abspath(packet_path)}} AS packet_abspath
FROM read_parquet('{{tables}}/rvp_judge_packets.parquet')
