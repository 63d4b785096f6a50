"""Rynn-VP ingestion end to end on the demo, checked against figures computed here from the raw
files (JSON + PyAV metadata), independently of the project's code."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import av
import duckdb
import pytest

from benchlake_demo.rynn_vp import load_spec
from dagster_project.warehouse.catalog import connect

DONE = {"Done", "Done."}


def raw_figures(root: Path) -> dict[str, float]:
    """The card's statistics, recomputed from the raw snapshot files."""
    cases = sorted(p for p in (root / "cases").iterdir() if p.is_dir())
    instructions, per_case, durations, widths, heights = [], [], [], [], []
    overlaps = excess_all = excess_big = 0
    max_excess = 0.0
    finals: list[str] = []
    ws = 0
    tuples, tuples_no_source = set(), set()
    scenes: dict[str, int] = {}
    groups: dict[str, int] = {}
    non_done = total = 0
    for case in cases:
        task = json.loads((case / "task.json").read_text())
        ann = json.loads((case / "gt_annotations.json").read_text())
        instructions.append(task["instruction"])
        with av.open(str(case / "gt.mp4")) as c:
            s = c.streams.video[0]
            dur = float(s.duration * s.time_base) if s.duration else c.duration / 1e6
            widths.append(s.codec_context.width)
            heights.append(s.codec_context.height)
        durations.append(dur)
        items = list(ann["planning"].items())
        per_case.append(len(items))
        prev_end = None
        for key, label in items:
            a, b = key.split("-")
            start, end = float(a.rstrip("s")), float(b.rstrip("s"))
            total += 1
            non_done += label not in DONE
            if prev_end is not None and start < prev_end:
                overlaps += 1
            prev_end = end
            for t in (start, end):
                if t > dur:
                    excess_all += 1
                    excess_big += (t - dur) > 0.2
                    max_excess = max(max_excess, t - dur)
        finals.append(items[-1][1])
        ws += ann["task"] != ann["task"].rstrip()
        parts = case.name.split("-")
        source, scene, room = parts[0], "-".join(parts[1:-4]), parts[-4]
        tuples.add((source, scene, room))
        tuples_no_source.add((scene, room))
        scenes[scene] = scenes.get(scene, 0) + 1
        groups[source] = groups.get(source, 0) + 1
    figures = {
        "task_instances": len(cases), "unique_instructions": len(set(instructions)),
        "gt_videos": len(cases), "initial_images": len(cases), "annotation_files": len(cases),
        "planning_intervals": total, "non_done_intervals": non_done,
        "intervals_per_case_min": min(per_case), "intervals_per_case_max": max(per_case),
        "intervals_per_case_mean": statistics.mean(per_case),
        "intervals_per_case_median": statistics.median(per_case),
        "gt_width_min": min(widths), "gt_width_max": max(widths),
        "gt_height_min": min(heights), "gt_height_max": max(heights),
        "gt_duration_min_s": min(durations), "gt_duration_max_s": max(durations),
        "gt_duration_mean_s": statistics.mean(durations),
        "gt_duration_median_s": statistics.median(durations),
        "gt_duration_total_min": sum(durations) / 60,
        "gt_videos_le_60s": sum(d <= 60 for d in durations),
        "distinct_source_scene_room": len(tuples), "distinct_scene_room": len(tuples_no_source),
        "overlapping_intervals": overlaps, "endpoints_exceeding_duration": excess_all,
        "endpoints_exceeding_duration_by_over_0_2s": excess_big,
        "max_endpoint_excess_s": max_excess,
        "terminal_done": finals.count("Done"), "terminal_done_period": finals.count("Done."),
        "nonstandard_final_labels": sum(f not in DONE for f in finals),
        "task_text_trailing_whitespace": ws,
    }
    figures.update({f"scene:{k}": v for k, v in scenes.items()})
    figures.update({f"source_group:{k}": v for k, v in groups.items()})
    return {k: float(v) for k, v in figures.items()}


def stats(settings) -> dict[str, float]:
    con = connect(settings.home)
    return dict(con.execute("SELECT property, value FROM rvp_dataset_stats").fetchall())


def test_dataset_stats_equal_figures_computed_from_raw_files(demo_warehouse):
    expected = raw_figures(Path(demo_warehouse.rynn_vp_source_or_demo()))
    got = stats(demo_warehouse)
    assert set(got) == set(expected)
    for prop, value in expected.items():
        assert got[prop] == pytest.approx(value, abs=1e-6), prop


