"""Judgment ingest: every rejection reason once, duplicates and conflicts, final-attempt choice,
stage rows and GT compilation records. Small hand-built contexts; no Dagster, no demo."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dagster_project.rynn_vp.judgment_records import (
    GT_SCHEMA,
    JUDGMENT_SCHEMA,
    MAX_RECORD_BYTES,
    METRIC_COLUMNS,
    CandidateInfo,
    CaseInfo,
    EvalContext,
    SourceFile,
    _fast_check,
    _validator,
    canonical_json,
)
from dagster_project.rynn_vp.judgments import IngestResult, ingest

PLAIN = "source1_1-Bedroom-Room_03-Task_02-Variant_07-001"  # no explicit plan
PLANNED = "source2_1-Kitchen-Room_01-Task_01-Variant_01-001"  # explicit plan
EMPTY = "source3_1-Office-Room_02-Task_01-Variant_01-001"  # nobody submitted a candidate
VEO, STORY = "veo-sim", "storyboard-sim"
FP = {PLAIN: "a" * 64, PLANNED: "b" * 64, EMPTY: "c" * 64}

CTX = EvalContext(
    systems=frozenset({VEO, STORY}),
    cases={
        PLAIN: CaseInfo(False, frozenset({"0.0s-2.2s", "2.2s-5.4s"})),
        PLANNED: CaseInfo(True, frozenset({"0.0s-3.0s"})),
        EMPTY: CaseInfo(False, frozenset({"0.0s-1.0s"})),
    },
    candidates={
        (VEO, PLAIN): CandidateInfo("video", frozenset()),
        (VEO, PLANNED): CandidateInfo("video", frozenset()),
        (STORY, PLAIN): CandidateInfo("images", frozenset({"01", "02", "03"})),
    },
    evidence_ids={
        f"{VEO}/{PLAIN}": frozenset({f"{VEO}/{PLAIN}#S0", f"{VEO}/{PLAIN}#P01"}),
        f"{VEO}/{PLANNED}": frozenset({f"{VEO}/{PLANNED}#P01"}),
        f"{STORY}/{PLAIN}": frozenset({f"{STORY}/{PLAIN}#ST01"}),
    },
    gt_fingerprints=FP,
)


def record(system: str = VEO, case_id: str = PLAIN, **over: Any) -> dict[str, Any]:
    """A valid judgment record for (system, case_id); `over` replaces top-level fields."""
    metrics: dict[str, Any] = {"PI-1": 80, "PI-2": 70, "PI-3": 60, "PI-4": 50.5, "VQ": 90}
    metrics |= {f"VR-{i}": 10 * i for i in range(1, 9)}
    case = CTX.cases.get(case_id)
    if case is not None and case.has_explicit_plan:
        metrics["PI-5"] = 40
    cand = CTX.candidates.get((system, case_id))
    rec: dict[str, Any] = {
        "system": system, "case_id": case_id, "judge_run_id": "run-1", "attempt": 1,
        "metrics": metrics,
        "hallucinations": [],
        "evidence": sorted(CTX.evidence_ids.get(f"{system}/{case_id}", {"x#S0"}))[:1],
        "judge": {"model": "GPT-6-sol", "reasoning": "high", "prompt_version": "v1",
                  "input_modality": cand.modality if cand else "video",
                  "candidate_scope": "full", "context_sharing": "isolated"},
    }
    rec.update(over)
    return rec


def gt_record(case_id: str = PLAIN, fingerprint: str | None = None, run: str = "run-1",
              **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "case_id": case_id, "fingerprint": fingerprint or FP.get(case_id, "d" * 64),
        "prompt_version": "v1", "judge_run_id": run,
        "compilation": {"entity_correspondence": {"pillow": "pillow"}, "goal_predicates": ["g"],
                        "necessary_process_evidence": [], "allowed_alternatives": [],
                        "uncertainties": []},
        "judge": {"model": "GPT-6-sol", "reasoning": "high", "prompt_version": "v1"},
    }
    rec.update(over)
    return rec


class Drop:
    """A judgments folder in tmp_path: write files, get SourceFiles with their version."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.versions: dict[str, int] = {}

    def write(self, name: str, content: str | bytes) -> SourceFile:
        data = content.encode() if isinstance(content, str) else content
        version = self.versions.get(name, 0) + 1
        self.versions[name] = version
        path = self.root / "archive" / f"{name}.v{version}"  # successive versions side by side
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return SourceFile(name, version, hashlib.sha256(data).hexdigest(), path)

    def json(self, name: str, obj: Any) -> SourceFile:
        return self.write(name, json.dumps(obj, indent=2))

    def jsonl(self, name: str, objs: list[Any]) -> SourceFile:
        return self.write(name, "".join(json.dumps(o) + "\n" for o in objs))


