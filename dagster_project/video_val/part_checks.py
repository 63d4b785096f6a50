"""The response tables' invariants, checked on each part once, when it is new.

A data test over a view of every response re-scans the whole campaign on each run (minutes at
11 M responses) though only one checkpoint's file arrived. A part is never rewritten under its
name (`parts.py`), so a part that passed stays passed: each check keeps the names of the parts it
passed in `$BENCHLAKE_HOME/cache/checked/<check>.json` and reads only the others. Deleting the
cache checks every part again. The views over the responses add no row of their own that could
break these invariants; their SQL is held by the dbt unit tests (`int_vv_later_records`,
`int_vv_response_status`, ...). The question grain the scores read (`raw_vv_question_scores`,
one part per checkpoint) is checked the same way: its keys unique within a part and one
checkpoint per part make them unique in the table, and the views above it (`int_vv_row_scores`,
`vv_sample_metrics`) only divide its counts, so they carry no data test that would read every
question of the campaign on every run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from dagster_project.parts import PartStore, on_connections

# Per table: what each invariant says, and the SQL condition of a row that breaks it.
RESPONSE_INVARIANTS = {
    "keys not null": "run_id IS NULL OR step IS NULL OR uid IS NULL OR sample_idx IS NULL",
    "where read not null": "source_file IS NULL OR file_version IS NULL OR line IS NULL",
}
SCORED_INVARIANTS = {
    **RESPONSE_INVARIANTS,
    "extraction_method is boxed_answer, fallback or none":
        "extraction_method IS NULL OR extraction_method NOT IN ('boxed_answer', 'fallback', "
        "'none')",
    "a letter exactly when a method found one":
        "(extraction_method = 'none') <> (extracted IS NULL)",
    "correct is the extracted letter equal to the ground truth":
        "correct IS DISTINCT FROM coalesce(extracted = ground_truth, false)",
    "format flags not null": "format_card IS NULL OR format_exact IS NULL",
}
QUESTION_INVARIANTS = {
    "counts within the samples": "k < 1 OR n_correct NOT BETWEEN 0 AND k OR "
                                 "n_format_card NOT BETWEEN 0 AND k OR "
                                 "n_format_exact NOT BETWEEN 0 AND k OR "
                                 "n_majority NOT BETWEEN 0 AND k OR "
                                 "n_fallback + n_none NOT BETWEEN 0 AND k",
    "no letter voted, no sample correct": "majority_letter IS NULL AND n_correct > 0",
    "a majority letter exactly when a sample has a letter":
        "(majority_letter IS NULL) <> (n_none = k)",
    "one letter or `-` per sample": "length(letters) <> k OR "
                                    "n_none <> length(letters) - length(replace(letters, '-', ''))",
}
# (source_file, file_version, line) is one record: each part holds it once
UNIQUE_ROWS = {"vv_responses": ["source_file", "file_version", "line"],
               "vv_scored_responses": ["source_file", "file_version", "line"],
               "vv_question_scores": ["run_id", "step", "uid"]}
# A part holds one value of these columns (one checkpoint per question-scores part)
ONE_PER_PART = {"vv_question_scores": ["run_id", "step"]}


@dataclass
class PartCheck:
    """What checking a table's new parts found."""

    checked: int = 0  # parts read now
    already: int = 0  # parts that passed before
    violations: dict[str, list[str]] = field(default_factory=dict)  # invariant -> parts

    @property
    def passed(self) -> bool:
        return not self.violations


def _ledger(home: Path, check: str) -> Path:
    return Path(home) / "cache" / "checked" / f"{check}.json"


def check_new_parts(home: Path, table: str, check: str, invariants: dict[str, str]
                    ) -> PartCheck:
    """Check every part of raw table `table` that `check` has not passed yet against
    `invariants` (and `UNIQUE_ROWS[table]` unique within the part); remember those that pass."""
    store = PartStore.of_table(home, table, "")
    ledger = _ledger(home, check)
    try:
        passed = set(json.loads(ledger.read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        passed = set()
    keys = store.all_keys()
    todo = [k for k in keys if k not in passed]
    out = PartCheck(checked=len(todo), already=len(keys) - len(todo))
    unique, single = UNIQUE_ROWS.get(table), ONE_PER_PART.get(table)
    counts = ", ".join(f"count(*) FILTER (WHERE {sql})" for sql in invariants.values())
    if unique:
        counts += f", count(*) - count(DISTINCT ({', '.join(unique)}))"
    if single:
        counts += f", greatest(count(DISTINCT ({', '.join(single)})) - 1, 0)"
    names = [*invariants, *([f"({', '.join(unique)}) unique in a part"] if unique else []),
             *([f"one ({', '.join(single)}) per part"] if single else [])]
    # a part at a time, two at once (`parts.on_connections`): most parts are one row group
    rows = on_connections(lambda con, key: con.execute(
        f"SELECT {counts} FROM read_parquet(?)", [str(store.path(key))]).fetchone(), todo)
    for key, row in zip(todo, rows, strict=True):
        bad = [name for name, n in zip(names, row or (), strict=True) if n]
        for name in bad:
            out.violations.setdefault(name, []).append(key)
        if not bad:
            passed.add(key)
    passed &= set(keys)  # parts removed since are forgotten
    ledger.parent.mkdir(parents=True, exist_ok=True)
    tmp = ledger.with_name(f".{ledger.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(sorted(passed)), encoding="utf-8")
    os.replace(tmp, ledger)
    return out
