"""The small Markdown tables the Dagster UI shows of a table or a mart, rounded as each column
means: a column's `meta.decimals` in its dbt YAML (the 0-100 Rynn-VP scores say 2), else 4 for a
floating-point column (rates, accuracies, p-values). A mart of up to `COMPLETE_ROWS` rows is shown
whole; a longer one by its first `HEAD_ROWS` rows and how many more there are."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

PREVIEW_TAG = "preview"  # marts users read: row count and preview in their metadata
COMPLETE_ROWS = 200
HEAD_ROWS = 10
DEFAULT_DECIMALS = 4
_CELL = 60  # characters of one cell before it is cut


def _cell(value: Any, decimals: int | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""  # NaN/Infinity: no value, as NULL
    if isinstance(value, float) and decimals is not None:
        # 62.706785714285715 -> 62.71, 14.0 -> 14 (a count kept as a double)
        text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    else:
        text = str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= _CELL else text[:_CELL - 3] + "..."


def markdown_preview(table: pa.Table | pl.DataFrame, limit: int = HEAD_ROWS,
                     decimals: Mapping[str, int] | None = None,
                     total: int | None = None) -> str:
    """The first `limit` rows of `table` as Markdown, floats rounded (`decimals` per column,
    else `DEFAULT_DECIMALS`), and how many rows are left out (of `total`, when `table` holds
    only the first rows)."""
    df = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    if not df.columns:
        return "_(no columns)_"
    places = {c: (decimals or {}).get(c, DEFAULT_DECIMALS) for c in df.columns}
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    for row in df.head(limit).iter_rows():
        lines.append("| " + " | ".join(_cell(v, places[c])
                                       for c, v in zip(df.columns, row, strict=True)) + " |")
    total = df.height if total is None else total
    if total > limit:
        lines.append(f"\n_{total - limit} more rows_")
    return "\n".join(lines)


@cache
def _decimals(manifest_path: str, mtime: float) -> dict[str, dict[str, int]]:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    out: dict[str, dict[str, int]] = {}
    for node in manifest["nodes"].values():
        cols = {c: int(spec["meta"]["decimals"]) for c, spec in node.get("columns", {}).items()
                if "decimals" in (spec.get("meta") or {})}
        if cols:
            out[node["name"]] = cols
    return out


def column_decimals(relation: str) -> dict[str, int]:
    """{column: decimals} declared in the YAML of model `relation`."""
    from dagster_project.warehouse.project import DBT_PROJECT

    path = DBT_PROJECT.manifest_path
    return _decimals(str(path), path.stat().st_mtime).get(relation, {})


def preview(con: Any, relation: str) -> tuple[int, str]:
    """(row count, Markdown preview) of a catalog relation: whole up to `COMPLETE_ROWS` rows."""
    count = con.sql(f'SELECT count(*) FROM "{relation}"').fetchall()[0][0]
    limit = count if count <= COMPLETE_ROWS else HEAD_ROWS
    table = con.sql(f'SELECT * FROM "{relation}" LIMIT {limit}').to_arrow_table()
    return count, markdown_preview(table, limit, column_decimals(relation), count)
