"""The embedded Rynn-VP judgments demo (`JUDGMENTS_DIR` layout), generated deterministically.

No model is called: the records stand in for what the role prompts in `assets/prompts/v1/`
would return, so that ingest, attempt resolution, the GT-compilation cache and the reports have
realistic input. Layout:

- `gt_compilations/<case_id>.json`: one GT compilation per demo case (judge run "judge-run-a",
  prompt version "benchlake-prompts-v1"), keyed by `gt_fingerprint` of the case's four files;
  plus one stale compilation of an older prompt version, which the cache must not reuse.
- `judge-run-a.jsonl`: one record per demo candidate, with a retry, a repair + manager review,
  two localized hallucinations (GT interval / step id), PI-5 on the explicit-plan case only, and
  exactly one invalid line that ingest must reject.
- `judge-run-b.jsonl`: a second run over a subset, reusing run a's cached GT compilations.

Scores come from a seeded `random.Random` per (judge run, system, case, attempt); files are
written with sorted keys and no timestamps, so every build is byte-identical.
`demo_expectations()` states what was planted, computed without building anything.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from pathlib import Path
from typing import Any

from benchlake_demo.rvp_candidates import STORYBOARD, VEO, WAN, DemoCandidate, demo_plan
from benchlake_demo.rynn_vp import load_spec, make_planning
from dagster_project.rynn_vp.evidence import (
    N_PANELS,
    PANELS_PER_STORYBOARD,
    anchor_intervals,
    select_steps,
)
from dagster_project.rynn_vp.fingerprint import GT_INPUT_FILES, gt_fingerprint
from dagster_project.rynn_vp.parsing import DONE_LABELS, parse_interval
from dagster_project.settings import ASSETS_DIR
from dagster_project.tables import atomic_write_bytes

DEMO_JUDGE_RUNS = ("judge-run-a", "judge-run-b")
RUN_A, RUN_B = DEMO_JUDGE_RUNS
PROMPT_VERSION = "benchlake-prompts-v1"
STALE_PROMPT_VERSION = "benchlake-prompts-v0"
STALE_JUDGE_RUN = "judge-run-0"  # the (older) run that produced the stale compilation
JUDGE_MODEL = "GPT-6-sol"
JUDGE_REASONING = "high"
CONTEXT_SHARING = "fresh context per role"
PROMPTS_DIR = ASSETS_DIR / "prompts" / "v1"
PROMPT_ROLES = ("gt_compilation", "observer", "vr_vq_judge", "hallucination_auditor",
                "pi_judge", "critic")
CANDIDATE_ROLES = PROMPT_ROLES[1:]
GT_DIR = "gt_compilations"
RUN_B_SYSTEMS = (STORYBOARD, VEO)

# Per-system quality (PI, VR, VQ centres): veo-sim best, wan-sim middle, the image planner
# plans reasonably but renders poorly (lowest VQ).
_QUALITY = {VEO: (78.0, 75.0, 83.0), WAN: (63.0, 60.0, 67.0), STORYBOARD: (66.0, 56.0, 45.0)}
_ENTITY = re.compile(
    r"\b(?:the|a|an)\s+([A-Za-z][A-Za-z ]*?)"
    r"(?=,|\.|\s+(?:and|in|on|off|into|under|to|next|from|with|then|of)\b|$)")


# --- the planted layout (pure: from the spec and the candidates plan only) ----------------


def _cases() -> list[dict[str, Any]]:
    return list(load_spec()["cases"])


def _actions(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The case's intervals as rvp_intervals-like rows (ordinal from 1)."""
    rows = []
    for n, (interval, label) in enumerate(make_planning(case).items(), start=1):
        start, end = parse_interval(interval)
        rows.append({"ordinal": n, "interval": interval, "start_s": start, "end_s": end,
                     "label": label, "is_done_label": label in DONE_LABELS})
    return rows


def _step_after_gap(step_ids: tuple[str, ...]) -> str | None:
    """The first step id whose predecessor id is missing (e.g. "04" in 01, 02, 04)."""
    for prev, cur in zip(step_ids, step_ids[1:], strict=False):
        if int(cur) != int(prev) + 1:
            return cur
    return None


def _entities(instruction: str) -> list[str]:
    return list(dict.fromkeys(m.strip() for m in _ENTITY.findall(instruction)))


