"""One home, many corruptions at once, one `benchlake materialize` (the user's command, in its own
process): every refusal names its file and reason, the valid rest flows, the run succeeds and
says what it refused, no statistic is NaN, and nothing outside the configured roots is read.

The classes: corrupted media and JSON, bad intervals, wrong checksums, unlisted and extra files
(tests/rynn_vp/test_bad_input.py's mutations, so they keep holding together with the rest),
symbolic links out of the snapshot and the candidates folder (to a valid case elsewhere and to
/etc), non-video candidates, a single valid record of a new judge run, malformed / mistyped /
oversized judgment records, records and candidates of a refused case, a duplicated val row,
garbage and unknown-uid responses. Kills are in tests/cli/test_kill.py."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_project.warehouse.catalog import connect, view_names
from tests.conftest import copy_home
from tests.rynn_vp.test_bad_input import EXPECTED, _break_snapshot

pytestmark = pytest.mark.slow
BENCHLAKE = str(Path(sys.executable).with_name("benchlake"))
SOLO_RUN = "judge-run-solo"
# Names /etc holds on every Debian-like machine: none may appear in any table.
ETC_NAMES = ("passwd", "hostname", "os-release")


def _first_line_of(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


@pytest.fixture(scope="module")
def hostile(demo_warehouse, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    settings = copy_home(demo_warehouse, root / "home")
    demo = settings.home / "demo"
    outside = root / "outside"  # a place no setting names
    outside.mkdir()
    snapshot, candidates = demo / "Rynn-VP", demo / "candidates"
    judgments, responses = demo / "judgments", demo / "responses"
    done: dict[str, str] = {}

    # --- the snapshot: the mutations that already hold, then links out of it
    broken = _break_snapshot(snapshot)
    cases = sorted(p.name for p in (snapshot / "cases").iterdir()
                   if p.is_dir() and p.name not in broken.values())
    spare = cases[-1]
    shutil.copytree(snapshot / "cases" / spare, outside / "case-elsewhere")
    escaped_case = spare[:-3] + "901"  # a valid-looking id whose folder is a link out
    (snapshot / "cases" / escaped_case).symlink_to(outside / "case-elsewhere")
    (snapshot / "cases" / (spare[:-3] + "902")).symlink_to("/etc")
    done["escaped_case"] = escaped_case

    # --- candidates: a refused case's candidate, non-videos, links out
    systems = sorted(p.name for p in candidates.iterdir())
    video_system = next(s for s in systems if (candidates / s / cases[0] / "candidate.mp4")
                        .is_file())
    text, empty, linked = cases[0], cases[1], cases[2]
    (candidates / video_system / text / "candidate.mp4").write_text(
        "this is not a video, only a note\n" * 20)
    (candidates / video_system / empty / "candidate.mp4").write_bytes(b"")
    real = candidates / video_system / linked / "candidate.mp4"
    shutil.copy2(real, outside / "elsewhere.mp4")
    real.unlink()
    real.symlink_to(outside / "elsewhere.mp4")
    shutil.copytree(candidates / video_system, outside / "system-elsewhere")
    (candidates / "linked-system").symlink_to(outside / "system-elsewhere")
    (candidates / "etc-system").symlink_to("/etc")
    done |= {"video_system": video_system, "text": text, "empty": empty, "linked": linked}

    # --- judgments: one valid record of a new judge run, and bad ones
    record = next(r for r in map(json.loads, (judgments / "judge-run-a.jsonl").read_text()
                                 .splitlines()) if r["case_id"] in cases)
    solo = {**record, "judge_run_id": SOLO_RUN}
    (judgments / f"{SOLO_RUN}.jsonl").write_text(json.dumps(solo) + "\n")
    refused_case = broken["truncated_mp4"]
    of_refused = next(r for r in map(json.loads, (judgments / "judge-run-a.jsonl").read_text()
                                     .splitlines()) if r["case_id"] == refused_case)
    mistyped = {**record, "judge_run_id": "judge-run-bad", "attempt": 2,
                "metrics": {**record["metrics"], "PI-1": "high"}}
    oversized = {**record, "judge_run_id": "judge-run-bad", "attempt": 3,
                 "notes": "x" * (8 * 1024 * 1024)}
    (judgments / "judge-run-bad.jsonl").write_text("\n".join([
        '{"system": "veo-sim", "case_id": ',  # malformed JSON
        json.dumps(mistyped), json.dumps(oversized),
        json.dumps({**of_refused, "judge_run_id": "judge-run-bad", "attempt": 4})]) + "\n")
    done |= {"solo_case": record["case_id"], "refused_case": refused_case}

    # --- the val suite: a duplicated row, garbage and unknown-uid responses
    parquet = next((demo / "video-val" / "parquets").glob("videomme*.parquet"))
    table = pq.read_table(parquet)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), parquet)
    done["duplicate_uid"] = f"{table.column('data_source')[0].as_py()}:{table.num_rows}"
    good = json.loads((responses / "base-rl.jsonl").read_text().splitlines()[0])
    (responses / "hostile.jsonl").write_text("\n".join([
        "not json at all",
        json.dumps({**good, "run_id": "hostile", "uid": "videomme_test:999999"}),
        json.dumps({**good, "run_id": "hostile"})]) + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHLAKE_")}
    env["BENCHLAKE_HOME"] = str(settings.home)
    run = subprocess.run([BENCHLAKE, "materialize"], env=env, capture_output=True, text=True,
                         timeout=1800)
    return run, connect(settings.home), done, broken, settings.home


def test_the_run_succeeds_and_ends_with_what_it_refused(hostile):
    run, *_ = hostile
    assert run.returncode == 0, run.stderr[-4000:]
    tail = run.stderr[run.stderr.index("materialized "):]
    assert "refused (the rest was accepted" in tail
    for view in ("rvp_rejects", "rvp_judgment_rejects", "vv_response_rejects"):
        assert f"  {view}: " in tail, tail
    assert "  vv_rejects: " not in tail  # a noted duplicate row is kept, not refused


def test_no_statistic_is_nan_or_infinite_in_any_view(hostile):
    _, con, *_ = hostile
    bad = []
    for view in view_names(con):
        cols = [c for c, t in con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ?", [view]).fetchall() if t in ("DOUBLE", "FLOAT")]
        if cols:
            found = con.execute(f"SELECT {', '.join(f'count(*) FILTER (isnan({c}) OR isinf({c}))' for c in cols)} FROM {view}").fetchone()  # noqa: E501
            bad += [f"{view}.{c}" for c, n in zip(cols, found, strict=True) if n]
    assert bad == []
    # the single record of a new judge run is accepted and scored
    assert con.execute("SELECT count(*) FROM rvp_judgments WHERE judge_run_id = ?",
                       [SOLO_RUN]).fetchone()[0] == 1


def test_sql_json_output_is_json(hostile):
    *_, home = hostile
    env = {**os.environ, "BENCHLAKE_HOME": str(home)}
    out = subprocess.run([BENCHLAKE, "sql", "--format", "json",
                          "SELECT * FROM rvp_judge_agreement"], env=env, capture_output=True,
                         text=True, check=True).stdout
    rows = json.loads(out)  # a bare NaN would not parse
    assert all(not (isinstance(v, float) and not math.isfinite(v))
               for r in rows for v in (r.values() if isinstance(r, dict) else r))


@pytest.mark.parametrize("mutation", list(EXPECTED))
def test_each_snapshot_problem_is_refused_with_its_file_and_reason(hostile, mutation):
    _, con, _, broken, _ = hostile
    filename, words = EXPECTED[mutation]
    rows = con.execute("SELECT source_file, reason FROM rvp_rejects WHERE case_id = ?",
                       [broken[mutation]]).fetchall()
    assert any(src.endswith(filename) and words in reason for src, reason in rows), rows


def test_links_out_of_the_snapshot_are_refused_and_never_read(hostile):
    _, con, done, *_ = hostile
    escaped = done["escaped_case"]
    assert con.execute("SELECT count(*) FROM rvp_cases WHERE case_id = ?",
                       [escaped]).fetchone() == (0,)
    reasons = [r for (r,) in con.execute("SELECT reason FROM rvp_rejects WHERE source_file "
                                         "LIKE ?", [f"%{escaped}%"]).fetchall()]
    assert reasons and all("link" in r and "outside" in r for r in reasons), reasons


def test_nothing_of_etc_is_listed_anywhere(hostile):
    _, con, *_ = hostile
    for view in ("rvp_rejects", "rvp_candidates", "rvp_evaluations"):
        text = json.dumps(con.execute(f"SELECT * FROM {view}").fetchall(), default=str)
        assert not [n for n in ETC_NAMES if f"/{n}" in text], view


def test_links_out_of_the_candidates_are_refused_and_never_decoded(hostile):
    _, con, done, *_ = hostile
    assert con.execute("SELECT count(*) FROM rvp_evaluations WHERE system IN "
                       "('linked-system', 'etc-system')").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM rvp_evaluations WHERE system = ? AND case_id = ?",
                       [done["video_system"], done["linked"]]).fetchone() == (0,)
    reasons = [r for (r,) in con.execute(
        "SELECT reason FROM rvp_rejects WHERE stage = 'rvp_candidates' AND "
        "(source_file LIKE '%linked-system%' OR source_file LIKE '%etc-system%' "
        "OR source_file LIKE ?)", [f"%{done['linked']}/candidate.mp4"]).fetchall()]
    assert len(reasons) >= 3 and all("link" in r for r in reasons), reasons


@pytest.mark.parametrize("which, words", [("text", "text"), ("empty", "empty")])
def test_a_non_video_candidate_says_what_it_is(hostile, which, words):
    _, con, done, *_ = hostile
    (reason,) = con.execute(
        "SELECT reason FROM rvp_rejects WHERE stage = 'rvp_candidates' AND source_file LIKE ?",
        [f"%{done['video_system']}/{done[which]}/candidate.mp4"]).fetchone()
    assert words in reason and "moov atom" not in reason


def test_dependents_of_a_refused_case_name_the_refusal(hostile):
    _, con, done, *_ = hostile
    case = done["refused_case"]
    candidates = [r for (r,) in con.execute(
        "SELECT reason FROM rvp_rejects WHERE stage = 'rvp_candidates' AND case_id = ?",
        [case]).fetchall()]
    judged = [r for (r,) in con.execute(
        "SELECT reason FROM rvp_judgment_rejects WHERE reason LIKE ?",
        [f"%{case}%"]).fetchall()]
    assert candidates and all(r.startswith("case refused at ") for r in candidates), candidates
    assert judged and all("case refused at " in r for r in judged), judged


def test_bad_judgment_records_are_refused_with_their_line(hostile):
    _, con, *_ = hostile
    rows = con.execute("SELECT line, reason FROM rvp_judgment_rejects "
                       "WHERE source_file LIKE '%judge-run-bad.jsonl' ORDER BY line").fetchall()
    assert [line for line, _ in rows] == [1, 2, 3, 4], rows
    assert "JSON" in rows[0][1] and "PI-1" in rows[1][1]


def test_the_leaderboard_shows_the_snapshot_beside_its_denominators(hostile):
    _, con, _, broken, home = hostile
    n_snapshot, n_cases = con.execute(
        "SELECT DISTINCT n_snapshot_cases, n_cases FROM rvp_leaderboard "
        "WHERE profile = 'current' AND judge_run_id = 'judge-run-a' ORDER BY n_cases DESC"
    ).fetchone()
    folders = {p.name for p in (home / "demo" / "Rynn-VP" / "cases").iterdir()}
    assert n_cases <= n_snapshot and n_snapshot - n_cases >= len(broken)
    assert n_snapshot <= len(folders)


def test_a_duplicated_val_row_is_flagged_and_garbage_responses_refused(hostile):
    _, con, done, *_ = hostile
    (reason,) = con.execute("SELECT reason FROM vv_rejects WHERE uid = ? AND action = 'noted'",
                            [done["duplicate_uid"]]).fetchone()
    assert reason.startswith("duplicate of ")
    reasons = [r for (r,) in con.execute("SELECT reason FROM vv_response_rejects WHERE "
                                         "source_file LIKE '%hostile.jsonl'").fetchall()]
    assert len(reasons) == 2 and any("999999" in r for r in reasons), reasons
    assert con.execute("SELECT count(DISTINCT (uid, sample_idx)) FROM vv_scored_responses "
                       "WHERE run_id = 'hostile'").fetchone()[0] == 1
