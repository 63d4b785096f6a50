"""What the Dagster UI shows of a table: rounded as each column means, whole when small."""

import duckdb
import pyarrow as pa

from dagster_project.warehouse.previews import (
    COMPLETE_ROWS,
    HEAD_ROWS,
    column_decimals,
    markdown_preview,
    preview,
)


def test_scores_round_to_two_places_and_rates_to_four() -> None:
    decimals = column_decimals("rvp_leaderboard")
    assert decimals["final_score"] == decimals["pi"] == decimals["final_score_ci_low"] == 2
    assert "n_scored" not in decimals  # not a score: the default rounding applies
    assert column_decimals("vv_scores") == {}  # rates: the default, 4 places
    table = pa.table({"final_score": [62.706785714285715, 14.0], "accuracy": [0.59166666, 0.5]})
    text = markdown_preview(table, decimals={"final_score": 2})
    assert "| 62.71 | 0.5917 |" in text and "| 14 | 0.5 |" in text
    assert "62.706" not in text


def test_a_small_mart_is_shown_whole_and_a_large_one_by_its_head() -> None:
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE VIEW small AS SELECT range AS n FROM range({COMPLETE_ROWS})")
    con.execute(f"CREATE VIEW large AS SELECT range AS n FROM range({COMPLETE_ROWS + 1})")
    count, text = preview(con, "small")
    assert count == COMPLETE_ROWS and text.count("\n| ") == COMPLETE_ROWS
    assert "more rows" not in text
    count, text = preview(con, "large")
    assert count == COMPLETE_ROWS + 1 and text.count("\n| ") == HEAD_ROWS
    assert f"_{COMPLETE_ROWS + 1 - HEAD_ROWS} more rows_" in text
