"""`catalog.built_for` and `Workspace.built`: the homes a database's views read and the tables it
holds, kept between the workspace's opens while the database is the file it was, read again as
soon as it changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb

from dagster_project.warehouse import catalog


def _views(database: Path, *homes: Path) -> None:
    con = duckdb.connect(str(database))
    try:
        for i, home in enumerate(homes):
            (home / "tables" / "raw" / f"t{i}").mkdir(parents=True, exist_ok=True)
            con.execute(f"COPY (SELECT 1 AS x) TO '{home}/tables/raw/t{i}/p.parquet'")
            con.execute(f"CREATE OR REPLACE VIEW v{i} AS SELECT * FROM "
                        f"read_parquet('{home}/tables/raw/t{i}/*.parquet')")
    finally:
        con.close()


def _age(database: Path) -> None:
    """The file as if written a second ago (a stamp of this very tick is not trusted)."""
    st = database.stat()
    os.utime(database, ns=(st.st_atime_ns, st.st_mtime_ns - 1_000_000_000))


def test_the_homes_read_are_kept_until_the_database_changes(tmp_path: Path) -> None:
    database, a, b = tmp_path / "benchlake.duckdb", tmp_path / "a", tmp_path / "b"
    _views(database, a)
    _age(database)
    assert catalog.built_for(database) == {str(a)}
    kept = catalog._KEPT["homes", database]
    assert catalog.built_for(database) == {str(a)} and catalog._KEPT["homes", database] is kept

    _views(database, a, b)  # another view: the file changed, its homes are read again
    assert catalog.built_for(database) == {str(a), str(b)}
    # written in this tick: answered, but not kept (the next write could keep the same stamp)
    assert catalog._KEPT["homes", database] is kept
    _age(database)
    assert catalog.built_for(database) == {str(a), str(b)}
    assert catalog._KEPT["homes", database][1] == {str(a), str(b)}


def test_the_tables_held_are_kept_until_the_database_changes(tmp_path: Path) -> None:
    ws = catalog.Workspace(tmp_path)
    ws.folder.mkdir(parents=True)
    con = duckdb.connect(str(ws.database))
    con.execute("CREATE TABLE a AS SELECT 1 AS x; CREATE TABLE b AS SELECT 1 AS x")
    con.close()
    (ws.folder / "definitions.json").write_text(json.dumps({"model.p.a": "1", "model.p.b": "2"}))
    _age(ws.database)
    assert ws.built() == {"model.p.a": "1", "model.p.b": "2"}
    kept = catalog._KEPT["tables", ws.database]
    assert ws.built() == {"model.p.a": "1", "model.p.b": "2"}
    assert catalog._KEPT["tables", ws.database] is kept  # the database not opened again
    con = duckdb.connect(str(ws.database))
    con.execute("DROP TABLE b")
    con.close()
    assert ws.built() == {"model.p.a": "1"}  # a table dropped since is no longer listed
