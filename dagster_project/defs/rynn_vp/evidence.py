"""Rynn-VP candidates and evidence: what a judge sees per evaluation (system × case).

`rvp_evidence` is partitioned by case (dynamic partitions `rvp_case`, keys synced from
`rvp_cases` by `rvp_case_partitions_sensor` or by `benchlake materialize`). A run over a range of
cases fans the cases out over a process pool; each case writes its own Parquet files
(`tables/<table>/<case_id>.parquet`) and images (`evidence/<case_id>/`), so partitions never
share a file and re-running one gives byte-identical outputs.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import dagster as dg
import pyarrow as pa
from tqdm import tqdm

from dagster_project.catalog import connect
from dagster_project.defs.rynn_vp.assets import snapshot_root
from dagster_project.demo import ensure_candidates_demo
from dagster_project.partitions import RVP_CASE_PARTITIONS, rvp_case_keys
from dagster_project.resources import BenchlakeSettings, write_and_describe
from dagster_project.rynn_vp.candidates import scan_candidates
from dagster_project.rynn_vp.evidence import MAX_SOURCE_FRAMES, CaseInputs, build_case_evidence
from dagster_project.status import mark_written
from dagster_project.tables import (
    Reject,
    path_field,
    rejects_table,
    rows_to_table,
    stored_path,
    write_table,
)

GROUP = "rynn_vp"

CANDIDATES_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("modality", pa.string()),
    path_field("path"), ("fingerprint", pa.string()), ("duration_s", pa.float64()),
    ("frame_count", pa.int64()), ("first_frame_s", pa.float64()),
    ("last_frame_s", pa.float64()), ("step_count", pa.int32()),
    ("step_ids", pa.list_(pa.string())), path_field("step_paths", many=True),
    ("width", pa.int32()), ("height", pa.int32()), ("ok", pa.bool_()), ("problem", pa.string()),
])
FRAMES_SCHEMA = pa.schema([
    ("evidence_id", pa.string()), ("evaluation_id", pa.string()), ("system", pa.string()),
    ("case_id", pa.string()), ("role", pa.string()), ("ordinal", pa.int32()),
    path_field("source_path"), ("source_fingerprint", pa.string()),
    ("requested_s", pa.float64()), ("used_s", pa.float64()), ("pts", pa.int64()),
    ("frame_index", pa.int64()), ("clamped", pa.bool_()), path_field("image_path"),
    ("width", pa.int32()), ("height", pa.int32()), ("interval_ordinal", pa.int32()),
    ("label", pa.string()), ("step_id", pa.string()),
])
STORYBOARDS_SCHEMA = pa.schema([
    ("evaluation_id", pa.string()), ("system", pa.string()), ("case_id", pa.string()),
    ("storyboard_no", pa.int32()), path_field("image_path"), ("panel_count", pa.int32()),
    ("first_panel", pa.int32()), ("last_panel", pa.int32()), ("width", pa.int32()),
    ("height", pa.int32()),
])
EVALUATIONS_SCHEMA = pa.schema([
    ("evaluation_id", pa.string()), ("system", pa.string()), ("case_id", pa.string()),
    ("modality", pa.string()), path_field("candidate_path"),
    ("candidate_fingerprint", pa.string()), ("n_source_frames", pa.int32()),
    ("clip_start_s", pa.float64()), ("clip_end_s", pa.float64()), ("n_panels", pa.int32()),
    ("truncated", pa.bool_()), ("steps_total", pa.int32()), ("steps_shown", pa.int32()),
    ("evidence_gaps", pa.list_(pa.string())), ("extra_evidence", pa.int32()),
    ("problem", pa.string()),
])
EVIDENCE_TABLES = {"rvp_evidence_frames": FRAMES_SCHEMA, "rvp_storyboards": STORYBOARDS_SCHEMA,
                   "rvp_evaluations": EVALUATIONS_SCHEMA}


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=["rvp_cases"])
def rvp_candidates(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Candidates found under CANDIDATES_DIR: `<system>/<case_id>/candidate.mp4` (video) or
    `<system>/<case_id>/steps/<step_id>.(png|jpg)` (ordered images), with fingerprints,
    durations / step counts; every other file there is a reject with its reason."""
    s = benchlake.settings()
    ensure_candidates_demo(s)
    root = s.open_drop_folder("CANDIDATES_DIR")
    rows, rejects = scan_candidates(root, set(rvp_case_keys(s)))
    write_table(rejects_table(rejects), s.tables_dir / "rvp_rejects" / "rvp_candidates.parquet")
    return write_and_describe(benchlake, "rvp_candidates", rows_to_table(rows, CANDIDATES_SCHEMA),
                              systems=len({r["system"] for r in rows}), rejects=len(rejects))


