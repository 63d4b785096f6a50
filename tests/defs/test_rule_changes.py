"""A rule changed on a materialized home refreshes everything that depends on it, Python assets
included, and until then the UI's stale status names what changed.

Done as a user does it: in their own checkout (a copy of the project, run from there in a fresh
process), on a home materialized with it, they change a scoring policy, a reporting profile, a
metric weight, the prompt version and the evidence policy, then `benchlake materialize`. Every
table that depends on one of them must change, and change as the new rule says; the others must
keep their bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow

# Run inside the copy: it imports the copy's package (PYTHONPATH) and reads its sql/ and assets/.
STEP = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver
from dagster._time import get_current_datetime
from dagster_project.runner import dagster_instance, definitions, materialize
from dagster_project.settings import Settings
from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.project import prepare_manifest

step, home = sys.argv[1], sys.argv[2]
settings = Settings.from_env({"BENCHLAKE_HOME": home})
prepare_manifest()
instance = dagster_instance(settings)
out = {}
if step in ("materialize", "observe"):
    select = None if step == "materialize" else "key:rvp_prompts"
    result = materialize(settings, select, instance=instance, checks=False)
    assert result.success, [f.message for f in result.failures()]
if step == "observe":
    graph = definitions().resolve_asset_graph()
    view = AssetGraphView(temporal_context=TemporalContext(
        effective_dt=get_current_datetime(), last_event_id=None), instance=instance,
        asset_graph=graph)
    resolver = CachingStaleStatusResolver(instance, graph, view)
    out["stale"] = {k.to_user_string(): sorted(f"{c.category.name}:{c.reason}"
                                                 for c in resolver.get_stale_causes(k))
                    for k in graph.get_all_asset_keys()
                    if resolver.get_status(k).name == "STALE"}
if step == "materialize":
    con = connect(home)
    def rows(sql):
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    out["composite"] = rows(
        "SELECT run_id, step, uid, sample_idx, correct, format_ok, composite "
        "FROM vv_scored_responses WHERE policy = 'card' ORDER BY ALL")
    out["verl"] = rows(
        "SELECT run_id, step, data_source, metric, value FROM vv_verl_metrics "
        "WHERE metric LIKE 'benchlake_composite/%' ORDER BY ALL")
    out["axes"] = rows(
        "SELECT judge_run_id, system, case_id, pi, vr, vq, final_score "
        "FROM rvp_candidate_scores WHERE profile = 'current' AND status = 'scored' ORDER BY ALL")
    out["judgments"] = rows(
        "SELECT system, case_id, judge_run_id, vr_1, vr_2, vr_3, vr_4, vr_5, vr_6, vr_7, vr_8 "
        "FROM rvp_judgments WHERE is_final ORDER BY ALL")
    out["gt"] = rows("SELECT case_id, fingerprint, prompt_version FROM rvp_gt_fingerprints "
                     "ORDER BY ALL")
    out["gt_cache"] = rows("SELECT case_id, count(*) FILTER (is_current) AS current "
                           "FROM rvp_gt_compilations GROUP BY ALL ORDER BY ALL")
    out["packets"] = rows("SELECT DISTINCT prompt_version FROM rvp_judge_packets")
    out["evaluations"] = rows("SELECT evaluation_id, inputs_fingerprint FROM stg_rvp_evaluations "
                              "ORDER BY ALL")
print(json.dumps(out, default=str))
'''

# What the user edits in their checkout.
EDITS = {
    "sql/seeds/vv_scoring_policies.csv": ("card,card,0.8,0.2,true", "card,card,0.6,0.4,true"),
    "sql/seeds/rvp_reporting_profiles.csv": ("current,0.50,0.40,0.10", "current,0.60,0.30,0.10"),
    "sql/seeds/rvp_metric_weights.csv": ("current,VR,VR-1,any,0.20\ncurrent,VR,VR-2,any,0.20",
                                         "current,VR,VR-1,any,0.30\ncurrent,VR,VR-2,any,0.10"),
    "assets/prompts/v1/VERSION": ("benchlake-prompts-v1", "benchlake-prompts-v1-edited"),
    "dagster_project/rynn_vp/evidence.py": ('EVIDENCE_POLICY_VERSION = "1"',
                                            'EVIDENCE_POLICY_VERSION = "1-edited"'),
}


def _step(project: Path, step: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("BENCHLAKE_", "RYNN_VP_", "VIDEO_VAL_", "CANDIDATES_", "JUDGMENTS_", "RESPONSES_",
         "DAGSTER_HOME"))}
    env["PYTHONPATH"] = str(project)
    done = subprocess.run([sys.executable, "-c", STEP, step, str(home)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_changed_rule_makes_its_dependents_stale_and_a_materialize_recomputes_them(
        demo_inputs, tmp_path: Path) -> None:
    project = tmp_path / "checkout"
    for part in ("dagster_project", "benchlake_demo", "sql", "assets", "tools"):
        shutil.copytree(PROJECT_ROOT / part, project / part, ignore=shutil.ignore_patterns(
            "target", "logs", "__pycache__", ".user.yml"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", project)
    home = tmp_path / "home"
    shutil.copytree(demo_inputs.demo_dir, home / "demo")
    before = _step(project, "materialize", home)

    for rel, (old, new) in EDITS.items():
        path = project / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, rel
        path.write_text(text.replace(old, new), encoding="utf-8")

    # Before anything is rematerialized, the UI's stale status says what changed and where.
    stale = _step(project, "observe", home)["stale"]
    for seed in ("vv_scoring_policies", "rvp_reporting_profiles", "rvp_metric_weights"):
        assert any(c.startswith("CODE:") for c in stale.get(seed, [])), (seed, stale.get(seed))
    for table in ("raw_rvp_gt_fingerprints", "raw_rvp_judge_packets"):  # read the prompts
        assert any("rvp_prompts" in c or c.startswith("DATA:") for c in stale.get(table, [])), (
            table, stale.get(table))
    for table in ("raw_rvp_evidence_frames", "raw_rvp_storyboards", "raw_rvp_evaluations"):
        assert any(c.startswith("CODE:") for c in stale.get(table, [])), (table, stale)
    assert "raw_vv_responses" not in stale and "raw_rvp_cases" not in stale

    after = _step(project, "materialize", home)
    # scoring policy: every composite is 0.6 correct + 0.4 format, the verl metric too
    assert after["composite"] != before["composite"]
    for r in after["composite"]:
        assert r["composite"] == pytest.approx(0.6 * r["correct"] + 0.4 * r["format_ok"])
    assert after["verl"] != before["verl"] and after["verl"]
    # reporting profile and metric weights: the axis scores follow the new weights
    assert after["axes"] != before["axes"]
    for r in after["axes"]:
        assert r["final_score"] == pytest.approx(0.6 * r["pi"] + 0.3 * r["vr"] + 0.1 * r["vq"])
    vr_before = {(r["judge_run_id"], r["system"], r["case_id"]): r["vr"] for r in before["axes"]}
    changed_vr = [r for r in after["axes"]
                  if r["vr"] != pytest.approx(vr_before[(r["judge_run_id"], r["system"],
                                                         r["case_id"])])]
    assert changed_vr  # VR-1 and VR-2 now weigh 0.30 and 0.10
    # prompt version: new GT cache keys, every recorded compilation stale, new packets
    assert {r["prompt_version"] for r in after["gt"]} == {"benchlake-prompts-v1-edited"}
    assert not {r["fingerprint"] for r in after["gt"]} & {r["fingerprint"] for r in before["gt"]}
    assert all(r["current"] == 0 for r in after["gt_cache"])
    assert [r["prompt_version"] for r in after["packets"]] == ["benchlake-prompts-v1-edited"]
    # evidence policy: every evaluation extracted again under the new policy version
    fingerprints = {r["evaluation_id"]: r["inputs_fingerprint"] for r in before["evaluations"]}
    assert {r["evaluation_id"] for r in after["evaluations"]} == set(fingerprints)
    assert all(r["inputs_fingerprint"] != fingerprints[r["evaluation_id"]]
               for r in after["evaluations"])
    # and nothing is stale any more
    assert _step(project, "observe", home)["stale"] == {}
