"""Judging end to end on the demo: records ingested and audited, the GT cache, stages, packets,
the drop-folder sensor and file versions (a changed file is a new version, never an overwrite)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchlake_demo.rvp_judgments import demo_expectations
from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.runner import materialize
from dagster_project.rynn_vp.packets import CANDIDATE_ROLES, packet_store
from dagster_project.tables import table_path
from dagster_project.warehouse.catalog import connect
from tests.conftest import copy_home, settings_for

JUDGING = ("key:raw_rvp_gt_fingerprints or key:raw_rvp_judgment_files or key:raw_rvp_judgments or "
           "key:raw_rvp_hallucinations or key:raw_rvp_judgment_rejects or key:raw_rvp_gt_compilations or "
           "key:raw_rvp_stages or key:raw_rvp_judge_packets")
# The views these tests read, rebuilt in the test's home (a copied catalog names the original's
# Parquet).
JUDGING_VIEWS = ("(+key:rvp_judgments or +key:rvp_judgment_files or +key:rvp_judgment_rejects "
                 "or +key:rvp_gt_cache or +key:rvp_judge_packets) and kind:dbt")


def q(con, sql, params=()):
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_demo_records_are_ingested_with_the_planted_cases(demo_warehouse):
    exp = demo_expectations()
    con = connect(demo_warehouse.home)
    rejects = q(con, "SELECT * FROM rvp_judgment_rejects")
    assert [(r["source_file"], r["line"]) for r in rejects] == [
        (exp["rejected"]["file"], exp["rejected"]["line"])]
    assert "VR-3 = 101" in rejects[0]["reason"] and '"VR-3": 101' in rejects[0]["raw"].replace(
        " ", "").replace('"VR-3":101', '"VR-3": 101')
    for kind in ("retry", "manager_review"):
        e = exp[kind]
        rows = q(con, "SELECT attempt, attempt_kind, is_final FROM rvp_judgments WHERE "
                      "evaluation_id = ? AND judge_run_id = ? ORDER BY attempt",
                 [e["evaluation_id"], e["judge_run_id"]])
        assert [r["attempt_kind"] for r in rows] == e["attempt_kinds"]
        assert [r["attempt"] for r in rows if r["is_final"]] == [e["final_attempt"]]
    finals = q(con, "SELECT judge_run_id, system, case_id, count(*) FILTER (is_final) AS n "
                    "FROM rvp_judgments GROUP BY ALL")
    assert all(r["n"] == 1 for r in finals)
    pi5 = q(con, "SELECT DISTINCT case_id FROM rvp_judgments WHERE pi_5 IS NOT NULL")
    assert pi5 == [{"case_id": exp["pi5_case"]}]
    hall = q(con, "SELECT system, case_id, locus, locus_kind FROM rvp_hallucinations "
                  "ORDER BY system, case_id")
    assert {h["locus_kind"] for h in hall} == {"interval", "step"}
    assert [(h["system"], h["case_id"], h["locus"]) for h in hall] == [
        (h["system"], h["case_id"], h["locus"]) for h in exp["hallucinations"]]


def test_gt_cache_and_stages(demo_warehouse):
    exp = demo_expectations()
    con = connect(demo_warehouse.home)
    cache = q(con, "SELECT * FROM rvp_gt_cache")
    assert cache and all(c["cached"] for c in cache)
    stale = q(con, "SELECT case_id, is_current, prompt_version FROM rvp_gt_compilations "
                   "WHERE NOT is_current")
    assert stale == [{"case_id": exp["gt_compilations"]["stale"]["case_id"], "is_current": False,
                      "prompt_version": exp["gt_compilations"]["stale"]["prompt_version"]}]
    # run b relies on cached GT compilations: five candidate stages, GT cached
    stages = q(con, "SELECT evaluation_id, stage, status FROM rvp_stages "
                    "WHERE judge_run_id = 'judge-run-b'")
    per_eval: dict[str, list] = {}
    for s in stages:
        per_eval.setdefault(s["evaluation_id"], []).append(s)
    for rows in per_eval.values():
        gt = [r for r in rows if r["stage"] == "gt_compilation"]
        assert [r["status"] for r in gt] == ["cached"]
        assert {r["stage"] for r in rows if r["status"] != "cached"} == {
            "observer", "vr_vq_judge", "hallucination_auditor", "pi_judge", "critic"}


def test_packets_name_existing_evidence_and_are_fingerprinted(demo_warehouse):
    con = connect(demo_warehouse.home)
    packets = q(con, "SELECT * FROM rvp_judge_packets")
    evals = con.execute("SELECT count(*) FROM rvp_evaluations").fetchone()[0]
    cases = con.execute("SELECT count(*) FROM rvp_cases").fetchone()[0]
    assert len(packets) == 5 * evals + cases
    for p in packets[:: max(1, len(packets) // 25)]:
        data = json.loads(Path(p["packet_abspath"]).read_text())
        assert data["fingerprint"] == p["packet_fingerprint"]
        assert data["role"] == p["role"] and data["prompt"]["version"] == p["prompt_version"]
        template = Path(__file__).parents[2] / "assets" / "prompts" / "v1" / f"{p['role']}.md"
        assert data["prompt"]["text"] == template.read_text()  # used unchanged
        folder = Path(p["packet_abspath"]).parent
        for item in data["evidence"] + data["storyboards"]:
            assert (folder / item["file"]).is_file()
        ids = {e["evidence_id"] for e in data["evidence"]}
        if p["evaluation_id"]:
            known = {r[0] for r in con.execute(
                "SELECT evidence_id FROM rvp_evidence_frames WHERE evaluation_id = ?",
                [p["evaluation_id"]]).fetchall()}
            assert ids == known
        assert data["gt_compilation"]["fingerprint"] == p["gt_fingerprint"]


def test_skill_prompts_are_used_unchanged(tmp_path):
    from dagster_project.rynn_vp.packets import ROLES, load_prompts

    prompts_dir = tmp_path / "skills" / "rynn-vp-eval" / "references" / "prompts"
    prompts_dir.mkdir(parents=True)
    names = {"gt_compilation": "01_gt_compilation.md", "observer": "02-observer.md",
             "vr_vq_judge": "03_vr_vq_judge.md", "hallucination_auditor":
             "04_hallucination_auditor.md", "pi_judge": "05_pi_judge.md",
             "critic": "06_critic.md"}
    for role, name in names.items():
        (prompts_dir / name).write_text(f"frozen prompt for {role}\n  keep   spacing\n")
    prompts = load_prompts(tmp_path)
    assert prompts.source == "skill" and prompts.version.startswith("rynn-vp-skill-")
    assert all(prompts.texts[r] == f"frozen prompt for {r}\n  keep   spacing\n" for r in ROLES)
    assert load_prompts(None).source == "project"


@pytest.fixture
def judging_home(demo_warehouse, tmp_path):
    """A copy of the demo warehouse with a private, writable judgments folder."""
    home = tmp_path / "home"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster", ".built"))
    drop = tmp_path / "judgments"
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    (home / "tables" / "raw" / "rvp_judgment_files.parquet").unlink()
    shutil.rmtree(home / "tables" / "raw" / "rvp_judgments")  # its parts
    return settings_for(home, judgments_dir=str(drop)), drop


@pytest.mark.slow
def test_a_changed_file_is_a_new_version_never_an_overwrite(judging_home):
    settings, drop = judging_home
    assert materialize(settings, f"{JUDGING} or {JUDGING_VIEWS}", checks=False).success
    con = connect(settings.home)
    before = q(con, "SELECT * FROM rvp_judgments WHERE source_file = 'judge-run-b.jsonl'")
    lines = (drop / "judge-run-b.jsonl").read_text().splitlines()
    changed = json.loads(lines[0])
    changed["attempt"], changed["attempt_kind"] = 2, "repair"
    changed["metrics"]["VQ"] = 12.5
    # v2 of the file: first line edited into a new attempt, another line removed
    (drop / "judge-run-b.jsonl").write_text("\n".join([json.dumps(changed), *lines[2:]]) + "\n")
    assert materialize(settings, f"{JUDGING} or {JUDGING_VIEWS}", checks=False).success
    con = connect(settings.home)
    files = q(con, "SELECT version, is_current FROM rvp_judgment_files "
                   "WHERE source_file = 'judge-run-b.jsonl' ORDER BY version")
    assert files == [{"version": 1, "is_current": False}, {"version": 2, "is_current": True}]
    after = q(con, "SELECT * FROM rvp_judgments WHERE source_file = 'judge-run-b.jsonl'")
    # every v1 record is still there (nothing lost), plus the new attempt from v2
    assert {r["record_sha256"] for r in before} <= {r["record_sha256"] for r in after}
    assert len(after) == len(before) + 1
    new = [r for r in after if r["file_version"] == 2 and r["attempt"] == 2]
    assert new and new[0]["is_final"] and new[0]["vq"] == 12.5
    dups = con.execute("SELECT count(*) FROM rvp_judgment_rejects WHERE reason LIKE "
                       "'duplicate of judge-run-b.jsonl v1%'").fetchone()[0]
    assert dups == len(lines) - 2  # unchanged lines in v2 are counted duplicates, ignored


@pytest.mark.slow
def test_sensor_triggers_only_on_new_content(judging_home):
    from dagster_project.defs.rynn_vp.sensors import rvp_judgments_sensor

    settings, drop = judging_home
    resources = {"benchlake": BenchlakeSettings.from_settings(settings)}
    ctx = dg.build_sensor_context(resources=resources)
    first = rvp_judgments_sensor(ctx)
    assert len(first.run_requests) == 1
    cursor = first.cursor
    assert set(json.loads(cursor)) == {p.relative_to(drop).as_posix() for p in drop.rglob("*")
                                       if p.is_file()}
    again = rvp_judgments_sensor(dg.build_sensor_context(cursor=cursor, resources=resources))
    assert not again.run_requests and again.skip_reason
    (drop / "late.jsonl").write_text((drop / "judge-run-b.jsonl").read_text().splitlines()[0]
                                     + "\n")
    third = rvp_judgments_sensor(dg.build_sensor_context(cursor=cursor, resources=resources))
    assert len(third.run_requests) == 1
    assert "late.jsonl" in third.run_requests[0].tags["benchlake/changed_files"]
    assert third.run_requests[0].run_key != first.run_requests[0].run_key
    # same content under the same path again → same run key (Dagster dedupes the run)
    again3 = rvp_judgments_sensor(dg.build_sensor_context(cursor=cursor, resources=resources))
    assert again3.run_requests[0].run_key == third.run_requests[0].run_key


@pytest.mark.slow
def test_changed_gt_input_invalidates_the_cache(demo_inputs, tmp_path):
    from benchlake_demo.rynn_vp import write_sha256sums

    root = tmp_path / "Rynn-VP"
    shutil.copytree(demo_inputs.rynn_vp_source_or_demo(), root)
    case = sorted((root / "cases").iterdir())[0]
    task = json.loads((case / "task.json").read_text())
    task["instruction"] += " Carefully."
    (case / "task.json").write_text(json.dumps(task))
    write_sha256sums(root)
    settings = settings_for(tmp_path / "home", rynn_vp_source=str(root),
                            judgments_dir=str(demo_inputs.judgments_root()),
                            candidates_dir=str(demo_inputs.candidates_root()))
    assert materialize(settings, "+group:rynn_vp", checks=False).success
    con = connect(settings.home)
    row = q(con, "SELECT cached, stale_compilations FROM rvp_gt_cache WHERE case_id = ?",
            [case.name])[0]
    assert row == {"cached": False, "stale_compilations": 1}
    # the judge packets now tell the harness to compile the GT again (six stages, not five)
    cached = {r["gt_cached"] for r in q(con, "SELECT gt_cached FROM rvp_judge_packets "
                                             "WHERE case_id = ?", [case.name])}
    assert cached == {False}
    others = q(con, "SELECT DISTINCT gt_cached FROM rvp_judge_packets WHERE case_id <> ?",
               [case.name])
    assert others == [{"gt_cached": True}]


def _packet_stamps(settings) -> dict[str, int]:
    roots = [settings.packets_dir, packet_store(settings.cache_dir).folder]
    return {p.relative_to(settings.home).as_posix(): p.stat().st_mtime_ns
            for root in roots for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_packets_are_rebuilt_only_when_their_inputs_change(demo_warehouse, tmp_path):
    """A run over unchanged inputs writes no packet file and no part (same mtimes); a missing
    packet builds its unit again, the same; a changed evaluation builds only its five packets."""
    settings = copy_home(demo_warehouse, tmp_path / "home")
    select = "key:raw_rvp_judge_packets"
    before = _packet_stamps(settings)
    files = sorted(settings.packets_dir.rglob("*.json"))
    outcome = materialize(settings, select, checks=False)
    assert outcome.success
    assert _packet_stamps(settings) == before  # a copied home: the same keys, nothing built
    [event] = outcome.get_asset_materialization_events()
    assert event.materialization.metadata["units_built"].value == 0
    gone = [files[0], files[-1]]  # a case's GT packet, an evaluation's packet
    assert gone[0].parent.parent.name == "_gt" and gone[1].parent.parent.name != "_gt"
    saved = [f.read_bytes() for f in gone]
    for f in gone:
        f.unlink()
    assert materialize(settings, select, checks=False).success
    assert [f.read_bytes() for f in gone] == saved  # built again, the same
    # one evaluation changed (its row in its case's evidence part): its packets only
    part = sorted(table_path(settings.home, "rvp_evaluations", "_").parent.glob("*.*.parquet"))[0]
    table = pq.read_table(part)
    evaluation_id = table.column("evaluation_id")[0].as_py()
    problems = table.column("problem").to_pylist()
    problems[0] = "changed for the test"
    pq.write_table(table.set_column(table.schema.get_field_index("problem"), "problem",
                                    pa.array(problems, pa.string())), part)
    stamps = _packet_stamps(settings)
    assert materialize(settings, select, checks=False).success
    after = _packet_stamps(settings)
    changed = {p for p in after if after[p] != stamps.get(p)}
    system, case_id = evaluation_id.split("/")
    packets = {p for p in changed if not p.startswith("cache/")}
    assert packets == {f"packets/{system}/{case_id}/{role}.json" for role in CANDIDATE_ROLES}
    parts = {p for p in changed if p.startswith("cache/")}
    assert len(parts) == 1 and Path(parts.pop()).name.startswith(
        evaluation_id.replace("/", "_") + ".")
    assert len([p for p in stamps if p not in after]) == 1  # its old part
