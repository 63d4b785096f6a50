"""Rows as text for the report files: values for JSON, CSV and Markdown, number formatting,
Markdown tables and the per-view Markdown page. The same rows always give the same text.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from dagster_project.reports.export import _ViewExport

NULL_MARK = "–"  # en dash: visibly "no value" in a report, unlike an empty cell
_MD_CELL_MAX = 160  # Markdown is for reading; CSV/JSON/Parquet keep the full text


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


def _csv_value(value: Any) -> str:
    value = _json_value(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form: exact and stable
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def format_number(value: float) -> str:
    """Four decimals at most, trailing zeros dropped; tiny non-zero values keep 4 significant
    digits so they do not read as 0."""
    if not math.isfinite(value):
        return NULL_MARK
    if value != 0 and abs(value) < 0.00005:
        return f"{value:.4g}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _md_value(value: Any) -> str:
    value = _json_value(value)
    if value is None:
        return NULL_MARK
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = format_number(value)
    elif isinstance(value, list):
        text = ", ".join(NULL_MARK if v is None else str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    text = " ".join(text.split())  # a table row is one line
    if len(text) > _MD_CELL_MAX:
        text = text[: _MD_CELL_MAX - 1] + "…"
    return text.replace("|", "\\|") if text else " "


def _is_numeric(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


def markdown_table(columns: Sequence[str], rows: Sequence[dict[str, Any]],
                   numeric: Sequence[bool]) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned, NULL as an en dash)."""
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |",
             "|" + "|".join("---:" if num else "---" for num in numeric) + "|"]
    lines += ["| " + " | ".join(_md_value(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def with_error_bars(columns: Sequence[str], rows: Sequence[dict[str, Any]],
                    numeric: Sequence[bool]) -> tuple[list[str], list[dict[str, Any]], list[bool]]:
    """For reading: a score `m` with an `m_se` column shows as "m ± se" (the `m_se` column
    folds into it), and `m_ci_low`/`m_ci_high` as one "[low, high]" column `m_ci95`. A
    difference `*_diff` pairs with `diff_se`/`diff_ci_*` the same way. Other columns as they are."""
    present = set(columns)

    def companion(col: str, suffix: str) -> str | None:
        for name in (f"{col}{suffix}", f"diff{suffix}" if col.endswith("_diff") else None):
            if name and name in present:
                return name
        return None

    folded = {c: (companion(c, "_se"), companion(c, "_ci_low"), companion(c, "_ci_high"))
              for c in columns}
    folded = {c: v for c, v in folded.items() if v[0] or (v[1] and v[2])}
    hidden = {x for v in folded.values() for x in v if x}
    out_cols: list[str] = []
    out_numeric: list[bool] = []
    for col, num in zip(columns, numeric, strict=True):
        if col in hidden:
            continue
        out_cols.append(col)
        out_numeric.append(num)
        se, low, high = folded.get(col, (None, None, None))
        if low and high:
            out_cols.append(f"{col}_ci95")
            out_numeric.append(True)
    out_rows = []
    for row in rows:
        new = {c: row[c] for c in columns if c not in hidden}
        for col, (se, low, high) in folded.items():
            if se and row[col] is not None and row[se] is not None:
                new[col] = f"{_md_value(row[col])} ± {_md_value(row[se])}"
            if low and high:
                new[f"{col}_ci95"] = (NULL_MARK if row[low] is None or row[high] is None
                                      else f"[{_md_value(row[low])}, {_md_value(row[high])}]")
        out_rows.append(new)
    return out_cols, out_rows, out_numeric


def _render_markdown(export: _ViewExport, table: pa.Table, profiles: Sequence[str]) -> str:
    numeric = [_is_numeric(table.schema.field(c).type) for c in export.columns]
    columns, rows, numeric = with_error_bars(export.columns, export.rows, numeric)
    parts = [f"# {export.view}", "", export.caption]
    if "profile" in export.columns:
        parts[-1] += f" Profiles: {', '.join(profiles)}."
    if len(columns) < len(export.columns):
        parts[-1] += (" `a ± b`: the value and its standard error; `_ci95`: its 95 % interval"
                      " (the CSV, JSON and Parquet files keep every column).")
    parts += ["", markdown_table(columns, rows, numeric)]
    if not export.rows:
        parts += ["", "_(no rows)_"]
    return "\n".join(parts) + "\n"


def _render_csv(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[_csv_value(row[c]) for c in columns] for row in rows])
    return buf.getvalue()
