"""A snapshot of the asset graph: a refactor that drops an edge, a group or a check shows here."""

import re
from dataclasses import fields

import dagster as dg
import pytest

from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.runner import definitions
from dagster_project.settings import Settings
from dagster_project.warehouse.catalog import marts, nodes, seeds

# The Python assets (raw tables) and what each declares it reads.
EXPECTED_DEPS = {
    "raw_rvp_snapshot": {"rynn_vp_source"},  # an observed source: its files' identities
    "raw_rvp_checksums": {"raw_rvp_snapshot"},
    "raw_rvp_media": {"raw_rvp_checksums"},
    "raw_rvp_cases": {"raw_rvp_checksums", "raw_rvp_media"},
    "raw_rvp_intervals": {"raw_rvp_checksums", "raw_rvp_media"},
    "raw_rvp_candidates": {"raw_rvp_cases", "candidates_dir"},
    # the one Python asset that needs a SQL rule (Done label, clamping) declares the view
    "raw_rvp_evidence_frames": {"raw_rvp_cases", "raw_rvp_media", "raw_rvp_checksums",
                                "raw_rvp_candidates", "rvp_intervals"},
    "raw_rvp_storyboards": {"raw_rvp_candidates"},
    "raw_rvp_evaluations": {"raw_rvp_candidates"},
    "raw_rvp_gt_fingerprints": {"raw_rvp_checksums", "raw_rvp_cases", "rvp_prompts"},
    "raw_rvp_judgments": {"raw_rvp_cases", "raw_rvp_intervals", "raw_rvp_candidates",
                          "raw_rvp_evidence_frames", "raw_rvp_storyboards",
                          "raw_rvp_gt_fingerprints", "judgments_dir", "judge_judgments_dir"},
    # the judge reads the packets and checks its records against what the ingest checks with
    "raw_rvp_judge_calls": {"raw_rvp_judge_packets", "raw_rvp_cases", "raw_rvp_intervals",
                            "raw_rvp_candidates", "raw_rvp_evidence_frames",
                            "raw_rvp_storyboards", "raw_rvp_gt_fingerprints"},
    "raw_rvp_judge_packets": {"raw_rvp_cases", "raw_rvp_gt_fingerprints",
                              "raw_rvp_gt_compilations", "raw_rvp_evaluations",
                              "raw_rvp_evidence_frames", "raw_rvp_intervals",
                              "raw_rvp_storyboards", "rvp_prompts"},
    # each stage writes its part of the refusals as it refuses; the table comes after them all
    "raw_rvp_rejects": {"raw_rvp_checksums", "raw_rvp_media", "raw_rvp_cases",
                        "raw_rvp_candidates", "raw_rvp_evaluations"},
    "raw_vv_source": {"video_val_source"},
    "raw_vv_rejects": {"raw_vv_source"},
    "raw_vv_questions": {"raw_vv_source"},
    "raw_vv_videos": {"raw_vv_questions"},
    "raw_vv_frame_plan": {"raw_vv_videos", "raw_vv_questions"},
    "raw_vv_frames": {"raw_vv_frame_plan", "raw_vv_questions"},
    # verl dumps are resolved against the questions
    "raw_vv_responses": {"raw_vv_questions", "responses_dir"},
    "raw_vv_scored_responses": {"raw_vv_responses", "raw_vv_questions"},
    # verl's metrics of benchlake's own scores follow the default scoring policy (a rule table)
    "raw_vv_verl_metrics": {"raw_vv_scored_responses", "vv_scoring_policies"},
}
EXPECTED_CHECKS = {
    ("raw_rvp_checksums", "rvp_checksums_verified", False),
    ("raw_rvp_intervals", "rvp_intervals_per_case_in_range", False),
    ("raw_rvp_media", "rvp_media_decodes_at_both_ends", False),
    ("raw_vv_questions", "vv_videos_resolvable", False),
    ("raw_vv_frame_plan", "vv_frame_plan_within_bounds", False),
    ("raw_rvp_evaluations", "rvp_evidence_within_budget", False),
}
# The raw table no asset writes: the run markers, written by every asset as it starts and
# finishes. Declared with its description and group.
EXTERNAL = {"raw_status_markers": "warehouse"}


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
    for assets_def in [*defs.asset_checks, *defs.assets]:
        for spec in getattr(assets_def, "check_specs", []):
            checks.add((spec.asset_key.to_user_string(), spec.name, spec.blocking))
    assert checks >= EXPECTED_CHECKS
    # no Dagster partitions: per-case and per-video work fans out inside the asset's step
    assert not [k for k in graph.get_all_asset_keys() if graph.get(k).partitions_def]
    assert {s.name for s in defs.sensors} == {"rvp_judgments_sensor",
                                              "rvp_judge_judgments_sensor", "vv_responses_sensor"}
    # what `benchlake judge` launches: a job of the code location (the packets, then the judge)
    judge_job = defs.resolve_job_def("rvp_judge_job")
    assert {k.to_user_string() for k in judge_job.asset_layer.selected_asset_keys} == {
        "raw_rvp_judge_packets", "raw_rvp_judge_calls", "raw_rvp_judge_rejects"}
    assert {s.name for s in defs.schedules} == {"rescoring_daily"}


