"""Responses at campaign scale: one Parquet part per file version, parsed once and scored once.

`sync_parts` brings `raw_vv_responses/` and `raw_vv_response_rejects/` in line with the file
versions of RESPONSES_DIR: a version whose part exists is not read again, a new one is parsed
(`responses.write_response_part`, two processes over the files), a part whose version is gone
(the setting points at another folder) is removed. `score_parts` does the same for
`raw_vv_scored_responses/`: a part is scored once per content of the questions it is scored
against (their fingerprint is in the part's Parquet metadata), `BATCH_ROWS` rows at a time.
Every parted table also holds `_schema.parquet`, no rows, so its views exist while no file has
been dropped yet.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.tables import streaming_parquet, table_path, write_table
from dagster_project.video_val.policies import DefaultPolicy
from dagster_project.video_val.responses import (
    BATCH_ROWS,
    DUMP_PART_KEY,
    RESPONSE_REJECTS_SCHEMA,
    RESPONSES_SCHEMA,
    ResponseFile,
    tool_of,
    write_response_part,
)
from dagster_project.video_val.scoring import SCORED_SCHEMA, score_frame
from dagster_project.video_val.verl_metrics import (
    METRICS_VERSION,
    VERL_METRICS_SCHEMA,
    dump_metrics,
)

SCHEMA_PART = "_schema"
# Below this many bytes to parse, or responses to score, one process: starting a second (spawned,
# not forked: Polars' and Arrow's thread pools do not survive a fork) costs more than it saves.
POOL_MIN_BYTES = 64 * 1024 * 1024
POOL_MIN_ROWS = 200_000
QUESTIONS_KEY = b"benchlake.questions_fingerprint"
SCORED_INPUT = ["run_id", "step", "uid", "sample_idx", "response", "source_file", "file_version",
                "line"]
SCORED_TABLES = {"vv_responses": RESPONSES_SCHEMA, "vv_response_rejects": RESPONSE_REJECTS_SCHEMA}


@dataclass
class PartsResult:
    """What a sync did: parts kept as they were, parts written now, parts removed."""

    kept: int = 0
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rows_written: int = 0


def _parts(home: Path, name: str) -> dict[str, Path]:
    folder = table_path(home, name, SCHEMA_PART).parent
    return {p.stem: p for p in sorted(folder.glob("*.parquet")) if p.stem != SCHEMA_PART}


def _ensure_schema_part(home: Path, name: str, schema: pa.Schema) -> None:
    path = table_path(home, name, SCHEMA_PART)
    if not path.exists() or pq.read_schema(path) != schema:
        write_table(schema.empty_table(), path)


def _remove_stale(home: Path, name: str, wanted: set[str], result: PartsResult) -> None:
    for stem, path in _parts(home, name).items():
        if stem not in wanted:
            path.unlink()
            result.removed.append(stem)


def _parse_job(job: tuple[ResponseFile, Path, Path, pl.DataFrame | None]) -> int:
    f, rows_path, rejects_path, questions = job
    return write_response_part(f, rows_path, rejects_path, questions)["rows"]


def sync_parts(home: Path, files: Sequence[ResponseFile],
               questions: pl.DataFrame | None = None) -> PartsResult:
    """Parse the versions that have no part yet (see the module notes), two files at a time
    from `POOL_MIN_BYTES` on. `questions`: what other tools' files are resolved against."""
    result = PartsResult()
    for name, schema in SCORED_TABLES.items():
        _ensure_schema_part(home, name, schema)
    wanted = {f.part for f in files}
    for name in SCORED_TABLES:
        _remove_stale(home, name, wanted, result)
    have = set(_parts(home, "vv_responses")) & set(_parts(home, "vv_response_rejects"))
    jobs = [(f, table_path(home, "vv_responses", f.part),
             table_path(home, "vv_response_rejects", f.part),
             questions if f.tool is not None else None)
            for f in files if f.part not in have]
    result.kept = len(files) - len(jobs)
    size = sum(job[0].path.stat().st_size for job in jobs)
    if len(jobs) > 1 and size >= POOL_MIN_BYTES and (os.cpu_count() or 1) > 1:
        with ProcessPoolExecutor(max_workers=2,
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            counts = list(pool.map(_parse_job, jobs))
    else:
        counts = [_parse_job(job) for job in jobs]
    result.written = [job[0].part for job in jobs]
    result.rows_written = sum(counts)
    return result


TOOL_QUESTION_COLUMNS = ["uid", "data_source", "row_index", "question", "options",
                         "user_prompt", "ground_truth", "video_uri"]


def mark_tools(files: Sequence[ResponseFile], questions: Callable[[], pl.DataFrame]
               ) -> tuple[list[ResponseFile], pl.DataFrame | None]:
    """`files` with each other tool's output marked (`responses.tool_of`) with the fingerprint
    of the questions its rows are resolved against, and those questions
    (`TOOL_QUESTION_COLUMNS`), read only when such a file is there."""
    tools = [tool_of(f) for f in files]
    if not any(tools):
        return list(files), None
    table = questions().select(TOOL_QUESTION_COLUMNS)
    key = questions_fingerprint(table)[:16]
    marked = [replace(f, tool=tool, questions_key=key) if tool else f
              for f, tool in zip(files, tools, strict=True)]
    return marked, table


def questions_fingerprint(questions: pl.DataFrame) -> str:
    """What a scored part depends on besides its responses: each question's uid, data_source,
    option letters and ground truth."""
    digest = hashlib.sha256()
    for row in questions.sort("uid").iter_rows():
        digest.update(repr(row).encode())
    return digest.hexdigest()


def _scored_fingerprint(path: Path) -> bytes | None:
    meta = pq.read_schema(path).metadata or {}
    return meta.get(QUESTIONS_KEY)


_QUESTIONS: pl.DataFrame | None = None


def _init_scorer(questions: pl.DataFrame) -> None:
    global _QUESTIONS
    _QUESTIONS = questions


def _score_job(job: tuple[Path, Path, bytes]) -> int:
    """Score one response part into its scored part, `BATCH_ROWS` rows at a time."""
    source, out, fingerprint = job
    assert _QUESTIONS is not None
    schema = SCORED_SCHEMA.with_metadata(None)
    rows = 0
    with streaming_parquet(out, schema.with_metadata({QUESTIONS_KEY: fingerprint})) as w:
        for batch in pq.ParquetFile(source).iter_batches(
                batch_size=BATCH_ROWS, columns=SCORED_INPUT):
            frame = pl.from_arrow(batch).join(_QUESTIONS, on="uid", how="inner",
                                              maintain_order="left")
            if frame.height:
                table = score_frame(frame).select(schema.names).to_arrow().cast(schema)
                w.write(table)
                rows += table.num_rows
    return rows


def score_parts(home: Path, questions: pl.DataFrame) -> PartsResult:
    """Score every response part not yet scored against these `questions` (uid, data_source,
    option_letters, ground_truth). Rows whose uid is not a question are not scored (the views
    reject them). From `POOL_MIN_ROWS` responses on, two parts at a time in two processes: the
    scoring is partly Python, so one process keeps only one core busy."""
    result = PartsResult()
    _ensure_schema_part(home, "vv_scored_responses", SCORED_SCHEMA.with_metadata(None))
    sources = _parts(home, "vv_responses")
    _remove_stale(home, "vv_scored_responses", set(sources), result)
    fingerprint = questions_fingerprint(questions).encode()
    scored = _parts(home, "vv_scored_responses")
    questions = questions.select("uid", "data_source", "option_letters", "ground_truth")
    jobs = []
    for stem, source in sources.items():
        if stem in scored and _scored_fingerprint(scored[stem]) == fingerprint:
            result.kept += 1
        else:
            jobs.append((source, table_path(home, "vv_scored_responses", stem), fingerprint))
    rows = sum(pq.ParquetFile(job[0]).metadata.num_rows for job in jobs)
    if len(jobs) > 1 and rows >= POOL_MIN_ROWS and (os.cpu_count() or 1) > 1:
        with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_scorer, initargs=(questions,)) as pool:
            counts = list(pool.map(_score_job, jobs))
    else:
        _init_scorer(questions)
        counts = [_score_job(job) for job in jobs]
    result.written = [job[1].stem for job in jobs]
    result.rows_written = sum(counts)
    return result


