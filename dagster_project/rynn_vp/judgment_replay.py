"""The replay of the judgment parts, kept from one run to the next: one more file is the only
one replayed.

`judgments.write_tables` replays the parts in file order; earlier wins, so what the records of
the first k files decide does not depend on the files after them, and neither do the rows they
make: the tables are written a segment of files at a time (`judgments.segments`), each
segment's rows into a part of its own. After a replay its state is saved here (`save`): the
digests and identities seen, with where each was first seen, the accepted judgments and current
GT compilations in the order they came, and the `seq` each file started at. The next run
(`restore`) takes the files the two orders share from the start (the same parts: same file
version, context and checks), rolls the state back to the start of a segment no later than the
first file that differs (every entry made later is dropped, the groups are rebuilt from the
accepted judgments before it), and replays only from there: a file added at the end replays the
last segment (the new file and the few before it in that segment), a file inserted earlier the
segments from there on, a changed first file everything (the full replay). The result is the same
rows in the same parts, so the same bytes (tests/rynn_vp/test_judgment_replay). What is read
whole is this small index (an entry per record, no rows).

Deleting the folder costs one full replay. No Dagster import.
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster_project.parts import digest

# Bump when the replay's decisions or its state change: the next run replays everything.
REPLAY_VERSION = "2"
STATE = "state.pickle"
ROWS = "rows.pickle"  # the rows of each part of the last replay, by name (`part_rows`)
_LINE_BITS = 32  # as `judgments._LINE_BITS`: a place is (file index << 32) | line


def save(folder: Path, names: Sequence[str], refused: Sequence[dict[str, Any]],
         state: Any, rows: Sequence[int]) -> None:
    """Keep the state of a finished replay of the parts `names` (in order, with their `rows`)
    in `folder` (replaced atomically)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bounds = [state.seq] * (len(names) + 1)  # `seq` before file i (after the last: the end)
    for i in range(len(names) - 1, -1, -1):
        bounds[i] = state.starts.get(i, bounds[i + 1])
    saved = {"version": REPLAY_VERSION, "names": list(names), "refused": digest(list(refused)),
             "bounds": bounds, "seen": state.seen, "judgments": state.judgments,
             "gts": state.gts, "log": state.log, "current_log": state.current_log,
             "dup_seqs": state.dup_seqs}
    with open(tmp / STATE, "wb") as fh:
        pickle.dump(saved, fh, protocol=pickle.HIGHEST_PROTOCOL)
    with open(tmp / ROWS, "wb") as fh:
        pickle.dump({"version": REPLAY_VERSION, "rows": dict(zip(names, rows, strict=True))}, fh,
                    protocol=pickle.HIGHEST_PROTOCOL)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def part_rows(folder: Path) -> dict[str, int]:
    """The rows of each part the replay kept in `folder` read (a part's name is a digest of
    what it holds), so that the next run opens the footers of new parts only: {} if none."""
    try:
        with open(folder / ROWS, "rb") as fh:
            saved = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError):
        return {}
    return saved["rows"] if saved.get("version") == REPLAY_VERSION else {}


def restore(folder: Path, state: Any, names: Sequence[str], refused: Sequence[dict[str, Any]],
            starts: Sequence[int]) -> int:
    """Roll the saved state of `folder` into the fresh `state` of a replay of the parts `names`,
    back to the latest of `starts` (ascending file indexes where a replay may begin: the
    segments' starts, up to the first one to write again) that the saved files cover: that
    file index (the files before it need no replay), 0 if none."""
    try:
        with open(folder / STATE, "rb") as fh:
            saved = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError):
        return 0
    if saved.get("version") != REPLAY_VERSION or saved["refused"] != digest(list(refused)):
        return 0
    old, k = saved["names"], 0
    while k < min(len(old), len(names)) and old[k] == names[k]:
        k += 1
    k = max((s for s in starts if s <= k), default=0)
    if k == 0:
        return 0
    bound, where = saved["bounds"][k], k << _LINE_BITS
    state.seen = {key: w for key, w in saved["seen"].items() if w < where}
    state.judgments = {key: v for key, v in saved["judgments"].items() if v[0] < where}
    state.gts = {key: w for key, w in saved["gts"].items() if w < where}
    state.starts = {i: s for i, s in enumerate(saved["bounds"][:k])}
    state.dup_seqs = [s for s in saved["dup_seqs"] if s <= bound]
    state.duplicates = len(state.dup_seqs)
    for entry in saved["log"]:
        if entry[0] <= bound:
            state.accept(*entry)
    for seq, case, run in saved["current_log"]:
        if seq <= bound:
            state.current_gt(seq, case, run)
    state.seq = bound
    return k
