"""A snapshot of the asset graph: a refactor that drops an edge, a group or a check shows here."""

import dagster as dg

from dagster_project.runner import definitions
from dagster_project.warehouse.seeds import SEEDS_DIR
from dagster_project.warehouse.views import views

# The Python assets (raw tables) and what each declares it reads.
EXPECTED_DEPS = {
    "raw_rvp_snapshot": set(),
    "raw_rvp_checksums": {"raw_rvp_snapshot"},
    "raw_rvp_media": {"raw_rvp_checksums"},
    "raw_rvp_cases": {"raw_rvp_checksums", "raw_rvp_media"},
    "raw_rvp_intervals": {"raw_rvp_checksums", "raw_rvp_media"},
    "raw_rvp_candidates": {"raw_rvp_cases"},
    # the one Python asset that needs a SQL rule (Done label, clamping) declares the view
    "raw_rvp_evidence_frames": {"raw_rvp_cases", "raw_rvp_media", "raw_rvp_checksums",
                                "raw_rvp_candidates", "rvp_intervals"},
    "raw_rvp_storyboards": {"raw_rvp_candidates"},
    "raw_rvp_evaluations": {"raw_rvp_candidates"},
    "raw_rvp_gt_fingerprints": {"raw_rvp_checksums", "raw_rvp_cases"},
    "raw_rvp_judgments": {"raw_rvp_cases", "raw_rvp_intervals", "raw_rvp_candidates",
                          "raw_rvp_evidence_frames", "raw_rvp_storyboards",
                          "raw_rvp_gt_fingerprints"},
    "raw_rvp_judge_packets": {"raw_rvp_cases", "raw_rvp_gt_fingerprints",
                              "raw_rvp_gt_compilations", "raw_rvp_evaluations",
                              "raw_rvp_evidence_frames", "raw_rvp_intervals",
                              "raw_rvp_storyboards"},
    "raw_vv_source": set(),
    "raw_vv_questions": {"raw_vv_source"},
    "raw_vv_videos": {"raw_vv_questions"},
    "raw_vv_frame_plan": {"raw_vv_videos", "raw_vv_questions"},
    "raw_vv_frames": {"raw_vv_frame_plan", "raw_vv_questions"},
    "raw_vv_responses": {"raw_vv_questions"},  # verl dumps are resolved against the questions
    "raw_vv_scored_responses": {"raw_vv_responses", "raw_vv_questions"},
    "raw_vv_verl_metrics": {"raw_vv_scored_responses"},
}
EXPECTED_CHECKS = {
    ("raw_rvp_checksums", "rvp_checksums_verified", True),
    ("raw_rvp_intervals", "rvp_intervals_per_case_in_range", False),
    ("raw_rvp_media", "rvp_media_decodes_at_both_ends", False),
    ("raw_vv_questions", "vv_videos_resolvable", False),
    ("raw_vv_frame_plan", "vv_frame_plan_within_bounds", False),
    ("raw_rvp_evaluations", "rvp_evidence_within_budget", True),
}
EXPECTED_PARTITIONS = {
    "raw_rvp_evidence_frames": "rvp_case", "raw_rvp_storyboards": "rvp_case",
    "raw_rvp_evaluations": "rvp_case", "raw_vv_frames": "static",
}
# Raw tables no single asset writes: each stage writes its own part of the rejects; the run
# markers are written by every run.
EXTERNAL = {"raw_rvp_rejects", "raw_vv_rejects", "raw_status_markers"}


def _graph():
    defs = definitions()
    graph = defs.resolve_asset_graph()
    deps = {k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys}
            for k in graph.get_all_asset_keys()}
    groups = {k.to_user_string(): graph.get(k).group_name for k in graph.get_all_asset_keys()}
    return defs, graph, deps, groups


def test_python_assets_snapshot():
    defs, graph, deps, groups = _graph()
    assert {k: v for k, v in deps.items() if k in EXPECTED_DEPS} == EXPECTED_DEPS
    for name in EXPECTED_DEPS:
        assert groups[name] == ("rynn_vp" if name.startswith("raw_rvp_") else "video_val")
    checks = set()
    for check_def in defs.asset_checks:
        for spec in check_def.check_specs:
            checks.add((spec.asset_key.to_user_string(), spec.name, spec.blocking))
    assert checks >= EXPECTED_CHECKS
    partitioned = {}
    for key in graph.get_all_asset_keys():
        pdef = graph.get(key).partitions_def
        if pdef is not None:
            partitioned[key.to_user_string()] = getattr(pdef, "name", None) or "static"
    assert partitioned == EXPECTED_PARTITIONS
    assert {s.name for s in defs.sensors} == {"rvp_case_partitions_sensor",
                                              "rvp_judgments_sensor", "vv_responses_sensor"}
    assert defs.resolve_job_def("rvp_evidence_job") is not None
    assert {s.name for s in defs.schedules} == {"rescoring_daily"}


def test_every_view_is_an_asset_with_its_lineage_and_group():
    _, graph, deps, groups = _graph()
    models = {v.name: v for v in views()}
    assert len(models) > 80
    assert {"rvp_leaderboard", "rvp_by_scene", "vv_scores", "vv_best_checkpoints",
            "rvp_dataset_stats", "benchlake_status"} <= models.keys()
    raw = {k for k in deps if k.startswith("raw_")}
    # the rule tables (dbt seeds) are assets too, under their names, with no upstream
    seeds = {p.stem for p in SEEDS_DIR.glob("*.csv")}
    for name in seeds:
        assert deps[name] == set(), name
        domain = ("rynn_vp" if "rvp" in name else "video_val" if "vv_" in name else "warehouse")
        assert groups[name] == domain, name
    for name, view in models.items():
        assert name in deps, name  # the view is an asset under its own name
        # upstream: the models and seeds it refs, the raw tables it reads (staging only),
        # nothing else
        assert deps[name] - raw - seeds == set(view.depends_on), name
        if deps[name] & raw:
            assert name.startswith("stg_") or name == "benchlake_status", name
        domain = ("rynn_vp" if "rvp" in name else "video_val" if "vv_" in name else "warehouse")
        assert groups[name] == domain, name
    # every raw table has a producer, except the few written by several assets
    assert {k for k in raw if not graph.get(dg.AssetKey.from_user_string(k)).is_materializable
            } == EXTERNAL


def test_dbt_tests_are_asset_checks_of_the_models():
    defs, graph, _, _ = _graph()
    checks_by_asset: dict[str, set[str]] = {}
    for key in graph.asset_check_keys:
        checks_by_asset.setdefault(key.asset_key.to_user_string(), set()).add(key.name)
    assert sum(len(v) for v in checks_by_asset.values()) > 250
    assert any(n.startswith("unique_combination_of_columns") for n in
               checks_by_asset["rvp_leaderboard"])
    assert any(n.startswith("accepted_values") for n in checks_by_asset["vv_scored_responses"])
    assert any(n.startswith("relationships") for n in checks_by_asset["rvp_judgments"])


def test_exports_follow_the_marts():
    _, _, deps, groups = _graph()
    marts = {v.name for v in views() if not v.name.startswith(("stg_", "int_"))}
    assert deps["benchlake_exports"] == marts
    assert groups["benchlake_exports"] == "reports"
