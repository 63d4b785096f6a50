-- Staging: accepted cases as written by the rvp_cases asset (rejected ones are in rvp_rejects).
SELECT * FROM read_parquet('{{tables}}/rvp_cases.parquet')