@pytest.fixture
def drop(tmp_path: Path) -> Drop:
    return Drop(tmp_path)


def one_reject(result: IngestResult) -> dict[str, Any]:
    assert len(result.rejects) == 1, result.rejects
    return result.rejects[0]


def rejected(drop: Drop, rec: dict[str, Any]) -> str:
    """Ingest `rec` alone; it must be rejected; its reason."""
    name = f"j{len(drop.versions)}.json"
    result = ingest([drop.json(name, rec)], CTX)
    assert result.judgments == []
    row = one_reject(result)
    assert row["line"] == 1 and row["source_file"] == name and row["file_version"] == 1
    assert json.loads(row["raw"]) == rec  # kept exactly as read
    return row["reason"]


# --- accepted rows ---------------------------------------------------------------------------


def test_valid_record_gives_full_row(drop: Drop) -> None:
    rec = record(hallucinations=[{"entity": "pillow", "locus": "2.2s-5.4s",
                                  "contradictory_observations": ["cover reappears"],
                                  "affected_chain": "fold", "severity": "major"}])
    rec["metrics"]["VQ-D3"] = 12
    result = ingest([drop.json("j.json", rec)], CTX)
    assert result.rejects == [] and result.duplicates == 0
    [row] = result.judgments
    assert set(METRIC_COLUMNS.values()) <= set(row)
    assert (row["pi_1"], row["pi_4"], row["vr_8"], row["vq"], row["vq_d3"]) == (80, 50.5, 80, 90, 12)
    assert row["pi_5"] is None and row["pi_6"] is None and row["vq_d1"] is None
    assert row["evaluation_id"] == f"{VEO}/{PLAIN}" and row["attempt_kind"] == "initial"
    assert row["is_final"] is True and row["n_hallucinations"] == 1
    assert row["judge_model"] == "GPT-6-sol" and row["input_modality"] == "video"
    assert row["has_explicit_plan"] is False and row["line"] == 1
    canonical = json.dumps(rec, sort_keys=True, separators=(",", ":"))
    assert row["record_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    [h] = result.hallucinations
    assert (h["hallucination_no"], h["locus"], h["locus_kind"], h["severity"]) == (
        1, "2.2s-5.4s", "interval", "major")
    assert h["is_final"] is True and h["contradictory_observations"] == ["cover reappears"]


def test_step_locus_and_json_array(drop: Drop) -> None:
    a = record(STORY, hallucinations=[{"entity": "cup", "locus": "02",
                                       "contradictory_observations": ["o"],
                                       "affected_chain": "c"}])
    b = record(STORY, attempt=2, attempt_kind="retry")
    text = "[\n  " + json.dumps(a) + " ,\n" + json.dumps(b, indent=1) + "\n]"
    result = ingest([drop.write("arr.json", text)], CTX)
    assert result.rejects == []
    assert [(r["attempt"], r["line"]) for r in result.judgments] == [(1, 1), (2, 2)]
    [h] = result.hallucinations
    assert h["locus_kind"] == "step" and h["severity"] is None and h["is_final"] is False


# --- file-level problems ---------------------------------------------------------------------


def test_not_json(drop: Drop) -> None:
    row = one_reject(ingest([drop.write("j.json", '{"system": "veo-sim",')], CTX))
    assert row["reason"].startswith("not JSON: ") and "line 1 column" in row["reason"]
    assert row["line"] is None and row["raw"] == '{"system": "veo-sim",'


def test_not_utf8(drop: Drop) -> None:
    row = one_reject(ingest([drop.write("j.json", b'{"system": "v\xffo"}')], CTX))
    assert row["reason"].startswith("not UTF-8: ") and "position 13" in row["reason"]


def test_jsonl_one_bad_line_among_good(drop: Drop) -> None:
    good1, good2 = record(), record(attempt=2)
    text = json.dumps(good1) + "\n\n{oops\n" + json.dumps(good2) + "\n"
    result = ingest([drop.write("run.jsonl", text)], CTX)
    assert [r["line"] for r in result.judgments] == [1, 4]
    row = one_reject(result)
    assert row["line"] == 3 and row["raw"] == "{oops" and row["reason"].startswith("not JSON")


def test_jsonl_undecodable_line_keeps_the_others(drop: Drop) -> None:
    data = json.dumps(record()).encode() + b"\n\xfe\xff\n"
    result = ingest([drop.write("run.jsonl", data)], CTX)
    assert len(result.judgments) == 1
    row = one_reject(result)
    assert row["line"] == 2 and row["reason"].startswith("not UTF-8")


def test_repeated_key_and_nan_are_refused(drop: Drop) -> None:
    text = json.dumps(record()).replace('"VQ": 90', '"VQ": 90, "VQ": 10')
    assert "appears twice" in one_reject(ingest([drop.write("a.json", text)], CTX))["reason"]
    text = json.dumps(record()).replace('"VQ": 90', '"VQ": NaN')
    assert "NaN" in one_reject(ingest([drop.write("b.json", text)], CTX))["reason"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_limits_are_per_record_not_per_file(drop: Drop, suffix: str) -> None:
    """A campaign file far over the record limit is read whole; only the one runaway record
    (over MAX_RECORD_BYTES) is refused, with its line, and its neighbours flow."""
    runs = [record(judge_run_id=f"run-{n}", attempt=1) for n in range(2000)]
    runaway = record(judge_run_id="run-huge", note="x" * (MAX_RECORD_BYTES + 10))
    records = [*runs[:1000], runaway, *runs[1000:]]
    text = ("".join(json.dumps(r) + "\n" for r in records) if suffix == ".jsonl"
            else json.dumps(records, indent=1))
    assert len(text) > 2 * MAX_RECORD_BYTES
    result = ingest([drop.write(f"campaign{suffix}", text)], CTX)
    row = one_reject(result)
    assert row["line"] == 1001  # the line of a .jsonl, the index in a .json array
    assert f"over the limit of {MAX_RECORD_BYTES} bytes per record" in row["reason"]
    assert len(row["raw"]) == MAX_RECORD_BYTES and row["raw"].startswith("{")
    assert len(result.judgments) == 2000


def test_wrong_extension(drop: Drop) -> None:
    row = one_reject(ingest([drop.write("notes.txt", json.dumps(record()))], CTX))
    assert row["line"] is None and "'.txt'" in row["reason"] and "*.jsonl" in row["reason"]


def test_empty_files_are_listed(drop: Drop) -> None:
    result = ingest([drop.write("a.jsonl", "\n \n"), drop.write("b.json", "[]")], CTX)
    assert [r["reason"].startswith("file holds no records") for r in result.rejects] == [True] * 2


def test_archive_copy_must_match_its_sha(drop: Drop) -> None:
    sf = drop.json("j.json", record())
    sf.path.write_text(json.dumps(record(attempt=2)))
    assert "differs from the recorded" in one_reject(ingest([sf], CTX))["reason"]


def test_record_must_be_an_object(drop: Drop) -> None:
    result = ingest([drop.write("j.jsonl", '[1, 2]\n"x"\n')], CTX)
    assert [r["reason"] for r in result.rejects] == [
        "a judgment record must be a JSON object, not an array",
        "a judgment record must be a JSON object, not a string"]


# --- metrics ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "reason"), [
    (101, "metric VR-3 = 101 is outside 0-100"),
    (-1, "metric VR-3 = -1 is outside 0-100"),
    ("80", 'metric VR-3 is "80", not a number'),
    (True, "metric VR-3 is true, not a number"),
    (None, "metric VR-3 is null, not a number"),
])
def test_bad_score(drop: Drop, value: Any, reason: str) -> None:
    rec = record()
    rec["metrics"]["VR-3"] = value
    assert rejected(drop, rec) == reason


