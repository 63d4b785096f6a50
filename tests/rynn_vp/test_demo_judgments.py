"""The embedded judgments demo and the v1 role prompts: records valid against the shipped schema
(except the one planted bad line), GT compilations keyed by the right fingerprint, PI-5 only on
the explicit-plan case, evidence ids and hallucination loci that exist, the planted attempts,
determinism."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from benchlake_demo.rvp_candidates import (
    STORYBOARD,
    VEO,
    WAN,
    DemoCandidate,
    build_candidates_demo,
    demo_plan,
)
from benchlake_demo.rvp_judgments import (
    DEMO_JUDGE_RUNS,
    PROMPT_ROLES,
    PROMPT_VERSION,
    PROMPTS_DIR,
    build_judgments_demo,
    demo_expectations,
)
from benchlake_demo.rynn_vp import build_rynn_vp_demo
from dagster_project.rynn_vp.evidence import (
    N_PANELS,
    PANELS_PER_STORYBOARD,
    anchor_intervals,
    select_steps,
)
from dagster_project.rynn_vp.fingerprint import GT_INPUT_FILES, gt_fingerprint
from dagster_project.rynn_vp.parsing import DONE_LABELS, parse_interval
from dagster_project.settings import ASSETS_DIR

SCHEMAS = ASSETS_DIR / "schemas"
EXPECT = demo_expectations()
PLAN = {(c.system, c.case_id): c for c in demo_plan()}
EVIDENCE_ID = re.compile(r"[^\s:]+/[^#\s]+#(?:S0|A\d+|P\d+|SB\d+|step-\w+)")


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("judgments-inputs")
    return (build_rynn_vp_demo(root / "Rynn-VP"), build_candidates_demo(root / "candidates"))


@pytest.fixture(scope="module")
def demo(inputs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_judgments_demo(tmp_path_factory.mktemp("j") / "judgments", *inputs)


@pytest.fixture(scope="module")
def lines(demo: Path) -> list[tuple[str, int, str, dict[str, Any]]]:
    """(file, 1-based line, raw, parsed) for every line of every run."""
    out = []
    for run in DEMO_JUDGE_RUNS:
        name = f"{run}.jsonl"
        for n, raw in enumerate((demo / name).read_text(encoding="utf-8").splitlines(), 1):
            out.append((name, n, raw, json.loads(raw)))
    return out


@pytest.fixture(scope="module")
def records(lines: list[tuple[str, int, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The valid records (the planted bad line left out)."""
    bad = EXPECT["rejected"]
    return [r for f, n, _, r in lines if (f, n) != (bad["file"], bad["line"])]


@pytest.fixture(scope="module")
def cases(inputs: tuple[Path, Path]) -> dict[str, dict[str, Any]]:
    """task.json + planning of each demo case, read back from the snapshot."""
    out = {}
    for case_dir in sorted((inputs[0] / "cases").iterdir()):
        task = json.loads((case_dir / "task.json").read_text(encoding="utf-8"))
        ann = json.loads((case_dir / "gt_annotations.json").read_text(encoding="utf-8"))
        out[case_dir.name] = {"task": task, "planning": ann["planning"]}
    return out


def n_anchors(planning: dict[str, str]) -> int:
    rows = [{"ordinal": n, "interval": k, "end_s": parse_interval(k)[1], "label": v,
             "is_done_label": v in DONE_LABELS} for n, (k, v) in enumerate(planning.items(), 1)]
    return len(anchor_intervals(rows))


def allowed_ids(c: DemoCandidate, planning: dict[str, str]) -> set[str]:
    """Every evidence id the evidence policy produces for this evaluation."""
    suffixes = {"S0", *(f"A{n}" for n in range(1, n_anchors(planning) + 1))}
    if c.modality == "video":
        n = min(N_PANELS, c.n_frames)
        suffixes |= {f"P{p:02d}" for p in range(1, n + 1)}
        suffixes |= {f"SB{b}" for b in range(1, math.ceil(n / PANELS_PER_STORYBOARD) + 1)}
    else:
        suffixes |= {f"step-{s}" for s in select_steps(list(c.step_ids))[0]}
    return {f"{c.system}/{c.case_id}#{s}" for s in suffixes}


# --- files and schema -----------------------------------------------------------------------


