"""Val-suite responses and scores end to end on the demo: ingest with rejects, policy v1 scores,
every aggregate view recomputed in plain Python, best checkpoints, deltas, mean@k / majority."""

from __future__ import annotations

import json
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from benchlake_demo.vv_responses import LMMS_FILE, LMMS_MODEL, VERL_N, VERL_ORDER, VERL_RUN
from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.runner import materialize
from dagster_project.tables import table_path
from dagster_project.video_val.schema import SOURCES
from dagster_project.video_val.scoring import score_response
from dagster_project.warehouse.catalog import connect
from tests.conftest import settings_for

# The response assets and every view downstream of them (verl's metrics included).
RESPONSES = "key:raw_vv_responses+"


def rows(con, sql, params=()):
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def raw_responses(settings) -> list[dict]:
    root = settings.responses_root()
    out = []
    for f in sorted(root.iterdir()):
        if f.suffix == ".jsonl":
            out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        elif f.suffix == ".parquet":
            out += pq.read_table(f).to_pylist()
    for r in out:
        r.setdefault("uid", f"{r.get('data_source')}:{r.get('row_index')}")
        r.setdefault("sample_idx", 0)
    # the verl run: rows in dataloader order (the demo's order of the files), n in a row
    sources = [(ds, len(pq.read_table(Path(settings.video_val_source_or_demo()) / name)))
               for name, ds in SOURCES.items()]
    order = [f"{ds}:{i}" for ds in VERL_ORDER for name, n in sources if name == ds
             for i in range(n)]
    for dump in sorted((root / VERL_RUN).glob("*.jsonl")):
        for i, line in enumerate(dump.read_text().splitlines()):
            rec = json.loads(line)
            out.append({"run_id": VERL_RUN, "step": int(dump.stem), "uid": order[i // VERL_N],
                        "sample_idx": i % VERL_N, "response": rec["output"]})
    # the lmms-eval log: the demo's doc_id is the Video-MME row; the raw response is scored
    for line in (root / LMMS_FILE).read_text().splitlines():
        rec = json.loads(line)
        out.append({"run_id": LMMS_MODEL, "step": 0, "uid": f"videomme_v1_test:{rec['doc_id']}",
                    "sample_idx": 0, "response": rec.get("resps", rec["filtered_resps"])})
    return out


def questions(settings) -> dict[str, dict]:
    """uid → (letters, ground truth, source) parsed here from the raw parquets."""
    import re

    out = {}
    for name, ds in SOURCES.items():
        table = pq.read_table(Path(settings.video_val_source_or_demo()) / name).to_pylist()
        for i, row in enumerate(table):
            user = [m["content"] for m in row["prompt"] if m["role"] == "user"][0]
            letters = "".join(re.findall(r"^([A-Z])\. ", user, flags=re.M))
            letters = letters[letters.rfind("A"):]  # the last A.. run
            out[f"{ds}:{i}"] = {"letters": letters, "gt": row["reward_model"]["ground_truth"],
                                "source": ds, "meta": row["extra_info"]}
    return out


@pytest.mark.parametrize(("policy", "rule"), [("card", "format_card"), ("strict", "format_exact")])
def test_scores_recomputed_in_python(demo_warehouse, policy, rule):
    qs = questions(demo_warehouse)
    per_row = defaultdict(list)
    for r in raw_responses(demo_warehouse):
        q = qs[r["uid"]]
        s = score_response(r["response"], q["letters"], q["gt"])
        per_row[(r["run_id"], r["step"], r["uid"])].append(s)
    con = connect(demo_warehouse.home)
    scored = rows(con, "SELECT * FROM vv_scored_responses WHERE policy = ?", [policy])
    assert len(scored) == sum(len(v) for v in per_row.values())
    assert {r["extraction_method"] for r in scored} >= {"boxed_answer", "fallback"}
    got = {(r["run_id"], r["step"], r["data_source"]): r
           for r in rows(con, "SELECT * FROM vv_scores WHERE policy = ?", [policy])}
    n_rows = Counter(q["source"] for q in qs.values())
    for (run, step) in {(k[0], k[1]) for k in per_row}:
        acc_by_source = {}
        for ds in n_rows:
            vals = [statistics.fmean(s.correct for s in v) for (r2, s2, uid), v in per_row.items()
                    if (r2, s2) == (run, step) and qs[uid]["source"] == ds]
            g = got[(run, step, ds)]
            assert (g["n_rows"], g["n_responded"]) == (n_rows[ds], len(vals))
            if not vals:  # the lmms-eval run answered Video-MME only
                assert g["accuracy"] is None and run == LMMS_MODEL
                continue
            assert g["accuracy"] == pytest.approx(statistics.fmean(vals), abs=1e-12)
            acc_by_source[ds] = statistics.fmean(vals)
        every = [statistics.fmean(s.correct for s in v) for (r2, s2, _), v in per_row.items()
                 if (r2, s2) == (run, step)]
        assert got[(run, step, "all")]["accuracy"] == pytest.approx(statistics.fmean(every),
                                                                    abs=1e-12)
        assert got[(run, step, "macro")]["accuracy"] == pytest.approx(
            statistics.fmean(acc_by_source.values()), abs=1e-12)
        # composite = 0.8 accuracy + 0.2 format under the policy's format rule
        comp = [statistics.fmean(0.8 * s.correct + 0.2 * getattr(s, rule) for s in v)
                for (r2, s2, _), v in per_row.items() if (r2, s2) == (run, step)]
        assert got[(run, step, "all")]["composite"] == pytest.approx(statistics.fmean(comp),
                                                                     abs=1e-12)
    best = {r["run_id"]: r for r in rows(
        con, "SELECT * FROM vv_best_checkpoints WHERE policy = ?", [policy])}
    for run in {k[0] for k in per_row}:
        steps = sorted({k[1] for k in per_row if k[0] == run})
        accs = [got[(run, s, "all")]["accuracy"] for s in steps]
        assert best[run]["best_step"] == steps[accs.index(max(accs))]  # ties: earliest


def test_policy_diff_lists_exactly_the_flips(demo_warehouse):
    qs = questions(demo_warehouse)
    flips = set()
    for r in raw_responses(demo_warehouse):
        s = score_response(r["response"], qs[r["uid"]]["letters"], qs[r["uid"]]["gt"])
        if s.format_card != s.format_exact:
            flips.add((r["run_id"], r["step"], r["uid"], r.get("sample_idx", 0) or 0))
    con = connect(demo_warehouse.home)
    diff = rows(con, "SELECT * FROM vv_policy_diff WHERE policy = 'card' AND base_policy = "
                     "'strict'")
    assert flips  # the demo has responses with text around the tags
    assert {(d["run_id"], d["step"], d["uid"], d["sample_idx"]) for d in diff} == flips
    assert all(d["format_ok"] and not d["base_format_ok"] for d in diff)
    scores = rows(con, "SELECT * FROM vv_policy_diff_scores WHERE policy = 'card' AND "
                       "base_policy = 'strict' AND data_source = 'all'")
    assert sum(r["n_flipped"] for r in scores) == len(flips)
    assert all(r["delta_accuracy"] == 0 and r["delta_format_rate"] >= 0 for r in scores)
    default = rows(con, "SELECT policy FROM vv_scoring_policies WHERE is_default")
    assert default == [{"policy": "card"}]


def test_tool_disagreements_recomputed_in_python(demo_warehouse):
    """vv_tool_disagreements lists exactly the demo responses where verl's acc / pred or
    lmms-eval's score / pred_answer differ from benchlake's own scoring of the same output."""
    qs = questions(demo_warehouse)
    root = demo_warehouse.responses_root()
    recorded = {}  # (run, step, uid, sample) -> (acc, pred)
    tool_rows = [r for r in raw_responses(demo_warehouse) if r["run_id"] in (VERL_RUN, LMMS_MODEL)]
    for step in (50, 100):
        for i, line in enumerate((root / VERL_RUN / f"{step}.jsonl").read_text().splitlines()):
            rec = json.loads(line)
            recorded[(VERL_RUN, step, i)] = (rec["acc"], rec["pred"])
    lmms = {json.loads(x)["doc_id"]: json.loads(x)["videomme_perception_score"]
            for x in (root / LMMS_FILE).read_text().splitlines()}
    expected, seen = set(), Counter()
    for r in tool_rows:
        q = qs[r["uid"]]
        s = score_response(r["response"], q["letters"], q["gt"])
        if r["run_id"] == VERL_RUN:
            acc, pred = recorded[(VERL_RUN, r["step"], seen[r["step"]])]
            seen[r["step"]] += 1
        else:
            m = lmms[int(r["uid"].split(":")[1])]
            acc, pred = m["score"], m["pred_answer"]
        differs = [name for name, d in (("acc", acc != float(s.correct)),
                                        ("pred", pred != (s.extracted or ""))) if d]
        if differs:
            expected.add((r["run_id"], r["step"], r["uid"], r["sample_idx"], ", ".join(differs)))
    con = connect(demo_warehouse.home)
    got = {(r["run_id"], r["step"], r["uid"], r["sample_idx"], r["differs_on"]) for r in rows(
        con, "SELECT * FROM vv_tool_disagreements")}
    assert got == expected and any(k[0] == VERL_RUN for k in got)


def test_breakdowns_and_coverage(demo_warehouse):
    con = connect(demo_warehouse.home)
    dims = {r["dimension"] for r in rows(con, "SELECT DISTINCT dimension FROM vv_breakdowns")}
    assert dims == {"task", "category", "question_type", "subject"}
    qt = rows(con, "SELECT DISTINCT value FROM vv_breakdowns WHERE dimension = 'question_type'")
    assert {r["value"] for r in qt} <= {"short", "medium", "long"}
    cov = rows(con, "SELECT * FROM vv_coverage WHERE data_source = 'all'")
    assert all(r["n_responded"] == r["n_rows"] == 30 for r in cov if r["run_id"] != LMMS_MODEL)
    assert [r["n_responded"] for r in cov if r["run_id"] == LMMS_MODEL] == [
        sum(uid.startswith("videomme_v1_test:") for uid in questions(demo_warehouse))]


def test_deltas_and_samples(demo_warehouse):
    con = connect(demo_warehouse.home)
    d = rows(con, "SELECT * FROM vv_run_deltas WHERE kind = 'same_step' AND base_run_id = "
                  "'base-rl' AND data_source = 'all'")
    scores = {(r["run_id"], r["step"]): r["accuracy"] for r in rows(
        con, "SELECT * FROM vv_scores WHERE data_source = 'all'")}
    assert d and all(r["delta_accuracy"] == pytest.approx(
        scores[(r["run_id"], r["step"])] - scores[("base-rl", r["step"])]) for r in d)
    k = rows(con, "SELECT * FROM vv_scores_at_k WHERE data_source = 'all' AND k > 1")
    assert {(r["run_id"], r["step"], r["k"]) for r in k} == {
        ("base-rl", 60, 4), ("verl-grpo", 50, 4), ("verl-grpo", 100, 4)}
    for at_k in k:
        s = rows(con, "SELECT * FROM vv_scored_responses WHERE run_id = ? AND step = ? "
                      "AND policy = 'card'", [at_k["run_id"], at_k["step"]])
        by_uid = defaultdict(list)
        for r in s:
            by_uid[r["uid"]].append(r)
        maj = 0
        for uid_rows in by_uid.values():
            votes = Counter(r["extracted"] for r in uid_rows if r["extracted"])
            if votes:
                top = max(votes.values())
                letter = min(x for x, n in votes.items() if n == top)
                maj += letter == uid_rows[0]["ground_truth"]
        assert at_k["majority_accuracy"] == pytest.approx(maj / len(by_uid))


@pytest.fixture
def responses_home(demo_warehouse, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(demo_warehouse.home, home, ignore=shutil.ignore_patterns("dagster"))
    table_path(home, "vv_response_files").unlink()
    for parts in ("vv_responses", "vv_response_rejects", "vv_scored_responses"):
        shutil.rmtree(table_path(home, parts, "_schema").parent)
    drop = tmp_path / "responses"
    shutil.copytree(demo_warehouse.responses_root(), drop)
    return settings_for(home, responses_dir=str(drop)), drop


@pytest.mark.slow
def test_bad_responses_are_rejected_with_reasons(responses_home):
    settings, drop = responses_home
    good = (drop / "base-rl.jsonl").read_text().splitlines()[0]
    lines = [good,  # duplicate of base-rl.jsonl line 1
             json.dumps({"run_id": "x", "step": 1, "uid": "videomme_v1_test:999",
                         "response": "A"}),
             json.dumps({"run_id": "x", "step": 1, "data_source": "video_holmes_test",
                         "row_index": 0, "response": "<answer>\\boxed{F}</answer>"}),
             "{not json"]
    (drop / "extra.jsonl").write_text("\n".join(lines) + "\n")
    (drop / "empty.jsonl").write_text("")
    assert materialize(settings, RESPONSES, checks=False).success
    con = connect(settings.home)
    rej = {(r["source_file"], r["line"]): r["reason"] for r in rows(
        con, "SELECT * FROM vv_response_rejects")}
    assert "duplicate of base-rl.jsonl v1 line 1" in rej[("extra.jsonl", 1)]
    assert "unknown uid 'videomme_v1_test:999'" in rej[("extra.jsonl", 2)]
    assert "not JSON" in rej[("extra.jsonl", 4)]
    assert "empty file" in rej[("empty.jsonl", None)]
    ok = rows(con, "SELECT * FROM vv_scored_responses WHERE run_id = 'x'")
    assert [(r["uid"], r["extracted"], r["correct"]) for r in ok][0][:2] == (
        "video_holmes_test:0", "F")


@pytest.mark.slow
def test_responses_sensor(responses_home):
    from dagster_project.defs.video_val.sensors import vv_responses_sensor

    settings, drop = responses_home
    res = {"benchlake": BenchlakeSettings.from_settings(settings)}
    first = vv_responses_sensor(dg.build_sensor_context(resources=res))
    assert len(first.run_requests) == 1
    again = vv_responses_sensor(dg.build_sensor_context(cursor=first.cursor, resources=res))
    assert not again.run_requests and again.skip_reason
    (drop / "new.jsonl").write_text((drop / "base-rl.jsonl").read_text().splitlines()[0] + "\n")
    later = vv_responses_sensor(dg.build_sensor_context(cursor=first.cursor, resources=res))
    assert "new.jsonl" in later.run_requests[0].tags["benchlake/changed_files"]
