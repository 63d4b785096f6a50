-- t975 reads the table as a list indexed by df, so df must be 1, 2, ..., n without a gap (with
-- df unique, that is: smallest 1, largest the number of rows). Returns a row when it is not.
SELECT min(df) AS min_df, max(df) AS max_df, count(*) AS n_rows
FROM {{ ref('stat_t_quantiles') }}
HAVING min(df) <> 1 OR max(df) <> count(*)
