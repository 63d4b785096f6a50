-- Staging: the acquired snapshot (one row): where it came from and the revision actually read.
SELECT * FROM read_parquet('{{tables}}/rvp_snapshot.parquet')
