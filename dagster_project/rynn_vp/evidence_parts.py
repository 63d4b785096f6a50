"""Rynn-VP evidence kept in parts: one part per case in each of `rvp_evidence_frames`,
`rvp_storyboards`, `rvp_evaluations` and (if it has rejects) `rvp_rejects/rvp_evidence`, keyed
by the case's inputs (its files' digests and stored paths, decodable range and intervals, each
candidate's evaluation fingerprint) and `EVIDENCE_POLICY_VERSION` (`parts.PartStore`).

An unchanged case is not touched at all (its parts are there and so are their images). A changed
case is built again in a worker process from its previous part: an evaluation whose own
`inputs_fingerprint` is unchanged keeps its rows and images, only the others are decoded
(`evidence.build_case_evidence`). Parts of cases no longer accepted are removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dagster_project.parts import PartStore, fan_out
from dagster_project.rynn_vp.evidence import (
    EVIDENCE_POLICY_VERSION,
    EVIDENCE_TABLES,
    MAX_SOURCE_FRAMES,
    CaseInputs,
    build_case_evidence,
    case_fingerprint,
    evaluation_fingerprint,
)
from dagster_project.rynn_vp.snapshot import snapshot_root
from dagster_project.tables import (
    Reject,
    connect_raw,
    content_version,
    keep,
    read_kept,
    read_table,
    rejects_table,
    remove_stale_temps,
    resolved_path,
    rows_to_table,
    stored_path,
    table_files,
    table_path,
)

# the raw tables `case_inputs` reads (`rvp_intervals` through its view): with the code, what the
# step's `inputs` digest is made of (`defs/rynn_vp/assets.rvp_evidence`)
EVIDENCE_INPUTS = ("rvp_snapshot", "rvp_checksums", "rvp_media", "rvp_cases", "rvp_intervals",
                   "rvp_candidates")
REJECTS = "rvp_rejects/rvp_evidence"  # this stage's folder of the shared rejects table
_ROWS = {"rvp_evidence_frames": "frames", "rvp_storyboards": "storyboards",
         "rvp_evaluations": "evaluations"}


def source_frame_budget(home: Path, kept: Path) -> tuple[int, int]:
    """(evaluations over `MAX_SOURCE_FRAMES` source frames, the most any has), over every part
    of `rvp_evaluations`; kept in `kept` under the table's version (`content_version`: its
    parts' names and sizes) and taken from there while the parts are the same: a run where
    nothing changed opens none of them (0.12-0.14 s for the full-size home's 201)."""
    version = f"{content_version(home, 'rvp_evaluations')}:{MAX_SOURCE_FRAMES}"
    counted = read_kept(kept, version)
    if isinstance(counted, list) and len(counted) == 2:
        return counted[0], counted[1]
    con = connect_raw(home, ["rvp_evaluations"])
    try:
        over, worst = con.execute(
            f"SELECT count(*) FILTER (WHERE n_source_frames > {MAX_SOURCE_FRAMES}), "
            "coalesce(max(n_source_frames), 0) FROM raw.rvp_evaluations").fetchone()
    finally:
        con.close()
    keep(kept, version, [over, worst])
    return over, worst


def evidence_stores(home: Path) -> dict[str, PartStore]:
    """The part stores of the three evidence tables and of this stage's rejects."""
    stores = {name: PartStore.of_table(home, name, EVIDENCE_POLICY_VERSION, schema)
              for name, schema in EVIDENCE_TABLES.items()}
    stores[REJECTS] = PartStore(table_path(home, "rvp_rejects", "rvp_evidence/_").parent,
                                EVIDENCE_POLICY_VERSION)
    return stores


def accepted_cases(home: Path) -> list[str]:
    """The case ids `raw_rvp_cases` accepted."""
    return sorted(pq.read_table(table_path(home, "rvp_cases"), columns=["case_id"])
                  .column(0).to_pylist())


def case_inputs(home: Path, case_ids: list[str]) -> list[CaseInputs]:
    """Each case's inputs: its files and digests, its candidates, and its intervals with the Done
    rule and the clamped extraction times of the `rvp_intervals` view (the rule lives there)."""
    from dagster_project.warehouse import catalog

    con = catalog.connect(home)
    root, _ = snapshot_root(home)

    def raw(name: str) -> list[dict[str, Any]]:
        return read_table(table_path(home, name), home).to_pylist()

    sums = {r["rel_path"]: r["actual_sha256"] for r in raw("rvp_checksums")}
    media = {r["case_id"]: (r["first_frame_s"], r["last_frame_s"])
             for r in raw("rvp_media") if r["ok"]}
    cand = raw("rvp_candidates")
    cur = con.execute("SELECT case_id, ordinal, \"interval\", end_s, label, is_done_label "
                      "FROM rvp_intervals ORDER BY case_id, ordinal")  # one query, not one a case
    cols = [d[0] for d in cur.description]
    intervals_of: dict[str, list[dict[str, Any]]] = {}
    for row in cur.fetchall():
        record = dict(zip(cols, row, strict=True))
        intervals_of.setdefault(record.pop("case_id"), []).append(record)
    out = []
    for case_id in case_ids:
        if case_id not in media:
            continue  # not an accepted case with media (metadata-only snapshot, or rejected)
        intervals = intervals_of.get(case_id, [])
        rel = f"cases/{case_id}"
        out.append(CaseInputs(
            case_id=case_id, initial_png=str(root / rel / "initial.png"),
            initial_sha256=sums.get(f"{rel}/initial.png"), gt_mp4=str(root / rel / "gt.mp4"),
            gt_sha256=sums.get(f"{rel}/gt.mp4"), first_frame_s=media[case_id][0],
            last_frame_s=media[case_id][1], intervals=intervals,
            candidates=[c for c in cand if c["case_id"] == case_id]))
    con.close()
    return out


def case_key(store: PartStore, inp: CaseInputs, home: Path) -> str:
    """The name of a case's parts: its inputs as stored (the same in every home)."""
    case_fp = case_fingerprint(inp, home)
    return store.key(inp.case_id, case_fp,
                     [evaluation_fingerprint(case_fp, c, home) for c in inp.candidates])


def _unchanged(stores: dict[str, PartStore], key: str, home: Path, case_id: str) -> bool:
    """Whether the case's parts are all there, and every image they name. Without reading the
    parts when no folder of the case's images changed since its parts were written (its images
    are written before them; removing a file changes its folder's modification time)."""
    try:  # a case's rejects part is written before these, and only when it has rejects
        written = min(stores[t].path(key).stat().st_mtime_ns for t in EVIDENCE_TABLES)
    except OSError:
        return False
    newest = _newest_folder(home / "evidence" / case_id)
    if newest is not None and newest <= written:
        return True
    images = [p for name in ("rvp_evidence_frames", "rvp_storyboards")
              for p in pq.ParquetFile(stores[name].path(key)).read(columns=["image_path"])
              .column(0).to_pylist()]
    return all(os.path.isfile(resolved_path(p, home) or "") for p in images)


def images_untouched(home: Path) -> bool:
    """Whether no folder of the evidence images (`$BENCHLAKE_HOME/evidence/`) changed since the
    newest evidence part was written: `_unchanged` for every case at once, one walk of the
    folders and no part read (a step whose inputs are the same then describes its tables
    again)."""
    try:
        written = max(f.stat().st_mtime_ns for table in EVIDENCE_TABLES
                      for f in table_files(home, table))
    except (OSError, ValueError):  # no part yet: the step runs
        return False
    newest = _newest_folder(home / "evidence")
    return newest is not None and newest <= written


def _newest_folder(top: Path) -> int | None:
    """The latest modification time of `top` and of every folder under it (links not
    followed), None if `top` is not there. Removing or adding a file changes its folder's."""
    try:
        newest = os.stat(top).st_mtime_ns
    except OSError:
        return None
    for folder, _, _ in os.walk(top):
        with suppress(OSError):  # a folder gone meanwhile
            newest = max(newest, os.stat(folder).st_mtime_ns)
    return newest


def _previous(stores: dict[str, PartStore], case_id: str, home: Path) -> dict[str, dict]:
    """The case's evidence rows as last built (an earlier part of it), by evaluation."""
    tables = ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations")
    keys = [k for k in stores["rvp_evaluations"].labelled(case_id)
            if all(stores[t].has(k) for t in tables)]
    if not keys:
        return {}
    try:
        rows = {t: read_table(stores[t].path(keys[-1]), home).to_pylist() for t in tables}
    except Exception:  # noqa: BLE001 - an unreadable old part only costs a new extraction
        return {}
    out = {ev["evaluation_id"]: {"evaluation": ev, "frames": [], "storyboards": []}
           for ev in rows["rvp_evaluations"] if ev.get("inputs_fingerprint")}
    for table, kind in (("rvp_evidence_frames", "frames"), ("rvp_storyboards", "storyboards")):
        for row in rows[table]:
            if row["evaluation_id"] in out:
                out[row["evaluation_id"]][kind].append(row)
    return out


def build_case(job: tuple[CaseInputs, str, str]) -> int:
    """One changed case, in a worker process: extract what changed and write its parts; the
    number of evaluations decoded."""
    inp, key, home_text = job
    home = Path(home_text)
    stores = evidence_stores(home)
    remove_stale_temps(home / "evidence" / inp.case_id)  # a killed run's (one job per case)
    out = build_case_evidence(inp, home / "evidence" / inp.case_id,
                              previous=_previous(stores, inp.case_id, home), home=home)
    # The rejects first, and only if there are any: an empty part would still change the
    # rejects table's version (its parts' names), and so every view and check reading it.
    if out["rejects"]:
        stores[REJECTS].write(key, rejects_table(
            Reject(stored_path(r["source_file"], home) or "", r["reason"], r["case_id"],
                   r["stage"]) for r in out["rejects"]))
    for (table, schema), kind in zip(EVIDENCE_TABLES.items(), _ROWS.values(), strict=True):
        stores[table].write(key, rows_to_table(out[kind], schema), home=home)
    return len(out["extracted"])


@dataclass
class EvidenceResult:
    cases: int = 0
    built: list[str] = field(default_factory=list)  # the parts (cases) built now
    removed: list[str] = field(default_factory=list)
    extracted: int = 0  # evaluations decoded now

    def work(self, table: str) -> dict[str, int]:
        """What this run did, as the UI shows it for evidence table `table`."""
        done = {"parts_written": len(self.built), "parts_removed": len(self.removed)}
        if table == "rvp_evaluations":
            done["evaluations_extracted"] = self.extracted
        return done


def sync_evidence(home: Path, log: Callable[[str], None] = lambda _: None,
                  workers: int = 2, ray_address: str = "") -> EvidenceResult:
    """Bring the evidence parts in line with the accepted cases (see the module notes); the
    changed cases fanned out over `workers` processes, or as tasks of the Ray cluster at
    `ray_address` (`parts.fan_out`)."""
    stores = evidence_stores(home)
    for store in stores.values():
        store.ensure_schema()
    inputs = case_inputs(home, accepted_cases(home))
    keys = [case_key(stores["rvp_evaluations"], inp, home) for inp in inputs]
    jobs = [(inp, key, str(home)) for inp, key in zip(inputs, keys, strict=True)
            if not _unchanged(stores, key, home, inp.case_id)]
    result = EvidenceResult(cases=len(inputs), built=[job[1] for job in jobs])
    for done, extracted in enumerate(fan_out(build_case, jobs, workers, ray_address, log),
                                     1):
        result.extracted += extracted
        if done % 25 == 0 or done == len(jobs):
            log(f"evidence: {done}/{len(jobs)} changed cases built, "
                f"{result.extracted} evaluations extracted")
    removed = {k for store in stores.values() for k in store.keep(keys)}
    result.removed = sorted(removed)
    log(f"evidence: {len(inputs) - len(jobs)} cases unchanged, {len(jobs)} built, "
        f"{len(result.removed)} parts removed")
    return result
