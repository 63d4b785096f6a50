"""The replay kept from one run to the next (`judgment_replay`): a run that resumes it writes
exactly the bytes of a full replay, whether a file is added at the end, inserted earlier, or an
earlier file changes (then it falls back to replaying from there, or everything)."""

from __future__ import annotations

import shutil

from dagster_project.rynn_vp import judgment_replay
from dagster_project.rynn_vp.judgment_parts import judgment_store, sync_parts
from dagster_project.rynn_vp.judgments import JUDGMENT_TABLES, write_tables
from tests.rynn_vp.test_judgment_parts import _mixed_files
from tests.rynn_vp.test_judgment_records import CTX, PLANNED, Drop
from tests.rynn_vp.test_judgment_records import record as judgment


def _run(files, store, work, checkpoint=None, refused=()):
    parts, _ = sync_parts(store, files, CTX)
    work.mkdir(parents=True)
    out = {name: work / f"{name}.parquet" for name in JUDGMENT_TABLES}
    written = write_tables(files, CTX, out, work, parts, refused, checkpoint)
    return {name: path.read_bytes() for name, path in out.items()}, written


def _check(tmp_path, before, after, refused=(), covered=None):
    """Replay `before` with a checkpoint, then `after` from it: the same bytes as a full
    replay of `after`; `covered`: the files the checkpoint must spare."""
    store = judgment_store(tmp_path / "cache")
    checkpoint = tmp_path / "replay"
    _run(before, store, tmp_path / "w0", checkpoint, refused)
    calls, real = [], judgment_replay.restore

    def spy(*args):
        calls.append(real(*args))
        return calls[-1]

    judgment_replay.restore = spy
    try:
        resumed, written = _run(after, store, tmp_path / "w1", checkpoint, refused)
    finally:
        judgment_replay.restore = real
    if covered is not None:
        assert calls == [covered]
    full, full_written = _run(after, store, tmp_path / "w2", None, refused)
    assert resumed == full
    assert written == full_written
    # and the kept state now is that of `after`: resuming again changes nothing
    again, _ = _run(after, store, tmp_path / "w3", checkpoint, refused)
    assert again == full
    return full


def test_a_file_added_at_the_end_replays_alone(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    # a retry that becomes the final attempt, a repeat and a rewrite of an accepted record
    late = drop.jsonl("z-late.jsonl", [judgment(attempt=3, attempt_kind="retry"), judgment(),
                                       judgment(attempt=3, attempt_kind="retry", notes="x")])
    _check(tmp_path, files, [*files, late], covered=len(files))


def test_a_file_inserted_earlier_replays_from_there(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    # conflicts with records of the files after it: they now lose to it
    early = drop.jsonl("b0.jsonl", [judgment(notes="first"), judgment(PLANNED, attempt=5)])
    after = [*files[:2], early, *files[2:]]
    _check(tmp_path, files, after, covered=2)


def test_a_changed_first_file_replays_everything(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    changed = drop.jsonl("a.jsonl", [judgment(attempt=7, attempt_kind="retry")])
    after = [changed, *files[1:]]
    _check(tmp_path, files, after, covered=0)


def test_other_refused_rows_or_a_lost_checkpoint_replay_everything(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    refused = [{"source_file": "out.jsonl", "reason": "leads out of the folder"}]
    _check(tmp_path / "r", files, files, refused=refused, covered=len(files))
    (tmp_path / "r2").mkdir()
    store = judgment_store(tmp_path / "r2" / "cache")
    _run(files, store, tmp_path / "r2" / "w0", tmp_path / "r2" / "replay")
    assert judgment_replay.restore(tmp_path / "r2" / "replay", _Probe(), [], refused) == 0
    shutil.rmtree(tmp_path / "r2" / "replay")
    full, _ = _run(files, store, tmp_path / "r2" / "w1", None, refused)
    lost, _ = _run(files, store, tmp_path / "r2" / "w2", tmp_path / "r2" / "replay", refused)
    assert lost == full


class _Probe:
    """A state restore must not touch when it refuses the checkpoint."""

    def __getattr__(self, name):
        raise AssertionError(name)


def test_parts_checked_by_several_processes_are_those_of_one(tmp_path, monkeypatch):
    from dagster_project.rynn_vp import judgment_parts

    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    one, _ = sync_parts(judgment_store(tmp_path / "one"), files, CTX)
    monkeypatch.setattr(judgment_parts, "PARALLEL_BYTES", 0)
    many, written = sync_parts(judgment_store(tmp_path / "many"), files, CTX)
    assert len(written) == len(files)
    assert [many[sf].read_bytes() for sf in files] == [one[sf].read_bytes() for sf in files]