@pytest.mark.parametrize("change", [{}, {"VR-9": 10, "PI-6": 0}, {"VQ": 100.0, "PI-5": 30},
                                    {"VR-4": None}, {"VQ-D9": 1, "PI-1": 99.5}])
def test_metric_names_alone_decide_for_a_record_its_schema_passes(change: dict) -> None:
    """A record its schema passes has numbers of 0-100 for metrics: `in_range` checks only their
    names, and says what the full check says."""
    from dagster_project.rynn_vp.judgment_records import (
        JUDGMENT_SCHEMA,
        _fast_check,
        _metric_reasons,
    )

    compared = 0
    for case_id in (PLAIN, PLANNED):
        rec = record(case_id=case_id)
        rec["metrics"].update(change)
        rec["metrics"] = {k: v for k, v in rec["metrics"].items() if v is not None}
        if _fast_check(JUDGMENT_SCHEMA)(rec):
            case = CTX.cases[case_id]
            assert (_metric_reasons(rec["metrics"], case_id, case, in_range=True)
                    == _metric_reasons(rec["metrics"], case_id, case))
            compared += 1
    assert compared == 2  # the schema passes each change on both cases


def test_missing_vr_metric(drop: Drop) -> None:
    rec = record()
    del rec["metrics"]["VR-4"]
    assert rejected(drop, rec) == "missing metric VR-4"


