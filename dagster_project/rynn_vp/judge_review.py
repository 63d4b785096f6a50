"""A person's verdict on an evaluation two judge runs disagree on (`rvp_judge_review`): a
`manager_review` record with its author and reason, which wins over the judges' attempts
(`judgments.py`: a manager review is the final attempt). `benchlake review` writes it. No
Dagster import."""

from __future__ import annotations

import json
from pathlib import Path

from dagster_project.records import read_records
from dagster_project.rynn_vp.judgment_records import MAX_RECORD_BYTES
from dagster_project.tables import atomic_write_bytes
from dagster_project.warehouse.catalog import connect


def write_reviews(home: Path, judge_dir: Path, evaluation_id: str, take: str, author: str,
                  reason: str) -> list[Path]:
    """A person's verdict on an evaluation: the final judge record of judge run `take` (its
    metrics, hallucinations, evidence and judge, as the record file holds them) written as a
    `manager_review` attempt, with `review` {author, reason}, into every judge run that judged
    the evaluation, so it is final there and counts in the scores. Files under the judge's
    folder (`<run>/<system>/<case_id>/review-<attempt>.json`); the paths written."""
    if not author.strip() or not reason.strip():
        raise ValueError("a review needs an author and a reason")
    con = connect(home)
    try:
        cur = con.execute(
            "SELECT j.judge_run_id, j.attempt, j.attempt_kind, j.source_file, j.line, "
            "f.archived_abspath, max(j.attempt) OVER (PARTITION BY j.judge_run_id) AS last "
            "FROM rvp_judgments AS j JOIN rvp_judgment_files AS f "
            "ON f.source_file = j.source_file AND f.version = j.file_version "
            "WHERE j.evaluation_id = ? ORDER BY j.judge_run_id, j.attempt", [evaluation_id])
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
    if not rows:
        raise ValueError(f"no accepted judgment of {evaluation_id}: nothing to review")
    runs = sorted({r["judge_run_id"] for r in rows})
    judged = [r for r in rows
              if r["judge_run_id"] == take and r["attempt_kind"] != "manager_review"]
    if not judged:
        raise ValueError(f"judge run {take!r} has no judge record of {evaluation_id} (runs: "
                         f"{', '.join(runs)})")
    chosen = judged[-1]  # its final judge record: the highest attempt that is no review
    record = next((r.value for r in read_records(
        Path(chosen["archived_abspath"]), chosen["source_file"], accept=(".json", ".jsonl"),
        max_record_bytes=MAX_RECORD_BYTES) if r.line == chosen["line"]), None)
    if not isinstance(record, dict):
        raise ValueError(f"{chosen['source_file']} line {chosen['line']}: record not found")
    written = []
    for run in runs:
        attempt = max(r["last"] for r in rows if r["judge_run_id"] == run) + 1
        review = {k: v for k, v in record.items() if k not in ("stages", "notes", "review")}
        review.update(judge_run_id=run, attempt=attempt, attempt_kind="manager_review",
                      review={"author": author.strip(), "reason": reason.strip()},
                      notes=f"verdict of judge run {take}, attempt {chosen['attempt']} "
                            f"({chosen['source_file']} line {chosen['line']})")
        system, case_id = record["system"], record["case_id"]
        path = judge_dir / "judgments" / run / system / case_id / f"review-{attempt}.json"
        atomic_write_bytes(path, (json.dumps(review, sort_keys=True, ensure_ascii=False,
                                              indent=1) + "\n").encode())
        written.append(path)
    return written
