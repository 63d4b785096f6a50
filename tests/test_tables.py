"""tables.py: rows_to_table takes exactly the schema's columns; DuckDB type names map to Arrow
exactly; a killed writer's temp files are found and removed, nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_project.parts import PartStore
from dagster_project.tables import (
    REJECTS_SCHEMA,
    arrow_type,
    atomic_write_bytes,
    connect_raw,
    path_field,
    raw_schema,
    remove_stale_temps,
    rows_to_table,
    streaming_parquet,
    table_path,
    temp_beside,
    write_table,
)


def test_rows_to_table_fills_missing_keys_with_null():
    table = rows_to_table([{"source_file": "a.json", "reason": "bad"}], REJECTS_SCHEMA)
    assert table.schema == REJECTS_SCHEMA
    assert table.to_pylist() == [
        {"source_file": "a.json", "case_id": None, "stage": None, "reason": "bad"}]


def test_rows_to_table_refuses_a_key_that_is_not_a_column_and_names_the_table():
    rows = [{"source_file": "a.json", "reason": "bad"},
            {"source_file": "b.json", "reson": "misspelt", "extra": 1}]
    with pytest.raises(ValueError, match=r"'extra', 'reson'.*table 'rvp_rejects'"):
        rows_to_table(rows, REJECTS_SCHEMA)


def test_rows_to_table_names_the_table_given_or_the_columns():
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(ValueError, match=r"'b'.*table 'mine'"):
        rows_to_table([{"a": 1, "b": 2}], schema, table="mine")
    with pytest.raises(ValueError, match=r"'b'.*schema \(a\)"):
        rows_to_table([{"a": 1, "b": 2}], schema)


def test_a_schema_two_tables_share_names_both():
    with pytest.raises(ValueError, match="rvp_judgment_files' or table 'vv_response_files"):
        rows_to_table([{"folder": "x", "sha": "y"}], raw_schema("vv_response_files"))


@pytest.mark.parametrize(("duckdb_type", "arrow"), [
    ("VARCHAR", pa.string()), ("INTEGER", pa.int32()), ("BIGINT", pa.int64()),
    ("DOUBLE", pa.float64()), ("BOOLEAN", pa.bool_()), ("BLOB", pa.binary()),
    ("BIGINT[]", pa.list_(pa.int64())), ("VARCHAR[][]", pa.list_(pa.list_(pa.string()))),
    ('STRUCT(letter VARCHAR, "text" VARCHAR)[]',
     pa.list_(pa.struct([("letter", pa.string()), ("text", pa.string())]))),
    ("STRUCT(a INTEGER, b STRUCT(c DOUBLE, d BOOLEAN[]))",
     pa.struct([("a", pa.int32()),
                ("b", pa.struct([("c", pa.float64()), ("d", pa.list_(pa.bool_()))]))])),
])
def test_arrow_type_maps_duckdb_names_exactly(duckdb_type: str, arrow: pa.DataType):
    assert arrow_type(duckdb_type) == arrow


@pytest.mark.parametrize("duckdb_type", ["HUGEINT", "FLOAT", "TIMESTAMP", "DECIMAL(10,2)"])
def test_arrow_type_refuses_what_raw_tables_do_not_use(duckdb_type: str):
    with pytest.raises(ValueError, match="no Arrow type"):
        arrow_type(duckdb_type)


def test_remove_stale_temps_removes_only_unrenamed_temp_files(tmp_path):
    atomic_write_bytes(tmp_path / "a" / "kept.jpg", b"x")
    fd, left = temp_beside(tmp_path / "a" / "b" / "killed.jpg")  # never renamed
    os.close(fd)
    (tmp_path / "a" / ".hidden").write_bytes(b"y")
    (tmp_path / "a" / "plain.tmp").write_bytes(b"z")
    assert remove_stale_temps(tmp_path / "a") == 1
    assert not Path(left).exists()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()
                  ) == ["a/.hidden", "a/kept.jpg", "a/plain.tmp"]
    assert remove_stale_temps(tmp_path / "missing") == 0


def test_atomic_writes_have_the_mode_a_plain_open_gives(tmp_path):
    """The temp file is created with 0666 and the umask (not mkstemp's 0600): the renamed file
    is readable by whom the umask allows, whichever writer made it, in a folder made for it."""
    umask = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "new" / "a.bin", b"x")
        table = pa.table({"n": [1]})
        write_table(table, tmp_path / "b.parquet")
        with streaming_parquet(tmp_path / "c.parquet", table.schema) as out:
            out.write(table)
        fd, tmp = temp_beside(tmp_path / "d.bin")
        os.close(fd)
    finally:
        os.umask(umask)
    for name in ("new/a.bin", "b.parquet", "c.parquet"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o640, name
    assert Path(tmp).name.startswith(f".d.bin.{os.getpid()}.") and Path(tmp).suffix == ".tmp"
    with pytest.raises(FileExistsError):  # a new name each time, never an existing file
        os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    fd, other = temp_beside(tmp_path / "d.bin")
    os.close(fd)
    assert other != tmp


def test_connect_raw_reads_the_parts_asked_for_and_every_single_file_table(tmp_path):
    """`parts` narrows a table kept in parts to the parts of those labels (their views keep
    their columns when none is there); a table in one file, or one it does not name, is read
    whole."""
    home = tmp_path / "home"
    schema = pa.schema([("case_id", pa.string()), ("n", pa.int64())])
    store = PartStore.of_table(home, "in_parts", "1", schema)
    store.ensure_schema()
    for case, n in (("a/1", 1), ("b", 2), ("c", 3)):
        store.write(store.key(case, n), pa.table({"case_id": [case], "n": [n]}, schema=schema))
    write_table(pa.table({"case_id": ["a/1", "b"], "n": [10, 20]}, schema=schema),
                table_path(home, "whole"))
    other = PartStore.of_table(home, "other_parts", "1", schema)
    other.write(other.key("00000", 1), pa.table({"case_id": ["x"], "n": [7]}, schema=schema))
    con = connect_raw(home, ["in_parts", "whole", "other_parts"],
                      parts={"in_parts": ["a/1", "c"], "whole": ["a/1"]})
    assert con.execute("SELECT n FROM raw.in_parts ORDER BY n").fetchall() == [(1,), (3,)]
    assert con.execute("SELECT n FROM raw.whole ORDER BY n").fetchall() == [(10,), (20,)]
    assert con.execute("SELECT n FROM raw.other_parts").fetchall() == [(7,)]
    con = connect_raw(home, ["in_parts"], parts={"in_parts": ["nope"]})
    assert con.execute("SELECT count(*) FROM raw.in_parts").fetchall() == [(0,)]
    con = connect_raw(home, ["in_parts"])
    assert con.execute("SELECT count(*) FROM raw.in_parts").fetchall() == [(3,)]


def test_connect_raw_gives_path_columns_absolute_or_as_stored(tmp_path):
    home = tmp_path / "home"
    schema = pa.schema([("n", pa.int64()), path_field("image_path")])
    write_table(pa.table({"n": [1, 2], "image_path": [str(home / "img" / "a.jpg"), None]},
                         schema=schema), table_path(home, "t"), home=home)
    query = "SELECT image_path FROM raw.t ORDER BY n"
    assert connect_raw(home, ["t"]).execute(query).fetchall() == [(f"{home}/img/a.jpg",),
                                                                  (None,)]
    assert connect_raw(home, ["t"], stored=True).execute(query).fetchall() == [("img/a.jpg",),
                                                                               (None,)]