def test_unknown_metric(drop: Drop) -> None:
    rec = record()
    rec["metrics"]["VR-9"] = 10
    assert rejected(drop, rec) == "unknown metric 'VR-9'"


def test_pi5_on_case_without_plan(drop: Drop) -> None:
    rec = record()
    rec["metrics"]["PI-5"] = 30
    assert rejected(drop, rec) == f"PI-5 given but case {PLAIN} has no explicit plan"


def test_pi5_missing_on_plan_case(drop: Drop) -> None:
    rec = record(case_id=PLANNED)
    del rec["metrics"]["PI-5"]
    assert rejected(drop, rec) == f"PI-5 missing: case {PLANNED} has an explicit plan"
    ok = ingest([drop.json("ok.json", record(case_id=PLANNED))], CTX)
    assert ok.rejects == [] and ok.judgments[0]["pi_5"] == 40
    assert ok.judgments[0]["has_explicit_plan"] is True


def test_all_problems_in_one_row(drop: Drop) -> None:
    rec = record(attempt=0)
    rec["metrics"]["PI-1"] = 101
    del rec["metrics"]["VQ"]
    reason = rejected(drop, rec)
    assert reason.split("; ") == ["attempt = 0 is below the minimum 1",
                                  "metric PI-1 = 101 is outside 0-100", "missing metric VQ"]


# --- loci, evidence, identity of the evaluation ----------------------------------------------


def test_unknown_interval_locus(drop: Drop) -> None:
    rec = record(hallucinations=[{"entity": "cup", "locus": "9.9s-10.0s",
                                  "contradictory_observations": ["o"], "affected_chain": "c"}])
    assert rejected(drop, rec) == (f"hallucination 1: locus '9.9s-10.0s' is neither an interval "
                                   f"of case {PLAIN} nor a step id of the candidate")


def test_unknown_step_locus(drop: Drop) -> None:
    ok = {"entity": "cup", "locus": "01", "contradictory_observations": ["o"],
          "affected_chain": "c"}
    rec = record(STORY, hallucinations=[ok, dict(ok, locus="07")])
    assert rejected(drop, rec).startswith("hallucination 2: locus '07' is neither")


def test_evidence_from_another_evaluation(drop: Drop) -> None:
    other = f"{VEO}/{PLANNED}#P01"
    rec = record(evidence=[f"{VEO}/{PLAIN}#S0", other, "made-up"])
    assert rejected(drop, rec).split("; ") == [
        f"evidence id '{other}' does not belong to evaluation {VEO}/{PLAIN} "
        f"(it is evidence of {VEO}/{PLANNED})",
        f"evidence id 'made-up' does not belong to evaluation {VEO}/{PLAIN} (no such evidence id)"]


def test_unknown_system(drop: Drop) -> None:
    assert rejected(drop, record(system="foo")) == "unknown system 'foo'"


def test_unknown_case(drop: Drop) -> None:
    assert rejected(drop, record(case_id="nope")) == "unknown case 'nope'"