def test_every_input_is_an_observed_source():
    _, graph, deps, groups = _graph()
    sources = {k.to_user_string() for k in graph.get_all_asset_keys()
               if graph.get(k).is_observable}
    assert sources == {"rynn_vp_source", "candidates_dir", "judgments_dir",
                       "judge_judgments_dir", "rvp_prompts", "video_val_source",
                       "responses_dir"}
    for name in sources:
        assert graph.get(dg.AssetKey(name)).description
        assert groups[name] in ("rynn_vp", "video_val")


def test_every_view_and_rule_table_is_an_asset_with_its_lineage_and_group():
    _, graph, deps, groups = _graph()
    models = {n.name: n for n in nodes()}
    assert len(models) > 80
    assert {"rvp_leaderboard", "rvp_by_scene", "vv_scores", "vv_best_checkpoints",
            "rvp_dataset_stats", "benchlake_status"} <= models.keys()
    raw = {k for k in deps if k.startswith("raw_")}
    # the rule tables (dbt seeds) are assets too, under their names, with no upstream
    for name in seeds():
        assert deps[name] == set(), name
    for name, node in models.items():
        assert name in deps, name  # the model is an asset under its own name
        # upstream: the models it refs, the raw tables it reads (staging only), nothing else
        assert deps[name] - raw == set(node.depends_on), name
        if deps[name] & raw:
            assert name.startswith("stg_") or name == "benchlake_status", name
        domain = ("rynn_vp" if "rvp" in name else "video_val" if "vv_" in name else "warehouse")
        assert groups[name] == domain, name
    # every raw table has a producer, except the few written by several assets, which are
    # declared in their domain's group with a description
    external = {k for k in raw if not graph.get(dg.AssetKey(k)).is_materializable}
    assert external == set(EXTERNAL)
    for key, group in EXTERNAL.items():
        assert groups[key] == group
        assert graph.get(dg.AssetKey(key)).description


def test_no_two_assets_share_a_label_and_each_suite_has_its_leaderboard():
    _, graph, _, groups = _graph()
    labels = [k.path[-1] for k in graph.get_all_asset_keys()]
    assert len(labels) == len(set(labels)), sorted(n for n in labels if labels.count(n) > 1)
    # what the UI's search finds for "leaderboard": one per suite, in its group
    boards = {n: groups[n] for n in labels if "leaderboard" in n}
    assert boards == {"rvp_leaderboard": "rynn_vp", "vv_leaderboard": "video_val"}


def test_dbt_tests_are_asset_checks_of_the_models():
    defs, graph, _, _ = _graph()
    checks_by_asset: dict[str, set[str]] = {}
    for key in graph.asset_check_keys:
        checks_by_asset.setdefault(key.asset_key.to_user_string(), set()).add(key.name)
    assert sum(len(v) for v in checks_by_asset.values()) > 250
    assert any(n.startswith("unique_combination_of_columns") for n in
               checks_by_asset["rvp_leaderboard"])
    assert any(n.startswith("accepted_values") for n in checks_by_asset["vv_breakdowns"])
    # the response tables are checked part by part, in Python (video_val/part_checks.py)
    assert "vv_scored_parts_valid" in checks_by_asset["raw_vv_scored_responses"]
    assert any(n.startswith("relationships") for n in checks_by_asset["rvp_judgments"])


def test_the_second_dbt_op_selects_what_its_names_would():
    """The views op's YAML selector (`_views_selector`, fast) selects exactly what the list of
    its models' names selects (dbt's eager selection, one pass per name): the same models, and
    every test that reads one of them, those that also read a model of the rules op included;
    and every data test of the project is a check of one of the two ops."""
    from dagster_dbt.utils import _select_unique_ids_from_manifest

    from dagster_project.defs.warehouse import assets

    by_names = _select_unique_ids_from_manifest(
        " ".join(sorted(assets._VIEWS)), "", "", assets._MANIFEST)
    by_selector = _select_unique_ids_from_manifest("", "", "benchlake_views", assets._SELECTABLE)
    assert by_selector == by_names
    shared = [uid for uid in by_selector if uid.startswith("test.")
              and {assets._NODES[p]["name"] for p in assets._NODES[uid]["depends_on"]["nodes"]}
              & assets._RULES]
    assert any("rvp_cases" in uid for uid in shared)  # relationships to rvp_cases: kept
    checks = {k.name for op in (assets.benchlake_rules, assets.benchlake_views)
              for k in op.check_keys}
    tests = {n["name"] for n in assets._NODES.values() if n["resource_type"] == "test"}
    assert tests <= checks


