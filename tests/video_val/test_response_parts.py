"""Responses in parts: each file version parsed and scored once; the views over the parts equal
a plain Python reading of every version in order, whether the files came one at a time or all at
once; a part whose version is no longer in the folder is removed; a rerun with nothing changed
writes no part, and one new version writes exactly its parts (parsed, scored, verl metrics)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_project.dropfolder import scan_drop_folder
from dagster_project.parts import SCHEMA_PART
from dagster_project.runner import materialize
from dagster_project.tables import table_path
from dagster_project.video_val import response_parts
from dagster_project.video_val.responses import response_digest
from dagster_project.warehouse.catalog import connect
from tests.conftest import copy_home

RESPONSES = ("key:raw_vv_response_files or key:raw_vv_responses or key:raw_vv_response_rejects"
             " or key:raw_vv_scored_responses or key:raw_vv_question_scores"
             " or key:raw_vv_later_records")
# The views the tests read, rebuilt in the test's home (the copied catalog names the original's
# Parquet), with the Python assets of the responses.
VIEWS = ("(+key:vv_scores or +key:vv_sample_metrics or +key:vv_response_rejects "
         "or +key:vv_responses or +key:vv_scored_responses or key:stg_vv_response_files) "
         "and kind:dbt")
TABLES = ("vv_responses", "vv_response_rejects", "vv_scored_responses")


def _home(demo_warehouse, tmp_path: Path, drop: Path):
    settings = copy_home(demo_warehouse, tmp_path / "home", responses_dir=str(drop))
    home = settings.home
    table_path(home, "vv_response_files").unlink()
    for name in TABLES:
        shutil.rmtree(table_path(home, name, SCHEMA_PART).parent)
    shutil.rmtree(home / "archive" / "responses", ignore_errors=True)
    return settings


def _run(settings, select: str = RESPONSES) -> None:
    assert materialize(settings, select, checks=False).success


def _record(uid: str, step: int, response: str, sample: int = 0, run: str = "r") -> str:
    return json.dumps({"run_id": run, "step": step, "uid": uid, "sample_idx": sample,
                       "response": response})


def _files(uids: list[str]) -> list[tuple[str, str]]:
    """(name, content) in the order they are dropped; the last rewrites b.jsonl."""
    a, b, c = uids[:3]
    return [
        ("b.jsonl", "\n".join([_record(a, 1, "<answer>\\boxed{A}</answer>"),
                               _record(b, 1, "B", sample=1), "{broken"]) + "\n"),
        ("a.jsonl", "\n".join([_record(a, 1, "<answer>\\boxed{A}</answer>"),  # the first of its key (a < b)
                               _record(c, 1, "C"), _record("nope:1", 1, "A")]) + "\n"),
        ("run2/c.jsonl", "\n".join([_record(a, 1, "other"),  # conflicts with a.jsonl line 1
                                    _record(a, 2, "answer: D", run="r2")]) + "\n"),
        ("b.jsonl", "\n".join([_record(b, 1, "B", sample=1), _record(c, 3, "E")]) + "\n"),
    ]


def _expected(versions: list[tuple[str, int, str]], known: set[str]):
    """Statuses of every well-formed record, read in (file, version, line) order."""
    first: dict[tuple, tuple[str, str]] = {}
    out = {}
    for name, version, text in sorted(versions):
        for line, raw in enumerate(text.splitlines(), 1):
            try:
                r = json.loads(raw)
            except ValueError:
                out[(name, version, line)] = "malformed"
                continue
            where = f"{name} v{version} line {line}"
            key = (r["run_id"], r["step"], r["uid"], r["sample_idx"])
            if r["uid"] not in known:
                out[(name, version, line)] = "unknown uid"
            elif key not in first:
                first[key] = (where, response_digest(r["response"]))
                out[(name, version, line)] = "accepted"
            elif first[key][1] == response_digest(r["response"]):
                out[(name, version, line)] = f"duplicate of {first[key][0]}"
            else:
                out[(name, version, line)] = f"conflicts with {first[key][0]}"
    return out


def _observed(settings):
    con = connect(settings.home)
    status = {(f, v, ln): "accepted" for f, v, ln in con.execute(
        "SELECT source_file, file_version, line FROM vv_responses").fetchall()}
    for f, v, ln, reason in con.execute(
            "SELECT source_file, file_version, line, reason FROM vv_response_rejects").fetchall():
        status[(f, v, ln)] = ("malformed" if reason.startswith("not JSON") else
                              "unknown uid" if reason.startswith("unknown uid") else
                              reason.split(" (")[0].split(":")[0])
    tables = {view: con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
              for view in ("vv_responses", "vv_response_rejects", "vv_scored_responses",
                           "vv_scores", "vv_sample_metrics")}
    return status, tables


@pytest.mark.slow
def test_incremental_ingest_equals_the_full_one(demo_warehouse, tmp_path, monkeypatch):
    drop = tmp_path / "drop"
    drop.mkdir()
    settings = _home(demo_warehouse, tmp_path, drop)
    con = connect(demo_warehouse.home)
    uids = [u for (u,) in con.execute("SELECT uid FROM vv_questions ORDER BY uid").fetchall()]
    versions: list[tuple[str, int, str]] = []
    parts_before: dict[str, float] = {}
    for name, text in _files(uids):
        (drop / name).parent.mkdir(parents=True, exist_ok=True)
        (drop / name).write_text(text)
        versions.append((name, 1 + sum(v[0] == name for v in versions), text))
        _run(settings)
        folder = table_path(settings.home, "vv_responses", SCHEMA_PART).parent
        parts = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.parquet")}
        # an earlier version's part is never written again
        assert all(parts.get(p) == t for p, t in parts_before.items()), name
        parts_before = parts
    _run(settings, VIEWS)
    status, incremental = _observed(settings)
    assert status == _expected(versions, set(uids))
    # all four versions have their parts (the folder holds 3 files; b.jsonl v1 stays archived)
    assert len(parts_before) == 1 + 4

    # the full path: every part parsed and scored again from the archive, two processes each
    monkeypatch.setattr(response_parts, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(response_parts, "POOL_MIN_ROWS", 0)
    for name in TABLES:
        shutil.rmtree(table_path(settings.home, name, SCHEMA_PART).parent)
    _run(settings, f"{RESPONSES} or {VIEWS}")
    assert _observed(settings)[1] == incremental


@pytest.mark.slow
def test_parts_follow_the_folder_and_parse_once(demo_warehouse, tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    settings = _home(demo_warehouse, tmp_path, drop)
    con = connect(demo_warehouse.home)
    uid = con.execute("SELECT min(uid) FROM vv_questions").fetchone()[0]
    (drop / "one.jsonl").write_text(_record(uid, 1, "A") + "\n")
    _run(settings)
    folder = table_path(settings.home, "vv_scored_responses", SCHEMA_PART).parent
    [part] = [p for p in folder.glob("*.parquet") if p.stem != SCHEMA_PART]
    stamp = part.stat().st_mtime_ns
    _run(settings)
    assert part.stat().st_mtime_ns == stamp  # nothing changed: nothing scored again
    assert pq.read_metadata(part).num_rows == 1

    other = tmp_path / "other"
    other.mkdir()
    moved = settings.__class__.from_env({**settings.as_env(), "RESPONSES_DIR": str(other)})
    _run(moved, f"{RESPONSES} or {VIEWS}")
    con = connect(settings.home)
    assert con.execute("SELECT count(*) FROM vv_scored_responses").fetchone()[0] == 0
    assert not part.exists()  # its version belongs to another folder now
    assert con.execute("SELECT count(*) FROM stg_vv_response_files WHERE NOT is_current"
                       ).fetchone()[0] == 1  # still archived and listed


PARTED = ("vv_responses", "vv_response_rejects", "vv_scored_responses", "vv_verl_metrics")
WITH_METRICS = f"{RESPONSES} or key:raw_vv_verl_metrics or key:vv_scoring_policies"


def _stamps(home: Path) -> dict[str, int]:
    return {f"{name}/{p.name}": p.stat().st_mtime_ns for name in PARTED
            for p in table_path(home, name, SCHEMA_PART).parent.glob("*.parquet")}


def _written(outcome, key: str) -> int:
    [event] = [e for e in outcome.get_asset_materialization_events()
               if e.asset_key.to_user_string() == key]
    return event.materialization.metadata["parts_written"].value


@pytest.mark.slow
def test_a_rerun_writes_nothing_and_a_new_version_only_its_parts(demo_warehouse, tmp_path):
    drop = tmp_path / "responses"
    shutil.copytree(demo_warehouse.responses_root(), drop)
    settings = copy_home(demo_warehouse, tmp_path / "home", responses_dir=str(drop))
    _run(settings, WITH_METRICS)  # the copied folder: its own versions
    before = _stamps(settings.home)
    outcome = materialize(settings, WITH_METRICS, checks=False)
    assert outcome.success and _stamps(settings.home) == before
    assert {_written(outcome, f"raw_{name}") for name in PARTED} == {0}
    # one more verl dump (a copy of one, as a later step): a response part, its rejects, a
    # scored part and its metrics; nothing else
    dump = sorted((drop / "verl-grpo").glob("*.jsonl"))[0]
    (drop / "verl-grpo" / "150.jsonl").write_bytes(dump.read_bytes())
    outcome = materialize(settings, WITH_METRICS, checks=False)
    assert outcome.success
    after = _stamps(settings.home)
    assert {k: v for k, v in after.items() if k in before} == before
    new = sorted(k for k in after if k not in before)
    assert [k.split("/")[0] for k in new] == sorted(PARTED)
    assert all(k.split("/")[1].startswith("verl-grpo_150.jsonl.v1.") for k in new)
    assert {_written(outcome, f"raw_{name}") for name in PARTED} == {1}


def test_scoring_keeps_each_parts_unknown_uids_beside_it(tmp_path):
    """A part's responses of no question are kept in its vv_unknown_uids part (same key), as
    read and in order, and only the others are scored; a part scored before these were kept gets
    them without being scored again; nothing changed writes nothing."""
    responses = response_parts.parsed_stores(tmp_path)["vv_responses"]
    responses.ensure_schema()
    rows = [{"run_id": "r", "step": 10, "uid": uid, "sample_idx": i, "line": i + 1,
             "response": f"<answer>\\boxed{{{letter}}}</answer>", "source_file": "a.jsonl",
             "file_version": 1, "response_digest": str(i)}
            for i, (uid, letter) in enumerate([("q:1", "A"), ("gone:7", "B"), ("q:2", "C"),
                                               ("gone:8", "D")])]
    schema = responses.schema
    responses.write(responses.key("a.jsonl.v1", 1), pa.Table.from_pylist(
        [{n: row.get(n) for n in schema.names} for row in rows], schema=schema))
    questions = pl.DataFrame({"uid": ["q:1", "q:2"], "data_source": ["q", "q"],
                              "option_letters": ["ABCD", "ABCD"], "ground_truth": ["A", "B"]})

    scored, unknown = response_parts.score_parts(tmp_path, questions)
    assert (len(scored.written), scored.rows_written, unknown.rows_written) == (1, 2, 2)
    [key] = unknown.written
    assert key == scored.written[0]  # the scored part's key
    kept = response_parts.unknown_uids_store(tmp_path)
    assert kept.load(key).to_pylist() == [
        {n: row[n] for n in response_parts.UNKNOWN_UIDS_SCHEMA.names}
        for row in rows if row["uid"].startswith("gone:")]
    part = response_parts.scored_store(tmp_path).path(key)
    assert pq.read_table(part, columns=["uid"])["uid"].to_pylist() == ["q:1", "q:2"]

    before = part.stat().st_mtime_ns
    kept.path(key).unlink()  # a home scored before the unknown uids were kept
    scored, unknown = response_parts.score_parts(tmp_path, questions)
    assert (scored.written, unknown.written, unknown.rows_written) == ([], [key], 2)
    assert part.stat().st_mtime_ns == before
    assert kept.load(key).num_rows == 2

    scored, unknown = response_parts.score_parts(tmp_path, questions)
    assert (scored.written, unknown.written, scored.kept, unknown.kept) == ([], [], 1, 1)


def test_new_files_are_archived_by_the_jobs_that_parse_them_and_a_rewritten_one_read_again(
        tmp_path, monkeypatch):
    """Four new files the folder's observation hashed (the stat cache holds their digests): the
    parse jobs (two processes) copy each into the archive before they read it. After they were
    listed, one is rewritten and one removed: their jobs find other bytes, or none, and parse
    nothing; the folder is listed again and the rewritten file read as it is now. Every version
    is then archived byte for byte and parsed once, under the digest of the bytes read."""
    home, drop = tmp_path / "home", tmp_path / "drop"
    drop.mkdir()
    cache = home / "cache" / "files.sqlite"
    for step in (1, 2, 3, 4):
        (drop / f"{step}.jsonl").write_text("".join(
            _record(f"q:{i}", step, f"<answer>\\boxed{{A}}</answer> {i}") + "\n"
            for i in range(40)))
    scan_drop_folder(drop, cache)  # the observation
    observed = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in drop.iterdir()}
    listed = []
    real = response_parts.archive_versions

    def listed_then_rewritten(*args):
        versions = real(*args)
        listed.append(dict(args[5]) if len(args) > 5 else None)
        if len(listed) == 1:  # after the first listing, before the jobs copy the files
            with (drop / "2.jsonl").open("a") as fh:
                fh.write(_record("q:99", 2, "late") + "\n")
            (drop / "4.jsonl").unlink()
        return versions

    monkeypatch.setattr(response_parts, "archive_versions", listed_then_rewritten)
    monkeypatch.setattr(response_parts, "POOL_MIN_BYTES", 0)

    versions, result = response_parts.archive_and_parse(
        home / "archive", drop, home / "files.parquet", home, cache,
        lambda: pytest.fail("no other tool's file here"))

    # the first listing left the four copies to the jobs, under the digests observed; the
    # second made its own
    assert [sorted(Path(p).name for p in d) if d is not None else None for d in listed] == [
        sorted(observed.values()), None]
    assert {(v["source_file"], v["version"]) for v in versions} == {
        ("1.jsonl", 1), ("2.jsonl", 1), ("3.jsonl", 1)}
    for v in versions:
        data = (drop / v["source_file"]).read_bytes()
        assert v["sha256"] == hashlib.sha256(data).hexdigest()
        assert Path(v["archived_path"]).read_bytes() == data
        assert v["size_bytes"] == len(data)
    assert (len(result.written), result.rows_written, result.changed) == (3, 121, [])
    rows = pl.concat(pl.read_parquet(p, columns=["source_file"])
                     for p in sorted(table_path(home, "vv_responses", SCHEMA_PART).parent.glob(
                         "*.parquet")) if p.stem != SCHEMA_PART)
    assert dict(rows.group_by("source_file").len().iter_rows()) == {
        "1.jsonl": 40, "2.jsonl": 41, "3.jsonl": 40}
