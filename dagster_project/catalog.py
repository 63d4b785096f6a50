"""The DuckDB side: every view is a `.sql` file under `sql/`, one view per file, named after it.

Views read Parquet through `{{tables}}`, replaced by the absolute tables folder when the views are
created, so the catalog file works from any working directory. Path columns are stored relative
to the home (`tables.path_field`); `{{abspath(col)}}` expands to the absolute path of `col`
against the home the views are built for. `connect()` builds the same views
in an in-memory database for ad-hoc SQL and exports: readers never open the catalog file a
materialization may be rewriting, so they neither block it nor wait for it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.settings import SQL_DIR

_LAYER_ORDER = {"stg": 0, "int": 1}
CATALOG_STORAGE_VERSION = "v1.0.0"


@dataclass(frozen=True)
class ViewDef:
    name: str
    path: Path
    sql: str


def view_files(sql_dir: Path = SQL_DIR) -> list[Path]:
    """Every view file, staging first, then intermediate, then marts (then by name)."""
    files = [p for p in sql_dir.rglob("*.sql") if not p.name.startswith("_")]
    return sorted(files, key=lambda p: (_LAYER_ORDER.get(p.stem.split("_")[0], 2), p.stem))


def _sql_literal_path(path: Path | str) -> str:
    return str(path).replace("\\", "/").replace("'", "''")


_ABSPATH = re.compile(r"\{\{\s*abspath\(\s*([\w.]+)\s*\)\s*\}\}")


def _render(sql: str, tables: str) -> str:
    home = tables.rsplit("/", 1)[0]

    def abspath(match: re.Match[str]) -> str:
        col = match.group(1)
        return (f"CASE WHEN {col} IS NULL OR {col} LIKE '/%' OR {col} LIKE '%://%' THEN {col} "
                f"ELSE '{home}/' || {col} END")

    return _ABSPATH.sub(abspath, sql).replace("{{tables}}", tables)


def load_views(tables_dir: Path | str, sql_dir: Path = SQL_DIR) -> list[ViewDef]:
    tables = _sql_literal_path(tables_dir).rstrip("/")
    return [ViewDef(p.stem, p, _render(p.read_text(encoding="utf-8"), tables))
            for p in view_files(sql_dir)]


_NO_FILES = re.compile(r"No files found")
_MISSING_TABLE = re.compile(r"Table with name (\w+) does not exist")


def create_views(
    con: duckdb.DuckDBPyConnection, views: list[ViewDef]
) -> dict[str, str]:
    """Create every view that can be created; returns {view: reason} for those that could not.

    A view whose Parquet has not been materialized yet (or that depends on such a view) is
    skipped rather than failing the whole catalog. Views are retried until no more succeed, so
    file order only has to be roughly right.
    """
    pending = list(views)
    errors: dict[str, str] = {}
    while pending:
        progressed, still = False, []
        for view in pending:
            try:
                body = view.sql.rstrip().rstrip(";")
                con.execute(f'CREATE OR REPLACE VIEW "{view.name}" AS\n{body}')
                progressed = True
                errors.pop(view.name, None)
            except duckdb.Error as exc:
                errors[view.name] = str(exc).splitlines()[0]
                still.append(view)
        pending = still
        if not progressed:
            break
    return errors


def connect(
    tables_dir: Path | str, sql_dir: Path = SQL_DIR, *, filesystem: Any = None
) -> tuple[duckdb.DuckDBPyConnection, dict]:
    """An in-memory DuckDB with every available view; returns (connection, skipped views).

    `tables_dir` may also be an object-store URI such as `s3://bucket/warehouse/tables` when
    `filesystem` is the matching fsspec filesystem (e.g. `s3fs.S3FileSystem`): DuckDB then reads
    the same Parquet through it, with the same view definitions."""
    # No replacement scans: a name that is not a view must fail, never silently resolve to a
    # Python variable of the calling frame.
    config: dict[str, Any] = {"python_enable_replacements": False}
    if filesystem is not None:
        # read through the registered filesystem, never try to download an extension
        config.update(autoinstall_known_extensions=False, autoload_known_extensions=False)
    con = duckdb.connect(":memory:", config=config)
    if filesystem is not None:
        con.register_filesystem(filesystem)
    skipped = create_views(con, load_views(tables_dir, sql_dir))
    return con, skipped


def build_catalog(catalog_path: Path, tables_dir: Path, sql_dir: Path = SQL_DIR) -> dict:
    """Write the catalog file (views only) atomically; returns {view: reason} for skipped ones."""
    catalog_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".benchlake.", suffix=".duckdb", dir=catalog_path.parent)
    os.close(fd)
    os.unlink(tmp)  # DuckDB must create the file itself
    try:
        # The oldest storage format that holds views, so the stock `duckdb` CLI of any 1.x
        # release (not only the library version writing it) can open the catalog.
        con = duckdb.connect(":memory:")
        try:
            con.execute(f"ATTACH '{_sql_literal_path(tmp)}' AS catalog "
                        f"(STORAGE_VERSION '{CATALOG_STORAGE_VERSION}')")
            con.execute("USE catalog")
            skipped = create_views(con, load_views(tables_dir.resolve(), sql_dir))
            con.execute("CHECKPOINT catalog")
        finally:
            con.close()
        os.replace(tmp, catalog_path)
    finally:
        for leftover in (Path(tmp), Path(tmp + ".wal")):
            leftover.unlink(missing_ok=True)
    return skipped


def view_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
    ).fetchall()
    return [r[0] for r in rows]


def broken_views(skipped: dict[str, str]) -> dict[str, str]:
    """The skipped views that are NOT explained by an unmaterialized table: real errors.

    A view is excused if its Parquet does not exist yet, or if it only lacks another view that is
    itself excused.
    """
    excused = {v for v, r in skipped.items() if _NO_FILES.search(r)}
    changed = True
    while changed:
        changed = False
        for view, reason in skipped.items():
            match = _MISSING_TABLE.search(reason)
            if view not in excused and match and match.group(1) in excused:
                excused.add(view)
                changed = True
    return {v: r for v, r in skipped.items() if v not in excused}