def test_a_record_of_a_refused_case_names_the_refusal(drop: Drop) -> None:
    why = "case refused at rvp_media: cases/gone/gt.mp4: video probe failed: truncated"
    ctx = dataclasses.replace(CTX, refused={"gone": why})
    result = ingest([drop.json("refused.json", record(case_id="gone"))], ctx)
    assert result.judgments == [] and one_reject(result)["reason"] == why


def test_no_candidate(drop: Drop) -> None:
    assert rejected(drop, record(STORY, EMPTY)) == (
        f"no candidate of system {STORY} for case {EMPTY}: nothing was judged")


def test_incomplete_judge_metadata(drop: Drop) -> None:
    rec = record()
    del rec["judge"]["input_modality"]
    assert rejected(drop, rec) == "judge metadata incomplete: missing input_modality"
    rec = record()
    rec["judge"]["model"] = ""
    assert rejected(drop, rec) == "judge metadata incomplete: model is empty"


def test_modality_mismatch(drop: Drop) -> None:
    rec = record()
    rec["judge"]["input_modality"] = "images"
    assert rejected(drop, rec) == (
        "judge input_modality 'images' differs from the candidate's modality 'video'")


def test_schema_errors_are_readable(drop: Drop) -> None:
    rec = record(notes=3, extra="x", attempt=1.0,
                 hallucinations=[{"entity": "e", "locus": "0.0s-2.2s", "affected_chain": "c",
                                  "contradictory_observations": ["o"], "severity": "huge"}])
    del rec["evidence"]
    assert rejected(drop, rec).split("; ") == [
        "missing field evidence", "unexpected field 'extra'",
        'hallucination 1: severity is "huge", not one of minor, major, decisive',
        "notes is 3, not a string", "attempt is 1.0, not an integer"]


# --- duplicates and immutability -------------------------------------------------------------


def test_duplicate_is_ignored_counted_and_listed(drop: Drop) -> None:
    rec = record()
    first = drop.jsonl("run.jsonl", [rec])
    again = drop.jsonl("run.jsonl", [rec, record(attempt=2)])  # v2 of the same file, appended
    copy_elsewhere = drop.write("copy.json", json.dumps(rec, indent=4, sort_keys=True))
    result = ingest([first, again, copy_elsewhere], CTX)
    assert result.duplicates == 2
    assert [(r["file_version"], r["line"]) for r in result.judgments] == [(1, 1), (2, 2)]
    assert [(r["source_file"], r["file_version"], r["line"], r["reason"])
            for r in result.rejects] == [
        ("copy.json", 1, 1, "duplicate of run.jsonl v1 line 1 (same content): ignored"),
        ("run.jsonl", 2, 1, "duplicate of run.jsonl v1 line 1 (same content): ignored")]


def test_default_written_out_is_a_duplicate_not_a_conflict(drop: Drop) -> None:
    result = ingest([drop.jsonl("a.jsonl", [record(), record(attempt_kind="initial")])], CTX)
    assert result.duplicates == 1 and len(result.judgments) == 1
    assert "same content once defaults are applied" in one_reject(result)["reason"]


def test_conflicting_attempt(drop: Drop) -> None:
    first = drop.json("a.json", record())
    changed = record()
    changed["metrics"]["VQ"] = 10
    later = drop.jsonl("b.jsonl", [changed])
    result = ingest([first, later], CTX)
    [row] = result.judgments
    assert row["vq"] == 90 and row["source_file"] == "a.json"  # the first accepted wins
    reject = one_reject(result)
    assert reject["source_file"] == "b.jsonl" and reject["line"] == 1
    assert reject["reason"] == ("conflicts with a.json v1 line 1: same system/case/judge_run/"
                                "attempt, different content (send a new attempt instead)")
    assert result.duplicates == 0


def test_invalid_first_record_does_not_block_a_valid_one(drop: Drop) -> None:
    bad = record()
    bad["metrics"]["VQ"] = 200
    result = ingest([drop.jsonl("a.jsonl", [bad, record()])], CTX)
    assert [r["line"] for r in result.judgments] == [2]
    assert one_reject(result)["line"] == 1


# --- final attempt ---------------------------------------------------------------------------


def finals(result: IngestResult) -> dict[tuple[str, int], bool]:
    return {(r["judge_run_id"], r["attempt"]): r["is_final"] for r in result.judgments}


