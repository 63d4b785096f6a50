"""The generated videorl-video-val demo against the dataset card, checked from the raw files
(pyarrow + PyAV) rather than through the project's own readers."""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pyarrow.parquet as pq
import pytest

from benchlake_demo.video_val import (
    build_video_val_demo,
    demo_prefix_map,
    generate_full_size_parquets,
)
from dagster_project.video_val.schema import (
    CARD_VIDEO_SETTINGS,
    EXTRA_INFO_FIELDS,
    FOREIGN_PREFIX,
    POPULATED_EXTRA_INFO,
    PUBLISHED_ROWS,
    SOURCES,
    SYSTEM_PROMPT,
    USER_SUFFIX,
    VAL_SCHEMA,
)

OPTION = re.compile(r"^([A-Z])\. ")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_video_val_demo(tmp_path_factory.mktemp("vv") / "video-val")


@pytest.fixture(scope="module")
def rows(demo: Path) -> dict[str, list[dict[str, Any]]]:
    return {source: pq.read_table(demo / "parquets" / name).to_pylist()
            for name, source in SOURCES.items()}


@pytest.fixture(scope="module")
def probes(demo: Path, rows: dict[str, list[dict[str, Any]]]) -> dict[Path, dict[str, Any]]:
    """Every distinct remapped video, fully decoded once."""
    old, new = demo_prefix_map(demo).split("=", 1)
    found: dict[Path, dict[str, Any]] = {}
    for source_rows in rows.values():
        for row in source_rows:
            uri = row["videos"][0]["video"]
            assert uri.startswith(old + "/")
            path = Path(uri.replace(old, new, 1).removeprefix("file://"))
            if path in found:
                continue
            assert path.is_file(), path
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                frames = [f for f in container.decode(stream)]
                rate = Fraction(stream.average_rate)
                found[path] = {
                    "codec": stream.codec_context.name,
                    "width": frames[0].width,
                    "height": frames[0].height,
                    "frames": len(frames),
                    "seconds": float(len(frames) / rate),
                }
    return found


def split_user(content: str) -> tuple[list[str], list[str]]:
    """(question lines, option letters): the options are the LAST run of A., B., ... lines."""
    lines = content.split("\n")
    assert lines[0] == "<video>" and lines[-1] == USER_SUFFIX
    body = lines[1:-1]
    start = max(i for i, line in enumerate(body) if line.startswith("A. "))
    letters = [OPTION.match(line).group(1) for line in body[start:]]  # type: ignore[union-attr]
    assert letters == [chr(ord("A") + i) for i in range(len(letters))]
    assert start > 0, "question text missing"
    return body[:start], letters


