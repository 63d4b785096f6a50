"""Responses at campaign scale: one Parquet part per file version, parsed once and scored once,
each a `parts.PartStore` keyed by what it is made of.

`sync_parts` brings `raw_vv_responses/` and `raw_vv_response_rejects/` in line with the file
versions of RESPONSES_DIR: a part is keyed by its version (file, number, content hash, the
questions another tool's rows are resolved against) and `PARSER_VERSION`; a version whose part
exists is not read again, a new one is parsed (`responses.write_response_part`, two processes over
the files), a part whose version is gone (the setting points at another folder) is removed.
`score_parts` does the same for `raw_vv_scored_responses/`: a scored part is named after its
response part and keyed by it, the questions it is scored against and `SCORING_VERSION`, scored
`BATCH_ROWS` rows at a time, and its responses whose uid is no question go to the part of
`raw_vv_unknown_uids/` of the same key (so the refusals read those few rows, not the campaign);
`verl_metric_parts` keys each dump's metrics by its scored part, the default policy and
`METRICS_VERSION`. Every parted table also holds `_schema.parquet`, no rows, so
its views exist while no file has been dropped yet.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.dropfolder import archive_versions, copy_deferred, versions_of
from dagster_project.filecache import Identity
from dagster_project.lifeline import process_pool
from dagster_project.parts import PartStore
from dagster_project.tables import raw_schema, streaming_parquet
from dagster_project.video_val.policies import DefaultPolicy
from dagster_project.video_val.responses import (
    BATCH_ROWS,
    DUMP_PART_KEY,
    PARSER_VERSION,
    RESPONSE_REJECTS_SCHEMA,
    RESPONSES_SCHEMA,
    ResponseFile,
    tool_of,
    write_response_part,
)
from dagster_project.video_val.scoring import SCORED_SCHEMA, SCORING_VERSION, score_frame
from dagster_project.video_val.verl_metrics import (
    METRICS_VERSION,
    VERL_METRICS_SCHEMA,
    dump_metrics,
)

# Below this many bytes to parse, or responses to score, one process: starting a second (spawned,
# not forked: Polars' and Arrow's thread pools do not survive a fork) costs more than it saves.
POOL_MIN_BYTES = 64 * 1024 * 1024
POOL_MIN_ROWS = 200_000
SCORED_INPUT = ["run_id", "step", "uid", "sample_idx", "response", "source_file", "file_version",
                "line"]
PARSED_TABLES = {"vv_responses": RESPONSES_SCHEMA, "vv_response_rejects": RESPONSE_REJECTS_SCHEMA}
UNKNOWN_UIDS_SCHEMA = raw_schema("vv_unknown_uids")


@dataclass
class PartsResult:
    """What a sync did: parts kept as they were, parts written now, parts removed, and the
    files found rewritten or removed since they were listed (not read: `sync_parts`)."""

    kept: int = 0
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rows_written: int = 0
    changed: list[str] = field(default_factory=list)


def parsed_stores(home: Path) -> dict[str, PartStore]:
    """The parts of `raw_vv_responses` and `raw_vv_response_rejects` (the same keys)."""
    return {name: PartStore.of_table(home, name, PARSER_VERSION, schema)
            for name, schema in PARSED_TABLES.items()}


def scored_store(home: Path) -> PartStore:
    return PartStore.of_table(home, "vv_scored_responses", SCORING_VERSION,
                              SCORED_SCHEMA.with_metadata(None))


def unknown_uids_store(home: Path) -> PartStore:
    """The responses of unknown uids, one part per scored part, under the scored part's key."""
    return PartStore.of_table(home, "vv_unknown_uids", SCORING_VERSION, UNKNOWN_UIDS_SCHEMA)


def metrics_store(home: Path) -> PartStore:
    return PartStore.of_table(home, "vv_verl_metrics", METRICS_VERSION, VERL_METRICS_SCHEMA)


def _copied(f: ResponseFile) -> bool:
    """Archive `f` from its drop folder file if that is still to do (`f.copy_from`): whether
    the archive then holds the version's bytes (`dropfolder.copy_deferred`)."""
    return copy_deferred(f.path, f.sha256, f.copy_from)


def _parse_job(job: tuple[ResponseFile, Path, Path, pl.DataFrame | None]) -> int | None:
    """Archive the version if that is left to do, then parse it; None if its file changed."""
    f, rows_path, rejects_path, questions = job
    if not _copied(f):
        return None
    f = replace(f, copy_from=None)
    return write_response_part(f, rows_path, rejects_path, questions)["rows"]


