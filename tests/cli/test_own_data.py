"""Issue 11, "real data never mixes with the demo": one test per item, each against real files
(MP4s, Parquet, JSONL) in fresh homes, with real in-process Dagster runs or the real CLI.

Sources "of one's own" are copies of the demo inputs in folders outside the home (a few demo
cases for Rynn-VP, the demo parquets for the val suite), so the pipeline sees exactly what a
new user with their own data would give it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from benchlake_demo.rynn_vp import write_sha256sums
from dagster_project.cli import app
from dagster_project.runner import definitions, materialize, selected_keys
from dagster_project.rynn_vp.judgment_records import MAX_RECORD_BYTES as JUDGMENT_CAP
from dagster_project.settings import PROJECT_ROOT, Settings
from dagster_project.video_val.responses import MAX_RECORD_BYTES as RESPONSE_CAP
from dagster_project.video_val.schema import FOREIGN_PREFIX
from dagster_project.warehouse.catalog import connect
from tests.conftest import settings_for
from tests.video_val.test_scores import RESPONSES, rows

FIVE_MB = 5 * 1024 * 1024  # the old whole-file limit


def cli(monkeypatch: pytest.MonkeyPatch, home: Path, *args: str, **env: str):
    """`benchlake ARGS` in this process (typer's CliRunner) with BENCHLAKE_HOME=`home` and only
    the settings given in `env` (every other benchlake setting unset)."""
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))  # the CLI sets it; restored after
    environ: dict[str, str | None] = {name: None for name in Settings.env_names()}
    environ |= {"BENCHLAKE_HOME": str(home), **env}
    return CliRunner().invoke(app, list(args), env=environ)


def count(con, table: str, where: str = "true", params: tuple = ()) -> int:
    return con.execute(f"SELECT count(*) FROM {table} WHERE {where}", list(params)).fetchone()[0]


def copy_home(settings: Settings, dest: Path) -> Path:
    """A private copy of a built warehouse (not its Dagster history)."""
    shutil.copytree(settings.home, dest, ignore=shutil.ignore_patterns("dagster"))
    return dest


def own_snapshot(demo_inputs: Settings, dest: Path, n_cases: int = 3) -> list[str]:
    """A Rynn-VP snapshot of one's own in `dest`: the first `n_cases` demo cases (so the demo's
    other case ids do not exist there), with SHA256SUMS.txt written for what is there."""
    src = Path(demo_inputs.rynn_vp_source_or_demo())
    cases = sorted(p.name for p in (src / "cases").iterdir())[:n_cases]
    shutil.copytree(src, dest, ignore=lambda d, names: [
        n for n in names if Path(d) == src / "cases" and n not in cases])
    write_sha256sums(dest)
    return cases


# --- 1. own Rynn-VP snapshot, candidates and judgments not configured --------------------------


@pytest.mark.slow
def test_own_snapshot_reads_empty_drop_folders_not_the_demo(demo_inputs, tmp_path, monkeypatch):
    snap = tmp_path / "my-rynn-vp"
    cases = own_snapshot(demo_inputs, snap)
    home = tmp_path / "home"
    done = cli(monkeypatch, home, "materialize", "--select", "group:rynn_vp",
               RYNN_VP_SOURCE=str(snap))
    assert done.exit_code == 0, done.output + done.stderr
    for setting, kind in (("CANDIDATES_DIR", "candidates"), ("JUDGMENTS_DIR", "judgments")):
        folder = home / "drop" / kind
        assert folder.is_dir() and not any(folder.iterdir())
        assert f"{setting} is not set: reading the drop folder {folder} " in done.stderr
    assert "RESPONSES_DIR" not in done.stderr  # the val source is still the demo's
    assert not (home / "demo").exists()  # no demo input was built, none was read
    con = connect(home)
    assert sorted(r[0] for r in con.execute("SELECT case_id FROM rvp_cases").fetchall()) == cases
    empty = ("rvp_candidates", "rvp_evaluations", "rvp_judgment_files", "rvp_judgments",
             "rvp_judgment_rejects", "rvp_gt_compilations", "rvp_stages",
             "rvp_candidate_scores", "rvp_leaderboard")
    assert {t: count(con, t) for t in empty} == dict.fromkeys(empty, 0)


@pytest.mark.slow
def test_own_candidates_with_the_demo_snapshot_get_no_demo_judgments(demo_warehouse, tmp_path):
    """The demo judgments judge the demo candidates: with candidates of one's own (here one
    case of one system) and the demo snapshot, an unset JUDGMENTS_DIR is the empty drop folder,
    not the demo judgments built (and failing) against candidates they do not describe."""
    home = copy_home(demo_warehouse, tmp_path / "home")
    shutil.rmtree(home / "demo" / "judgments")  # as in a fresh home: not built yet
    mine = tmp_path / "my-candidates"
    one = sorted((demo_warehouse.candidates_root() / "veo-sim").iterdir())[0]
    shutil.copytree(one, mine / "veo-sim" / one.name)
    settings = settings_for(home, candidates_dir=str(mine))
    assert settings.default_drop_folders() == {"JUDGMENTS_DIR": home / "drop" / "judgments"}
    result = materialize(settings, "key:raw_rvp_candidates+ or key:raw_rvp_judgments+",
                         raise_on_error=False, checks=False)
    assert result.success, [f.message for f in result.failures()]
    assert not (home / "demo" / "judgments").exists()
    con = connect(settings.home)
    assert con.execute("SELECT system, case_id FROM rvp_candidates").fetchall() == [
        ("veo-sim", one.name)]
    assert count(con, "rvp_judgments") == count(con, "rvp_judgment_rejects") == 0
    # the demo folder's versions read before stay listed, archived, not current
    assert count(con, "rvp_judgment_files", "is_current") == 0


# --- 2. own val parquets, responses not configured; hostile rows and files (item 7) -----------


@pytest.fixture(scope="module")
def own_val(demo_inputs, tmp_path_factory):
    """The demo parquets copied into a folder of one's own (RESPONSES_DIR unset), the videos
    mapped into the demo's video cache. Three Video-MME rows name videos outside that root
    (/etc/passwd, a real MP4 elsewhere, and a path that leaves the root through `..` after the
    map); the PerceptionComp parquet has its reward_model column written as a string."""
    root = tmp_path_factory.mktemp("own-val")
    src = root / "parquets"
    shutil.copytree(demo_inputs.video_val_source_or_demo(), src)
    cache = demo_inputs.video_val_demo_dir / "cache"
    outside = root / "elsewhere" / "clip.mp4"
    outside.parent.mkdir()
    shutil.copy(sorted(cache.rglob("*.mp4"))[0], outside)
    mme = src / "videomme-test.parquet"
    table = pq.read_table(mme)
    records = table.to_pylist()
    hostile = ["file:///etc/passwd", outside.as_uri(),
               f"{FOREIGN_PREFIX}/{os.path.relpath(outside, cache)}"]
    for record, uri in zip(records, hostile, strict=False):
        record["videos"][0]["video"] = uri
    pq.write_table(pa.Table.from_pylist(records, schema=table.schema), mme)
    pc = src / "perceptioncomp-test.parquet"
    table = pq.read_table(pc)
    i = table.schema.get_field_index("reward_model")
    as_text = pa.array([json.dumps(v) for v in table.column(i).to_pylist()], pa.string())
    pq.write_table(table.set_column(i, "reward_model", as_text), pc)
    settings = settings_for(root / "home", video_val_source=str(src),
                            video_val_prefix_map=f"{FOREIGN_PREFIX}={cache.as_uri()}")
    assert materialize(settings, "group:video_val", checks=False).success
    con = connect(settings.home)
    return settings, con, outside, cache


@pytest.mark.slow
def test_own_val_source_scores_no_demo_responses(own_val):
    settings, con, *_ = own_val
    folder = settings.home / "drop" / "responses"
    assert settings.responses_root() == folder and folder.is_dir() and not any(folder.iterdir())
    assert not (settings.home / "demo").exists()
    assert count(con, "vv_questions") >= 20  # the questions were read ...
    for table in ("stg_vv_response_files", "vv_responses", "vv_response_rejects",
                  "vv_scored_responses", "vv_scores", "vv_best_checkpoints"):
        assert count(con, table) == 0, table  # ... and nothing answered them


@pytest.mark.slow
def test_video_outside_the_roots_is_never_opened(own_val):
    _, con, outside, cache = own_val
    unresolved = {r["uid"]: r for r in rows(con, "SELECT * FROM vv_unresolved_videos")}
    assert set(unresolved) == {f"videomme_v1_test:{i}" for i in range(3)}
    for r in unresolved.values():
        assert not r["video_in_roots"] and not r["video_exists"]
        assert "never opened" in r["problem"]
    assert unresolved["videomme_v1_test:0"]["video_path"] == "/etc/passwd"
    assert unresolved["videomme_v1_test:1"]["prefix_matched"] is False
    assert unresolved["videomme_v1_test:2"]["prefix_matched"] is True  # mapped, then `..` out
    # Only videos inside the root were probed, and each is a real video: /etc/passwd and a
    # perfectly decodable MP4 outside the root (by name or through `..`) were never opened.
    probed = [r[0] for r in con.execute("SELECT video_abspath FROM vv_videos").fetchall()]
    assert len(probed) >= 5
    assert all(Path(os.path.normpath(p)).is_relative_to(cache) for p in probed)
    assert count(con, "vv_videos", "NOT ok") == 0
    planned = [r[0] for r in con.execute("SELECT video_abspath FROM vv_frame_plan").fetchall()]
    assert planned and all(Path(os.path.normpath(p)).is_relative_to(cache) for p in planned)
    assert outside.is_file()  # it was there to be opened


@pytest.mark.slow
def test_column_of_another_type_rejects_the_file_naming_it(own_val):
    _, con, *_ = own_val
    rejects = rows(con, "SELECT * FROM vv_rejects WHERE source_file = "
                        "'perceptioncomp-test.parquet' AND action <> 'noted'")
    assert [(r["action"], r["row_index"]) for r in rejects] == [("file_rejected", None)]
    assert rejects[0]["reason"] == ("column reward_model has type string, expected "
                                    "struct<ground_truth: string, style: string>")
    assert count(con, "vv_questions", "data_source = 'perceptioncomp_test'") == 0
    assert count(con, "vv_questions", "data_source = 'video_holmes_test'") > 0


def _responses(run_id: str, uids: list[str], step: int = 1) -> str:
    return "".join(json.dumps({"run_id": run_id, "step": step, "uid": uid,
                               "response": "<answer>\\boxed{A}</answer>"}) + "\n"
                   for uid in uids)


@pytest.mark.slow
def test_switching_responses_dir_carries_nothing_over(own_val, tmp_path):
    base, con, *_ = own_val
    uids = [r[0] for r in con.execute("SELECT uid FROM vv_questions WHERE data_source = "
                                      "'video_holmes_test' ORDER BY uid").fetchall()][:3]
    home = copy_home(base, tmp_path / "home")
    a, b = tmp_path / "A", tmp_path / "B"
    a.mkdir()
    b.mkdir()
    (a / "run.jsonl").write_text(_responses("run-a", uids))
    (b / "run.jsonl").write_text(_responses("run-b", uids[:2]))  # same name, other folder
    (b / "more.jsonl").write_text(_responses("run-b", uids[:1], step=2))
    env = {"video_val_source": base.video_val_source,
           "video_val_prefix_map": base.video_val_prefix_map}

    assert materialize(settings_for(home, responses_dir=str(a), **env), RESPONSES,
                       checks=False).success
    con = connect(home)
    assert count(con, "vv_responses", "run_id = 'run-a'") == 3

    assert materialize(settings_for(home, responses_dir=str(b), **env), RESPONSES,
                       checks=False).success
    con = connect(home)
    got = con.execute("SELECT run_id, step, source_file FROM vv_responses ORDER BY ALL")
    assert got.fetchall() == [("run-b", 1, "run.jsonl"), ("run-b", 1, "run.jsonl"),
                              ("run-b", 2, "more.jsonl")]
    for view in ("vv_scored_responses", "vv_scores"):
        assert {r[0] for r in con.execute(f"SELECT DISTINCT run_id FROM {view}").fetchall()} == {
            "run-b"}
    files = rows(con, "SELECT folder_abspath, source_file, version, sha256, is_current, "
                      "archived_abspath FROM stg_vv_response_files ORDER BY folder_abspath, "
                      "source_file")
    assert [(f["folder_abspath"], f["source_file"], f["version"], f["is_current"])
            for f in files] == [(str(a), "run.jsonl", 1, False), (str(b), "more.jsonl", 1, True),
                                (str(b), "run.jsonl", 2, True)]
    kept = files[0]  # A's version: still listed and archived, byte for byte, but not read
    assert kept["sha256"] == hashlib.sha256((a / "run.jsonl").read_bytes()).hexdigest()
    assert Path(kept["archived_abspath"]).read_bytes() == (a / "run.jsonl").read_bytes()
    assert count(con, "vv_response_rejects") == 0


# --- 3. selections -----------------------------------------------------------------------------


def readme_selections() -> list[str]:
    """Every asset selection the README shows (`group:...`, `key:...`, `--select ...`)."""
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`(?:--select )?((?:key|group|tag|kind|owner):[^`\s]+)`",
                                 text)))


@pytest.mark.slow
def test_every_key_selection_resolves_to_a_runnable_job():
    """`key:K`, `key:K+`, `+key:K` for every asset key and every README selection: resolved as
    `benchlake materialize` resolves them, the code location's asset job takes them as one run
    (a multi-asset that cannot be subset used to fail with "Failed to resolve asset job")."""
    defs = definitions()
    graph = defs.resolve_asset_graph()
    job = defs.resolve_implicit_global_asset_job_def()
    readme = readme_selections()
    assert {"group:rynn_vp", "key:raw_rvp_media+", "group:reports"} <= set(readme)
    # (nothing is upstream of an observed source: `+key:` of one selects nothing)
    selections = [(f"{pre}key:{key.to_user_string()}{post}", key)
                  for key in sorted(graph.get_all_asset_keys()) if graph.get(key).is_executable
                  for pre, post in (("", ""), ("", "+"), ("+", ""))
                  if not (pre and graph.get(key).is_observable)]
    selections += [(sel, None) for sel in readme]
    for select, key in selections:
        keys = set(selected_keys(defs, select))
        assert keys and (key is None or key in keys), select
        for k in keys:  # whole multi-assets only (the dbt models can be subset)
            assets_def = graph.get(k).assets_def
            assert assets_def.can_subset or set(assets_def.keys) <= keys, (select, k)
        assert job.get_subset(asset_selection=keys).asset_layer.selected_asset_keys, select


@pytest.mark.slow
@pytest.mark.parametrize(("select", "written"), [
    ("key:raw_vv_responses+", {"vv_response_files", "vv_responses", "vv_response_rejects",
                           "vv_scored_responses"}),
    ("key:raw_rvp_judgment_files+", {"rvp_judgment_files", "rvp_judgments", "rvp_hallucinations",
                                 "rvp_judgment_rejects", "rvp_gt_compilations", "rvp_stages"}),
])
def test_one_key_of_a_multi_asset_materializes_on_the_demo(demo_warehouse, tmp_path, select,
                                                           written):
    settings = settings_for(copy_home(demo_warehouse, tmp_path / "home"))
    result = materialize(settings, select)
    assert result.success
    done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert {f"raw_{name}" for name in written} <= done


# --- 4. limits per record, not per file ---------------------------------------------------------


@pytest.fixture(scope="module")
def campaign(demo_warehouse, tmp_path_factory):
    """The demo judgments plus one campaign file over 5 MB: the demo's valid judge-run-a
    records under 25 new judge run ids, each with a judge's notes of 3.5 KB (1,025 records,
    5.4 MB), and at line 1000 one record over the 1 MB cap."""
    root = tmp_path_factory.mktemp("campaign")
    drop = root / "judgments"
    shutil.copytree(demo_warehouse.judgments_root(), drop)
    con = connect(demo_warehouse.home)
    bad = {line for (line,) in con.execute("SELECT line FROM rvp_judgment_rejects WHERE "
                                          "source_file = 'judge-run-a.jsonl'").fetchall()}
    demo = [json.loads(text) for n, text in enumerate(
        (drop / "judge-run-a.jsonl").read_text().splitlines(), start=1) if n not in bad]
    notes = "The candidate reaches the goal state; step order checked against each anchor. " * 45
    lines = [json.dumps({**rec, "judge_run_id": f"campaign-{run:03d}", "notes": notes})
             for run in range(25) for rec in demo]
    assert sum(len(x) + 1 for x in lines) > FIVE_MB  # over the old limit without the runaway
    lines.insert(999, json.dumps({**demo[0], "judge_run_id": "campaign-runaway",
                                  "notes": "x" * JUDGMENT_CAP}))
    (drop / "campaign.jsonl").write_text("\n".join(lines) + "\n")
    settings = settings_for(copy_home(demo_warehouse, root / "home"), judgments_dir=str(drop))
    # the whole multi-asset, and the views over it
    assert materialize(settings, "key:raw_rvp_judgment_files or 1+key:rvp_judgments or "
                       "1+key:rvp_judgment_rejects or 1+key:rvp_judgment_files",
                       checks=False).success
    con = connect(settings.home)
    return con, len(lines), (drop / "campaign.jsonl").stat().st_size


@pytest.mark.slow
def test_judgments_file_over_5mb_is_read_record_by_record(campaign):
    con, n_lines, size = campaign
    assert size > FIVE_MB + JUDGMENT_CAP
    assert con.execute("SELECT size_bytes, is_current FROM rvp_judgment_files WHERE "
                       "source_file = 'campaign.jsonl'").fetchall() == [(size, True)]
    assert count(con, "rvp_judgments", "source_file = 'campaign.jsonl'") == n_lines - 1
    assert count(con, "rvp_judgments", "judge_run_id LIKE 'campaign-%'") == n_lines - 1
    [reject] = rows(con, "SELECT * FROM rvp_judgment_rejects WHERE source_file = "
                         "'campaign.jsonl'")
    assert reject["line"] == 1000
    assert reject["reason"].startswith("record is ")
    assert f"over the limit of {JUDGMENT_CAP} bytes per record" in reject["reason"]
    assert count(con, "rvp_judgments", "judge_run_id = 'campaign-runaway'") == 0
    # the neighbours of the runaway line flowed
    lines = {r[0] for r in con.execute("SELECT line FROM rvp_judgments WHERE source_file = "
                                       "'campaign.jsonl' AND line IN (999, 1001)").fetchall()}
    assert lines == {999, 1001}


THOUGHT = "Counting the objects frame by frame, then comparing each option with what is seen. " * 2
FORMAT_CASES = {  # response, format_ok under card, under strict
    "after": (f"<think>{THOUGHT}</think><answer>\\boxed{{A}}</answer> Note: B is close.",
              True, False),
    "before": (f"Sure! <think>{THOUGHT}</think><answer>\\boxed{{A}}</answer>", True, False),
    "exact": (f"<think>{THOUGHT}</think>\n<answer>\\boxed{{A}}</answer>", True, True),
}


@pytest.fixture(scope="module")
def responses(demo_warehouse, tmp_path_factory):
    """The demo responses plus: a campaign file over 5 MB (600 long responses, one record over
    the 4 MB cap at line 300), and three responses (run `fmt`) around the format rules."""
    root = tmp_path_factory.mktemp("responses")
    drop = root / "responses"
    shutil.copytree(demo_warehouse.responses_root(), drop)
    con = connect(demo_warehouse.home)
    uids = [r[0] for r in con.execute("SELECT uid FROM vv_questions ORDER BY uid").fetchall()]
    thinking = "<think>" + "Looking again at every frame. " * 300 + "</think>"
    lines = [json.dumps({"run_id": "campaign", "step": step, "uid": uid,
                         "response": f"{thinking}<answer>\\boxed{{A}}</answer>"})
             for step in range(20) for uid in uids[:30]]
    assert sum(len(x) + 1 for x in lines) > FIVE_MB
    lines.insert(299, json.dumps({"run_id": "campaign", "step": 99, "uid": uids[0],
                                  "response": "x" * RESPONSE_CAP}))
    (drop / "campaign.jsonl").write_text("\n".join(lines) + "\n")
    (drop / "format.jsonl").write_text("".join(
        json.dumps({"run_id": "fmt", "step": 1, "uid": uid, "response": text}) + "\n"
        for uid, (text, _, _) in zip(uids, FORMAT_CASES.values(), strict=False)))
    settings = settings_for(copy_home(demo_warehouse, root / "home"), responses_dir=str(drop))
    assert materialize(settings, RESPONSES, checks=False).success
    con = connect(settings.home)
    return con, len(lines), dict(zip(FORMAT_CASES, uids, strict=False))


@pytest.mark.slow
def test_responses_file_over_5mb_is_read_record_by_record(responses):
    con, n_lines, _ = responses
    assert count(con, "vv_responses", "source_file = 'campaign.jsonl'") == n_lines - 1
    [reject] = rows(con, "SELECT * FROM vv_response_rejects WHERE source_file = "
                         "'campaign.jsonl'")
    assert reject["line"] == 300
    assert f"over the limit of {RESPONSE_CAP} bytes per record" in reject["reason"]
    assert count(con, "vv_responses", "run_id = 'campaign' AND step = 99") == 0
    assert count(con, "vv_scored_responses", "run_id = 'campaign' AND policy = 'card'") == (
        n_lines - 1)


# --- 5. a failed materialize says which asset, what, and where ---------------------------------


def test_failed_materialize_names_each_asset_and_its_error(tmp_path, monkeypatch):
    missing = tmp_path / "no-such-candidates"
    home = tmp_path / "home"
    done = cli(monkeypatch, home, "materialize", "--select",
               "key:raw_rvp_candidates or key:raw_vv_questions",
               CANDIDATES_DIR=str(missing), VIDEO_VAL_PREFIX_MAP="file:///old-prefix")
    assert done.exit_code == 1
    lines = done.stderr.strip().splitlines()
    assert (f"benchlake: raw_rvp_candidates failed: FileNotFoundError: CANDIDATES_DIR {missing}: "
            f"no such folder (input: {missing})") in lines
    assert ("benchlake: raw_vv_questions, raw_vv_rejects failed: ValueError: prefix map item "
            "'file:///old-prefix' has no '=' (expected OLD=NEW)") in lines
    assert lines[-1].startswith("benchlake: materialization failed in 2 step(s)")
    assert not any("Traceback" in line or "DagsterExecutionStepExecutionError" in line
                   for line in lines)


# --- 6. the card's format rule is the default policy; `strict` beside it -----------------------


@pytest.mark.slow
def test_text_around_the_tags_is_format_ok_under_the_card_only(responses):
    con, _, uid_of = responses
    scored = {(r["uid"], r["policy"]): r["format_ok"] for r in rows(
        con, "SELECT uid, policy, format_ok FROM vv_scored_responses WHERE run_id = 'fmt'")}
    for name, (_, card, strict) in FORMAT_CASES.items():
        assert (scored[(uid_of[name], "card")], scored[(uid_of[name], "strict")]) == (
            card, strict), name
    assert rows(con, "SELECT policy FROM vv_scoring_policies WHERE is_default") == [
        {"policy": "card"}]
    scores = rows(con, "SELECT policy, format_rate FROM vv_scores WHERE run_id = 'fmt' AND "
                       "data_source = 'all' ORDER BY policy")
    assert scores == [{"policy": "card", "format_rate": 1.0},
                      {"policy": "strict", "format_rate": pytest.approx(1 / 3)}]
    diff = rows(con, "SELECT uid, format_ok, base_format_ok, correct = base_correct AS same "
                     "FROM vv_policy_diff WHERE run_id = 'fmt' AND policy = 'card' AND "
                     "base_policy = 'strict' ORDER BY uid")
    assert diff == [{"uid": uid, "format_ok": True, "base_format_ok": False, "same": True}
                    for uid in sorted(uid_of[n] for n in ("after", "before"))]
    [delta] = rows(con, "SELECT delta_format_rate, delta_accuracy, n_flipped FROM "
                        "vv_policy_diff_scores WHERE run_id = 'fmt' AND policy = 'card' AND "
                        "base_policy = 'strict' AND data_source = 'all'")
    assert delta == {"delta_format_rate": pytest.approx(2 / 3), "delta_accuracy": 0,
                     "n_flipped": 2}


# --- 7. bad inputs: a PNG called gt.mp4 --------------------------------------------------------


@pytest.mark.slow
def test_png_named_gt_mp4_is_a_rejected_case_with_no_evaluations(demo_inputs, tmp_path):
    snap = tmp_path / "my-rynn-vp"
    png_case, *others = own_snapshot(demo_inputs, snap)
    case_dir = snap / "cases" / png_case
    shutil.copy(case_dir / "initial.png", case_dir / "gt.mp4")
    write_sha256sums(snap)  # a content problem, not a checksum one
    cands = tmp_path / "candidates"
    for system in ("veo-sim", "storyboard-planner"):  # one video, one image-step system
        for case in (png_case, *others):
            shutil.copytree(demo_inputs.candidates_root() / system / case, cands / system / case)
    settings = settings_for(tmp_path / "home", rynn_vp_source=str(snap),
                            candidates_dir=str(cands))
    assert materialize(settings, "group:rynn_vp", checks=False).success
    con = connect(settings.home)
    rejects = rows(con, "SELECT source_file, reason FROM rvp_rejects WHERE case_id = ?",
                   [png_case])
    assert any(r["source_file"] == f"cases/{png_case}/gt.mp4" and "not a video" in r["reason"]
               for r in rejects), rejects
    for table in ("rvp_cases", "rvp_media", "rvp_evaluations", "rvp_evidence_frames",
                  "rvp_judge_packets"):
        assert count(con, table, "case_id = ?", (png_case,)) == 0, table
    assert count(con, "rvp_evaluations", "problem IS NULL") == 2 * len(others)
    assert {r[0] for r in con.execute("SELECT DISTINCT case_id FROM rvp_judge_packets"
                                      ).fetchall()} == set(others)