def test_layout(demo: Path) -> None:
    gt = EXPECT["gt_compilations"]
    expected = {f"{run}.jsonl" for run in DEMO_JUDGE_RUNS} | set(gt["files"]) | {
        gt["stale"]["file"]}
    assert set(tree_bytes(demo)) == expected


def test_dest_must_not_exist(demo: Path, inputs: tuple[Path, Path]) -> None:
    with pytest.raises(FileExistsError):
        build_judgments_demo(demo, *inputs)


def test_every_line_but_the_planted_one_validates(lines: list) -> None:
    v = validator("judgment_record.schema.json")
    bad = EXPECT["rejected"]
    failing = {}
    for f, n, raw, rec in lines:
        # One record per line, sorted keys, compact separators.
        assert raw == json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        errors = list(v.iter_errors(rec))
        if errors:
            failing[(f, n)] = errors
    assert set(failing) == {(bad["file"], bad["line"])}
    (error,) = failing[(bad["file"], bad["line"])]
    assert list(error.absolute_path) == ["metrics", bad["metric"]]
    assert error.instance == bad["value"]
    rec = next(r for f, n, _, r in lines if (f, n) == (bad["file"], bad["line"]))
    assert (rec["system"], rec["case_id"], rec["attempt"]) == (
        bad["system"], bad["case_id"], bad["attempt"])
    for run in DEMO_JUDGE_RUNS:
        info = EXPECT["runs"][run]
        assert sum(f == info["file"] for f, *_ in lines) == info["lines"]


def test_gt_compilations_validate_and_are_keyed_by_fingerprint(
        demo: Path, inputs: tuple[Path, Path], cases: dict) -> None:
    v = validator("gt_compilation.schema.json")
    gt = EXPECT["gt_compilations"]
    assert gt["case_ids"] == sorted(cases)
    for rel in [*gt["files"], gt["stale"]["file"]]:
        rec = json.loads((demo / rel).read_text(encoding="utf-8"))
        assert not list(v.iter_errors(rec)), rel
        digests = {name: hashlib.sha256((inputs[0] / "cases" / rec["case_id"] / name)
                                        .read_bytes()).hexdigest() for name in GT_INPUT_FILES}
        assert rec["fingerprint"] == gt_fingerprint(digests, rec["prompt_version"])
        assert rec["judge"]["prompt_version"] == rec["prompt_version"]
        comp = rec["compilation"]
        assert comp["entity_correspondence"] and comp["goal_predicates"]
        planning = cases[rec["case_id"]]["planning"]
        assert {p["interval"] for p in comp["necessary_process_evidence"]} <= set(planning)
        if rel == gt["stale"]["file"]:
            assert (rec["prompt_version"], rec["judge_run_id"]) == (
                gt["stale"]["prompt_version"], gt["stale"]["judge_run_id"])
            assert rec["prompt_version"] != PROMPT_VERSION
            current = json.loads((demo / f"gt_compilations/{rec['case_id']}.json").read_text())
            assert current["fingerprint"] != rec["fingerprint"]  # the cache must not reuse it
        else:
            assert rec["case_id"] == Path(rel).stem
            assert (rec["prompt_version"], rec["judge_run_id"]) == (PROMPT_VERSION,
                                                                    gt["judge_run_id"])


# --- record content -------------------------------------------------------------------------


def test_one_initial_record_per_candidate(records: list[dict]) -> None:
    initial = {r["judge_run_id"]: set() for r in records}
    for r in records:
        if r["attempt"] == 1:
            assert r["attempt_kind"] == "initial"
            key = (r["system"], r["case_id"])
            assert key not in initial[r["judge_run_id"]]
            initial[r["judge_run_id"]].add(key)
    assert initial["judge-run-a"] == set(PLAN)
    run_b = EXPECT["run_b"]
    assert initial["judge-run-b"] == {k for k in PLAN if k[0] in run_b["systems"]
                                      and k[1] in run_b["case_ids"]}
    assert len(initial["judge-run-b"]) < len(PLAN)
    for run in DEMO_JUDGE_RUNS:
        assert sorted(f"{s}/{c}" for s, c in initial[run]) == EXPECT["runs"][run]["evaluations"]


def test_pi5_only_on_the_explicit_plan_case(records: list[dict], cases: dict) -> None:
    plan_cases = {cid for cid, c in cases.items() if c["task"].get("plan")}
    assert plan_cases == {EXPECT["pi5_case"]}
    seen = 0
    for r in records:
        assert ("PI-5" in r["metrics"]) == (r["case_id"] in plan_cases), r["case_id"]
        seen += r["case_id"] in plan_cases
    assert seen >= 2