def test_demo_reproduces_the_card_quirks(demo_warehouse):
    got = stats(demo_warehouse)
    assert got["task_instances"] >= 12
    assert {k for k in got if k.startswith("scene:")} == {
        "scene:Bedroom", "scene:Living_Room", "scene:Office_Space", "scene:Kitchen",
        "scene:Bathroom", "scene:Home Office"}
    assert {k for k in got if k.startswith("source_group:")} == {
        f"source_group:{g}" for g in ("source1_1", "source1_2", "source2_1", "source2_2")}
    assert got["unique_instructions"] < got["task_instances"]  # repeated instructions
    assert got["intervals_per_case_min"] == 6 and got["intervals_per_case_max"] == 24
    assert got["overlapping_intervals"] >= 1
    assert got["endpoints_exceeding_duration"] > got["endpoints_exceeding_duration_by_over_0_2s"]
    assert got["endpoints_exceeding_duration_by_over_0_2s"] >= 1
    assert got["terminal_done"] >= 1 and got["terminal_done_period"] >= 1
    assert got["nonstandard_final_labels"] == 1
    assert got["task_text_trailing_whitespace"] >= 1


def test_anomaly_views_list_each_quirk(demo_warehouse):
    con = connect(demo_warehouse.home)
    overlaps = con.execute("SELECT case_id, ordinal, overlap_s FROM rvp_interval_overlaps").fetchall()
    assert sorted(round(o[2], 3) for o in overlaps) == [0.1, 0.1, 0.3]
    labels = con.execute("SELECT label FROM rvp_nonstandard_labels").fetchall()
    assert labels == [("Down.",)]
    # `Down.` is kept as written and is not a done label.
    assert con.execute("SELECT bool_or(is_done_label) FROM rvp_intervals WHERE label = 'Down.'"
                       ).fetchone() == (False,)
    ws = con.execute("SELECT annotation_task_raw, annotation_task_normalized, "
                     "task_matches_instruction FROM rvp_whitespace_tasks").fetchall()
    assert ws and all(raw != norm and raw.rstrip() == norm and ok for raw, norm, ok in ws)
    excess = con.execute("SELECT endpoint, excess_s, over_0_2s FROM rvp_endpoint_excesses"
                         ).fetchall()
    assert any(big for *_, big in excess) and any(not big for *_, big in excess)


def _content_words(text: str) -> set[str]:
    small = {"the", "and", "put", "off", "its", "then", "with", "into", "from", "next", "both",
             "that"}
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3} - small


def test_demo_interval_labels_belong_to_their_own_instruction(demo_warehouse):
    """Each GT interval of a demo case describes a step of that case's task: its label is one
    of the spec's actions for the case's instruction, the actions come in their order and all of
    them are used, and every label names something its instruction names (no "Open the chair
    to the left" under "take the pillow cover off the pillow")."""
    actions = load_spec()["actions"]
    con = connect(demo_warehouse.home)
    rows = con.execute("SELECT c.case_id, c.instruction, list(i.label ORDER BY i.ordinal) "
                       "FROM rvp_cases AS c JOIN rvp_intervals AS i USING (case_id) "
                       "WHERE NOT i.is_done_label AND i.label <> 'Down.' GROUP BY ALL").fetchall()
    assert rows
    for case_id, instruction, labels in rows:
        steps = actions[instruction]
        assert [steps.index(label) for label in labels] == sorted(
            steps.index(label) for label in labels), case_id
        assert set(labels) == set(steps), case_id
        for label in labels:
            assert _content_words(label) & _content_words(instruction), (case_id, label)


def test_intervals_keep_order_and_clamp_into_the_decodable_range(demo_warehouse):
    con = connect(demo_warehouse.home)
    rows = con.execute("""
        SELECT i.case_id, i.ordinal, i.end_s, i.extract_end_s, m.first_frame_s, m.last_frame_s
        FROM rvp_intervals i JOIN rvp_media m USING (case_id) ORDER BY case_id, ordinal
    """).fetchall()
    root = Path(demo_warehouse.rynn_vp_source_or_demo())
    for case_id in {r[0] for r in rows}:
        ann = json.loads((root / "cases" / case_id / "gt_annotations.json").read_text())
        keys = list(ann["planning"])
        ordinals = [r[1] for r in rows if r[0] == case_id]
        assert ordinals == list(range(1, len(keys) + 1))
    for _, _, end, clamped, first, last in rows:
        assert first <= clamped <= last
        assert clamped == pytest.approx(min(max(end, first), last))
    assert any(end > last for _, _, end, _, _, last in rows)  # clamping actually happened


