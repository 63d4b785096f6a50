"""What each packet unit is made of, as one digest per unit, computed in one DuckDB query.

A packet unit (`packets._units`) is the five candidate packets of one evaluation, or the GT
compilation packet of one case. Its part (`packets.packet_store`) is keyed by what it is made
of: the raw rows it reads and the prompts. Reading every evidence row into Python to key 744
units took most of a run that changed one candidate; here DuckDB digests the rows instead, as
stored (paths relative to the home: the same rows give the same key in every home), and only
the units whose key is new are read into Python and built.

What a unit's digest covers:
- an evaluation: its `rvp_evaluations` row (its inputs' fingerprint stands for its images'
  bytes), its `rvp_evidence_frames` and `rvp_storyboards` rows, its case's variables
  (instruction, explicit plan) and GT reference (fingerprint, cached compilation);
- a case's GT packet (one per case with an evaluation): the case's S0 and anchor rows as the
  first evaluation of the case holds them (the same files for all), its intervals, variables
  and GT reference. The evidence policy's version is in its key (the shared images are made by
  it), beside the prompts' key.

What is digested is kept (`kept`, under `cache/`) per case, with the names and sizes of the
case's parts in the tables kept one part per case (`PER_CASE`; `tables.content_version`: a part's
name holds the key of what it was built from). A run that changed one candidate digests that
case's units only, reading its three parts: every case's units are digested again, all parts
read, when a table the query reads whole (the cases, intervals, GT fingerprints and
compilations) or the query changed, and when nothing was kept. On the full-size home that is
0.43 → 0.10 s of the packets step of a run that changed one candidate.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dagster_project.parts import SCHEMA_PART, PartStore, digest
from dagster_project.tables import (
    connect_raw,
    content_version,
    keep,
    raw_schema,
    read_kept,
    table_files,
    table_path,
)

# The raw tables a packet is built from (their assets are the packets' dependencies).
PACKET_INPUTS = ("rvp_cases", "rvp_gt_fingerprints", "rvp_gt_compilations", "rvp_evaluations",
                 "rvp_evidence_frames", "rvp_intervals", "rvp_storyboards")
# those of them kept in parts labelled by case (`evidence_parts`); the query reads the others whole
PER_CASE = ("rvp_evaluations", "rvp_evidence_frames", "rvp_storyboards")

_DIGESTS = r"""
WITH evaluations AS MATERIALIZED (SELECT * FROM raw.rvp_evaluations),
evidence AS MATERIALIZED (SELECT * FROM raw.rvp_evidence_frames),
variables AS (
    SELECT case_id, {'case_id': case_id, 'instruction': instruction,
                     'explicit_plan': CASE WHEN has_explicit_plan THEN plan END} AS variables
    FROM raw.rvp_cases),
cached AS (
    SELECT case_id, source_file, judge_run_id FROM raw.rvp_gt_compilations WHERE is_current
    QUALIFY row_number() OVER (PARTITION BY case_id ORDER BY source_file) = 1),
gt_ref AS (
    SELECT c.case_id, {'fingerprint': f.fingerprint, 'cached': g.case_id IS NOT NULL,
                       'source_file': g.source_file, 'judge_run_id': g.judge_run_id} AS gt_ref
    FROM (SELECT DISTINCT case_id FROM evaluations) AS c
    LEFT JOIN raw.rvp_gt_fingerprints AS f USING (case_id)
    LEFT JOIN cached AS g USING (case_id)),
frames AS (
    SELECT evaluation_id, md5(string_agg(to_json(f)::VARCHAR, chr(10) ORDER BY evidence_id))
               AS rows_digest
    FROM evidence AS f GROUP BY evaluation_id),
boards AS (
    SELECT evaluation_id, md5(string_agg(to_json(b)::VARCHAR, chr(10) ORDER BY storyboard_no))
               AS rows_digest
    FROM raw.rvp_storyboards AS b GROUP BY evaluation_id),
shared_rows AS (
    SELECT * EXCLUDE (evaluation_id)
             REPLACE (case_id || '#' || substr(evidence_id, strpos(evidence_id, '#') + 1)
                      AS evidence_id)
    FROM evidence WHERE role IN ('S0', 'anchor')
    QUALIFY row_number() OVER (PARTITION BY case_id, role, ordinal ORDER BY evaluation_id) = 1),
shared AS (
    SELECT case_id, md5(string_agg(to_json(r)::VARCHAR, chr(10) ORDER BY role, ordinal))
               AS rows_digest
    FROM shared_rows AS r GROUP BY case_id),
