"""A snapshot of the asset graph: a refactor that drops an edge, a group or a check shows here."""

from dagster_project.runner import definitions

EXPECTED_DEPS = {
    "rvp_snapshot": set(),
    "rvp_checksums": {"rvp_snapshot"},
    "rvp_media": {"rvp_checksums"},
    "rvp_cases": {"rvp_checksums", "rvp_media"},
    "rvp_intervals": {"rvp_checksums", "rvp_media"},
    "rvp_candidates": {"rvp_cases"},
    "rvp_evidence_frames": {"rvp_cases", "rvp_intervals", "rvp_media", "rvp_candidates"},
    "rvp_storyboards": {"rvp_candidates"},
    "rvp_evaluations": {"rvp_candidates"},
    "rvp_gt_fingerprints": {"rvp_checksums", "rvp_cases"},
    "rvp_judgments": {"rvp_candidates", "rvp_evidence_frames", "rvp_storyboards",
                      "rvp_gt_fingerprints", "rvp_intervals"},
    "rvp_judge_packets": {"rvp_gt_fingerprints", "rvp_evaluations", "rvp_evidence_frames",
                          "rvp_storyboards", "rvp_gt_compilations", "rvp_intervals"},
    "vv_responses": {"vv_questions"},
    "vv_scored_responses": {"vv_responses", "vv_questions"},
    "vv_source": set(),
    "vv_questions": {"vv_source"},
    "vv_videos": {"vv_questions"},
    "vv_frame_plan": {"vv_videos"},
    "vv_frames": {"vv_frame_plan", "vv_questions"},
}
EXPECTED_GROUPS = (
    {k: "rynn_vp" for k in EXPECTED_DEPS if k.startswith("rvp_")}
    | {k: "video_val" for k in EXPECTED_DEPS if k.startswith("vv_")}
    | {"benchlake_catalog": "catalog"}
)
EXPECTED_CHECKS = {
    ("rvp_checksums", "rvp_checksums_verified", True),
    ("rvp_intervals", "rvp_intervals_per_case_in_range", False),
    ("rvp_media", "rvp_media_decodes_at_both_ends", False),
    ("vv_questions", "vv_videos_resolvable", False),
    ("vv_frame_plan", "vv_frame_plan_within_bounds", False),
    ("rvp_evaluations", "rvp_evidence_within_budget", True),
}
EXPECTED_PARTITIONS = {
    "rvp_evidence_frames": "rvp_case", "rvp_storyboards": "rvp_case",
    "rvp_evaluations": "rvp_case", "vv_frames": "static",
}


def test_asset_graph_snapshot():
    defs = definitions()
    graph = defs.resolve_asset_graph()
    deps, groups = {}, {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        name = key.to_user_string()
        deps[name] = {p.to_user_string() for p in node.parent_keys}
        groups[name] = node.group_name
    assert {k: v for k, v in deps.items() if k in EXPECTED_DEPS} == EXPECTED_DEPS
    # the catalog is rebuilt after every table
    tables = {k for k, g in groups.items() if g in ("rynn_vp", "video_val")}
    assert deps["benchlake_catalog"] == tables
    assert {k: v for k, v in groups.items() if k in EXPECTED_GROUPS} == EXPECTED_GROUPS
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


def test_every_parquet_asset_is_in_the_catalog_deps():
    graph = definitions().resolve_asset_graph()
    catalog_parents = {p.to_user_string() for p in graph.get(
        next(k for k in graph.get_all_asset_keys() if k.to_user_string() == "benchlake_catalog")
    ).parent_keys}
    # every table the views read; the exports (group reports) are written from the catalog
    parquet_assets = {k.to_user_string() for k in graph.get_all_asset_keys()
                      if "parquet" in (graph.get(k).kinds or set())
                      and graph.get(k).group_name != "reports"}
    assert parquet_assets <= catalog_parents
