"""Judging: the GT cache key per case, judgment records from JUDGMENTS_DIR, and judge packets.

Judgment files are archived content-addressed on first sight (`archive/judgments/<sha256>`), and
`rvp_judgment_files` keeps every (path, content) version: a changed file is a new version, never
an overwrite, and the records of every version are read again on each run (duplicates by content
hash are ignored and counted). `rvp_judgments_sensor` only notices new content and launches the
same asset `benchlake materialize` runs.
"""

from pathlib import Path

import dagster as dg
import pyarrow as pa

from dagster_project.catalog import connect
from dagster_project.defs.rynn_vp.assets import snapshot_root
from dagster_project.demo import ensure_judgments_demo
from dagster_project.dropfolder import archive_versions, versions_of
from dagster_project.resources import (
    BenchlakeSettings,
    drop_folder_sensor_result,
    write_and_describe,
)
from dagster_project.rynn_vp.fingerprint import GT_INPUT_FILES, gt_fingerprint
from dagster_project.rynn_vp.judgments import (
    METRIC_COLUMNS,
    CandidateInfo,
    CaseInfo,
    EvalContext,
    SourceFile,
    ingest,
)
from dagster_project.rynn_vp.packets import build_packets, load_prompts
from dagster_project.tables import path_field, rows_to_table

GROUP = "rynn_vp"