def sync_parts(home: Path, files: Sequence[ResponseFile],
               questions: pl.DataFrame | None = None) -> PartsResult:
    """Parse the versions that have no part yet (see the module notes), two files at a time
    from `POOL_MIN_BYTES` on. `questions`: what other tools' files are resolved against.
    A version still to be copied into the archive (`copy_from`) is copied by the job that
    parses it, so that one file is copied while another is parsed; one whose file was
    rewritten or removed meanwhile is not parsed and is listed in `changed`."""
    result = PartsResult()
    rows, rejects = parsed_stores(home).values()
    for store in (rows, rejects):
        store.ensure_schema()
    keys = {f: rows.key(f.label, *f.part_inputs()) for f in files}
    for store in (rows, rejects):
        result.removed += [k for k in store.keep(keys.values()) if k not in result.removed]
    jobs = [(f, rows.path(key), rejects.path(key), questions if f.tool is not None else None)
            for f, key in keys.items() if not (rows.has(key) and rejects.has(key))]
    parsed = {job[0] for job in jobs}
    # parsed before but not archived (the archive lost it): copied here, nothing to parse
    result.changed = [f.source_file for f in files if f not in parsed and not _copied(f)]
    result.kept = len(files) - len(jobs)
    size = sum(f.copy_from[1].size if f.copy_from else f.path.stat().st_size for f in parsed)
    if len(jobs) > 1 and size >= POOL_MIN_BYTES and (os.cpu_count() or 1) > 1:
        with process_pool(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            counts = list(pool.map(_parse_job, jobs))
    else:
        counts = [_parse_job(job) for job in jobs]
    result.written = [job[1].stem for job, n in zip(jobs, counts, strict=True) if n is not None]
    result.changed += [job[0].source_file for job, n in zip(jobs, counts, strict=True)
                       if n is None]
    result.rows_written = sum(n for n in counts if n is not None)
    return result


TOOL_QUESTION_COLUMNS = ["uid", "data_source", "row_index", "question", "options",
                         "user_prompt", "ground_truth", "video_uri"]


def archive_and_parse(archive_root: Path, root: Path, manifest: Path, home: Path,
                      stat_cache: Path | None, questions: Callable[[], pl.DataFrame]
                      ) -> tuple[list[dict], PartsResult]:
    """The versions of drop folder `root` (`dropfolder.archive_versions`, its manifest at
    `manifest`) and the parts of every current one (`sync_parts`; `questions`: vv_questions'
    `TOOL_QUESTION_COLUMNS`, read only for another tool's files). The new files the folder's
    observation hashed are copied into the archive by the jobs that parse them, so that one
    file is copied while another is parsed. A file rewritten or removed since the scan is not
    parsed under the digest it was listed with: the folder is then listed again, as usual (its
    copies made and the other parts written are kept)."""
    copies: dict[str, tuple[Path, Identity]] = {}
    versions = archive_versions(archive_root, root, manifest, home, stat_cache, copies)
    result = _sync_versions(home, root, versions, questions, copies)
    if result.changed:
        first = result
        versions = archive_versions(archive_root, root, manifest, home, stat_cache)
        result = _sync_versions(home, root, versions, questions, {})
        result.written = first.written + result.written
        result.kept -= len(first.written)
        result.rows_written += first.rows_written
        result.removed = first.removed + [k for k in result.removed if k not in first.removed]
    return versions, result


def _sync_versions(home: Path, root: Path, versions: list[dict],
                   questions: Callable[[], pl.DataFrame],
                   copies: dict[str, tuple[Path, Identity]]) -> PartsResult:
    files = [ResponseFile(v["source_file"], v["version"], v["sha256"], Path(v["archived_path"]),
                          copy_from=copies.get(v["archived_path"]))
             for v in versions_of(versions, root)]
    files, table = mark_tools(files, questions)
    return sync_parts(home, files, table)


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


_QUESTIONS: pl.DataFrame | None = None


def _init_scorer(questions: pl.DataFrame) -> None:
    global _QUESTIONS
    _QUESTIONS = questions


def _score_job(job: tuple[Path, Path | None, Path]) -> int:
    """Score one response part into its scored part (None: it is there already), `BATCH_ROWS`
    rows at a time, and write its responses of unknown uids to their part."""
    source, out, unknown_out = job
    assert _QUESTIONS is not None
    schema = SCORED_SCHEMA.with_metadata(None)
    rows = 0
    with streaming_parquet(unknown_out, UNKNOWN_UIDS_SCHEMA) as unknown:
        if out is None:  # scored before its unknown uids were kept: only those, uids read first
            uids = pl.read_parquet(source, columns=["uid"])
            if uids.join(_QUESTIONS, on="uid", how="anti").height:
                unknown.write(_unknown(pl.read_parquet(source, columns=SCORED_INPUT)))
            return 0
        with streaming_parquet(out, schema) as scored:
            for batch in pq.ParquetFile(source).iter_batches(
                    batch_size=BATCH_ROWS, columns=SCORED_INPUT):
                responses = pl.from_arrow(batch)
                unknown.write(_unknown(responses))
                frame = responses.join(_QUESTIONS, on="uid", how="inner", maintain_order="left")
                if frame.height:
                    table = score_frame(frame).select(schema.names).to_arrow().cast(schema)
                    scored.write(table)
                    rows += table.num_rows
    return rows


def _unknown(responses: pl.DataFrame) -> pa.Table:
    """The responses whose uid is no question, in their order (an empty table writes nothing)."""
    assert _QUESTIONS is not None
    found = responses.join(_QUESTIONS.select("uid"), on="uid", how="anti", maintain_order="left")
    return found.select(UNKNOWN_UIDS_SCHEMA.names).to_arrow().cast(UNKNOWN_UIDS_SCHEMA)


def score_parts(home: Path, questions: pl.DataFrame) -> tuple[PartsResult, PartsResult]:
    """Score every response part not yet scored against these `questions` (uid, data_source,
    option_letters, ground_truth), and keep its responses of unknown uids (`raw_vv_unknown_uids`,
    one part per scored part, of the same key): they are not scored, and the views refuse them.
    From `POOL_MIN_ROWS` responses on, two parts at a time in two processes: the scoring is
    partly Python, so one process keeps only one core busy."""
    result, unknown_result = PartsResult(), PartsResult()
    store, unknown = scored_store(home), unknown_uids_store(home)
    for each in (store, unknown):
        each.ensure_schema()
    fingerprint = questions_fingerprint(questions)
    sources = parsed_stores(home)["vv_responses"]
    keys = {source: store.key(source, fingerprint) for source in sources.all_keys()}
    result.removed = store.keep(keys.values())
    unknown_result.removed = unknown.keep(keys.values())
    questions = questions.select("uid", "data_source", "option_letters", "ground_truth")
    jobs = [(sources.path(source), None if store.has(key) else store.path(key),
             unknown.path(key)) for source, key in keys.items()
            if not (store.has(key) and unknown.has(key))]
    rows = sum(pq.ParquetFile(job[0]).metadata.num_rows for job in jobs if job[1] is not None)
    if len(jobs) > 1 and rows >= POOL_MIN_ROWS and (os.cpu_count() or 1) > 1:
        with process_pool(2, mp_context=multiprocessing.get_context("spawn"),
                          initializer=_init_scorer, initargs=(questions,)) as pool:
            counts = list(pool.map(_score_job, jobs))
    else:
        _init_scorer(questions)
        counts = [_score_job(job) for job in jobs]
    result.written = [job[1].stem for job in jobs if job[1] is not None]
    result.kept, result.rows_written = len(keys) - len(result.written), sum(counts)
    unknown_result.written = [job[2].stem for job in jobs]
    unknown_result.kept = len(keys) - len(jobs)
    unknown_result.rows_written = sum(pq.ParquetFile(job[2]).metadata.num_rows for job in jobs)
    return result, unknown_result


def verl_metric_parts(home: Path, policy: DefaultPolicy) -> PartsResult:
    """`raw_vv_verl_metrics/<part>`: verl's validation metrics (`verl_metrics.dump_metrics`) of
    every response part read from a verl dump, computed once per content of its scored part and
    `policy` (both recorded in the part's Parquet metadata)."""
    result = PartsResult()
    store = metrics_store(home)
    store.ensure_schema()
    sources = parsed_stores(home)["vv_responses"]
    scored = scored_store(home)
    scored_of = {PartStore.label_of(k): k for k in scored.all_keys()}  # named after their source
    wanted = {}
    for source_key in sources.all_keys():
        source = sources.path(source_key)
        if source_key not in scored_of or DUMP_PART_KEY not in (
                pq.read_schema(source).metadata or {}):
            continue
        key = store.key(scored_of[source_key], vars(policy))
        wanted[key] = (source, scored.path(scored_of[source_key]))
    result.removed = store.keep(wanted)
    for key, (source, scored_path) in wanted.items():
        if store.has(key):
            result.kept += 1
            continue
        responses = pl.read_parquet(source, columns=["run_id", "step", "line", "tool_extras",
                                                     "source_file", "file_version"])
        rows = responses.join(
            pl.read_parquet(scored_path, columns=["line", "uid", "data_source", "extracted",
                                                   "correct", f"format_{policy.format_rule}"]),
            on="line", how="inner", maintain_order="left").rename(
            {f"format_{policy.format_rule}": "format_ok"})
        metrics = dump_metrics(rows.to_dict(as_series=False),
                               (policy.accuracy_weight, policy.format_weight))
        where = {k: rows[k][0] for k in ("run_id", "step", "source_file", "file_version")
                 } if rows.height else {}
        table = pa.Table.from_pylist([{**m, **where} for m in metrics],
                                     schema=VERL_METRICS_SCHEMA)
        store.write(key, table)
        result.written.append(key)
        result.rows_written += table.num_rows
    return result
