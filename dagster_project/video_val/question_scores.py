"""Per-question scores, one part per checkpoint: what every score view reads instead of the
responses.

A campaign is millions of responses but only (checkpoints × questions) question rows: about 8×
fewer at 8 samples per question. `raw_vv_question_scores` holds, per (run_id, step, uid), the
samples the views count (`k`), how many were correct, how many passed each format rule, and the
majority letter; `int_vv_row_scores` and `vv_sample_metrics` read it, so every score, breakdown,
paired test and best checkpoint is computed from question rows, never from the responses again.

One part per checkpoint (run_id, step), keyed by the scored parts that hold any response of it
(`response_parts.score_parts`; a scored part's key is its file version's content, the questions
it was scored against and the scoring code) and `QUESTION_SCORES_VERSION`. A key (run_id, step,
uid, sample_idx) can only repeat inside its own checkpoint, so a checkpoint's part decides
"first record wins" (first in (source_file, file_version, line) order: the rule of
`int_vv_later_records`, which the response-grain views keep) over that checkpoint's responses
only. A new checkpoint file writes one part; a file that adds samples to an existing checkpoint
rewrites that checkpoint's part; nothing else is read. Which checkpoints a scored part holds is
read from its Parquet footer's min/max statistics (a file of one checkpoint, as verl writes
them), else from its two key columns.

The same step writes `raw_vv_later_records`, one part per checkpoint (most of them empty): the
records of the checkpoint that are not first of their key, each with its first record (the
response digests from the parsed parts). `int_vv_later_records` reads these parts, so "first
record wins" is decided once per checkpoint, here, for the scores and for the response views
alike, and no view groups the keys of the whole campaign.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from dagster_project.parts import PartStore, on_connections
from dagster_project.tables import raw_schema
from dagster_project.video_val.format_rules import FORMAT_RULES
from dagster_project.video_val.response_parts import PartsResult, parsed_stores, scored_store

QUESTION_SCORES_VERSION = "2"
WORKERS = 4  # checkpoints counted at once, at most (`on_connections`: never above the cores)
QUESTION_SCORES_SCHEMA = raw_schema("vv_question_scores")
LATER_RECORDS_SCHEMA = raw_schema("vv_later_records")
FORMAT_COLUMNS = [f"format_{rule}" for rule in FORMAT_RULES]


def question_scores_store(home: Path) -> PartStore:
    return PartStore.of_table(home, "vv_question_scores", QUESTION_SCORES_VERSION,
                              QUESTION_SCORES_SCHEMA)


def later_records_store(home: Path) -> PartStore:
    return PartStore.of_table(home, "vv_later_records", QUESTION_SCORES_VERSION,
                              LATER_RECORDS_SCHEMA)


def checkpoints_of(path: Path) -> set[tuple[str, int]]:
    """The (run_id, step) pairs of the responses in scored part `path`."""
    meta = pq.ParquetFile(path).metadata
    if meta.num_rows == 0:
        return set()
    names = meta.schema.to_arrow_schema().names
    columns = [names.index("run_id"), names.index("step")]
    found = set()
    for g in range(meta.num_row_groups):
        stats = [meta.row_group(g).column(c).statistics for c in columns]
        if not all(s is not None and s.has_min_max and s.min == s.max for s in stats):
            break
        found.add((stats[0].min, stats[1].min))
    else:
        return found
    con = duckdb.connect()
    try:
        return {(r, s) for r, s in con.execute(
            "SELECT DISTINCT run_id, step FROM read_parquet(?)", [str(path)]).fetchall()}
    finally:
        con.close()


# The accepted responses of one checkpoint (first record of each (uid, sample_idx) in
# (source_file, file_version, line) order), then per question: the samples counted, the correct
# ones, each format rule's passes, and the majority letter over the extracted letters (samples
# without one do not vote; a tie goes to the alphabetically first letter), as vv_sample_metrics
# defined it over the responses; and for the question views (vv_question_history) how many
# samples gave that letter, how many letters the fallback found or none was, and the letters in
# sample order (`-` for none).
_SQL = """
WITH accepted AS (
    SELECT * FROM records
    QUALIFY row_number() OVER (PARTITION BY uid, sample_idx
                               ORDER BY source_file, file_version, line) = 1
),
votes AS (
    SELECT uid, extracted, count(*) AS n FROM accepted
    WHERE extracted IS NOT NULL GROUP BY uid, extracted
),
majority AS (
    SELECT uid, arg_max(extracted, n * 1000 - ascii(extracted)) AS majority_letter
    FROM votes GROUP BY uid
)
SELECT a.run_id, a.step, a.uid, any_value(a.data_source) AS data_source,
       any_value(a.ground_truth) AS ground_truth, count(*) AS k,
       count(*) FILTER (WHERE a.correct) AS n_correct,
       {formats}, any_value(m.majority_letter) AS majority_letter,
       count(*) FILTER (WHERE a.extracted = m.majority_letter) AS n_majority,
       count(*) FILTER (WHERE a.extraction_method = 'fallback') AS n_fallback,
       count(*) FILTER (WHERE a.extraction_method = 'none') AS n_none,
       string_agg(coalesce(a.extracted, '-'), '' ORDER BY a.sample_idx) AS letters