def test_the_graph_of_steps_has_no_cycle():
    """A Python asset that reads a model sits between dbt ops, never inside one: the asset
    job's steps are then one `dbt build` per dbt op (Dagster splits an op it must break a
    cycle through into a step per layer)."""
    defs, graph, _, _ = _graph()
    job = defs.resolve_implicit_global_asset_job_def()
    ops = [n.name for n in job.graph.node_defs]
    assert {"benchlake_rules", "benchlake_views"} <= set(ops)
    assert not [n for n in ops if re.search(r"_\d+$", n)], ops  # no op split into layers
    tagged = {n.name for n in nodes() if "python_input" in n.tags}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if key.path[-1].startswith("raw_") and node.is_materializable:
            for parent in node.parent_keys:
                if parent.path[-1] in {n.name for n in nodes() if n.resource_type == "model"}:
                    assert parent.path[-1] in tagged, (key, parent)


def test_exports_follow_the_marts_and_rescoring_follows_the_rules():
    defs, graph, deps, groups = _graph()
    assert deps["benchlake_exports"] == set(marts())
    assert groups["benchlake_exports"] == "reports"
    rescoring = defs.resolve_job_def("rescoring_job")
    selected = {k.to_user_string() for k in rescoring.asset_layer.selected_asset_keys}
    # what reads a rule table is recomputed, Python included; ingest and evidence are not
    assert "raw_vv_verl_metrics" in selected
    assert {"rvp_leaderboard", "vv_scores", "benchlake_exports", *seeds()} <= selected
    assert not selected & {"raw_rvp_snapshot", "raw_vv_responses", "raw_rvp_evidence_frames"}


def test_the_settings_resource_is_typed_and_mirrors_the_settings():
    assert [f.name for f in fields(Settings)] == list(BenchlakeSettings.model_fields)
    resource = BenchlakeSettings(home="/tmp/x", rynn_vp_media="metadata")
    assert resource.settings().rynn_vp_media == "metadata"
    try:
        BenchlakeSettings(home="/tmp/x", rynn_vp_media="everything")
    except Exception as exc:  # noqa: BLE001 - pydantic's validation error
        assert "rynn_vp_media" in str(exc)
    else:
        raise AssertionError("an unknown RYNN_VP_MEDIA was accepted")


def test_parted_assets_carry_the_code_version_their_parts_are_keyed_by():
    """Bumping a version constant re-keys the parts and shows the asset stale in the UI."""
    from dagster_project.rynn_vp.evidence import EVIDENCE_POLICY_VERSION
    from dagster_project.rynn_vp.judgment_parts import CHECKS_VERSION
    from dagster_project.rynn_vp.packets import PACKETS_VERSION
    from dagster_project.video_val.frames import FRAMES_VERSION
    from dagster_project.video_val.responses import PARSER_VERSION
    from dagster_project.video_val.scoring import SCORING_VERSION
    from dagster_project.video_val.verl_metrics import METRICS_VERSION

    expected = {
        "raw_vv_responses": PARSER_VERSION, "raw_vv_response_rejects": PARSER_VERSION,
        "raw_vv_scored_responses": SCORING_VERSION, "raw_vv_verl_metrics": METRICS_VERSION,
        "raw_vv_frames": FRAMES_VERSION, "raw_rvp_judgments": CHECKS_VERSION,
        "raw_rvp_judgment_rejects": CHECKS_VERSION,
        **{f"raw_{t}": EVIDENCE_POLICY_VERSION
           for t in ("rvp_evidence_frames", "rvp_storyboards", "rvp_evaluations")},
        "raw_rvp_judge_packets": PACKETS_VERSION,
    }
    _, graph, _, _ = _graph()
    got = {name: graph.get(dg.AssetKey(name)).code_version for name in expected}
    assert got == expected


@pytest.mark.parametrize("select, says", [
    ("key:rvp_leaderbord", "no asset rvp_leaderbord; did you mean rvp_leaderboard"),
    ("rvp_leaderbord+", "no asset rvp_leaderbord; did you mean rvp_leaderboard"),
    ("group:videoval", "no group videoval; did you mean video_val?"),
    # a typo beside a name that exists must not shrink the run silently
    ("key:rvp_cases or key:vv_scroes", "no asset vv_scroes; did you mean vv_scores"),
    ("key:nonexistent_asset_xyz", "no asset nonexistent_asset_xyz;"),
    ("key:raw_rvp_cases+ and", "Invalid selection string"),
])
def test_a_bad_selection_names_a_few_close_matches(select, says):
    from dagster_project.runner import definitions, selected_keys

    with pytest.raises(ValueError) as error:
        selected_keys(definitions(), select)
    message = str(error.value)
    assert says in message
    assert len(message) < 300 and "\n" not in message  # a few names, never the whole catalog