def test_scores(records: list[dict]) -> None:
    for r in records:
        m = r["metrics"]
        assert {f"PI-{k}" for k in (1, 2, 3, 4, 6)} | {f"VR-{k}" for k in range(1, 9)} | {
            "VQ"} <= set(m)
        assert any(k.startswith("VQ-D") for k in m)
        assert all(0 <= x <= 100 and round(x, 1) == x for x in m.values())

    def mean(system: str, axis: str) -> float:
        return statistics.mean(r["metrics"][axis] for r in records if r["system"] == system)

    assert mean(VEO, "PI-1") > mean(WAN, "PI-1")
    assert mean(VEO, "VR-1") > mean(WAN, "VR-1") > mean(STORYBOARD, "VR-1")
    assert mean(VEO, "VQ") > mean(WAN, "VQ") > mean(STORYBOARD, "VQ")


def test_judge_block(records: list[dict]) -> None:
    for r in records:
        c = PLAN[(r["system"], r["case_id"])]
        j = r["judge"]
        assert (j["model"], j["reasoning"], j["prompt_version"], j["context_sharing"]) == (
            "GPT-6-sol", "high", PROMPT_VERSION, "fresh context per role")
        assert j["input_modality"] == c.modality
        if c.modality == "video" and c.n_frames >= N_PANELS:
            assert j["candidate_scope"] == "30 panels over the full clip"
        elif c.modality == "video":
            assert j["candidate_scope"].startswith(f"{c.n_frames} panels")
        else:
            assert j["candidate_scope"] == f"all {len(c.step_ids)} steps"


def test_evidence_ids_exist(records: list[dict], cases: dict) -> None:
    storyboards_cited = 0
    for r in records:
        c = PLAN[(r["system"], r["case_id"])]
        allowed = allowed_ids(c, cases[c.case_id]["planning"])
        ev = r["evidence"]
        assert len(ev) == len(set(ev))
        assert set(ev) <= allowed, set(ev) - allowed
        assert f"{c.system}/{c.case_id}#S0" in ev and f"{c.system}/{c.case_id}#A1" in ev
        if c.modality == "video":
            assert sum("#SB" in i for i in ev) == 1
            storyboards_cited += 1
        else:
            assert any("#step-" in i for i in ev)
        # Ids quoted inside observations are cited by the record too.
        for h in r["hallucinations"]:
            for obs in h["contradictory_observations"]:
                quoted = EVIDENCE_ID.findall(obs)
                assert quoted and set(quoted) <= set(ev), obs
    assert storyboards_cited > 0


def test_hallucinations_are_localized(records: list[dict], cases: dict) -> None:
    found = []
    for r in records:
        c = PLAN[(r["system"], r["case_id"])]
        for h in r["hallucinations"]:
            if c.modality == "video":
                assert h["locus"] in cases[c.case_id]["planning"]
                assert cases[c.case_id]["planning"][h["locus"]] not in DONE_LABELS
                kind = "interval"
            else:
                assert h["locus"] in c.step_ids
                kind = "step"
            assert h["entity"] in cases[c.case_id]["task"]["instruction"]
            found.append({"judge_run_id": r["judge_run_id"], "attempt": r["attempt"],
                          "system": r["system"], "case_id": r["case_id"], "locus": h["locus"],
                          "locus_kind": kind, "entity": h["entity"]})
    assert found == EXPECT["hallucinations"]
    assert {h["locus_kind"] for h in found} == {"interval", "step"}


def test_planted_attempts(records: list[dict]) -> None:
    by_eval: dict[tuple[str, str, str], list[dict]] = {}
    for r in records:
        by_eval.setdefault((r["judge_run_id"], r["system"], r["case_id"]), []).append(r)
    multi = {k: v for k, v in by_eval.items() if len(v) > 1}
    planted = {name: EXPECT[name] for name in ("retry", "manager_review")}
    assert set(multi) == {(e["judge_run_id"], e["system"], e["case_id"])
                          for e in planted.values()}
    for e in planted.values():
        recs = sorted(multi[(e["judge_run_id"], e["system"], e["case_id"])],
                      key=lambda r: r["attempt"])
        assert [r["attempt"] for r in recs] == e["attempts"]
        assert [r["attempt_kind"] for r in recs] == e["attempt_kinds"]
        assert recs[-1]["attempt"] == e["final_attempt"]
        assert recs[-1]["metrics"] != recs[0]["metrics"]
    assert EXPECT["retry"]["attempt_kinds"][-1] == "retry"
    assert EXPECT["manager_review"]["attempt_kinds"][-1] == "manager_review"