FROM accepted AS a LEFT JOIN majority AS m USING (uid)
GROUP BY a.run_id, a.step, a.uid
ORDER BY a.uid
"""


# The records of one checkpoint (`records`) read more than once per key, past the first, with
# that first (where it was read); then their digests, from the parsed parts.
_REPEATED_SQL = """
SELECT run_id, step, uid, sample_idx, source_file, file_version, line,
       first_value(source_file) OVER k AS first_source_file,
       first_value(file_version) OVER k AS first_file_version,
       first_value(line) OVER k AS first_line
FROM records
WINDOW k AS (PARTITION BY uid, sample_idx ORDER BY source_file, file_version, line)
QUALIFY row_number() OVER k > 1
"""
_LATER_SQL = """
SELECT l.run_id, l.step, l.uid, l.sample_idx, l.source_file, l.file_version, l.line,
       r.response_digest, l.first_source_file, l.first_file_version, l.first_line,
       f.response_digest AS first_response_digest
FROM repeated AS l
JOIN read_parquet($files) AS r USING (source_file, file_version, line)
JOIN read_parquet($files) AS f ON f.source_file = l.first_source_file
 AND f.file_version = l.first_file_version AND f.line = l.first_line
ORDER BY l.source_file, l.file_version, l.line
"""


def question_score_parts(home: Path) -> tuple[PartsResult, PartsResult]:
    """Bring `raw_vv_question_scores/` and `raw_vv_later_records/` in line with the scored
    parts (module notes): what each did."""
    stores = question_scores_store(home), later_records_store(home)
    results = PartsResult(), PartsResult()
    for store in stores:
        store.ensure_schema()
    scored = scored_store(home)
    held: dict[tuple[str, int], list[str]] = defaultdict(list)
    for key in scored.all_keys():
        for checkpoint in checkpoints_of(scored.path(key)):
            held[checkpoint].append(key)
    keys = [{checkpoint: store.key(f"{checkpoint[0]}_{checkpoint[1]}", checkpoint, sorted(parts))
             for checkpoint, parts in held.items()} for store in stores]
    for store, result, wanted in zip(stores, results, keys, strict=True):
        result.removed = store.keep(wanted.values())
        result.kept = sum(store.has(k) for k in wanted.values())
    todo = sorted(c for c in held if not all(
        store.has(wanted[c]) for store, wanted in zip(stores, keys, strict=True)))
    parsed = parsed_stores(home)["vv_responses"]
    # a scored part is labelled with the key of the parsed part it scored (listed only when a
    # checkpoint is to be counted: a run with nothing new lists nothing)
    parsed_of = ({PartStore.safe_label(k): parsed.path(k) for k in parsed.all_keys()}
                 if todo else {})

    def parsed_files(checkpoint: tuple[str, int]) -> list[str]:
        """The parsed parts of the checkpoint's scored parts (their response digests)."""
        found = []
        for key in sorted(held[checkpoint]):
            if PartStore.label_of(key) not in parsed_of:
                raise RuntimeError(f"{scored.path(key)}: scored part without its parsed part in "
                                   "raw_vv_responses; materialize raw_vv_responses and "
                                   "raw_vv_scored_responses first")
            found.append(str(parsed_of[PartStore.label_of(key)]))
        return found

    formats = ", ".join(f"count(*) FILTER (WHERE a.{c}) AS n_{c}" for c in FORMAT_COLUMNS)
    sql = _SQL.format(formats=formats)
    # A checkpoint is a few small queries and two writes, ~70 ms mostly spent outside DuckDB's
    # own threads: WORKERS checkpoints at once (`parts.on_connections`).
    def count(con: duckdb.DuckDBPyConnection, checkpoint: tuple[str, int]
              ) -> list[tuple[str, int] | None]:
        """Write the checkpoint's missing parts: (key, rows) of each store, None if kept."""
        files = [str(scored.path(k)) for k in sorted(held[checkpoint])]
        con.execute("CREATE OR REPLACE TEMP TABLE records AS SELECT * FROM "
                    "read_parquet($files) WHERE run_id = $run_id AND step = $step",
                    {"files": files, "run_id": checkpoint[0], "step": checkpoint[1]})
        scores = con.sql(sql).to_arrow_table()
        # the later records, their digests joined only when the checkpoint has any
        con.execute(f"CREATE OR REPLACE TEMP TABLE repeated AS {_REPEATED_SQL}")
        [(repeats,)] = con.execute("SELECT count(*) FROM repeated").fetchall()
        later = (con.execute(_LATER_SQL, {"files": parsed_files(checkpoint)}).to_arrow_table()
                 if repeats else LATER_RECORDS_SCHEMA.empty_table())
        written: list[tuple[str, int] | None] = []
        for store, wanted, table in zip(stores, keys, (scores, later), strict=True):
            key = wanted[checkpoint]
            if store.has(key):
                written.append(None)
            else:
                store.write(key, table.select(store.schema.names).cast(store.schema))
                written.append((key, table.num_rows))
        return written

    done = on_connections(count, todo, WORKERS)
    for written in done:  # in checkpoint order, whatever order the threads finished in
        for result, part in zip(results, written, strict=True):
            if part is not None:
                result.written.append(part[0])
                result.rows_written += part[1]
    return results