METRICS_KEY = b"benchlake.verl_metrics_inputs"


def verl_metric_parts(home: Path, policy: DefaultPolicy) -> PartsResult:
    """`raw_vv_verl_metrics/<part>`: verl's validation metrics (`verl_metrics.dump_metrics`) of
    every response part read from a verl dump, computed once per content of its scored part and
    `policy` (both recorded in the part's Parquet metadata)."""
    result = PartsResult()
    _ensure_schema_part(home, "vv_verl_metrics", VERL_METRICS_SCHEMA)
    dumps = {stem: path for stem, path in _parts(home, "vv_responses").items()
             if DUMP_PART_KEY in (pq.read_schema(path).metadata or {})}
    scored = _parts(home, "vv_scored_responses")
    _remove_stale(home, "vv_verl_metrics", set(dumps) & set(scored), result)
    have = _parts(home, "vv_verl_metrics")
    for stem, source in dumps.items():
        if stem not in scored:
            continue
        key = "\0".join([METRICS_VERSION, repr(policy),
                         (_scored_fingerprint(scored[stem]) or b"").decode()]).encode()
        if stem in have and (pq.read_schema(have[stem]).metadata or {}).get(METRICS_KEY) == key:
            result.kept += 1
            continue
        responses = pl.read_parquet(source, columns=["run_id", "step", "line", "tool_extras",
                                                     "source_file", "file_version"])
        rows = responses.join(
            pl.read_parquet(scored[stem], columns=["line", "uid", "data_source", "extracted",
                                                   "correct", f"format_{policy.format_rule}"]),
            on="line", how="inner", maintain_order="left").rename(
            {f"format_{policy.format_rule}": "format_ok"})
        metrics = dump_metrics(rows.to_dict(as_series=False),
                               (policy.accuracy_weight, policy.format_weight))
        where = {k: rows[k][0] for k in ("run_id", "step", "source_file", "file_version")
                 } if rows.height else {}
        table = pa.Table.from_pylist([{**m, **where} for m in metrics],
                                     schema=VERL_METRICS_SCHEMA)
        write_table(table.replace_schema_metadata({METRICS_KEY: key}),
                    table_path(home, "vv_verl_metrics", stem))
        result.written.append(stem)
        result.rows_written += table.num_rows
    return result