def test_gt_stage_compiled_once_in_run_a_cached_in_run_b(records: list[dict]) -> None:
    compiled: dict[str, list[str]] = {run: [] for run in DEMO_JUDGE_RUNS}
    for r in records:
        for s in r["stages"]:
            if s["stage"] == "gt_compilation":
                assert r["attempt"] == 1
                if s["status"] == "ok":
                    compiled[r["judge_run_id"]].append(r["case_id"])
                else:
                    assert (s["status"], s["attempt_kind"]) == ("cached", "cached")
        if r["attempt"] == 1:
            assert {s["stage"] for s in r["stages"]} == set(PROMPT_ROLES)
    assert sorted(compiled["judge-run-a"]) == EXPECT["gt_compilations"]["case_ids"]
    assert compiled["judge-run-b"] == []


# --- determinism, expectations, prompts ------------------------------------------------------


def test_deterministic(demo: Path, inputs: tuple[Path, Path], tmp_path: Path) -> None:
    again = build_judgments_demo(tmp_path / "judgments", *inputs)
    assert tree_bytes(again) == tree_bytes(demo)


def test_expectations_are_pure_and_serializable() -> None:
    assert demo_expectations() == EXPECT
    assert json.loads(json.dumps(EXPECT)) == EXPECT
    assert EXPECT["judge_runs"] == list(DEMO_JUDGE_RUNS) == ["judge-run-a", "judge-run-b"]


COMMON = {"{{prompt_version}}", "{{case_id}}", "{{instruction}}", "{{evidence_manifest}}"}
REQUIRED = {
    "gt_compilation": {"{{explicit_plan}}", "{{gt_annotations}}", "{{input_fingerprint}}"},
    "observer": {"{{evaluation_id}}", "{{gt_compilation_ref}}", "{{input_modality}}",
                 "{{candidate_scope}}", "{{explicit_plan}}"},
    "vr_vq_judge": {"{{evaluation_id}}", "{{gt_compilation_ref}}", "{{observer_report}}"},
    "hallucination_auditor": {"{{evaluation_id}}", "{{gt_compilation_ref}}", "{{gt_intervals}}",
                              "{{observer_report}}"},
    "pi_judge": {"{{evaluation_id}}", "{{gt_compilation_ref}}", "{{explicit_plan}}",
                 "{{hallucination_report}}"},
    "critic": {"{{evaluation_id}}", "{{gt_compilation_ref}}", "{{explicit_plan}}",
               "{{pi_report}}", "{{vr_vq_report}}", "{{hallucination_report}}"},
}
VOCABULARY = {"{{system}}", "{{judge_run_id}}"} | COMMON | set().union(*REQUIRED.values())


@pytest.mark.parametrize("role", PROMPT_ROLES)
def test_prompt_templates(role: str) -> None:
    text = (PROMPTS_DIR / f"{role}.md").read_text(encoding="utf-8")
    assert 30 <= len(text.splitlines()) <= 80
    used = set(re.findall(r"\{\{[^}]*\}\}", text))
    assert COMMON | REQUIRED[role] <= used
    assert used <= VOCABULARY, used - VOCABULARY  # no misspelt placeholders
    assert "```json" in text and "evidence" in text


def test_prompt_version_file() -> None:
    assert (PROMPTS_DIR / "VERSION").read_text().strip() == PROMPT_VERSION
    assert sorted(p.stem for p in PROMPTS_DIR.glob("*.md")) == sorted(PROMPT_ROLES)
    metrics = {"pi_judge": ["PI-1", "PI-4", "PI-5", "PI-6", ".50/.20/.15/.15"],
               "vr_vq_judge": ["VR-1", "VR-8", "VQ-D1", "VQ-D7"],
               "hallucination_auditor": ["entity", "locus", "contradictory_observations",
                                         "affected_chain"]}
    for role, words in metrics.items():
        text = (PROMPTS_DIR / f"{role}.md").read_text(encoding="utf-8")
        assert all(w in text for w in words), role