def test_schema_and_counts(demo: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    for name, source in SOURCES.items():
        schema = pq.read_schema(demo / "parquets" / name)
        assert schema.names == VAL_SCHEMA.names
        assert schema.equals(VAL_SCHEMA, check_metadata=False)
        assert {r["data_source"] for r in rows[source]} == {source}
    assert sum(len(r) for r in rows.values()) >= 30
    assert (demo / "README.md").is_file()


def test_row_fields(rows: dict[str, list[dict[str, Any]]]) -> None:
    for source, source_rows in rows.items():
        for row in source_rows:
            assert row["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
            assert row["prompt"][1]["role"] == "user" and len(row["prompt"]) == 2
            assert row["images"] == []
            assert len(row["videos"]) == 1
            video = row["videos"][0]
            assert video["type"] == "video" and video["video"].startswith(FOREIGN_PREFIX + "/")
            assert {k: video[k] for k in CARD_VIDEO_SETTINGS} == CARD_VIDEO_SETTINGS
            assert row["ability"] == "video_understanding"
            gt = row["reward_model"]["ground_truth"]
            assert row["reward_model"]["style"] == "rule"
            extra = row["extra_info"]
            assert extra["reward_type"] == "multiple_choice" and extra["answer"] == gt
            for field in EXTRA_INFO_FIELDS[2:]:
                populated = field in POPULATED_EXTRA_INFO[source]
                assert (extra[field] is not None) == populated, (source, field)
                assert extra[field] != ""
            if source == "videomme_v1_test":
                assert extra["question_type"] in {"short", "medium", "long"}


def test_options_per_source(rows: dict[str, list[dict[str, Any]]]) -> None:
    counts: dict[str, Counter[int]] = {}
    answers: dict[str, set[str]] = {}
    multi_line: Counter[str] = Counter()
    trap = 0
    for source, source_rows in rows.items():
        counts[source], answers[source] = Counter(), set()
        for row in source_rows:
            question, letters = split_user(row["prompt"][1]["content"])
            gt = row["reward_model"]["ground_truth"]
            assert gt in letters
            counts[source][len(letters)] += 1
            answers[source].add(gt)
            multi_line[source] += len(question) > 1
            trap += any(OPTION.match(line) for line in question)
    assert set(counts["videomme_v1_test"]) == {4}
    assert counts["perceptioncomp_test"][6] == 1 and set(counts["perceptioncomp_test"]) == {5, 6}
    assert set(counts["video_holmes_test"]) == {6}
    assert answers["videomme_v1_test"] == set("ABCD")
    assert answers["perceptioncomp_test"] == set("ABCDEF")
    assert answers["video_holmes_test"] == set("ABCDEF")
    assert multi_line["perceptioncomp_test"] >= 3 and multi_line["video_holmes_test"] >= 3
    assert trap >= 2  # question lines that look like options


def test_videos(demo: Path, probes: dict[Path, dict[str, Any]]) -> None:
    cache = (demo / "cache").resolve()
    rels = [p.relative_to(cache).as_posix() for p in probes]
    assert 6 <= len(probes) <= 8
    assert sum(re.fullmatch(r"videomme/data/[A-Za-z0-9_-]{11}\.mp4", r) is not None
               for r in rels) >= 3
    for repo in ("hrinnnn--PerceptionComp", "TencentARC--Video-Holmes"):
        pattern = rf"datasets--{repo}/snapshots/[0-9a-f]{{40}}/videos/[^/]+\.mp4"
        assert any(re.fullmatch(pattern, r) for r in rels), repo
    assert all(p["codec"] == "h264" for p in probes.values())
    seconds = [p["seconds"] for p in probes.values()]
    assert any(s < 4 for s in seconds)
    assert any(4 <= s <= 64 for s in seconds)
    assert any(s > 70 for s in seconds)
    assert any(p["height"] > p["width"] for p in probes.values())
    assert any((p["width"], p["height"]) == (854, 480) for p in probes.values())


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic(demo: Path, tmp_path: Path) -> None:
    again = build_video_val_demo(tmp_path / "video-val")
    first, second = _files(demo), _files(again)
    assert sorted(first) == sorted(second)
    assert sum(name.endswith(".mp4") for name in first) >= 6
    assert first == second


def test_full_size(demo: Path, rows: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    paths = generate_full_size_parquets(tmp_path / "a")
    again = generate_full_size_parquets(tmp_path / "b")
    demo_uris = {r["videos"][0]["video"] for source_rows in rows.values() for r in source_rows}
    assert set(paths) == set(PUBLISHED_ROWS)
    for source, path in paths.items():
        assert path.name in SOURCES and SOURCES[path.name] == source
        table = pq.read_table(path)
        assert table.schema.equals(VAL_SCHEMA, check_metadata=False)
        assert table.num_rows == PUBLISHED_ROWS[source]
        full = table.to_pylist()
        assert {r["videos"][0]["video"] for r in full} <= demo_uris
        assert len({r["prompt"][1]["content"] for r in full}) == len(full)  # rows are distinct
        assert path.read_bytes() == again[source].read_bytes()
    assert sum(PUBLISHED_ROWS.values()) == 5645
    uris = {"videomme_v1_test": ["file:///x/a.mp4"], "perceptioncomp_test": ["file:///x/b.mp4"],
            "video_holmes_test": ["file:///x/c.mp4", "file:///x/d.mp4"]}
    custom = generate_full_size_parquets(tmp_path / "c", uris)
    holmes = pq.read_table(custom["video_holmes_test"]).to_pylist()
    assert [r["videos"][0]["video"] for r in holmes[:3]] == [
        "file:///x/c.mp4", "file:///x/d.mp4", "file:///x/c.mp4"]
