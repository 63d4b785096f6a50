"""`benchlake judge` without a paid API: a small OpenAI-compatible server on 127.0.0.1
(`judge_server.py`) answers every role deterministically and fails on demand. The judging runs
for real (HTTP, cache files, journals, the ingest of the records it writes, the views)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dagster_project.rynn_vp.judge import MAX_TRIES, Judge, dry_run
from dagster_project.rynn_vp.judge_client import AnswerCache, ledger_tables
from dagster_project.rynn_vp.judge_requests import Request, load_work, parse_answer
from dagster_project.settings import JudgeSettings, Settings
from tests.conftest import copy_home, table_identities
from tests.rynn_vp.judge_server import JudgeServer, Running

SECRET = "sk-test-judge-0c7f1e9b5d2a4e8f9a1b"
MODEL = "judge-sim"
RUN = "bj-test"
BENCHLAKE = str(Path(sys.executable).parent / "benchlake")
# the demo: 14 cases (one GT compilation each) and 38 evaluations (five roles each)
DEMO_CASES, DEMO_EVALUATIONS = 14, 38
DEMO_REQUESTS = DEMO_CASES + 5 * DEMO_EVALUATIONS


@pytest.fixture
def server() -> Iterator[Running]:
    # an injected timeout outlasts the client's JUDGE_TIMEOUT_S (judge_env) twice over
    running = Running(JudgeServer(api_key=SECRET, timeout_sleep_s=6.0))
    yield running
    running.close()


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text(f"model,input_usd_per_1k,output_usd_per_1k\n{MODEL},0.001,0.002\n")
    return path


def judge_env(url: str, prices: Path, **more: str) -> dict[str, str]:
    return {"JUDGE_BASE_URL": url, "JUDGE_MODEL": MODEL, "JUDGE_API_KEY": SECRET,
            # long enough that a loaded machine (the slow suite on 2 cores) never times out an
            # answered request: its retry would reach the server twice, and the tests count
            "JUDGE_RUN_ID": RUN, "JUDGE_RPM": "0", "JUDGE_TIMEOUT_S": "3",
            "JUDGE_MAX_TOKENS": "200", "JUDGE_PRICES": str(prices), **more}


def judge_now(home: Path, env: dict[str, str], waits: list[float] | None = None):
    """One judging of the home's packets in this process (the asset's own logic)."""
    settings = Settings.from_env({"BENCHLAKE_HOME": str(home)})
    judge = Judge(home, settings.judge_dir, JudgeSettings.from_env(env), uuid.uuid4().hex,
                  log=lambda _: None, backoff_s=0.01,
                  sleep=waits.append if waits is not None else time.sleep)
    return judge.run(load_work(home))


@pytest.fixture
def judged_home(demo_warehouse: Settings, tmp_path: Path) -> Path:
    return copy_home(demo_warehouse, tmp_path / "home").home


# --- the parts ---------------------------------------------------------------------------


OBSERVE = "# Rynn-VP · Observer · v1\n\nYou are the Observer for evaluation `sys/c1`."


def _request(tmp_path: Path, text: str = OBSERVE, sample: int = 0,
             color: str = "red") -> Request:
    image = tmp_path / f"{color}.png"
    Image.new("RGB", (600, 300), color).save(image)
    import hashlib

    sha = hashlib.sha256(image.read_bytes()).hexdigest()
    return Request("observer", "c1", "sys/c1", sample, text, (("sys/c1#S0", image, sha),), "v1")


def test_the_request_key_is_what_determines_the_answer(tmp_path: Path) -> None:
    js = JudgeSettings.from_env({"JUDGE_BASE_URL": "http://127.0.0.1:9/v1/", "JUDGE_MODEL": "m",
                                 "JUDGE_API_KEY": SECRET})
    key = _request(tmp_path).key(js)
    assert _request(tmp_path).key(js) == key  # the same request, the same key
    changed = [
        _request(tmp_path, text=OBSERVE + " Again."),  # the rendered prompt
        _request(tmp_path, sample=1),  # the sample index (a retry)
        _request(tmp_path, color="blue"),  # an image's bytes (by digest)
    ]
    assert len({key, *(r.key(js) for r in changed)}) == 4
    for setting in ({"JUDGE_MODEL": "m2"}, {"JUDGE_TEMPERATURE": "0.5"},
                    {"JUDGE_SEED": "7"}, {"JUDGE_MAX_TOKENS": "10"},
                    {"JUDGE_REASONING": "high"}, {"JUDGE_BASE_URL": "http://127.0.0.1:10"}):
        other = JudgeSettings.from_env({"JUDGE_BASE_URL": "http://127.0.0.1:9/v1/",
                                        "JUDGE_MODEL": "m", **setting})
        assert _request(tmp_path).key(other) != key, setting
    # the key and the endpoint never carry the key or credentials in the URL
    with_creds = JudgeSettings.from_env({"JUDGE_BASE_URL": f"http://u:{SECRET}@127.0.0.1:9",
                                         "JUDGE_MODEL": "m"})
    assert SECRET not in json.dumps(_request(tmp_path).body(with_creds, with_images=False))
    assert SECRET not in repr(js)
    # images travel as base64 data URLs; the key holds their digests, not their bytes
    body = _request(tmp_path).body(js, with_images=True)
    assert body["messages"][0]["content"][2]["image_url"]["url"].startswith(
        "data:image/png;base64,")


def test_answers_are_parsed_or_refused_with_a_reason() -> None:
    assert parse_answer('```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert parse_answer('Here: {"a": {"b": 2}} done') == ({"a": {"b": 2}}, None)
    assert parse_answer("about 70 points")[1] == "the answer holds no JSON object"
    assert "not valid JSON" in parse_answer('{"a": 1,}')[1]


def test_settings_come_from_the_environment_and_the_key_only_from_it(tmp_path: Path,
                                                                     monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"JUDGE_MODEL=from-dotenv\nJUDGE_API_KEY={SECRET}\n")
    for name in [n for n in os.environ if n.startswith("JUDGE_")]:
        monkeypatch.delenv(name)
    js = JudgeSettings.from_env()
    assert (js.model, js.api_key, js.judge_run_id) == ("from-dotenv", "", "from-dotenv")
    with pytest.raises(ValueError, match="JUDGE_RPM must be a int"):
        JudgeSettings.from_env({"JUDGE_RPM": "fast"})
    with pytest.raises(ValueError, match="JUDGE_RUN_ID"):
        JudgeSettings.from_env({"JUDGE_RUN_ID": "../x"})


def test_the_judge_resource_mirrors_the_settings_and_names_the_key(monkeypatch) -> None:
    import dagster as dg

    from dagster_project.defs.resources import JudgeResource, judge_resource

    assert list(JudgeResource.model_fields) == [f.name for f in fields(JudgeSettings)]
    monkeypatch.setenv("JUDGE_API_KEY", SECRET)
    monkeypatch.setenv("JUDGE_MODEL", MODEL)
    resource = judge_resource()
    # the key is the variable's name until a step needs it (what the UI shows)
    assert isinstance(resource.api_key, dg.EnvVar)
    assert resource.api_key.env_var_name == "JUDGE_API_KEY"
    resolved = resource.process_config_and_initialize().settings()
    assert (resolved.api_key, resolved.model) == (SECRET, MODEL)


def test_a_prompts_folder_of_ones_own(tmp_path: Path) -> None:
    from dagster_project.rynn_vp.packets import PROJECT_PROMPTS, ROLES, load_prompts

    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "VERSION").write_text("my-prompts-3\n")
    for role in ROLES[:-1]:
        (folder / f"{role}.md").write_text(f"# {role} · {{{{prompt_version}}}}")
    with pytest.raises(FileNotFoundError, match=f"no {ROLES[-1]}.md there"):
        load_prompts(None, folder)
    (folder / f"{ROLES[-1]}.md").write_text("# critic")
    mine = load_prompts(PROJECT_PROMPTS.parent, folder)  # wins over a Skill's folder too
    assert (mine.source, mine.version) == ("folder", "my-prompts-3")
    assert mine.texts["observer"] == "# observer · {{prompt_version}}"


def test_judge_refuses_without_an_endpoint(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    done = subprocess.run([BENCHLAKE, "judge"], env={**env, "BENCHLAKE_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "benchlake: JUDGE_BASE_URL is not set: benchlake judge needs an OpenAI-compatible "
        "endpoint and a model"]


def test_429_5xx_and_timeouts_are_retried_errors_and_empty_answers_never_cached(
        tmp_path: Path, server: Running, prices: Path) -> None:
    env = judge_env(server.url, prices)
    waits: list[float] = []
    judge = Judge(tmp_path, tmp_path / "judge", JudgeSettings.from_env(env), "run-1",
                  log=lambda _: None, backoff_s=0.01, sleep=waits.append)
    request = _request(tmp_path)
    server.state.inject("429", retry_after="7")
    server.state.inject("500")
    server.state.inject("timeout")
    text, key, _ = judge.answer(request, 1)
    assert parse_answer(text)[0]["evaluation_id"] == "sys/c1"
    assert waits == [7.0, 0.02, 0.04]  # Retry-After honoured, then exponential backoff
    assert server.state.count() == 4 and server.state.seen[-1].images == 1
    assert server.state.seen[-1].image_urls_ok
    assert AnswerCache(tmp_path / "judge" / "cache").get(key)["answer"] == text
    # asked again: from the cache, nothing sent
    assert judge.answer(request, 1)[0] == text and server.state.count() == 4
    # an empty answer is no answer: not cached, asked again next time
    empty = _request(tmp_path, text=OBSERVE + " Another.")
    server.state.inject("empty")
    assert judge.answer(empty, 1)[0] == ""
    assert AnswerCache(tmp_path / "judge" / "cache").get(empty.key(judge.settings)) is None
    # errors on every try: given up after MAX_TRIES, nothing cached
    failing = _request(tmp_path, text=OBSERVE + " Failing.")
    server.state.inject("500", times=MAX_TRIES)
    with pytest.raises(Exception, match="http_500 after 5 tries"):
        judge.answer(failing, 1)
    judge.journal.close()
    calls, _ = ledger_tables(tmp_path / "judge" / "calls")
    assert [r["status"] for r in calls.to_pylist()] == [
        "http_429", "http_500", "timeout", "ok", "cached", "empty", *["http_500"] * MAX_TRIES]
    assert all(r["cost"] >= 0 and r["judge_run_id"] == RUN for r in calls.to_pylist())


# --- on the demo -------------------------------------------------------------------------


def _cached(home: Path) -> set[str]:
    return {p.stem for p in (home / "judge" / "cache").rglob("*.json")}


def test_a_killed_judge_resumes_with_only_the_missing_calls(judged_home: Path, server: Running,
                                                            prices: Path) -> None:
    """A judging process killed (SIGKILL) midway: what it got answered is cached and in its
    journal; the next judging sends exactly the requests not cached, and the ledger holds the
    killed run's calls too."""
    env = judge_env(server.url, prices)
    server.state.delay_s = 0.05
    script = ("import sys, uuid; from pathlib import Path; "
              "from dagster_project.rynn_vp.judge import Judge, load_work; "
              "from dagster_project.settings import JudgeSettings; "
              "home = Path(sys.argv[1]); "
              "Judge(home, home / 'judge', JudgeSettings.from_env(), 'killed-run', print)"
              ".run(load_work(home))")
    proc = subprocess.Popen([sys.executable, "-c", script, str(judged_home)],
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while server.state.count() < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    cached = _cached(judged_home)
    assert 0 < len(cached) < DEMO_REQUESTS
    server.state.delay_s = 0.0
    sent_before = server.state.settled_count()
    outcome = judge_now(judged_home, env)
    assert outcome.sent == server.state.count() - sent_before == DEMO_REQUESTS - len(cached)
    assert outcome.cache_hits == len(cached)
    assert outcome.evaluations == DEMO_EVALUATIONS
    assert len(list((judged_home / "judge" / "judgments" / RUN).rglob("*.json"))) == \
        DEMO_EVALUATIONS  # the killed run's records and the rest, each once
    calls, _ = ledger_tables(judged_home / "judge" / "calls")
    killed = [r for r in calls.to_pylist() if r["dagster_run_id"] == "killed-run"]
    assert len([r for r in killed if r["status"] == "ok"]) >= len(cached)


def test_the_budget_stops_the_run_before_it_is_exceeded(judged_home: Path, server: Running,
                                                        prices: Path) -> None:
    env = judge_env(server.url, prices, JUDGE_BUDGET_USD="0.02", JUDGE_CONCURRENCY="2")
    first = judge_now(judged_home, env)
    assert first.budget_reached and 0 < first.sent < DEMO_REQUESTS
    assert first.cost <= 0.02 and first.unfinished
    assert first.records_written < DEMO_EVALUATIONS
    # the next invocation of the same judge run counts what was spent before
    again = judge_now(judged_home, env)
    assert again.spent_before == pytest.approx(first.cost)
    assert again.budget_reached and again.spent_before + again.cost <= 0.02
    # a larger budget: only what is missing is sent, once
    rest = judge_now(judged_home, {**env, "JUDGE_BUDGET_USD": "100"})
    assert not rest.budget_reached and rest.sent == DEMO_REQUESTS - first.sent - again.sent
    assert first.records_written + again.records_written + rest.records_written == \
        DEMO_EVALUATIONS
    assert server.state.count() == DEMO_REQUESTS


def test_the_dry_run_counts_what_is_not_cached(judged_home: Path, server: Running,
                                               prices: Path) -> None:
    env = judge_env(server.url, prices)
    settings = Settings.from_env({"BENCHLAKE_HOME": str(judged_home)})
    before = dry_run(judged_home, settings.judge_dir, JudgeSettings.from_env(env))
    assert (before.calls, before.cached) == (DEMO_REQUESTS, 0)
    assert before.input_tokens > 0 and before.output_tokens == 200 * DEMO_REQUESTS
    assert before.cost == pytest.approx(before.input_tokens * 1e-6 + before.output_tokens * 2e-6)
    assert server.state.count() == 0
    judge_now(judged_home, env)
    after = dry_run(judged_home, settings.judge_dir, JudgeSettings.from_env(env))
    assert (after.calls, after.cached) == (0, DEMO_REQUESTS)


@pytest.mark.slow
def test_one_changed_candidate_rejudges_that_evaluation_only(judged_home: Path, server: Running,
                                                            prices: Path) -> None:
    from dagster_project.runner import materialize

    env = judge_env(server.url, prices)
    first = judge_now(judged_home, env)
    assert first.records_written == DEMO_EVALUATIONS
    settings = Settings.from_env({"BENCHLAKE_HOME": str(judged_home)})
    con = duckdb.connect()
    path, case_id = con.execute(
        "SELECT path, case_id FROM read_parquet(?) WHERE system = 'storyboard-planner' "
        "ORDER BY case_id LIMIT 1", [str(settings.tables_dir / "raw" / "rvp_candidates.parquet")]
    ).fetchone()
    step = sorted((settings.home / path).glob("*.png"))[-1]  # path: the steps folder
    with Image.open(step) as im:
        im.convert("RGB").rotate(180).save(step)
    result = materialize(settings, "+key:raw_rvp_judge_packets", checks=False)
    assert result.success
    server.state.reset()
    again = judge_now(judged_home, env)
    assert {s.subject for s in server.state.seen} == {f"storyboard-planner/{case_id}"}
    assert again.sent == 5 and again.records_written == 1
    assert again.cache_hits == DEMO_REQUESTS - 5
    # the ledger asset (as `benchlake materialize` runs it: nothing sent) writes both judgings'
    # calls, and with the journals unchanged it writes nothing again
    ledger = ("rvp_judge_calls", "rvp_judge_rejects")
    assert materialize(settings, "key:raw_rvp_judge_calls", checks=False).success
    calls = pq.read_table(settings.tables_dir / "raw" / "rvp_judge_calls.parquet")
    assert calls.num_rows == 2 * DEMO_REQUESTS and server.state.count() == 5
    before = table_identities(judged_home, ledger)
    assert materialize(settings, "key:raw_rvp_judge_calls", checks=False).success
    assert table_identities(judged_home, ledger) == before


@pytest.mark.slow
def test_benchlake_judge_on_the_demo(judged_home: Path, server: Running, prices: Path) -> None:
    """`benchlake judge` end to end: a 429, a 500 and a timeout retried; a garbage critic answer
    rejected and judged again as a `retry` attempt; an evaluation whose critic always answers
    garbage stays unscored (no score, not zero); the records ingested and scored; a second run
    sends nothing; the key is in no file of the home and in no output."""
    retried, unscored = ("veo-sim/" + _first_case(judged_home, "veo-sim"),
                         "wan-sim/" + _first_case(judged_home, "wan-sim"))
    server.state.inject("429", role="observer", retry_after="1")
    server.state.inject("500", role="pi_judge")
    server.state.inject("timeout", role="vr_vq_judge")
    server.state.inject("garbage", role="critic", subject=retried)
    server.state.inject("garbage", role="critic", subject=unscored, times=2)
    env = {**os.environ, "BENCHLAKE_HOME": str(judged_home), **judge_env(server.url, prices)}
    dry = subprocess.run([BENCHLAKE, "judge", "--dry-run"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0 and f"{DEMO_REQUESTS} call(s)" in dry.stdout
    assert server.state.count() == 0
    done = subprocess.run([BENCHLAKE, "judge"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # every request once, plus the three retried tries and the two critics asked again
    assert server.state.count() == DEMO_REQUESTS + 3 + 2
    assert all(s.authorization == f"Bearer {SECRET}" for s in server.state.seen)
    con = duckdb.connect(str(judged_home / "benchlake.duckdb"), read_only=True)
    con.execute("USE benchlake")

    def one(sql: str, *params: object) -> list[tuple]:
        return con.execute(sql, list(params)).fetchall()

    assert one("SELECT count(*), count(*) FILTER (WHERE is_final) FROM rvp_judgments "
               "WHERE judge_run_id = ?", RUN) == [(DEMO_EVALUATIONS - 1, DEMO_EVALUATIONS - 1)]
    assert one("SELECT attempt, attempt_kind FROM rvp_judgments WHERE judge_run_id = ? AND "
               "evaluation_id = ?", RUN, retried) == [(2, "retry")]
    assert one("SELECT count(*) FROM rvp_judgments WHERE judge_run_id = ? AND "
               "evaluation_id = ?", RUN, unscored) == [(0,)]
    system, case_id = unscored.split("/")
    assert set(one("SELECT status, final_score FROM rvp_candidate_scores WHERE "
                   "judge_run_id = ? AND system = ? AND case_id = ?", RUN, system, case_id)
               ) == {("no_final_judgment", None)}  # unscored, not zero
    [(n_scored, candidates)] = one(
        "SELECT n_scored, (SELECT count(*) FROM rvp_candidates WHERE system = ?) FROM "
        "rvp_leaderboard WHERE judge_run_id = ? AND system = ? AND profile = 'current'",
        system, RUN, system)
    assert n_scored == candidates - 1
    rejects = one("SELECT evaluation_id, attempt, reason, raw FROM rvp_judge_rejects "
                  "ORDER BY evaluation_id, attempt")
    assert [(e, a) for e, a, _, _ in rejects] == sorted([(retried, 1), (unscored, 1),
                                                         (unscored, 2)])
    assert all(r == "the answer holds no JSON object" and "70 points" in raw
               for _, _, r, raw in rejects)
    [(sent, hits, cost)] = one("SELECT requests_sent, cache_hits, cost FROM rvp_judge_runs "
                               "WHERE judge_run_id = ?", RUN)
    assert (sent, hits) == (DEMO_REQUESTS + 5, 0) and cost > 0
    assert one("SELECT count(*) FROM rvp_stages WHERE judge_run_id = ?", RUN)[0][0] > 0
    con.close()
    # a second run: everything from the cache, nothing sent, no record written again
    before = server.state.count()
    again = subprocess.run([BENCHLAKE, "judge"], env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert server.state.count() == before
    assert "0 request(s) sent" in again.stderr and "0 record(s)" in again.stderr
    # a disagreement with the demo's judge run a, settled by a person: the verdict is final in
    # both runs, counts in the scores, and the results browser says who decided and why
    con = duckdb.connect(str(judged_home / "benchlake.duckdb"), read_only=True)
    con.execute("USE benchlake")
    [(disputed,)] = con.execute(
        "SELECT min(evaluation_id) FROM rvp_judge_review WHERE over_threshold AND "
        "'judge-run-a' IN (judge_run_id, base_judge_run_id) AND ? IN (judge_run_id, "
        "base_judge_run_id)", [RUN]).fetchall()
    con.close()
    assert disputed is not None
    settled = subprocess.run([BENCHLAKE, "review", disputed, "--take", "judge-run-a", "--author",
                              "Ann Lee", "--reason", "SB3 shows the drop"], env=env,
                             capture_output=True, text=True, timeout=900)
    assert settled.returncode == 0, settled.stderr[-3000:]
    con = duckdb.connect(str(judged_home / "benchlake.duckdb"), read_only=True)
    con.execute("USE benchlake")
    finals = con.execute(
        "SELECT judge_run_id, attempt_kind, review_author, review_reason, vr_1 FROM "
        "rvp_judgments WHERE evaluation_id = ? AND is_final ORDER BY judge_run_id",
        [disputed]).fetchall()
    assert {(k, a, r) for _, k, a, r, _ in finals} == {
        ("manager_review", "Ann Lee", "SB3 shows the drop")}
    assert len({vr for *_, vr in finals}) == 1  # one verdict, whichever run
    scores = con.execute("SELECT DISTINCT final_score FROM rvp_candidate_scores WHERE "
                         "system || '/' || case_id = ? AND profile = 'current' AND "
                         "judge_run_id IN (?, 'judge-run-a')", [disputed, RUN]).fetchall()
    assert len(scores) == 1  # the verdict's score in both runs
    assert con.execute("SELECT bool_and(reviewed), min(review_author) FROM rvp_judge_review "
                       "WHERE evaluation_id = ?", [disputed]).fetchall() == [(True, "Ann Lee")]
    con.close()
    exported = subprocess.run([BENCHLAKE, "export", "--out", str(judged_home.parent / "ex")],
                              env=env, capture_output=True, text=True, timeout=600)
    assert exported.returncode == 0, exported.stderr[-3000:]
    [page] = (judged_home.parent / "ex").glob(f"*/rvp/{disputed}.html")
    assert "Manager review by <b>Ann Lee</b>: SB3 shows the drop" in page.read_text()
    # the key: in no file under the home or of the export, in no output
    for path in [*judged_home.rglob("*"), *(judged_home.parent / "ex").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    for run in (dry, done, again, settled, exported):
        assert SECRET not in run.stdout + run.stderr


def _first_case(home: Path, system: str) -> str:
    return duckdb.connect().execute(
        "SELECT min(case_id) FROM read_parquet(?) WHERE system = ?",
        [str(home / "tables" / "raw" / "rvp_candidates.parquet"), system]).fetchone()[0]
