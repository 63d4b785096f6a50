"""The replay kept from one run to the next (`judgment_replay`): a run that resumes it writes
exactly the bytes of a full replay, whether a file is added at the end, inserted earlier, or an
earlier file changes (then it falls back to replaying from there, or everything)."""

from __future__ import annotations

import shutil

import pytest

from dagster_project.rynn_vp import judgment_replay, judgments
from dagster_project.rynn_vp.judgment_parts import judgment_store, sync_parts
from dagster_project.rynn_vp.judgments import judgment_table_stores, write_tables
from tests.rynn_vp.test_judgment_parts import _mixed_files, table_bytes
from tests.rynn_vp.test_judgment_records import CTX, PLANNED, Drop
from tests.rynn_vp.test_judgment_records import record as judgment


@pytest.fixture(autouse=True)
def _a_segment_per_file(monkeypatch):
    """Every file a segment of its own (a file of records reaches SEGMENT_ROWS), so a replay can
    resume at any file."""
    monkeypatch.setattr(judgment_replay, "SEGMENT_ROWS", 1)


def _run(files, store, work, checkpoint=None, refused=()):
    parts, _ = sync_parts(store, files, CTX)
    work.mkdir(parents=True, exist_ok=True)
    stores = judgment_table_stores(work)
    written = write_tables(files, CTX, stores, work, parts, refused, checkpoint)
    return table_bytes(stores), written


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
        resumed, written = _run(after, store, tmp_path / "w0", checkpoint, refused)
    finally:
        judgment_replay.restore = real
    if covered is not None:
        assert calls == [covered]
    full, full_written = _run(after, store, tmp_path / "w2", None, refused)
    assert resumed == full
    assert (written.rows, written.duplicates) == (full_written.rows, full_written.duplicates)
    assert written.finals == full_written.finals
    if covered is not None:  # a segment per file: those from the first to replay are written
        assert written.segments == (len(after) - covered, len(after))
    # and the kept state now is that of `after`: resuming again changes nothing
    again, _ = _run(after, store, tmp_path / "w0", checkpoint, refused)
    assert again == full
    return full


def test_a_file_added_at_the_end_replays_alone(tmp_path):
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    # a retry that becomes the final attempt, a repeat and a rewrite of an accepted record
    late = drop.jsonl("z-late.jsonl", [judgment(attempt=3, attempt_kind="retry"), judgment(),
                                       judgment(attempt=3, attempt_kind="retry", notes="x")])
    _check(tmp_path, files, [*files, late], covered=len(files))


def test_a_resumed_replay_opens_the_new_parts_only(tmp_path, monkeypatch):
    """The rows of the parts the kept replay read are known: one more file opens one footer,
    not one per file of the campaign."""
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    late = drop.jsonl("z-late.jsonl", [judgment(attempt=3, attempt_kind="retry")])
    store = judgment_store(tmp_path / "cache")
    _run(files, store, tmp_path / "w0", tmp_path / "replay")
    opened, real = [], judgments.file_rows
    monkeypatch.setattr(judgments, "file_rows",
                        lambda paths: opened.extend(p.name for p in paths) or real(paths))
    resumed, _ = _run([*files, late], store, tmp_path / "w0", tmp_path / "replay")
    parts, _ = sync_parts(store, [*files, late], CTX)  # all there: none written
    assert opened == [parts[late].name]
    full, _ = _run([*files, late], store, tmp_path / "w1")  # no kept replay: every footer
    assert resumed == full and len(opened) == 1 + len(files) + 1


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
    assert judgment_replay.restore(tmp_path / "r2" / "replay", _Probe(), [], refused, [0]) == 0
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


def _segments(names, rows, refused):
    """The segments `judgment_replay.Cuts` closes as the rows of each part are told."""
    cuts = judgment_replay.Cuts(names, refused)
    return [seg for n in rows if (seg := cuts.add(n)) is not None]


def test_segments_are_cut_by_the_names_before_them_and_close_at_their_rows(monkeypatch):
    monkeypatch.setattr(judgment_replay, "SEGMENT_FILES", 4)
    monkeypatch.setattr(judgment_replay, "SEGMENT_ROWS", 10)
    names = [f"part-{i}" for i in range(40)]
    rows = [1] * 20 + [7] * 20
    cuts = _segments(names, rows, [])
    assert [s[0] for s in cuts] == [0, *(s[1] for s in cuts[:-1])] and cuts[-1][1] == 40
    # at least one cut by a name's digest and one by rows, none past SEGMENT_ROWS + a file
    assert any(sum(rows[a:b]) < 10 and b < 40 for a, b, _ in cuts)
    assert all(sum(rows[a:b - 1]) < 10 for a, b, _ in cuts)
    # a file added at the end leaves the segments before the last as they were
    more = _segments([*names, "part-new"], [*rows, 3], [])
    assert more[:len(cuts) - 1] == cuts[:-1] and more[-1][1] == 41
    # what a segment's rows depend on: its digest covers every name before, and the refused
    assert _segments(["other", *names[1:]], rows, [])[-1][2] != cuts[-1][2]
    assert _segments(names, rows, [{"source_file": "x"}])[0][2] != cuts[0][2]


