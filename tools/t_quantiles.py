"""Writes the seed `sql/seeds/stat_t_quantiles.csv`: Student's t 0.975 quantiles for df 1..1000,
computed by scipy, for the 95 % intervals of the views (DuckDB has no t distribution); and
`sql/seeds/stat_normal_quantiles.csv`: the standard normal quantiles the power figures use
(vv_power: z(0.975) for alpha = 0.05 two-sided, z(0.8) for 80 % power), as lmms-eval 0.7.3's
`power_analysis` gets them from scipy (`norm.ppf(1 - alpha / 2)`, `norm.ppf(power)`).

Above df 1000 the views use the Cornish-Fisher expansion in `sql/macros/statistics.sql` (within
1e-15 of scipy there). scipy is needed only here and in the tests, never by the pipeline, so the
catalog stays plain SQL any duckdb CLI can run. Each value is written as `repr(float)`, the
shortest text that reads back as the same double, and the seed's column is DOUBLE
(`sql/seeds/stat_t_quantiles.yml`), so the table holds scipy's doubles bit for bit.
`tests/warehouse/test_statistics.py` checks the committed file equals what this writes.

    .venv/bin/python tools/t_quantiles.py
"""

from __future__ import annotations

from pathlib import Path

MAX_DF = 1000
SEED = Path(__file__).resolve().parents[1] / "sql/seeds/stat_t_quantiles.csv"
NORMAL_SEED = SEED.with_name("stat_normal_quantiles.csv")
NORMAL_P = (0.8, 0.975)


def seed_csv() -> str:
    from scipy import stats

    rows = "".join(f"{df},{float(stats.t.ppf(0.975, df))!r}\n" for df in range(1, MAX_DF + 1))
    return "df,t975\n" + rows


def normal_seed_csv() -> str:
    from scipy import stats

    return "p,z\n" + "".join(f"{p!r},{float(stats.norm.ppf(p))!r}\n" for p in NORMAL_P)


if __name__ == "__main__":
    SEED.write_text(seed_csv(), encoding="utf-8")
    NORMAL_SEED.write_text(normal_seed_csv(), encoding="utf-8")
    print(f"wrote {SEED} and {NORMAL_SEED}")
