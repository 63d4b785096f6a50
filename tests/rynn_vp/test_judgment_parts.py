"""Judgment file versions read and checked once: replaying the parts gives exactly the rows and
rejects of reading every file again; a part is kept until its version or the context changes."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pyarrow.parquet as pq
import pytest

from dagster_project.dropfolder import archive_versions, scan_drop_folder
from dagster_project.runner import materialize
from dagster_project.rynn_vp import judgment_parts
from dagster_project.rynn_vp.judgment_parts import (
    complete,
    context_fingerprint,
    judgment_store,
    sync_parts,
)
from dagster_project.rynn_vp.judgment_records import SourceFile
from dagster_project.rynn_vp.judgments import ingest
from tests.conftest import copy_home
from tests.rynn_vp.test_judgment_records import CTX, PLANNED, STORY, Drop, gt_record
from tests.rynn_vp.test_judgment_records import record as judgment


def _mixed_files(drop: Drop) -> list:
    """Accepted records, a repeat, a rewrite (conflict), a retry, records the context refuses,
    unreadable lines and records, and GT compilations (one stale)."""
    good = judgment()
    return [
        drop.jsonl("a.jsonl", [good, judgment(PLANNED), judgment(STORY, hallucinations=[
            {"entity": "cup", "locus": "02", "contradictory_observations": ["x"],
             "affected_chain": "c"}])]),
        drop.write("b.jsonl", json.dumps(good) + "\n{broken\n[1, 2]\n"
                   + json.dumps(judgment(metrics={"PI-1": 101})) + "\n"),
        drop.json("c.json", [judgment(attempt=2, attempt_kind="retry"),
                             judgment(judge={**good["judge"], "model": "other"})]),
        drop.jsonl("a.jsonl", [good, judgment(case_id="nope")]),  # version 2
        drop.json("gt_compilations/p.json", gt_record()),
        drop.json("gt_compilations/q.json", [gt_record(PLANNED), gt_record(fingerprint="e" * 64),
                                             gt_record(compilation={"x": 1})]),
        drop.write("d.json", b""),
    ]


def test_replaying_parts_equals_reading_again(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    store = judgment_store(tmp_path / "cache")
    parts, written = sync_parts(store, files, CTX)
    assert len(written) == len(files)
    direct = ingest(files, CTX)
    replayed = ingest(files, CTX, parts)
    assert replayed == direct
    assert direct.judgments and direct.rejects and direct.gt_compilations and direct.duplicates
    reasons = " ".join(r["reason"] for r in direct.rejects)
    for words in ("conflicts with", "not JSON", "must be a JSON object", "unknown case",
                  "duplicate of", "empty"):
        assert words in reasons, words

    # parts are only read whole by the replay: no statistics (the raw text's first and last
    # value in every footer) and no dictionaries (`tables._WHOLE_READ_OPTIONS`)
    footer = pq.ParquetFile(parts[files[0]]).metadata.row_group(0)
    assert not any(footer.column(i).is_stats_set for i in range(footer.num_columns))
    assert not any(footer.column(i).has_dictionary_page for i in range(footer.num_columns))
    stamps = {p.name: p.stat().st_mtime_ns for p in store.folder.iterdir()}
    again, written = sync_parts(store, files, CTX)
    assert again == parts and written == []  # nothing read again, nothing written
    assert {p.name: p.stat().st_mtime_ns for p in store.folder.iterdir()} == stamps
    fewer, written = sync_parts(store, files[:2], CTX)
    assert written == [] and sorted(p.name for p in store.folder.iterdir()) == sorted(
        p.name for p in fewer.values())  # parts of versions no longer listed are removed

    sync_parts(store, files, CTX)  # the removed ones again
    other = dataclasses.replace(CTX, systems=CTX.systems - {STORY})
    assert context_fingerprint(other) != context_fingerprint(CTX)
    changed, written = sync_parts(store, files, other)
    # another context: the one version with a record of that system is checked again
    assert written == [changed[files[0]].stem] and changed[files[0]] != parts[files[0]]
    assert all(changed[sf] == parts[sf] for sf in files[1:])
    assert ingest(files, other, changed) == ingest(files, other)
    assert any("unknown system" in r["reason"] for r in ingest(files, other, changed).rejects)


def test_parts_checked_by_processes_are_those_checked_in_turn(tmp_path, monkeypatch):
    """Over two processes (bins of whole files in path order) every part has the bytes
    one process writes."""
    files = _mixed_files(Drop(tmp_path / "drop"))
    alone, _ = sync_parts(judgment_store(tmp_path / "alone"), files, CTX)
    monkeypatch.setattr(judgment_parts, "PARALLEL_BYTES", 0)  # the demo's files are small
    monkeypatch.setattr(judgment_parts, "WORKERS", 2)
    spread, written = sync_parts(judgment_store(tmp_path / "spread"), files, CTX)
    assert len(written) == len(files) and spread.keys() == alone.keys()
    assert all(spread[sf].read_bytes() == alone[sf].read_bytes() for sf in files)


def test_new_files_are_archived_by_the_processes_that_check_them(tmp_path, monkeypatch):
    """Four new files the folder's observation hashed: `archive_versions` leaves their copies to
    the checking processes, which copy each before they read it. One file rewritten and one
    removed after the listing get no part and no copy under their listed digest (the listing is
    not `complete`); listed again, every version is archived byte for byte and its records are
    those of the file as it is now."""
    drop, home = tmp_path / "drop", tmp_path / "home"
    drop.mkdir()
    cache = home / "cache" / "files.sqlite"
    for n in range(4):
        (drop / f"{n}.jsonl").write_text("".join(
            json.dumps(judgment(judge_run_id=f"run-{n}", attempt=a)) + "\n" for a in (1, 2)))
    scan_drop_folder(drop, cache)  # the observation
    copies: dict = {}
    versions = archive_versions(home / "archive", drop, home / "files.parquet", home, cache,
                                copies)
    files = SourceFile.current(versions, [drop])
    assert sorted(copies) == sorted(str(sf.path) for sf in files)
    assert not any(sf.path.exists() for sf in files)  # nothing copied by the listing
    with (drop / "1.jsonl").open("a") as fh:
        fh.write(json.dumps(judgment(judge_run_id="run-late")) + "\n")
    (drop / "3.jsonl").unlink()
    monkeypatch.setattr(judgment_parts, "PARALLEL_BYTES", 0)
    store = judgment_store(home / "cache")
    parts, written = sync_parts(store, files, CTX, copies)
    assert not complete(parts)
    assert sorted(sf.source_file for sf in files if parts[sf].exists()) == ["0.jsonl", "2.jsonl"]
    assert len(written) == 2 and not any(sf.path.exists() for sf in files[1::2])

    versions = archive_versions(home / "archive", drop, home / "files.parquet", home, cache)
    files = SourceFile.current(versions, [drop])
    parts, written = sync_parts(store, files, CTX)
    assert complete(parts) and [sf.source_file for sf in files] == [
        "0.jsonl", "1.jsonl", "2.jsonl"] and len(written) == 1  # the rewritten file
    for sf in files:
        assert sf.path.read_bytes() == (drop / sf.source_file).read_bytes()
    result = ingest(files, CTX, parts)
    assert result == ingest(files, CTX) and not result.rejects
    assert {j["judge_run_id"] for j in result.judgments} == {"run-0", "run-1", "run-2",
                                                            "run-late"}


@pytest.mark.slow
def test_the_asset_reads_each_version_once(demo_warehouse, tmp_path):
    """Each file version is read once; a new system's candidates (the context every judgment is
    checked against changes, but no record of the demo's names that system) keep every part:
    the step checks no version again."""
    drop, candidates = tmp_path / "judgments", tmp_path / "candidates"
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    shutil.copytree(demo_warehouse.candidates_root(), candidates)
    settings = copy_home(demo_warehouse, tmp_path / "home", judgments_dir=str(drop),
                         candidates_dir=str(candidates))
    home = settings.home
    folder = judgment_store(settings.cache_dir).folder
    select = "key:raw_rvp_judgment_files"
    assert materialize(settings, select, checks=False).success  # the copied drop folder
    parts = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    tables = {p.name: p.read_bytes() for p in (home / "tables" / "raw").glob("rvp_*.parquet")}
    assert parts
    assert materialize(settings, select, checks=False).success  # nothing changed
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == parts
    assert {p.name: p.read_bytes()
            for p in (home / "tables" / "raw").glob("rvp_*.parquet")} == tables
    # one new file: exactly one new part, the others untouched
    (drop / "late.jsonl").write_text((drop / "judge-run-b.jsonl").read_text().splitlines()[0]
                                     + "\n")
    assert materialize(settings, select, checks=False).success
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert {n: t for n, t in after.items() if n in parts} == parts
    assert [n for n in after if n not in parts] == [n for n in after if n.startswith("late")]
    assert len(after) == len(parts) + 1

    system = sorted(p.name for p in candidates.iterdir())[0]
    shutil.copytree(candidates / system, candidates / "new-system")
    run = materialize(settings, "+key:raw_rvp_judgments", checks=False)  # and the context
    assert run.success
    assert run.metadata_of("raw_rvp_judgments")["file_versions_checked"] == 0
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == after
    systems = pq.read_table(home / "tables" / "raw" / "rvp_candidates.parquet",
                            columns=["system"]).column("system").to_pylist()
    assert "new-system" in systems  # the context did change


def test_a_replay_that_meets_a_file_changed_since_the_listing_stops(tmp_path, monkeypatch):
    """The replay takes the parts as they are checked: at a version whose file was rewritten
    after the listing (no part, no archive copy) it stops with `Incomplete`, and the step
    lists the folder again; nothing is replayed from a part that is not there."""
    from dagster_project.rynn_vp.judgments import judgment_table_stores, write_tables

    drop, home = tmp_path / "drop", tmp_path / "home"
    drop.mkdir()
    cache = home / "cache" / "files.sqlite"
    for n in range(3):
        (drop / f"{n}.jsonl").write_text(json.dumps(judgment(judge_run_id=f"run-{n}")) + "\n")
    scan_drop_folder(drop, cache)
    copies: dict = {}
    versions = archive_versions(home / "archive", drop, home / "files.parquet", home, cache,
                                copies)
    files = SourceFile.current(versions, [drop])
    (drop / "1.jsonl").write_text(json.dumps(judgment(judge_run_id="run-late")) + "\n")
    monkeypatch.setattr(judgment_parts, "PARALLEL_BYTES", 0)
    stores = judgment_table_stores(home)
    with pytest.raises(judgment_parts.Incomplete, match="1.jsonl"), judgment_parts.check_parts(
            judgment_store(home / "cache"), files, CTX, copies) as parts:
        write_tables(files, CTX, stores, home, parts)
    assert parts[files[0]].exists() and not parts[files[1]].exists()
    assert not files[1].path.exists() and not complete(parts)


def table_bytes(stores) -> dict[str, dict[str, bytes]]:
    """The judgment tables as written: table -> part file -> its bytes."""
    return {name: {p.name: p.read_bytes() for p in sorted(store.folder.glob("*.parquet"))}
            for name, store in stores.items()}


def _tables(files, parts, work) -> dict[str, dict[str, bytes]]:
    from dagster_project.rynn_vp.judgments import judgment_table_stores, write_tables

    work.mkdir()
    stores = judgment_table_stores(work)
    write_tables(files, CTX, stores, work, parts)
    return table_bytes(stores)


def test_one_more_file_is_read_alone_and_gives_the_tables_of_a_fresh_start(tmp_path):
    """The cross-record decisions (repeat, rewrite, final attempt, stage rows) are made again
    over every part, but only the new file is read and checked: the tables are byte for byte
    those of reading everything into a new store, whatever the new file overturns."""
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    store = judgment_store(tmp_path / "cache")
    parts, _ = sync_parts(store, files, CTX)
    before = _tables(files, parts, tmp_path / "t0")
    # a retry that becomes the final attempt, a repeat of an accepted record and a rewrite of it
    late = drop.jsonl("late.jsonl", [judgment(attempt=3, attempt_kind="retry"), judgment(),
                                     judgment(attempt=3, attempt_kind="retry", notes="x")])
    more, written = sync_parts(store, [*files, late], CTX)
    assert written == [more[late].stem]  # the new version alone was read and checked
    after = _tables([*files, late], more, tmp_path / "t1")
    fresh, _ = sync_parts(judgment_store(tmp_path / "fresh"), [*files, late], CTX)
    assert _tables([*files, late], fresh, tmp_path / "t2") == after
    assert after != before  # the new file changed the tables (a new final attempt, rejects)
    rows = ingest([*files, late], CTX, more)
    finals = [(j["attempt"], j["attempt_kind"]) for j in rows.judgments
              if j["is_final"] and j["system"] == judgment()["system"]
              and j["case_id"] == judgment()["case_id"]]
    assert finals == [(3, "retry")]
    reasons = [r["reason"] for r in rows.rejects if r["source_file"] == "late.jsonl"]
    assert len(reasons) == 2 and "duplicate of a.jsonl v1 line 1" in reasons[0]
    assert "conflicts with late.jsonl v1 line 1" in reasons[1]


def test_a_large_file_is_a_bin_of_its_own():
    """Bins end before the file that would take them over their cost: a file of a bin's cost
    or more is checked (and replayed) alone, the small files around it share bins, in order."""
    bins = judgment_parts._bins("abcdefg", [10, 100, 10, 10, 10, 10, 100], 30)
    assert bins == [["a"], ["b"], ["c", "d", "e"], ["f"], ["g"]]
