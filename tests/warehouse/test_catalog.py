"""`catalog.built_for`: the homes a database's views read, kept between the workspace's opens
while the database is the file it was, read again as soon as it changes."""

from __future__ import annotations

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
    kept = catalog._BUILT_FOR[database]
    assert catalog.built_for(database) == {str(a)} and catalog._BUILT_FOR[database] is kept

    _views(database, a, b)  # another view: the file changed, its homes are read again
    assert catalog.built_for(database) == {str(a), str(b)}
    # written in this tick: answered, but not kept (the next write could keep the same stamp)
    assert catalog._BUILT_FOR[database] is kept
    _age(database)
    assert catalog.built_for(database) == {str(a), str(b)}
    assert catalog._BUILT_FOR[database][1] == {str(a), str(b)}