def test_media_probe_matches_the_files(demo_warehouse):
    con = connect(demo_warehouse.home)
    rows = con.execute("SELECT case_id, fps, frame_count, width, height, codec, duration_s, "
                       "last_frame_s FROM rvp_media").fetchall()
    root = Path(demo_warehouse.rynn_vp_source_or_demo())
    assert len(rows) == len(list((root / "cases").iterdir()))
    for case_id, fps, frames, w, h, codec, duration, last in rows:
        with av.open(str(root / "cases" / case_id / "gt.mp4")) as c:
            decoded = sum(1 for _ in c.decode(video=0))
        assert (fps, w, h, codec) == (25.0, 320, 180, "h264")
        assert frames == decoded
        assert last == pytest.approx((decoded - 1) / fps)
        assert duration == pytest.approx(decoded / fps)


def test_no_rejects_on_the_clean_demo(demo_warehouse):
    con = connect(demo_warehouse.home)
    assert con.execute("SELECT count(*) FROM rvp_rejects").fetchone() == (0,)
    statuses = con.execute("SELECT DISTINCT status FROM stg_rvp_checksums").fetchall()
    assert statuses == [("ok",)]


def test_catalog_opens_from_another_directory_with_the_stock_cli(demo_warehouse, tmp_path):
    catalog = demo_warehouse.catalog_path
    assert catalog.exists()
    # Python client, from an unrelated working directory, read-only.
    code = ("import duckdb,sys; c=duckdb.connect(sys.argv[1], read_only=True); "
            "print(c.execute('select count(*) from rvp_cases').fetchone()[0])")
    done = subprocess.run([__import__("sys").executable, "-c", code, str(catalog)],
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    assert int(done.stdout) >= 12
    # The stock duckdb CLI (a different DuckDB release than the library that wrote it).
    cli = Path(__import__("sys").executable).parent / "duckdb"
    done = subprocess.run([str(cli), "-readonly", "-csv", str(catalog)], cwd=tmp_path,
                          input="SELECT value FROM rvp_dataset_stats "
                                "WHERE property = 'planning_intervals';",
                          capture_output=True, text=True, check=True)
    assert float(done.stdout.split()[-1]) == stats(demo_warehouse)["planning_intervals"]


def test_catalog_holds_views_and_the_rule_tables_only(demo_warehouse):
    from dagster_project.warehouse.catalog import seeds
    from dagster_project.warehouse.project import DBT_PROJECT

    con = duckdb.connect(str(demo_warehouse.catalog_path), read_only=True)
    # nothing only it holds: every table is a seed, from its CSV in sql/seeds/, or a model dbt
    # materializes as a table from the Parquet (rebuilt when the Parquet changes; an incremental
    # one kept a checkpoint at a time)
    manifest = json.loads(DBT_PROJECT.manifest_path.read_text())
    materialized = {n["name"] for n in manifest["nodes"].values()
                    if n["resource_type"] == "model"
                    and n["config"]["materialized"] in ("table", "incremental")}
    assert {"int_vv_checkpoint_scores", "int_vv_pair_comparisons", "rvp_leaderboard"} <= materialized
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert tables == set(seeds()) | materialized
    views = {r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {"rvp_cases", "rvp_intervals", "rvp_media", "rvp_dataset_stats", "rvp_rejects"} <= views


def test_demo_generation_is_deterministic(demo_inputs, tmp_path):
    from benchlake_demo.rynn_vp import build_rynn_vp_demo

    other = build_rynn_vp_demo(tmp_path / "again")
    ours = Path(demo_inputs.rynn_vp_source_or_demo())
    assert (other / "SHA256SUMS.txt").read_bytes() == (ours / "SHA256SUMS.txt").read_bytes()
    listed = (ours / "SHA256SUMS.txt").read_text().splitlines()
    files = sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*") if p.is_file())
    assert sorted(line.split("  ", 1)[1] for line in listed) == [
        f for f in files if f != "SHA256SUMS.txt"]


def test_contract_columns_present(demo_warehouse):
    con = connect(demo_warehouse.home)
    required = {
        "rvp_cases": "case_id, instruction, source_group, scene, room_id, task_no, variant_no, "
                     "instance_no, has_explicit_plan",
        "rvp_intervals": "case_id, ordinal, interval, start_s, end_s, label, is_done_label",
        "rvp_media": "case_id, duration_s, fps, width, height, frame_count, codec",
        "rvp_dataset_stats": "property, value",
        "rvp_rejects": "source_file, case_id, reason",
    }
    for view, cols in required.items():
        have = {d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description}
        assert {c.strip() for c in cols.split(",")} <= have, view
    plan = con.execute("SELECT count(*) FILTER (has_explicit_plan) FROM rvp_cases").fetchone()
    assert plan == (1,)