def _case_inputs(benchlake: BenchlakeSettings, case_ids: list[str]) -> list[CaseInputs]:
    """Gather each case's inputs through the SQL views (the clamping and Done rules live there)."""
    s = benchlake.settings()
    con, _ = connect(s.tables_dir)
    root, _ = snapshot_root(benchlake)
    sums = dict(con.execute("SELECT rel_path, actual_sha256 FROM stg_rvp_checksums").fetchall())
    media = {r[0]: r[1:] for r in con.execute(
        "SELECT case_id, first_frame_s, last_frame_s FROM rvp_media").fetchall()}
    cand = benchlake.read("rvp_candidates").to_pylist()
    out = []
    for case_id in case_ids:
        if case_id not in media:
            continue  # not an accepted case with media (metadata-only snapshot, or rejected)
        cur = con.execute("SELECT ordinal, \"interval\", end_s, label, is_done_label "
                          "FROM rvp_intervals WHERE case_id = ? ORDER BY ordinal", [case_id])
        cols = [d[0] for d in cur.description]
        intervals = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        rel = f"cases/{case_id}"
        out.append(CaseInputs(
            case_id=case_id, initial_png=str(root / rel / "initial.png"),
            initial_sha256=sums.get(f"{rel}/initial.png"), gt_mp4=str(root / rel / "gt.mp4"),
            gt_sha256=sums.get(f"{rel}/gt.mp4"), first_frame_s=media[case_id][0],
            last_frame_s=media[case_id][1], intervals=intervals,
            candidates=[c for c in cand if c["case_id"] == case_id]))
    return out


def _build_and_write(inp: CaseInputs, home: str, run_id: str) -> dict[str, int]:
    """One case, in a worker process: extract, then write its three tables and rejects."""
    from dagster_project.settings import Settings

    s = Settings(home=Path(home))
    out = build_case_evidence(inp, s.evidence_dir / inp.case_id)
    for (table, schema), key in zip(EVIDENCE_TABLES.items(),
                                    ("frames", "storyboards", "evaluations"), strict=True):
        write_table(rows_to_table(out[key], schema),
                    s.tables_dir / table / f"{inp.case_id}.parquet", home=s.home)
        mark_written(s.tables_dir, table, inp.case_id, run_id, len(out[key]))
    write_table(rejects_table(Reject(stored_path(r["source_file"], s.home) or "", r["reason"],
                                     r["case_id"], r["stage"]) for r in out["rejects"]),
                s.tables_dir / "rvp_rejects" / "rvp_evidence" / f"{inp.case_id}.parquet")
    return {k: len(v) for k, v in out.items()}


@dg.multi_asset(
    group_name=GROUP,
    partitions_def=RVP_CASE_PARTITIONS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    specs=[
        dg.AssetSpec("rvp_evidence_frames", kinds={"parquet"},
                     deps=["rvp_cases", "rvp_intervals", "rvp_media", "rvp_candidates"],
                     description="Every source frame a judge sees, with provenance: S0, GT "
                     "anchors, candidate panels or steps."),
        dg.AssetSpec("rvp_storyboards", kinds={"parquet"}, deps=["rvp_candidates"],
                     description="Five 2x3 storyboards of the 30 panels per video candidate."),
        dg.AssetSpec("rvp_evaluations", kinds={"parquet"}, deps=["rvp_candidates"],
                     description="One row per evaluation: clip boundaries, truncation, steps "
                     "shown, evidence gaps, extra evidence."),
    ],
)
def rvp_evidence(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The card's evidence policy per case (≤ 50 source frames per evaluation)."""
    s = benchlake.settings()
    inputs = _case_inputs(benchlake, list(context.partition_keys))
    totals: dict[str, int] = {}
    workers = min(2, os.cpu_count() or 1, max(1, len(inputs)))
    with ProcessPoolExecutor(max_workers=workers) as pool, tqdm(
            total=len(inputs), desc="evidence frames", unit="case", disable=None) as bar:
        for counts in pool.map(_build_and_write, inputs, [str(s.home)] * len(inputs),
                               [context.run.run_id] * len(inputs)):
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
            bar.update(1)
    for table, key in (("rvp_evidence_frames", "frames"), ("rvp_storyboards", "storyboards"),
                       ("rvp_evaluations", "evaluations")):
        yield dg.MaterializeResult(asset_key=table, metadata={
            "dagster/row_count": totals.get(key, 0), "cases": len(inputs),
            "path": dg.MetadataValue.path(str(s.tables_dir / table))})


@dg.asset_check(asset="rvp_evaluations", blocking=True)
def rvp_evidence_within_budget(benchlake: BenchlakeSettings) -> dg.AssetCheckResult:
    """No evaluation uses more than the card's 50 source frames."""
    con, _ = connect(benchlake.settings().tables_dir)
    over = con.execute("SELECT evaluation_id, n_source_frames FROM rvp_evaluations "
                       f"WHERE n_source_frames > {MAX_SOURCE_FRAMES}").fetchall()
    worst = con.execute("SELECT max(n_source_frames) FROM rvp_evaluations").fetchone()[0]
    return dg.AssetCheckResult(passed=not over, metadata={"max_source_frames": worst or 0,
                                                          "over_budget": len(over)})


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def rvp_case_partitions_sensor(context: dg.SensorEvaluationContext,
                               benchlake: BenchlakeSettings):
    """Keeps the `rvp_case` partitions equal to the accepted cases of `rvp_cases`."""
    wanted = rvp_case_keys(benchlake.settings())
    have = set(context.instance.get_dynamic_partitions(RVP_CASE_PARTITIONS.name))
    add = [k for k in wanted if k not in have]
    remove = sorted(have - set(wanted))
    requests = []
    if add:
        requests.append(RVP_CASE_PARTITIONS.build_add_request(add))
    if remove:
        requests.append(RVP_CASE_PARTITIONS.build_delete_request(remove))
    if not requests:
        return dg.SkipReason(f"{len(wanted)} case partitions already in sync")
    return dg.SensorResult(dynamic_partitions_requests=requests)


TABLE_KEYS = [dg.AssetKey(k) for k in ("rvp_candidates", *EVIDENCE_TABLES)]