def _layout() -> dict[str, Any]:
    """Which evaluations carry the planted features. Fixed positions in the spec's case list
    (like the candidates demo), so the plants stay put if seeds change."""
    cases = _cases()
    ids = [str(c["case_id"]) for c in cases]
    by_id = {str(c["case_id"]): c for c in cases}
    plan = {(c.system, c.case_id): c for c in demo_plan()}
    plan_cases = [cid for cid in ids if by_id[cid].get("plan")]
    if len(plan_cases) != 1:
        raise ValueError(f"the demo spec must have exactly one explicit-plan case: {plan_cases}")
    video_case, step_case = ids[0], ids[1]
    retry, manager, bad = (VEO, ids[3]), (WAN, ids[4]), (STORYBOARD, ids[6])
    for key in (retry, manager, bad, (WAN, video_case), (STORYBOARD, step_case)):
        if key not in plan:
            raise ValueError(f"planted evaluation {key} has no demo candidate")
    actions = [a for a in _actions(by_id[video_case]) if not a["is_done_label"]]
    video_locus = actions[math.ceil(len(actions) / 2) - 1]["interval"]
    step_locus = _step_after_gap(plan[(STORYBOARD, step_case)].step_ids)
    if step_locus is None:
        raise ValueError(f"the demo candidate {STORYBOARD}/{step_case} has no step-id gap")
    return {
        "case_ids": ids,
        "pi5_case": plan_cases[0],
        "retry": retry,
        "manager_review": manager,
        "bad": bad,
        "stale_case": ids[5],
        "run_b_cases": sorted({*ids[:5], plan_cases[0]}),
        "hallucinations": [
            {"system": WAN, "case_id": video_case, "locus": video_locus,
             "locus_kind": "interval", "entity": _entities(by_id[video_case]["instruction"])[0]},
            {"system": STORYBOARD, "case_id": step_case, "locus": step_locus,
             "locus_kind": "step", "entity": _entities(by_id[step_case]["instruction"])[0]},
        ],
    }