def test_manager_review_wins_over_higher_retry(drop: Drop) -> None:
    recs = [record(), record(attempt=2, attempt_kind="manager_review"),
            record(attempt=3, attempt_kind="retry"),
            record(attempt=4, attempt_kind="manager_review"),
            record(attempt=5, attempt_kind="repair")]
    result = ingest([drop.jsonl("a.jsonl", recs)], CTX)
    assert finals(result) == {("run-1", 1): False, ("run-1", 2): False, ("run-1", 3): False,
                              ("run-1", 4): True, ("run-1", 5): False}


def test_highest_attempt_wins_per_run(drop: Drop) -> None:
    recs = [record(attempt=2, attempt_kind="retry"), record(), record(judge_run_id="run-2")]
    result = ingest([drop.jsonl("a.jsonl", recs)], CTX)
    assert finals(result) == {("run-1", 1): False, ("run-1", 2): True, ("run-2", 1): True}
    assert [r["attempt"] for r in result.judgments] == [1, 2, 1]  # sorted, not file order


# --- stages and GT compilations --------------------------------------------------------------


def stage_table(result: IngestResult, run: str) -> list[tuple[Any, ...]]:
    return [(r["stage_no"], r["stage"], r["attempt"], r["attempt_kind"], r["status"])
            for r in result.stages if r["judge_run_id"] == run]


def test_stage_rows_compiled_cached_missing(drop: Drop) -> None:
    gts = drop.jsonl("gt_compilations/run-1.jsonl", [gt_record(run="run-1")])
    judg = drop.jsonl("run.jsonl", [record(), record(attempt=2, attempt_kind="retry"),
                                    record(judge_run_id="run-2"),
                                    record(case_id=PLANNED, judge_run_id="run-3")])
    result = ingest([gts, judg], CTX)
    assert result.rejects == []
    candidate = ["observer", "vr_vq_judge", "hallucination_auditor", "pi_judge", "critic"]
    assert stage_table(result, "run-1") == [(1, "gt_compilation", 1, "initial", "compiled")] + [
        (no, stage, attempt, kind, "ok") for no, stage in enumerate(candidate, start=2)
        for attempt, kind in ((1, "initial"), (2, "retry"))]
    assert stage_table(result, "run-2")[0] == (1, "gt_compilation", None, "cached", "cached")
    assert len(stage_table(result, "run-2")) == 6
    assert stage_table(result, "run-3")[0] == (1, "gt_compilation", None, None, "missing")
    row = result.stages[0]
    assert row["evaluation_id"] == f"{VEO}/{PLAIN}" and row["system"] == VEO


def test_stale_gt_does_not_count_as_cached(drop: Drop) -> None:
    stale = drop.json("gt_compilations/old.json", gt_record(fingerprint="e" * 64, run="old"))
    result = ingest([stale, drop.json("j.json", record())], CTX)
    assert stage_table(result, "run-1")[0][-1] == "missing"


def test_explicit_stages(drop: Drop) -> None:
    stages = [{"stage": "gt_compilation", "attempt": 1, "attempt_kind": "cached",
               "status": "cached"},
              {"stage": "observer", "attempt": 1},
              {"stage": "pi_judge", "attempt": 1, "status": "failed"},
              {"stage": "pi_judge", "attempt": 2, "attempt_kind": "retry"}]
    result = ingest([drop.json("j.json", record(stages=stages))], CTX)
    assert stage_table(result, "run-1") == [
        (1, "gt_compilation", 1, "cached", "cached"), (2, "observer", 1, "initial", "ok"),
        (5, "pi_judge", 1, "initial", "failed"), (5, "pi_judge", 2, "retry", "ok")]


def test_bad_stage_entry(drop: Drop) -> None:
    rec = record(stages=[{"stage": "dreaming", "attempt": 1}])
    assert rejected(drop, rec) == (
        'stage entry 1: stage is "dreaming", not one of gt_compilation, observer, vr_vq_judge, '
        "hallucination_auditor, pi_judge, critic")


