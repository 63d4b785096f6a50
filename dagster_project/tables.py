"""Parquet tables: deterministic, atomic writes and the small previews the UI shows.

Parquet under `$BENCHLAKE_HOME/tables/` is the source of truth. Every writer goes through
`write_table` so that a reader (DuckDB views, `benchlake sql`) only ever sees whole files and the
same input always yields the same bytes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

# Fixed writer options: changing them changes every file's bytes, so they live in one place.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
}


def _umask_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _temp_beside(path: Path) -> tuple[int, str]:
    """A temp file in `path`'s folder (same filesystem, so the rename is atomic), with the mode
    a plain open() would give rather than mkstemp's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, _umask_mode())
    return fd, tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temp file in the same folder and a rename."""
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_table(table: pa.Table | pl.DataFrame, path: Path) -> Path:
    """Atomically write a table as Parquet with fixed options (identical bytes for equal input)."""
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    fd, tmp = _temp_beside(path)
    os.close(fd)
    try:
        pq.write_table(table, tmp, **_PARQUET_OPTIONS)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def rows_to_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) → an Arrow table with exactly `schema` (missing keys become null)."""
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.table(columns, schema=schema)


def markdown_preview(table: pa.Table | pl.DataFrame, limit: int = 10) -> str:
    """A small Markdown table of the first rows, for Dagster's materialization metadata."""
    df = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    head = df.head(limit)
    cols = head.columns
    if not cols:
        return "_(no columns)_"

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        text = text.replace("|", "\\|").replace("\n", " ")
        return text if len(text) <= 60 else text[:57] + "..."

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in head.iter_rows():
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    if df.height > limit:
        lines.append(f"\n_{df.height - limit} more rows_")
    return "\n".join(lines)


@dataclass(frozen=True)
class Reject:
    """One refused input: which file, which case (if any), and why."""

    source_file: str
    reason: str
    case_id: str | None = None
    stage: str = ""


REJECTS_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("case_id", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
    ]
)


def rejects_table(rejects: Iterable[Reject]) -> pa.Table:
    rows = sorted(
        (
            {"source_file": r.source_file, "case_id": r.case_id, "stage": r.stage,
             "reason": r.reason}
            for r in rejects
        ),
        key=lambda r: (r["source_file"], r["case_id"] or "", r["stage"], r["reason"]),
    )
    return rows_to_table(rows, REJECTS_SCHEMA)
