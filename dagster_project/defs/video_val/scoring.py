"""Val-suite responses and their scores: RESPONSES_DIR (JSONL / Parquet) → vv_responses →
vv_scored_responses (both format rules; policies expand in SQL). Aggregates are SQL views.

Like judgments, response files are archived by content on first sight and every version is read
on each run; `vv_responses_sensor` launches the same assets when new content appears.
"""

from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow as pa

from dagster_project.catalog import connect
from dagster_project.demo import ensure_responses_demo
from dagster_project.dropfolder import archive_versions, versions_of
from dagster_project.resources import (
    BenchlakeSettings,
    drop_folder_sensor_result,
    write_and_describe,
)
from dagster_project.tables import path_field, rows_to_table
from dagster_project.video_val.responses import ResponseFile, read_responses
from dagster_project.video_val.scoring import score_frame

GROUP = "video_val"

FILES_SCHEMA = pa.schema([
    path_field("folder"), ("source_file", pa.string()), ("version", pa.int32()),
    ("sha256", pa.string()),
    ("size_bytes", pa.int64()), path_field("archived_path"), ("is_current", pa.bool_()),
])
RESPONSES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("step", pa.int64()), ("uid", pa.string()),
    ("data_source", pa.string()), ("sample_idx", pa.int64()), ("response", pa.string()),
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int64()),
])
REJECTS_SCHEMA = pa.schema([
    ("source_file", pa.string()), ("file_version", pa.int32()), ("line", pa.int64()),
    ("reason", pa.string()), ("raw", pa.string()),
])
SCORED_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("step", pa.int64()), ("uid", pa.string()),
    ("sample_idx", pa.int64()), ("data_source", pa.string()), ("option_letters", pa.string()),
    ("ground_truth", pa.string()), ("extracted", pa.string()),
    ("extraction_method", pa.string()), ("correct", pa.bool_()), ("format_card", pa.bool_()),
    ("format_exact", pa.bool_()),
])
RESPONSE_TABLES = {"vv_response_files": FILES_SCHEMA, "vv_responses": RESPONSES_SCHEMA,
                   "vv_response_rejects": REJECTS_SCHEMA}


@dg.multi_asset(
    group_name=GROUP,
    specs=[dg.AssetSpec(name, kinds={"parquet"}, deps=["vv_questions"])
           for name in RESPONSE_TABLES],
)
def vv_responses(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every version of every file in RESPONSES_DIR: responses keyed by (run_id, step, uid,
    sample_idx); unknown uids, malformed records, duplicates and empty files are rejected with
    file, line and reason."""
    s = benchlake.settings()
    ensure_responses_demo(s)
    root = s.open_drop_folder("RESPONSES_DIR")
    versions = archive_versions(s.archive_dir / "responses", root,
                                benchlake.table_path("vv_response_files"), s.home)
    con, _ = connect(s.tables_dir)
    known = dict(con.execute("SELECT uid, data_source FROM vv_questions").fetchall())
    result = read_responses([ResponseFile(v["source_file"], v["version"],
                                          Path(v["archived_path"]))
                                for v in versions_of(versions, root)], known)
    tables = {"vv_response_files": versions, "vv_responses": result.rows,
              "vv_response_rejects": result.rejects}
    for name, schema in RESPONSE_TABLES.items():
        extra = {"duplicates_ignored": result.duplicates} if name == "vv_responses" else {}
        yield write_and_describe(benchlake, name, rows_to_table(tables[name], schema),
                                 asset_key=name, **extra)


@dg.asset(group_name=GROUP, kinds={"parquet"}, deps=["vv_responses", "vv_questions"])
def vv_scored_responses(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every response scored once: the letter from the last balanced \\boxed{} in the last
    <answer> block, else lmms-eval 0.7.3's extract_mcq_answer, and the format flag under each
    format rule (`card`, `exact`). Policies (which rule, which weights) are data in SQL
    (`vv_scoring_policies`); the views expand these rows per policy."""
    con, _ = connect(benchlake.settings().tables_dir)
    df = pl.from_arrow(con.sql("""
        SELECT r.run_id, r.step, r.uid, r.sample_idx, r.data_source, q.option_letters,
               q.ground_truth, r.response
        FROM vv_responses r JOIN vv_questions q USING (uid)
        ORDER BY r.run_id, r.step, r.uid, r.sample_idx""").to_arrow_table())
    scored = score_frame(df).drop("response")
    table = scored.select(SCORED_SCHEMA.names).to_arrow().cast(SCORED_SCHEMA)
    return write_and_describe(benchlake, "vv_scored_responses", table)


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets(*RESPONSE_TABLES, "vv_scored_responses",
                                                    "benchlake_catalog"))
def vv_responses_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches RESPONSES_DIR (cursor: path → content hash) and launches the response assets on
    new content; they read the whole folder."""
    root = benchlake.settings().responses_root()
    return drop_folder_sensor_result(root, context.cursor, "RESPONSES_DIR")


TABLE_KEYS = [dg.AssetKey(k) for k in (*RESPONSE_TABLES, "vv_scored_responses")]