def test_gt_compilation_rows_and_is_current(drop: Drop) -> None:
    current = gt_record()
    stale = gt_record(fingerprint="f" * 64, run="run-0")
    result = ingest([drop.jsonl("gt_compilations/all.jsonl", [current, stale])], CTX)
    assert result.rejects == [] and result.judgments == []
    rows = {r["fingerprint"]: r for r in result.gt_compilations}
    assert rows[FP[PLAIN]]["is_current"] is True and rows["f" * 64]["is_current"] is False
    row = rows[FP[PLAIN]]
    assert json.loads(row["compilation_json"]) == current["compilation"]
    assert row["judge_model"] == "GPT-6-sol" and row["line"] == 1 and row["file_version"] == 1
    assert row["source_file"] == "gt_compilations/all.jsonl"


def test_gt_compilation_validation(drop: Drop) -> None:
    bad = gt_record(fingerprint="XYZ")
    del bad["compilation"]["goal_predicates"]
    del bad["judge"]["model"]
    recs = [bad, gt_record(case_id="nope"), gt_record(prompt_version="v2")]
    result = ingest([drop.jsonl("gt_compilations/x.jsonl", recs)], CTX)
    assert result.gt_compilations == []
    assert [r["reason"] for r in result.rejects] == [
        'fingerprint "XYZ" is not 64 lowercase hex digits (a sha256); '
        "compilation: missing goal_predicates; judge metadata incomplete: missing model",
        "unknown case 'nope'",
        "prompt_version 'v2' differs from judge.prompt_version 'v1'"]


def test_gt_conflict_and_judgment_in_gt_folder(drop: Drop) -> None:
    first = gt_record()
    changed = copy.deepcopy(first)
    changed["compilation"]["uncertainties"] = ["lighting"]
    result = ingest([drop.jsonl("gt_compilations/a.jsonl", [first, changed, record()])], CTX)
    assert len(result.gt_compilations) == 1
    reasons = [r["reason"] for r in result.rejects]
    assert reasons[0].startswith("conflicts with gt_compilations/a.jsonl v1 line 1")
    assert reasons[1].startswith("missing field fingerprint, prompt_version, compilation")


def test_rejects_sorted_and_nothing_lost(drop: Drop) -> None:
    files = [drop.write("z.jsonl", "{\n" + json.dumps(record()) + "\n"),
             drop.write("a.txt", "x"), drop.write("m.json", "[")]
    result = ingest(files, CTX)
    assert [(r["source_file"], r["line"]) for r in result.rejects] == [
        ("a.txt", None), ("m.json", None), ("z.jsonl", 1)]
    assert len(result.judgments) == 1


