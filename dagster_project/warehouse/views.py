"""The views of the dbt project, created in any DuckDB from the compiled manifest.

`create_views` takes each model's compiled SQL (`project.ensure_manifest`), puts the home in for
`project.HOME_PLACEHOLDER`, and creates the views in dependency order (the manifest's
`depends_on`). Three places use it:

* `connect(home)`: an in-memory database named `benchlake` for `benchlake sql`, the exports and
  the Python assets that read a model. Readers never open a file a materialization writes, so
  they neither block one nor wait for one.
* `publish_catalog(home)`: `$BENCHLAKE_HOME/benchlake.duckdb` for the stock duckdb CLI, built in
  a temp file in DuckDB's v1.0.0 storage format (older CLIs than the library read it) and renamed
  into place.
* the dbt working database, seeded before a `dbt build` with the models it did not select
  (`defs/warehouse/assets.py`).

Compiled SQL names relations `"benchlake"."main"."<model>"`, so the database is always attached
under the name `benchlake`. A view whose Parquet does not exist yet is skipped, with the views
that read it; the result says which and why.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.warehouse.project import HOME_PLACEHOLDER, SQL_DIR, ensure_manifest

DATABASE = "benchlake"
CATALOG_STORAGE_VERSION = "v1.0.0"
_NO_FILES = re.compile(r"No files found|does not exist|cannot open file|No such file", re.I)


@dataclass(frozen=True)
class View:
    name: str
    sql: str  # compiled, with HOME_PLACEHOLDER for the home
    depends_on: tuple[str, ...]  # the models it reads
    tags: tuple[str, ...]
    unique_id: str


@cache
def _views_of(manifest_path: str, mtime: float) -> tuple[View, ...]:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    nodes = {uid: n for uid, n in manifest["nodes"].items() if n["resource_type"] == "model"}
    name_of = {uid: n["name"] for uid, n in nodes.items()}
    pending = {uid: {d for d in n["depends_on"]["nodes"] if d in nodes}
               for uid, n in nodes.items()}
    ordered: list[View] = []
    while pending:  # Kahn's order, ties by name, so the order is the same on every machine
        ready = sorted((uid for uid, deps in pending.items() if not deps), key=name_of.get)
        if not ready:
            raise RuntimeError(f"dependency cycle among models {sorted(map(name_of.get, pending))}")
        for uid in ready:
            n = nodes[uid]
            ordered.append(View(n["name"], n["compiled_code"],
                                tuple(sorted(name_of[d] for d in n["depends_on"]["nodes"]
                                             if d in nodes)), tuple(n.get("tags", [])), uid))
            del pending[uid]
        for deps in pending.values():
            deps.difference_update(ready)
    return tuple(ordered)


def views(sql_dir: Path = SQL_DIR) -> tuple[View, ...]:
    """Every model of the project, upstream before downstream."""
    path = ensure_manifest(sql_dir)
    return _views_of(str(path), path.stat().st_mtime)


def _home_sql(home: Path | str) -> str:
    text = str(home).rstrip("/") if "://" in str(home) else os.path.abspath(home)
    return text.replace("'", "''")


def create_views(con: duckdb.DuckDBPyConnection, home: Path | str,
                 only: set[str] | None = None, sql_dir: Path = SQL_DIR) -> dict[str, str]:
    """Create the views (all, or `only` and what they read) in the current database of `con`;
    returns {view: reason} for those skipped: their Parquet is missing, or a view they read is."""
    home_sql = _home_sql(home)
    wanted = None if only is None else _with_upstream(only, sql_dir)
    skipped: dict[str, str] = {}
    for view in views(sql_dir):
        if wanted is not None and view.name not in wanted:
            continue
        missing = [d for d in view.depends_on if d in skipped]
        if missing:
            skipped[view.name] = f"needs view {missing[0]}, which was skipped"
            continue
        try:
            con.execute(f'CREATE OR REPLACE VIEW "{view.name}" AS\n'
                        + view.sql.replace(HOME_PLACEHOLDER, home_sql))
        except duckdb.Error as exc:
            skipped[view.name] = str(exc).strip().splitlines()[0]
    return skipped


def _with_upstream(names: set[str], sql_dir: Path) -> set[str]:
    by_name = {v.name: v for v in views(sql_dir)}
    out, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in out or name not in by_name:
            continue
        out.add(name)
        todo.extend(by_name[name].depends_on)
    return out


def broken_views(skipped: dict[str, str]) -> dict[str, str]:
    """The skipped views NOT explained by a table that is not materialized yet: real errors."""
    return {v: r for v, r in skipped.items()
            if not _NO_FILES.search(r) and not r.startswith("needs view ")}


def connect(home: Path | str, *, only: set[str] | None = None, filesystem: Any = None,
            sql_dir: Path = SQL_DIR) -> tuple[duckdb.DuckDBPyConnection, dict[str, str]]:
    """An in-memory DuckDB with the views (every available one, or `only` and their upstream);
    returns (connection, skipped views). `home` may be an object-store URI such as
    `s3://bucket/warehouse` when `filesystem` is the matching fsspec filesystem: DuckDB then reads
    the same Parquet through it."""
    # No replacement scans: a name that is not a view must fail, never silently resolve to a
    # Python variable of the calling frame.
    config: dict[str, Any] = {"python_enable_replacements": False}
    if filesystem is not None:  # read through it; never try to download an extension
        config.update(autoinstall_known_extensions=False, autoload_known_extensions=False)
    con = duckdb.connect(":memory:", config=config)
    if filesystem is not None:
        con.register_filesystem(filesystem)
    con.execute(f"ATTACH ':memory:' AS {DATABASE}")
    con.execute(f"USE {DATABASE}")
    return con, create_views(con, home, only, sql_dir)


def publish_catalog(home: Path) -> dict[str, str]:
    """Write `home/benchlake.duckdb` (views only) atomically; returns the skipped views."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".benchlake.", suffix=".duckdb", dir=home)
    os.close(fd)
    os.unlink(tmp)  # DuckDB must create the file itself
    try:
        con = duckdb.connect(":memory:")
        try:
            # The oldest storage format that holds views, so the stock `duckdb` CLI of any 1.x
            # release (not only the library version writing it) opens the catalog.
            con.execute(f"ATTACH '{tmp.replace(chr(39), chr(39) * 2)}' AS {DATABASE} "
                        f"(STORAGE_VERSION '{CATALOG_STORAGE_VERSION}')")
            con.execute(f"USE {DATABASE}")
            skipped = create_views(con, home)
            con.execute(f"CHECKPOINT {DATABASE}")
        finally:
            con.close()
        os.replace(tmp, home / f"{DATABASE}.duckdb")
    finally:
        for leftover in (Path(tmp), Path(tmp + ".wal")):
            leftover.unlink(missing_ok=True)
    return skipped


def view_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                       "ORDER BY view_name").fetchall()
    return [r[0] for r in rows]