FINGERPRINTS_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("fingerprint", pa.string()), ("prompt_version", pa.string()),
    ("prompt_source", pa.string()),
    *[(f"{n.replace('.', '_')}_sha256", pa.string()) for n in GT_INPUT_FILES],
])
FILES_SCHEMA = pa.schema([
    path_field("folder"), ("source_file", pa.string()), ("version", pa.int32()),
    ("sha256", pa.string()),
    ("size_bytes", pa.int64()), path_field("archived_path"), ("is_current", pa.bool_()),
])
JUDGMENTS_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("attempt", pa.int32()), ("attempt_kind", pa.string()),
    ("is_final", pa.bool_()), ("source_file", pa.string()), ("file_version", pa.int32()),
    ("line", pa.int32()), ("record_sha256", pa.string()),
    *[(col, pa.float64()) for col in METRIC_COLUMNS.values()],
    ("n_hallucinations", pa.int32()), ("evidence", pa.list_(pa.string())),
    ("judge_model", pa.string()), ("judge_reasoning", pa.string()),
    ("prompt_version", pa.string()), ("input_modality", pa.string()),
    ("candidate_scope", pa.string()), ("context_sharing", pa.string()),
    ("has_explicit_plan", pa.bool_()),
])
HALLUCINATIONS_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("attempt", pa.int32()), ("is_final", pa.bool_()),
    ("hallucination_no", pa.int32()), ("entity", pa.string()), ("locus", pa.string()),
    ("locus_kind", pa.string()), ("contradictory_observations", pa.list_(pa.string())),
    ("affected_chain", pa.string()), ("severity", pa.string()),
])
REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int32()),
    ("reason", pa.string()), ("raw", pa.string()),
])
GT_COMPILATIONS_SCHEMA = pa.schema([
    ("case_id", pa.string()), ("fingerprint", pa.string()), ("prompt_version", pa.string()),
    ("judge_run_id", pa.string()), ("source_file", pa.string()), ("file_version", pa.int32()),
    ("line", pa.int32()), ("record_sha256", pa.string()), ("compilation_json", pa.string()),
    ("judge_model", pa.string()), ("is_current", pa.bool_()),
])
STAGES_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("judge_run_id", pa.string()), ("stage", pa.string()), ("stage_no", pa.int32()),
    ("attempt", pa.int32()), ("attempt_kind", pa.string()), ("status", pa.string()),
])
PACKETS_SCHEMA = pa.schema([
    ("system", pa.string()), ("case_id", pa.string()), ("evaluation_id", pa.string()),
    ("role", pa.string()), path_field("packet_path"), ("packet_fingerprint", pa.string()),
    ("n_evidence", pa.int32()), ("prompt_version", pa.string()), ("prompt_source", pa.string()),
    ("gt_fingerprint", pa.string()), ("gt_cached", pa.bool_()),
])
JUDGMENT_TABLES = {
    "rvp_judgment_files": FILES_SCHEMA, "rvp_judgments": JUDGMENTS_SCHEMA,
    "rvp_hallucinations": HALLUCINATIONS_SCHEMA, "rvp_judgment_rejects": REJECTS_SCHEMA,
    "rvp_gt_compilations": GT_COMPILATIONS_SCHEMA, "rvp_stages": STAGES_SCHEMA,
}


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=["rvp_checksums", "rvp_cases"])
def rvp_gt_fingerprints(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The GT compilation cache key of every accepted case: SHA-256 over the digests of its four
    files and the prompt version in effect (the Skill's prompts if the snapshot has them, else
    the project's templates)."""
    prompts = load_prompts(snapshot_root(benchlake)[0])
    con, _ = connect(benchlake.settings().tables_dir)
    digests: dict[str, dict[str, str]] = {}
    for rel, case_id, actual, expected in con.execute(
            "SELECT rel_path, case_id, actual_sha256, expected_sha256 FROM stg_rvp_checksums "
            "WHERE case_id IS NOT NULL").fetchall():
        # metadata-only snapshots have no media bytes: the published digest stands in
        digests.setdefault(case_id, {})[rel.rsplit("/", 1)[-1]] = actual or expected
    rows = []
    for (case_id,) in con.execute("SELECT case_id FROM rvp_cases ORDER BY case_id").fetchall():
        d = digests.get(case_id, {})
        if not all(d.get(n) for n in GT_INPUT_FILES):
            continue
        rows.append({"case_id": case_id, "fingerprint": gt_fingerprint(d, prompts.version),
                     "prompt_version": prompts.version, "prompt_source": prompts.source,
                     **{f"{n.replace('.', '_')}_sha256": d[n] for n in GT_INPUT_FILES}})
    return write_and_describe(benchlake, "rvp_gt_fingerprints",
                              rows_to_table(rows, FINGERPRINTS_SCHEMA),
                              prompt_version=prompts.version, prompt_source=prompts.source)


def _context(benchlake: BenchlakeSettings) -> EvalContext:
    con, _ = connect(benchlake.settings().tables_dir)
    cases = {}
    for case_id, plan in con.execute("SELECT case_id, has_explicit_plan FROM rvp_cases"
                                     ).fetchall():
        cases[case_id] = [plan, set()]
    for case_id, interval in con.execute("SELECT case_id, \"interval\" FROM rvp_intervals"
                                         ).fetchall():
        cases[case_id][1].add(interval)
    candidates = {
        (s, c): CandidateInfo(m, frozenset(steps or []))
        for s, c, m, steps in con.execute(
            "SELECT system, case_id, modality, step_ids FROM rvp_candidates").fetchall()}
    evidence: dict[str, set[str]] = {}
    for ev, eid in con.execute("SELECT evaluation_id, evidence_id FROM rvp_evidence_frames "
                               "UNION ALL SELECT evaluation_id, evaluation_id || '#SB' || "
                               "storyboard_no FROM rvp_storyboards").fetchall():
        evidence.setdefault(ev, set()).add(eid)
    prints = dict(con.execute("SELECT case_id, fingerprint FROM rvp_gt_fingerprints").fetchall())
    return EvalContext(
        systems=frozenset(s for s, _ in candidates),
        cases={c: CaseInfo(bool(p), frozenset(i)) for c, (p, i) in cases.items()},
        candidates=candidates,
        evidence_ids={k: frozenset(v) for k, v in evidence.items()},
        gt_fingerprints=prints,
    )


@dg.multi_asset(
    group_name=GROUP,
    specs=[
        dg.AssetSpec(name, kinds={"parquet"},
                     deps=["rvp_candidates", "rvp_evidence_frames", "rvp_storyboards",
                           "rvp_gt_fingerprints", "rvp_intervals"])
        for name in JUDGMENT_TABLES
    ],
)
def rvp_judgment_records(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Reads every version of every file in JUDGMENTS_DIR: judgment records (validated; the final
    attempt per system/case/judge run chosen; the rest kept for audit), their hallucinations,
    recorded GT compilations (gt_compilations/), the stages each evaluation ran, and every
    refused record with its file, line, reason and raw text."""
    s = benchlake.settings()
    ensure_judgments_demo(s)
    root = s.open_drop_folder("JUDGMENTS_DIR")
    versions = archive_versions(s.archive_dir / "judgments", root,
                                benchlake.table_path("rvp_judgment_files"), s.home)
    files = [SourceFile(v["source_file"], v["version"], v["sha256"], Path(v["archived_path"]))
             for v in versions_of(versions, root)]
    result = ingest(files, _context(benchlake))
    tables = {"rvp_judgment_files": versions, "rvp_judgments": result.judgments,
              "rvp_hallucinations": result.hallucinations,
              "rvp_judgment_rejects": result.rejects,
              "rvp_gt_compilations": result.gt_compilations, "rvp_stages": result.stages}
    for name, schema in JUDGMENT_TABLES.items():
        extra = {"duplicates_ignored": result.duplicates} if name == "rvp_judgments" else {}
        yield write_and_describe(benchlake, name, rows_to_table(tables[name], schema),
                                 asset_key=name, **extra)


@dg.asset(group_name=GROUP, kinds={"json"},
          deps=["rvp_gt_fingerprints", "rvp_evaluations", "rvp_evidence_frames",
                "rvp_storyboards", "rvp_gt_compilations", "rvp_intervals"])
def rvp_judge_packets(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One packet per (system, case, role) for the five candidate roles, and one GT compilation
    packet per case: JSON plus the evidence files it names, under `$BENCHLAKE_HOME/packets/`."""
    s = benchlake.settings()
    rows = build_packets(s.tables_dir, s.packets_dir, snapshot_root(benchlake)[0])
    return write_and_describe(benchlake, "rvp_judge_packets", rows_to_table(rows, PACKETS_SCHEMA),
                              packets_dir=dg.MetadataValue.path(str(s.packets_dir)))


JUDGING_ASSETS = ["rvp_gt_fingerprints", *JUDGMENT_TABLES]


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets(*JUDGMENT_TABLES, "rvp_judge_packets",
                                                    "benchlake_catalog"))
def rvp_judgments_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches JUDGMENTS_DIR. The cursor maps each path to its content hash: a new or changed
    file (a new version) launches `rvp_judgment_records`, which reads the whole folder."""
    root = benchlake.settings().judgments_root()
    return drop_folder_sensor_result(root, context.cursor, "JUDGMENTS_DIR")


TABLE_KEYS = [dg.AssetKey(k) for k in (*JUDGING_ASSETS, "rvp_judge_packets")]
