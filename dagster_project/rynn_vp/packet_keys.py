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
"""

from __future__ import annotations

from pathlib import Path

from dagster_project.tables import connect_raw, raw_schema, table_files

# The raw tables a packet is built from (their assets are the packets' dependencies).
PACKET_INPUTS = ("rvp_cases", "rvp_gt_fingerprints", "rvp_gt_compilations", "rvp_evaluations",
                 "rvp_evidence_frames", "rvp_intervals", "rvp_storyboards")

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
SELECT '_gt.' || case_id AS label,
       to_json({'variables': v.variables, 'gt_reference': r.gt_ref,
                'intervals': i.rows_digest, 'shared': sh.rows_digest})::VARCHAR AS made_of
FROM gt_ref AS r
LEFT JOIN variables AS v USING (case_id)
LEFT JOIN intervals AS i USING (case_id)
LEFT JOIN shared AS sh USING (case_id)
UNION ALL BY NAME
SELECT e.evaluation_id AS label,
       to_json({'evaluation': e, 'variables': v.variables, 'gt_reference': r.gt_ref,
                'frames': f.rows_digest, 'storyboards': b.rows_digest})::VARCHAR AS made_of
FROM evaluations AS e
LEFT JOIN variables AS v USING (case_id)
LEFT JOIN gt_ref AS r USING (case_id)
LEFT JOIN frames AS f USING (evaluation_id)
LEFT JOIN boards AS b USING (evaluation_id)
ORDER BY label[1:4] <> '_gt.', label
"""


def unit_digests(home: Path) -> list[tuple[str, str]]:
    """(label, what the unit is made of) of every packet unit, in the packets table's order: the
    GT packet of each case with an evaluation (`_gt.<case_id>`), then each evaluation (its id).
    Empty while there is no evaluation table."""
    if not table_files(home, "rvp_evaluations"):
        return []
    con = connect_raw(home, PACKET_INPUTS, stored=True)  # paths relative to the home
    try:
        views = {v for (v,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'raw'").fetchall()}
        for name in set(PACKET_INPUTS) - views:  # not written yet (no judgment: nothing cached)
            con.register(f"empty_{name}", raw_schema(name).empty_table())
            con.execute(f"CREATE VIEW raw.{name} AS SELECT * FROM empty_{name}")
        return [(label, made_of) for label, made_of in con.execute(_DIGESTS).fetchall()]
    finally:
        con.close()