def test_a_file_added_at_the_end_writes_the_last_segment_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(judgment_replay, "SEGMENT_ROWS", 3)  # a few files a segment
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    store = judgment_store(tmp_path / "cache")
    parts, _ = sync_parts(store, files, CTX)
    stores = judgment_table_stores(tmp_path / "home")
    checkpoint = tmp_path / "replay"
    first = write_tables(files, CTX, stores, tmp_path, parts, (), checkpoint)
    assert first.segments[0] == first.segments[1] > 2
    first_rows = first.rows  # the tables' rows now (read from the parts)
    before = {p: p.stat().st_ino for s in stores.values() for p in s.folder.glob("*.parquet")}
    late = drop.jsonl("z-late.jsonl", [judgment(attempt=3, attempt_kind="retry")])
    parts, _ = sync_parts(store, [*files, late], CTX)
    again = write_tables([*files, late], CTX, stores, tmp_path, parts, (), checkpoint)
    assert again.segments == (1, first.segments[1])  # the last segment, now with the new file
    after = {p: p.stat().st_ino for s in stores.values() for p in s.folder.glob("*.parquet")}
    kept = {p for p in before if p in after and after[p] == before[p]}
    last = f"{first.segments[1] - 1:05d}."
    assert {p for p in before if p not in kept} == {
        p for p in before if p.name.startswith((last, judgments.GT_STAGES))}
    assert again.rows["rvp_judgments"] == first_rows["rvp_judgments"] + 1
    # nothing new: no part, no state written again
    files_now = {p: p.stat().st_ino for s in stores.values() for p in s.folder.glob("*.parquet")}
    state = (checkpoint / judgment_replay.STATE).stat().st_ino
    same = write_tables([*files, late], CTX, stores, tmp_path, parts, (), checkpoint)
    assert same.segments == (0, first.segments[1]) and same.rows == again.rows
    assert {p: p.stat().st_ino for s in stores.values()
            for p in s.folder.glob("*.parquet")} == files_now
    assert (checkpoint / judgment_replay.STATE).stat().st_ino == state


def test_segments_replayed_while_their_files_are_checked_are_those_replayed_after(
        tmp_path, monkeypatch):
    """`check_parts` over processes (bins of files in file order): each segment is replayed
    once its files are checked, into the same bytes as a replay of parts all checked before.
    One more file at the end: the kept state is restored before its check is waited for."""
    from dagster_project.rynn_vp import judgment_parts

    monkeypatch.setattr(judgment_parts, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(judgment_parts, "WORKERS", 2)
    drop = Drop(tmp_path / "drop")
    files = _mixed_files(drop)
    late = drop.jsonl("z-late.jsonl", [judgment(attempt=3, attempt_kind="retry")])
    full = {n: _run(fs, judgment_store(tmp_path / f"c{n}"), tmp_path / f"full{n}")
            for n, fs in ((0, files), (1, [*files, late]))}
    store, stores = judgment_store(tmp_path / "cache"), judgment_table_stores(tmp_path / "w")
    with judgment_parts.check_parts(store, files, CTX) as checking:
        assert all(checking.checked_now(sf) for sf in files) and len(checking._bins) > 1
        first = write_tables(files, CTX, stores, tmp_path, checking, (), tmp_path / "replay")
        assert len(checking.written()) == len(files)
    assert table_bytes(stores) == full[0][0] and first.finals == full[0][1].finals
    order, restore, rows = [], judgment_replay.restore, judgment_parts.CheckedParts.rows
    monkeypatch.setattr(judgment_replay, "restore",
                        lambda *a: order.append("restore") or restore(*a))
    monkeypatch.setattr(judgment_parts.CheckedParts, "rows",
                        lambda self, sf: order.append(sf.source_file) or rows(self, sf))
    with judgment_parts.check_parts(store, [*files, late], CTX) as checking:
        assert [sf for sf in [*files, late] if checking.checked_now(sf)] == [late]
        again = write_tables([*files, late], CTX, stores, tmp_path, checking, (),
                             tmp_path / "replay")
    assert order == ["restore", "z-late.jsonl"] and again.segments == (1, len(files) + 1)
    assert table_bytes(stores) == full[1][0] and again.finals == full[1][1].finals
