"""The part store: keys readable and deterministic (the same in every home and process), a part
written once and atomically, the schema part, and `keep` removing what is no longer wanted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_project.parts import SCHEMA_PART, PartStore, on_connections, read_ahead
from dagster_project.tables import path_field

SCHEMA = pa.schema([("name", pa.string()), path_field("image_path")])


def test_keys_are_readable_deterministic_and_follow_every_input(tmp_path):
    store = PartStore(tmp_path / "a", "1")
    key = store.key("run/x.jsonl.v2", "run/x.jsonl", 2, {"b": 1, "a": [1.5, None]})
    label, digest = key.rsplit(".", 1)
    assert label == "run_x.jsonl.v2" and len(digest) == 16
    assert PartStore.label_of(key) == label
    # the same inputs in another folder (another home) and another process: the same key
    assert PartStore(tmp_path / "b", "1").key("run/x.jsonl.v2", "run/x.jsonl", 2,
                                              {"a": [1.5, None], "b": 1}) == key
    code = ("from dagster_project.parts import PartStore; print(PartStore('/elsewhere', '1')"
            ".key('run/x.jsonl.v2', 'run/x.jsonl', 2, {'b': 1, 'a': [1.5, None]}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[1]).stdout.strip()
    assert out == key
    others = {store.key("run/x.jsonl.v2", "run/x.jsonl", 3, {"b": 1, "a": [1.5, None]}),
              store.key("run/x.jsonl.v2", "run/x.jsonl", 2, {"b": 2, "a": [1.5, None]}),
              PartStore(tmp_path, "2").key("run/x.jsonl.v2", "run/x.jsonl", 2,
                                           {"b": 1, "a": [1.5, None]})}
    assert key not in others and len(others) == 3  # any input, or the code version


def test_parts_are_written_once_kept_and_removed(tmp_path):
    home = tmp_path / "home"
    store = PartStore(home / "tables" / "raw" / "t", "1", SCHEMA)
    store.ensure_schema()
    assert pq.read_schema(store.path(SCHEMA_PART)) == SCHEMA
    assert store.all_keys() == [] and store.rows() == 0
    a, b = store.key("a", 1), store.key("b", 2)
    table = pa.table({"name": ["x"], "image_path": [str(home / "img" / "x.jpg")]}, schema=SCHEMA)
    store.write(a, table, home=home)
    store.write(b, table, home=home)
    assert store.has(a) and store.all_keys() == sorted([a, b]) and store.rows() == 2
    # path columns are stored relative to the home; no temp file is left behind
    assert pq.read_table(store.path(a)).column("image_path").to_pylist() == ["img/x.jpg"]
    assert sorted(p.name for p in store.folder.iterdir()) == sorted(
        [f"{a}.parquet", f"{b}.parquet", f"{SCHEMA_PART}.parquet"])
    assert store.labelled("a") == [a]
    assert store.read([b, a], SCHEMA).num_rows == 2
    stamp = store.path(a).stat().st_mtime_ns
    killed = store.folder / f".{b}.parquet.k1ll3d.tmp"  # a writer killed before its rename
    killed.write_bytes(b"half a part")
    assert store.keep([a]) == [b]
    assert store.all_keys() == [a] and store.path(a).stat().st_mtime_ns == stamp
    assert not killed.exists()
    assert store.path(SCHEMA_PART).exists()  # the views keep their columns with no part


def test_equal_tables_give_equal_bytes_in_two_homes(tmp_path):
    files = []
    for name in ("one", "two"):
        home = tmp_path / name
        store = PartStore(home / "parts", "1", SCHEMA)
        key = store.key("p", "same")
        store.write(key, pa.table({"name": ["x"], "image_path": [str(home / "i.jpg")]},
                                  schema=SCHEMA), home=home)
        files.append(store.path(key))
    assert files[0].name == files[1].name
    assert files[0].read_bytes() == files[1].read_bytes()


def test_parts_are_read_in_the_order_of_their_keys_as_the_schema_says(tmp_path):
    """`read` is one scan of many parts: their rows in the order of the keys asked for (not of
    the files' names), every part's rows whole, typed as the schema."""
    home = tmp_path / "home"
    store = PartStore(home / "cache" / "t", "1", SCHEMA)
    keys = [store.key(label, 1) for label in ("z", "m", "a")]  # names sort against the order
    for n, key in enumerate(keys):
        store.write(key, pa.table({"name": [f"{key}-{i}" for i in range(n + 2)],
                                   "image_path": [None] * (n + 2)}, schema=SCHEMA), home=home)
    table = store.read(keys[::-1] + [keys[0]], SCHEMA)
    assert table.schema == SCHEMA
    assert table.column("name").to_pylist() == [
        *(f"{keys[2]}-{i}" for i in range(4)), *(f"{keys[1]}-{i}" for i in range(3)),
        *(f"{keys[0]}-{i}" for i in range(2)), *(f"{keys[0]}-{i}" for i in range(2))]
    assert store.read([], SCHEMA).equals(SCHEMA.empty_table())


def test_read_ahead_keeps_the_order_raises_the_readers_error_and_stops_with_its_caller():
    import threading

    import pytest

    assert list(read_ahead(iter(range(50)), depth=3)) == list(range(50))

    def failing():
        yield 1
        raise ValueError("part 2 is not Parquet")

    got = []
    with pytest.raises(ValueError, match="part 2 is not Parquet"):
        for item in read_ahead(failing()):
            got.append(item)
    assert got == [1]

    read = []

    def endless():
        n = 0
        while True:
            read.append(n)
            yield n
            n += 1

    items = read_ahead(endless(), depth=2)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()  # the caller stops early: the reader stops too, holding a bounded few more
    assert not any(t.name == "read-ahead" for t in threading.enumerate())
    assert len(read) <= 3 + 2 + 2


def test_on_connections_keeps_the_order_and_raises():
    """Fifty items on two connections (never more): the results in the items' order, each
    computed on its connection; an item's error is raised to the caller."""
    used = set()

    def work(con, i):
        used.add(id(con))
        return con.execute("SELECT ? * 2", [i]).fetchone()[0]

    assert on_connections(work, list(range(50)), 2) == [i * 2 for i in range(50)]
    assert 1 <= len(used) <= 2
    assert on_connections(work, [], 2) == []
    # one item: one connection, with every core
    assert on_connections(lambda con, _: con.execute(
        "SELECT current_setting('threads')").fetchone()[0], [0], 2) == [os.cpu_count() or 1]

    def fails(con, i):
        if i == 7:
            raise ValueError("item 7")
        return con.execute("SELECT ?", [i]).fetchone()[0]

    with pytest.raises(ValueError, match="item 7"):
        on_connections(fails, list(range(20)), 2)


def test_a_tables_rows_are_counted_from_the_footers_of_its_new_parts_only(tmp_path, monkeypatch):
    import dagster_project.parts as parts
    from dagster_project.status import mark_written
    from dagster_project.tables import table_path

    home = tmp_path / "home"
    store = PartStore(table_path(home, "t", SCHEMA_PART).parent, "1", SCHEMA)
    store.ensure_schema()

    def part(key: str, n: int) -> None:
        store.write(key, pa.table({"name": [key] * n, "image_path": [None] * n}, schema=SCHEMA),
                    home=home)

    part("a", 2)
    part("b", 3)
    opened: list[str] = []
    real = parts.file_rows
    monkeypatch.setattr(parts, "file_rows", lambda paths: (
        opened.extend(p.name for p in paths), real(paths))[1])
    counted = parts.counted_rows(home, "t")
    assert sorted(counted.values()) == [2, 3] and sorted(opened) == ["a.parquet", "b.parquet"]
    mark_written(home, "t", "run-1", sum(counted.values()), parts=counted)
    part("c", 4)  # one part added, one removed: only the new one's footer is read
    store.path("a").unlink()
    opened.clear()
    counted = parts.counted_rows(home, "t")
    assert sorted(counted.values()) == [3, 4] and opened == ["c.parquet"]
    mark_written(home, "t", "run-2", sum(counted.values()), parts=counted)
    # a part of another size under a known name is counted again (no stale count; parts are
    # never rewritten under their name, this is the guard if one were)
    size = store.path("b").stat().st_size
    store.write("b", pa.table({"name": [f"row {i}" for i in range(5)], "image_path": [None] * 5},
                              schema=SCHEMA), home=home)
    assert store.path("b").stat().st_size != size
    opened.clear()
    assert sorted(parts.counted_rows(home, "t").values()) == [4, 5] and opened == ["b.parquet"]
