"""`packet_keys.unit_digests`: what each packet unit is made of, kept per case. Kept digests give
the units the whole query gives, in its order; a case whose parts changed is digested again, the
others are taken as kept; a change to a table read whole digests every case again."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.rynn_vp.packet_keys import unit_digests
from dagster_project.tables import table_path
from tests.conftest import copy_home


def _tamper(kept: Path, case: str) -> None:
    """Every unit of `case` said to be made of something else, in the kept file only."""
    data = orjson.loads(kept.read_bytes())
    for unit in data["value"][case]["units"]:
        unit[1] = "tampered"
    kept.write_bytes(orjson.dumps(data))


def _changed(source: Path, dest: Path, column: str, value: str) -> None:
    """`source` written to `dest` with `column` of its first row `value`."""
    table = pq.read_table(source)
    values = table.column(column).to_pylist()
    values[0] = value
    pq.write_table(table.set_column(table.schema.get_field_index(column), column,
                                    pa.array(values, table.schema.field(column).type)), dest)


def test_kept_digests_are_the_whole_querys_and_only_a_changed_case_is_digested_again(
        demo_warehouse, tmp_path):
    home = copy_home(demo_warehouse, tmp_path / "home").home
    kept = tmp_path / "packet_keys.json"
    full = unit_digests(home)
    assert full[0][0].startswith("_gt.") and not full[-1][0].startswith("_gt.")
    assert unit_digests(home, kept) == full  # nothing kept yet: every case digested
    cases = sorted(orjson.loads(kept.read_bytes())["value"])
    assert len(cases) > 2
    assert unit_digests(home, kept) == full  # all taken as kept
    # a case's parts changed: that case digested again, the others taken as kept (the tampered
    # units of an unchanged case are what comes back)
    folder = table_path(home, "rvp_evaluations", "_").parent
    # built again under a new key, as a part of other rows is (`evidence_parts`)
    [part] = folder.glob(f"{cases[0]}.*.parquet")
    _changed(part, part.with_name(f"{cases[0]}.{'f' * 16}.parquet"), "problem", "changed")
    part.unlink()
    _tamper(kept, cases[0])
    _tamper(kept, cases[1])
    now, fresh = unit_digests(home, kept), unit_digests(home)
    assert fresh != full  # the change is in what its units are made of
    assert [label for label, _ in now] == [label for label, _ in fresh]
    differ = {label for (label, made_of), (_, whole) in zip(now, fresh, strict=True)
              if made_of != whole}
    assert differ and all(dict(now)[label] == "tampered" and cases[1] in label
                          for label in differ)  # only the unchanged case's kept units
    # a table read whole changed (a case's instruction): every case digested again
    path = table_path(home, "rvp_cases")
    shutil.copy(path, tmp_path / "cases.parquet")
    _changed(tmp_path / "cases.parquet", path, "instruction", "changed for the test")
    assert unit_digests(home, kept) == unit_digests(home) != fresh
    assert b"tampered" not in kept.read_bytes()
    # a kept file that is not as written is not read: every case digested again
    data = orjson.loads(kept.read_bytes())
    del data["value"][cases[2]]["units"]
    for text in (b"{", b"[]", orjson.dumps(data)):
        kept.write_bytes(text)
        assert unit_digests(home, kept) == unit_digests(home)