def _mutations(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, replacement) pairs: every node replaced by values of other types and edge values,
    every object key dropped ("<drop>") and an unknown key added ("<extra>")."""
    out: list[tuple[tuple, Any]] = []
    for other in (None, True, 1, 1.0, -5, 101, "", "x" * 3, [], {}, ["a"], [1]):
        out.append((path, other))
    if isinstance(value, dict):
        out.append((path, "<extra>"))
        for key, child in value.items():
            out.append(((*path, key), "<drop>"))
            out += _mutations(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:2]):
            out += _mutations(child, (*path, i))
    return out


def _mutated(obj: Any, path: tuple, new: Any) -> Any:
    obj = copy.deepcopy(obj)
    if not path:
        return {**obj, "zz_extra": 1} if new == "<extra>" else new
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    if new == "<drop>":
        del parent[path[-1]]
    elif new == "<extra>":
        parent[path[-1]] = {**parent[path[-1]], "zz_extra": 1}
    else:
        parent[path[-1]] = new
    return obj


@pytest.mark.parametrize(("schema", "make"), [(JUDGMENT_SCHEMA, lambda: record(
    hallucinations=[{"entity": "cup", "locus": "I1", "contradictory_observations": ["P03"],
                     "affected_chain": "grasp", "severity": "major"}],
    stages=[{"stage": "observer", "attempt": 1, "status": "ok"}], attempt_kind="retry")),
                                              (GT_SCHEMA, lambda: gt_record())])
def test_the_compiled_schema_never_accepts_what_jsonschema_refuses(schema, make):
    """The fast path (jsonschema-rs) only says yes; a yes must be jsonschema's yes too, or a
    record would pass unchecked. Held on every single-node mutation of a valid record."""
    base = make()
    checked = 0
    for path, new in _mutations(base):
        obj = _mutated(base, path, new)
        if not _fast_check(schema)(copy.deepcopy(obj)):
            continue
        assert not list(_validator(schema).iter_errors(obj)), (path, new)
        checked += 1
    assert checked > 10  # valid mutations exist (optional fields, free text), and were compared


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1.5, 85.25, -0.0, 0.0001, 1e15]},
    {"small": 1e-05, "tiny": 5e-324, "big": 1e16, "huge": 1.5e300},  # json's exponent forms
    {"int": 2**63 - 1, "neg": -2**63, "over": 2**64, "far": 10**30},  # orjson: 64 bits only
    {"text": "é ü 日本", "del": "\x7f", "ctl": "\x00\x1f\n\t", "case": "case-1e-3"},
    {"ключ": 1, "a": 2},  # non-ASCII keys (orjson would sort them by their UTF-8 bytes)
    {"lone": "\ud800"},  # a lone surrogate, which orjson refuses
])
def test_canonical_json_is_json_dumps(value: Any) -> None:
    """The digests and stored values of every record depend on these exact bytes."""
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))


def _staging_view(con, model: str, sources: dict[str, str]) -> None:
    """Staging model `model` as a DuckDB view, its dbt `source()` and `ref()` calls replaced by
    the relations `sources` names (the SQL as dbt compiles it for a build from scratch, without
    a dbt run)."""
    import jinja2

    from dagster_project.settings import SQL_DIR

    sql = jinja2.Template((SQL_DIR / "models" / "rynn_vp" / "staging" / f"{model}.sql"
                           ).read_text()).render(
        source=lambda _, name: sources[name], ref=lambda name: sources[name],
        is_incremental=lambda: False, new_parts=lambda *_: "TRUE")
    con.execute(f"CREATE VIEW {model} AS {sql}")


def test_the_staging_view_marks_the_final_attempts_the_replay_decides(drop: Drop, tmp_path):
    """`is_final` is the view's (no written row depends on a later record): on manager reviews
    below and above retries, repairs, several judge runs and systems, spread over files, it
    marks exactly the attempts the replay ranks final, and the hallucinations follow."""
    import duckdb

    from dagster_project.rynn_vp.judgments import judgment_table_stores, write_tables

    hall = [{"entity": "pillow", "locus": "2.2s-5.4s", "contradictory_observations": ["x"],
             "affected_chain": "fold", "severity": "major"}]
    files = [drop.jsonl("a.jsonl", [record(hallucinations=hall),
                                    record(attempt=2, attempt_kind="manager_review"),
                                    record(judge_run_id="run-2", attempt=2, attempt_kind="retry")]),
             drop.jsonl("b.jsonl", [record(attempt=3, attempt_kind="retry"),
                                    record(judge_run_id="run-2"),
                                    record(system=STORY, attempt=4, attempt_kind="repair")]),
             drop.jsonl("c.jsonl", [record(attempt=4, attempt_kind="manager_review",
                                           hallucinations=hall),
                                    record(attempt=5, attempt_kind="repair"),
                                    record(system=STORY, attempt=2, attempt_kind="retry")])]
    stores = judgment_table_stores(tmp_path / "home")
    written = write_tables(files, CTX, stores, tmp_path)
    con = duckdb.connect()
    raw = {name: f"read_parquet('{stores[name].folder}/*.parquet')"
           for name in ("rvp_judgments", "rvp_hallucinations")}
    _staging_view(con, "stg_rvp_judgments", raw)
    _staging_view(con, "stg_rvp_hallucinations", {**raw, "stg_rvp_judgments": "stg_rvp_judgments"})
    rows = con.execute("SELECT system, case_id, judge_run_id, attempt, is_final "
                       "FROM stg_rvp_judgments").fetchall()
    assert len(rows) == 9 and {r[:4] for r in rows if r[4]} == written.finals
    assert written.finals == {(VEO, PLAIN, "run-1", 4), (VEO, PLAIN, "run-2", 2),
                              (STORY, PLAIN, "run-1", 4)}
    halls = con.execute("SELECT system, case_id, judge_run_id, attempt, is_final "
                        "FROM stg_rvp_hallucinations").fetchall()
    assert sorted(h[3:] for h in halls) == [(1, False), (4, True)]
    assert all(h[4] == (h[:4] in written.finals) for h in halls)