intervals AS (
    SELECT case_id, md5(string_agg(to_json({'ordinal': ordinal, 'interval': "interval",
                                            'label': label})::VARCHAR, chr(10) ORDER BY ordinal))
               AS rows_digest
    FROM raw.rvp_intervals GROUP BY case_id)
SELECT '_gt.' || case_id AS label, case_id,
       to_json({'variables': v.variables, 'gt_reference': r.gt_ref,
                'intervals': i.rows_digest, 'shared': sh.rows_digest})::VARCHAR AS made_of
FROM gt_ref AS r
LEFT JOIN variables AS v USING (case_id)
LEFT JOIN intervals AS i USING (case_id)
LEFT JOIN shared AS sh USING (case_id)
UNION ALL BY NAME
SELECT e.evaluation_id AS label, e.case_id,
       to_json({'evaluation': e, 'variables': v.variables, 'gt_reference': r.gt_ref,
                'frames': f.rows_digest, 'storyboards': b.rows_digest})::VARCHAR AS made_of
FROM evaluations AS e
LEFT JOIN variables AS v USING (case_id)
LEFT JOIN gt_ref AS r USING (case_id)
LEFT JOIN frames AS f USING (evaluation_id)
LEFT JOIN boards AS b USING (evaluation_id)
"""


def unit_digests(home: Path, kept: Path | None = None) -> list[tuple[str, str]]:
    """(label, what the unit is made of) of every packet unit, in the packets table's order: the
    GT packet of each case with an evaluation (`_gt.<case_id>`), then each evaluation (its id).
    Empty while there is no evaluation table. `kept`: the file keeping the digests per case
    (see the module notes); read, and written again when a case was digested now."""
    import duckdb

    if not table_files(home, "rvp_evaluations"):
        return []
    whole = digest(_DIGESTS, duckdb.__version__,
                   [content_version(home, t) for t in PACKET_INPUTS if t not in PER_CASE])
    cases = _case_parts(home)
    if cases is None:  # a table in one file: every case digested, nothing kept
        return _in_order((label, made_of) for label, _, made_of in _query(home, None))
    before = _kept_cases(kept, whole) if kept is not None else {}
    units = {label: before[label]["units"] for label, names in cases.items()
             if before.get(label, {}).get("parts") == names}
    todo = sorted(set(cases) - set(units))
    if todo:  # none kept: every part read, not a list of them all
        for label, case_id, made_of in _query(home, todo if units else None):
            units.setdefault(PartStore.safe_label(case_id), []).append([label, made_of])
        if kept is not None:
            keep(kept, whole, {label: {"parts": names, "units": sorted(units.get(label, []))}
                               for label, names in sorted(cases.items())})
    return _in_order((label, made_of) for rows in units.values() for label, made_of in rows)


def _in_order(units: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The query's order: the GT packets, then the evaluations, each by label (DuckDB compares
    strings by code point, as Python does)."""
    return sorted(units, key=lambda unit: (not unit[0].startswith("_gt."), unit[0]))


def _case_parts(home: Path) -> dict[str, list[str]] | None:
    """Per case (its parts' label), the names and sizes of its parts in the `PER_CASE` tables;
    None when one of them is a single file (no case's rows can be read apart)."""
    cases: dict[str, list[str]] = {}
    for name in PER_CASE:
        if table_path(home, name).exists():
            return None
        for path in table_files(home, name):
            if path.stem != SCHEMA_PART:  # named and sized, as `content_version` has them
                cases.setdefault(PartStore.label_of(path.stem), []).append(
                    f"{name}/{path.stem}:{path.stat().st_size}")
    return cases


def _kept_cases(kept: Path, whole: str) -> dict[str, dict]:
    """The digests kept per case, if they were made by the same query over the same whole
    tables and are as written (each case with its parts and units); else none."""
    cases = read_kept(kept, whole)
    if isinstance(cases, dict) and all(
            isinstance(c, dict) and isinstance(c.get("parts"), list)
            and isinstance(c.get("units"), list) for c in cases.values()):
        return cases
    return {}


def _query(home: Path, cases: list[str] | None) -> list[tuple[str, str, str]]:
    """(label, case id, made of) of the units of `cases` (part labels; None: of every case)."""
    con = connect_raw(home, PACKET_INPUTS, None if cases is None else dict.fromkeys(
        PER_CASE, cases), stored=True)  # paths relative to the home
    try:
        views = {v for (v,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'raw'").fetchall()}
        for name in set(PACKET_INPUTS) - views:  # not written yet (no judgment: nothing cached)
            con.register(f"empty_{name}", raw_schema(name).empty_table())
            con.execute(f"CREATE VIEW raw.{name} AS SELECT * FROM empty_{name}")
        return con.execute(_DIGESTS).fetchall()
    finally:
        con.close()