def _slots(judge_run_id: str, layout: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines of one run's file, in order: (system, case_id, attempt, kind, invalid)."""
    cands = demo_plan()
    if judge_run_id == RUN_B:
        cands = [c for c in cands
                 if c.system in RUN_B_SYSTEMS and c.case_id in layout["run_b_cases"]]
    slots: list[dict[str, Any]] = []
    for c in cands:
        key = (c.system, c.case_id)
        kinds = ["initial"]
        if judge_run_id == RUN_A and key == layout["retry"]:
            kinds.append("retry")
        if judge_run_id == RUN_A and key == layout["manager_review"]:
            kinds += ["repair", "manager_review"]
        for attempt, kind in enumerate(kinds, start=1):
            slots.append({"cand": c, "attempt": attempt, "kind": kind, "invalid": False})
        if judge_run_id == RUN_A and key == layout["bad"]:
            # A retry whose judge wrote an out-of-range score: rejected, so attempt 1 stays final.
            slots.append({"cand": c, "attempt": 2, "kind": "retry", "invalid": True})
    return slots


def demo_expectations() -> dict[str, Any]:
    """What the judgments demo plants (for tests and docs); no files are read or written."""
    lay = _layout()
    runs: dict[str, Any] = {}
    rejected: dict[str, Any] = {}
    for run in DEMO_JUDGE_RUNS:
        slots = _slots(run, lay)
        runs[run] = {"file": f"{run}.jsonl", "lines": len(slots),
                     "valid_records": sum(not s["invalid"] for s in slots),
                     "evaluations": sorted({f"{s['cand'].system}/{s['cand'].case_id}"
                                            for s in slots})}
        for line, s in enumerate(slots, start=1):
            if s["invalid"]:
                rejected = {"file": f"{run}.jsonl", "line": line, "judge_run_id": run,
                            "system": s["cand"].system, "case_id": s["cand"].case_id,
                            "attempt": s["attempt"], "metric": "VR-3", "value": 101}

    def evaluation(key: tuple[str, str], kinds: list[str]) -> dict[str, Any]:
        return {"judge_run_id": RUN_A, "system": key[0], "case_id": key[1],
                "evaluation_id": f"{key[0]}/{key[1]}", "attempts": list(range(1, len(kinds) + 1)),
                "attempt_kinds": kinds, "final_attempt": len(kinds)}

    stale = lay["stale_case"]
    return {
        "judge_runs": list(DEMO_JUDGE_RUNS),
        "prompt_version": PROMPT_VERSION,
        "runs": runs,
        "pi5_case": lay["pi5_case"],
        "retry": evaluation(lay["retry"], ["initial", "retry"]),
        "manager_review": evaluation(lay["manager_review"],
                                     ["initial", "repair", "manager_review"]),
        "rejected": rejected,
        # In file order (system, case_id), as ingest will meet them.
        "hallucinations": sorted(({"judge_run_id": RUN_A, "attempt": 1, **h}
                                  for h in lay["hallucinations"]),
                                 key=lambda h: (h["system"], h["case_id"])),
        "gt_compilations": {
            "case_ids": sorted(lay["case_ids"]),
            "files": [f"{GT_DIR}/{cid}.json" for cid in sorted(lay["case_ids"])],
            "judge_run_id": RUN_A,
            "stale": {"file": f"{GT_DIR}/{stale}.{STALE_PROMPT_VERSION}.json",
                      "case_id": stale, "prompt_version": STALE_PROMPT_VERSION,
                      "judge_run_id": STALE_JUDGE_RUN},
        },
        # Run a compiles every case's GT once (its first evaluation); run b only reuses them.
        "gt_stage": {RUN_A: "compiled once per case", RUN_B: "cached"},
        "run_b": {"systems": list(RUN_B_SYSTEMS), "case_ids": list(lay["run_b_cases"])},
    }


# --- GT compilations ----------------------------------------------------------------------


def _file_digests(rynn_vp_root: Path, case_id: str) -> dict[str, str]:
    """SHA-256 of the case's four files, from SHA256SUMS.txt when listed (as ingest verifies
    them), else hashed here."""
    sums: dict[str, str] = {}
    sums_path = rynn_vp_root / "SHA256SUMS.txt"
    if sums_path.is_file():
        for line in sums_path.read_text(encoding="utf-8").splitlines():
            digest, _, rel = line.partition("  ")
            sums[rel] = digest
    out = {}
    for name in GT_INPUT_FILES:
        rel = f"cases/{case_id}/{name}"
        if rel not in sums:
            sums[rel] = hashlib.sha256((rynn_vp_root / rel).read_bytes()).hexdigest()
        out[name] = sums[rel]
    return out


def _compilation(task: dict[str, Any], planning: dict[str, str], duration_s: float,
                 stale: bool = False) -> dict[str, Any]:
    """A small, plausible compilation from the instruction and the intervals."""
    instruction = str(task["instruction"])
    rows = []
    for n, (interval, label) in enumerate(planning.items(), start=1):
        start, end = parse_interval(interval)
        rows.append({"ordinal": n, "interval": interval, "start_s": start, "end_s": end,
                     "label": label, "is_done_label": label in DONE_LABELS})
    anchors = anchor_intervals(rows)
    entities = _entities(instruction)
    correspondence = []
    for ent in entities:
        head = ent.split()[-1].lower()
        seen = [r["interval"] for r in rows if head in r["label"].lower()]
        correspondence.append({"entity": ent, "s0": f"the {ent} as visible in S0",
                               "intervals": seen, "evidence": ["S0"]})
    clauses = [c.strip() for c in re.split(r",\s*(?:and\s+|then\s+)?|\s+and\s+",
                                           instruction.rstrip(". ")) if c.strip()]
    last = f"A{len(anchors)}" if anchors else "S0"
    goals = [{"predicate": clause, "entities": [e for e in entities if e in clause],
              "evidence": [last]} for clause in clauses]
    process = [{"interval": a.interval, "requirement": f"visible: {a.label.rstrip('.')}",
                "evidence": [f"A{n}"]} for n, a in enumerate(anchors, start=1)]
    alternatives = ["any grasp or hand pose that produces the same state change",
                    "any free spot inside the target region"]
    if len(clauses) > 1:
        alternatives.append("independent subgoals may be done in another order")
    uncertainties = ["the GT video is one feasible witness, not a required script"]
    prev_end = None
    for r in rows:
        if prev_end is not None and r["start_s"] < prev_end:
            uncertainties.append(f"interval {r['interval']} overlaps the previous one")
        if r["end_s"] > duration_s:
            uncertainties.append(f"interval {r['interval']} ends after the video "
                                 f"({duration_s:.1f} s); positions are clamped")
        prev_end = r["end_s"]
    final = rows[-1]
    if not final["is_done_label"]:
        uncertainties.append(f"final label {final['label']!r} is not a standard Done label")
    comp: dict[str, Any] = {
        "entity_correspondence": correspondence, "goal_predicates": goals,
        "necessary_process_evidence": process,
        "allowed_alternatives": [] if stale else alternatives,
        "uncertainties": uncertainties[:1] if stale else uncertainties,
    }
    if task.get("plan"):
        comp["explicit_plan"] = list(task["plan"])
    return comp


def _gt_record(case_id: str, fingerprint: str, prompt_version: str, judge_run_id: str,
               compilation: dict[str, Any]) -> dict[str, Any]:
    return {"case_id": case_id, "fingerprint": fingerprint, "prompt_version": prompt_version,
            "judge_run_id": judge_run_id, "compilation": compilation,
            "judge": {"model": JUDGE_MODEL, "reasoning": JUDGE_REASONING,
                      "prompt_version": prompt_version}}


# --- judgment records ----------------------------------------------------------------------


def _rng(*parts: object) -> random.Random:
    # SHA-256 of the key, not `hash()`, which is salted per process.
    key = "/".join(str(p) for p in parts)
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def _score(x: float) -> float:
    return round(min(100.0, max(0.0, x)), 1)


def _metrics(run: str, c: DemoCandidate, attempt: int, has_plan: bool,
             hallucinated: bool) -> dict[str, float]:
    pi_c, vr_c, vq_c = _QUALITY[c.system]
    difficulty = _rng("difficulty", c.case_id).uniform(-8.0, 4.0)  # shared by all systems
    rng = _rng(run, c.system, c.case_id, attempt)
    pi = pi_c + difficulty + rng.gauss(0, 3)
    vr = vr_c + difficulty + rng.gauss(0, 3)
    vq = vq_c + rng.gauss(0, 3)
    m = {f"PI-{k}": pi + off + rng.gauss(0, 4)
         for k, off in zip(range(1, 5), (0.0, 6.0, 3.0, -4.0), strict=True)}
    if has_plan:
        m["PI-5"] = pi + 2.0 + rng.gauss(0, 4)
    m["PI-6"] = pi - 5.0 + rng.gauss(0, 6)
    for k, off in enumerate((0.0, -2.0, 3.0, 2.0, 5.0, 1.0, -1.0, vq - vr), start=1):
        m[f"VR-{k}"] = vr + off + rng.gauss(0, 4)
    m["VQ"] = vq
    dims = sorted(rng.sample(range(1, 8), rng.randint(3, 7)))
    for d in dims:
        m[f"VQ-D{d}"] = vq + rng.gauss(0, 5)
    if hallucinated:  # a broken identity chain costs goal achievement and consistency
        m["PI-1"] -= 25.0
        for k in ("VR-1", "VR-3", "VR-4"):
            m[k] -= 20.0
    if c.modality == "video" and c.n_frames < N_PANELS:  # truncated clip: less process shown
        m["PI-4"] -= 15.0
        m["VR-2"] -= 10.0
    return {k: _score(v) for k, v in sorted(m.items())}


def _scope(c: DemoCandidate) -> str:
    if c.modality == "images":
        shown, cut = select_steps(list(c.step_ids))
        return f"{len(shown)} of {len(c.step_ids)} steps" if cut else f"all {len(shown)} steps"
    if c.n_frames < N_PANELS:
        return f"{c.n_frames} panels (every frame; clip shorter than {N_PANELS} frames)"
    return f"{N_PANELS} panels over the full clip"


def _evidence(c: DemoCandidate, n_anchors: int, rng: random.Random) -> list[str]:
    eid = f"{c.system}/{c.case_id}"
    ids = ["S0", "A1"] + ([f"A{n_anchors}"] if n_anchors > 1 else [])
    if c.modality == "video":
        n = min(N_PANELS, c.n_frames)
        picks = {1, n, *rng.sample(range(2, n), 3)}
        ids += [f"P{p:02d}" for p in sorted(picks)]
        ids.append(f"SB{rng.randint(1, math.ceil(n / PANELS_PER_STORYBOARD))}")
    else:
        ids += [f"step-{s}" for s in select_steps(list(c.step_ids))[0]]
    return [f"{eid}#{i}" for i in ids]


def _evidence_order(evidence_id: str) -> tuple[int, int]:
    """S0, anchors, panels, storyboards, steps; by number within each kind."""
    suffix = evidence_id.rsplit("#", 1)[1]
    for rank, prefix in enumerate(("S0", "A", "P", "SB", "step-")):
        if suffix.startswith(prefix) and (prefix == "S0" or suffix[len(prefix):].isdigit()):
            return rank, int(suffix[len(prefix):] or 0)
    raise ValueError(f"not an evidence id: {evidence_id}")


def _hallucination(c: DemoCandidate, h: dict[str, Any], goal: str,
                   rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    """One localized hallucination and the evidence ids it cites."""
    eid = f"{c.system}/{c.case_id}"
    ent = h["entity"]
    if h["locus_kind"] == "interval":
        a = rng.randint(8, 20)
        before, after = f"{eid}#P{a:02d}", f"{eid}#P{a + 2:02d}"
        obs = [f"{before}: the {ent} is still where {eid}#S0 shows it, unchanged",
               f"{after}: the {ent} is at the destination with a different colour and shape, "
               f"and no grasp or transport is visible in between"]
        cited = [f"{eid}#S0", before, after]
    else:
        steps = list(c.step_ids)
        prev = steps[steps.index(h["locus"]) - 1]
        before, after = f"{eid}#step-{prev}", f"{eid}#step-{h['locus']}"
        obs = [f"{before}: the {ent} is still in place, matching {eid}#S0",
               f"{after}: a {ent} of another colour lies at the destination; the unshown "
               f"transition {prev}->{h['locus']} cannot account for the identity change"]
        cited = [f"{eid}#S0", before, after]
    return ({"entity": ent, "locus": h["locus"], "contradictory_observations": obs,
             "affected_chain": f"identity of the {ent} from S0 to the goal '{goal}'",
             "severity": "major"}, cited)


def _stages(run: str, slot: dict[str, Any], compiles_gt: bool,
            critic_failed: bool) -> list[dict[str, Any]]:
    attempt, kind = slot["attempt"], slot["kind"]
    if kind == "initial":
        gt = ({"stage": "gt_compilation", "attempt": 1, "attempt_kind": "initial",
               "status": "ok"} if compiles_gt else
              {"stage": "gt_compilation", "attempt": 1, "attempt_kind": "cached",
               "status": "cached"})
        return [gt] + [{"stage": r, "attempt": 1, "attempt_kind": "initial",
                        "status": "failed" if critic_failed and r == "critic" else "ok"}
                       for r in CANDIDATE_ROLES]
    rerun = {"retry": CANDIDATE_ROLES[1:], "repair": ("pi_judge", "critic"),
             "manager_review": ("critic",)}[kind]
    if slot["invalid"]:
        rerun = ("vr_vq_judge", "critic")
    return [{"stage": r, "attempt": attempt, "attempt_kind": kind, "status": "ok"}
            for r in rerun]


_NOTES = {
    "retry": "critic rejected attempt 1 (VR-1 contradicted the auditor's final-state reading); "
             "VR/VQ judge, auditor, PI judge and critic rerun",
    "repair": "PI judge output lacked the PI-4 rationale; repaired and re-checked by the critic",
    "manager_review": "manager review settled the PI judge / critic disagreement on partial "
                      "progress from the panels",
}


def _record(run: str, slot: dict[str, Any], lay: dict[str, Any], n_anchors: dict[str, int],
            goals: dict[str, str], compiled_by: dict[str, tuple[str, str]]) -> dict[str, Any]:
    c: DemoCandidate = slot["cand"]
    key = (c.system, c.case_id)
    attempt, kind = slot["attempt"], slot["kind"]
    plant = next((h for h in lay["hallucinations"]
                  if run == RUN_A and attempt == 1 and (h["system"], h["case_id"]) == key), None)
    metrics = _metrics(run, c, attempt, c.case_id == lay["pi5_case"], plant is not None)
    rng = _rng("evidence", run, c.system, c.case_id, attempt)
    evidence = _evidence(c, n_anchors[c.case_id], rng)
    hallucinations = []
    if plant is not None:
        h, cited = _hallucination(c, plant, goals[c.case_id], rng)
        hallucinations.append(h)
        evidence = sorted({*evidence, *cited}, key=_evidence_order)
    notes = [_NOTES[kind]] if kind in _NOTES else []
    if slot["invalid"]:
        notes = ["critic asked for a VR/VQ rerun after attempt 1"]
    if c.modality == "video" and c.n_frames < N_PANELS:
        notes.append(f"clip has {c.n_frames} frames: all shown, fewer than {N_PANELS} panels")
    if c.modality == "images":
        after_gap = _step_after_gap(c.step_ids)
        if after_gap is not None:
            notes.append(f"a step id before {after_gap} is missing: the transition is an "
                         "evidence gap, not a rename")
    if slot["invalid"]:
        metrics["VR-3"] = 101  # the planted schema violation (scores are 0-100)
    compiles = run == RUN_A and kind == "initial" and compiled_by[c.case_id] == key
    rec: dict[str, Any] = {
        "system": c.system, "case_id": c.case_id, "judge_run_id": run, "attempt": attempt,
        "attempt_kind": kind, "metrics": metrics, "hallucinations": hallucinations,
        "evidence": evidence,
        "judge": {"model": JUDGE_MODEL, "reasoning": JUDGE_REASONING,
                  "prompt_version": PROMPT_VERSION, "input_modality": c.modality,
                  "candidate_scope": _scope(c), "context_sharing": CONTEXT_SHARING},
        "stages": _stages(run, slot, compiles,
                          run == RUN_A and key == lay["retry"] and kind == "initial"),
    }
    if run == RUN_B:
        notes.append(f"GT compilation reused from {RUN_A} (same fingerprint)")
    if notes:
        rec["notes"] = "; ".join(notes)
    return rec


def _dump_line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _check_candidates(candidates_root: Path) -> None:
    """The records cite the demo candidates' frames and steps: refuse a mismatched folder."""
    for c in demo_plan():
        base = candidates_root / c.rel_dir
        need = ([base / "candidate.mp4"] if c.modality == "video"
                else [base / "steps" / f"{s}.png" for s in c.step_ids])
        missing = [p for p in need if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"demo candidate file missing: {missing[0]}")


def build_judgments_demo(dest: Path, rynn_vp_root: Path, candidates_root: Path) -> Path:
    """Write the demo judgments into `dest` (created; must not exist yet) and return it."""
    dest, rynn_vp_root = Path(dest), Path(rynn_vp_root)
    _check_candidates(Path(candidates_root))
    lay = _layout()
    spec = {str(c["case_id"]): c for c in _cases()}
    dest.mkdir(parents=True)

    n_anchors: dict[str, int] = {}
    goals: dict[str, str] = {}
    for cid in sorted(spec):
        case_dir = rynn_vp_root / "cases" / cid
        task = json.loads((case_dir / "task.json").read_text(encoding="utf-8"))
        planning = json.loads((case_dir / "gt_annotations.json").read_text(encoding="utf-8"))
        planning = planning["planning"]
        digests = _file_digests(rynn_vp_root, cid)
        duration = float(spec[cid]["seconds"])
        comp = _compilation(task, planning, duration)
        n_anchors[cid] = len(comp["necessary_process_evidence"])
        goals[cid] = comp["goal_predicates"][-1]["predicate"]
        rec = _gt_record(cid, gt_fingerprint(digests, PROMPT_VERSION), PROMPT_VERSION, RUN_A,
                         comp)
        atomic_write_bytes(dest / GT_DIR / f"{cid}.json", _dump_json(rec))
        if cid == lay["stale_case"]:
            # An older prompt version's entry: its key no longer matches, so it must be ignored.
            old = _gt_record(cid, gt_fingerprint(digests, STALE_PROMPT_VERSION),
                             STALE_PROMPT_VERSION, STALE_JUDGE_RUN,
                             _compilation(task, planning, duration, stale=True))
            atomic_write_bytes(dest / GT_DIR / f"{cid}.{STALE_PROMPT_VERSION}.json",
                               _dump_json(old))

    # In run a the first evaluation of each case (in file order) compiles its GT.
    compiled_by: dict[str, tuple[str, str]] = {}
    for c in demo_plan():
        compiled_by.setdefault(c.case_id, (c.system, c.case_id))
    for run in DEMO_JUDGE_RUNS:
        lines = [_dump_line(_record(run, s, lay, n_anchors, goals, compiled_by))
                 for s in _slots(run, lay)]
        atomic_write_bytes(dest / f"{run}.jsonl", "".join(lines).encode())
    return dest


def _dump_json(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
