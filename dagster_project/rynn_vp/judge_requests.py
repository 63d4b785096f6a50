"""The judge's requests: the packets of `rvp_judge_packets` read back (`load_work`), each role's
prompt rendered from its packet, and the answers parsed into records of the project's schema.
No Dagster import; `judge.py` runs them.

A prompt is its packet's text unchanged, each `{{name}}` filled from the packet's variables, the
evidence manifest, the GT compilation and the reports of the roles before (a placeholder the
project does not know, in a Skill's own prompt, stays as written). The images go with it as
base64 data URLs: S0, the GT anchors, then the storyboards of a video (its panels are their
tiles) or the steps of ordered images.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster_project.rynn_vp.judge_client import endpoint
from dagster_project.rynn_vp.judgment_records import canonical_json
from dagster_project.rynn_vp.packets import CANDIDATE_ROLES, GT_ROLE
from dagster_project.settings import JudgeSettings
from dagster_project.tables import read_table, table_path

CONTEXT_SHARING = "fresh context per role"
# Image tokens as OpenAI counts a high-detail image: 85 + 170 per 512-px tile (an estimate for
# other servers too); text tokens as characters / 4. Only for the budget and the dry run: the
# ledger holds what the server reports.
IMAGE_BASE_TOKENS, IMAGE_TILE_TOKENS, TILE_PX, CHARS_PER_TOKEN = 85, 170, 512, 4
_REPORT_VARIABLES = {"observer": "observer_report", "vr_vq_judge": "vr_vq_report",
                     "hallucination_auditor": "hallucination_report", "pi_judge": "pi_report"}
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


# --- the work: packets per case and evaluation ------------------------------------------------


@dataclass(frozen=True)
class Evaluation:
    evaluation_id: str
    system: str
    case_id: str
    packets: dict[str, dict[str, Any]]  # role -> packet JSON
    folder: Path  # the packets' folder (evidence files relative to it)


@dataclass(frozen=True)
class Case:
    case_id: str
    packet: dict[str, Any]
    folder: Path


@dataclass(frozen=True)
class Work:
    cases: dict[str, Case]
    evaluations: list[Evaluation]
    stale: list[str]  # evaluations whose packet files are not those of the packets table


def load_work(home: Path) -> Work:
    """The GT and candidate packets of the packets table (`rvp_judge_packets`), read from their
    files; an evaluation whose files are missing or differ from the table (written since by an
    older or newer build) is `stale` and not judged."""
    path = table_path(home, "rvp_judge_packets")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no judge packets yet: run `benchlake materialize` "
                                "first")
    rows = read_table(path, home).to_pylist()
    packets: dict[tuple[str | None, str], dict[str, tuple[Path, dict]]] = {}
    stale: set[str] = set()
    for r in rows:
        key = (r["system"], r["case_id"])
        path = Path(r["packet_path"])
        try:
            packet = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            packet = None
        if packet is None or packet.get("fingerprint") != r["packet_fingerprint"]:
            stale.add(r["evaluation_id"] or f"GT of {r['case_id']}")
            continue
        packets.setdefault(key, {})[r["role"]] = (path.parent, packet)
    cases = {cid: Case(cid, roles[GT_ROLE][1], roles[GT_ROLE][0])
             for (system, cid), roles in packets.items() if system is None and GT_ROLE in roles}
    evaluations = []
    for (system, cid), roles in sorted(packets.items(), key=lambda kv: (kv[0][0] or "",
                                                                         kv[0][1])):
        if system is None:
            continue
        eid = f"{system}/{cid}"
        if eid in stale or set(roles) != set(CANDIDATE_ROLES) or cid not in cases:
            stale.add(eid)
            continue
        evaluations.append(Evaluation(eid, system, cid, {r: p for r, (_, p) in roles.items()},
                                      roles[CANDIDATE_ROLES[0]][0]))
    return Work(cases, evaluations, sorted(stale))


# --- rendering -----------------------------------------------------------------------------


def _seconds(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, int | float) else "?"


def evidence_manifest(packet: dict[str, Any]) -> str:
    """One line per evidence id the packet offers for citation, with what it shows."""
    lines = []
    for e in packet["evidence"]:
        eid, role = e["evidence_id"], e["role"]
        if role == "S0":
            what = "initial scene (initial.png)"
        elif role == "anchor":
            what = (f"GT witness frame at {_seconds(e['used_s'])} (end of planning interval "
                    f"{e['interval_ordinal']})")
        elif role == "panel":
            what = f"candidate panel {e['ordinal']} at {_seconds(e['used_s'])}"
        else:
            what = f"candidate step {e['step_id']}"
        lines.append(f"- `{eid}`: {what}")
    for b in packet["storyboards"]:
        lines.append(f"- `{b['evidence_id']}`: storyboard of panels {b['panels']} "
                     "(2x3, left to right, top to bottom)")
    return "\n".join(lines)


def _shown(packet: dict[str, Any]) -> list[dict[str, Any]]:
    """The images sent with a packet: S0 and anchors, then the storyboards of a video (its
    panels are their tiles) or the steps; panels alone only when there is no storyboard."""
    boards = packet["storyboards"]
    items = [e for e in packet["evidence"] if e["role"] != "panel" or not boards]
    return [*items, *boards]


def candidate_scope(evaluation: dict[str, Any]) -> str:
    if evaluation["modality"] == "video":
        scope = (f"video clip {_seconds(evaluation['clip_start_s'])} to "
                 f"{_seconds(evaluation['clip_end_s'])}, {evaluation['n_panels']} panels")
        return scope + (" (candidate truncated)" if evaluation["truncated"] else "")
    return f"{evaluation['steps_shown']} of {evaluation['steps_total']} steps"


def _fill(text: str, variables: dict[str, str]) -> str:
    # a placeholder the project does not know (a Skill's own prompt) stays as written
    return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), text)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           sort_keys=True)


@dataclass(frozen=True)
class Request:
    """One role's request: the rendered text and the images it sends (path, sha256, size)."""

    role: str
    case_id: str
    evaluation_id: str | None
    sample: int
    text: str
    images: tuple[tuple[str, Path, str], ...]  # (evidence id, file, sha256)
    prompt_version: str

    def body(self, settings: JudgeSettings, *, with_images: bool) -> dict[str, Any]:
        """The chat-completions request; images as data URLs, or (for the key) their
        digests."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        for eid, path, sha in self.images:
            url = _data_url(path) if with_images else f"sha256:{sha}"
            content += [{"type": "text", "text": f"Evidence `{eid}`:"},
                        {"type": "image_url", "image_url": {"url": url}}]
        body: dict[str, Any] = {"model": settings.model,
                                "messages": [{"role": "user", "content": content}],
                                "temperature": settings.temperature,
                                "max_tokens": settings.max_tokens, "seed": settings.seed}
        if settings.reasoning:
            body["reasoning_effort"] = settings.reasoning
        return body

    def key(self, settings: JudgeSettings) -> str:
        """What determines the answer: endpoint, model, prompt version, the rendered messages
        (images by digest), decoding settings, sample index."""
        return hashlib.sha256(canonical_json({
            "endpoint": endpoint(settings), "prompt_version": self.prompt_version,
            "body": self.body(settings, with_images=False), "sample": self.sample,
        }).encode()).hexdigest()

    def estimated_input_tokens(self) -> int:
        tokens = math.ceil(len(self.text) / CHARS_PER_TOKEN)
        for eid, path, _ in self.images:
            tokens += math.ceil(len(f"Evidence `{eid}`:") / CHARS_PER_TOKEN)
            tokens += _image_tokens(path)
        return tokens


def _data_url(path: Path) -> str:
    kind = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg"}.get(path.suffix.lower(), "jpeg")
    return f"data:image/{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _image_tokens(path: Path) -> int:
    from PIL import Image

    with Image.open(path) as im:
        w, h = im.size
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * math.ceil(w / TILE_PX) * math.ceil(h / TILE_PX)


def _images(packet: dict[str, Any], folder: Path) -> tuple[tuple[str, Path, str], ...]:
    return tuple((e["evidence_id"], folder / e["file"], e["sha256"]) for e in _shown(packet))


def _common(packet: dict[str, Any], settings: JudgeSettings) -> dict[str, str]:
    variables = {k: _as_text(v) for k, v in packet["prompt"]["variables"].items()}
    return {**variables, "prompt_version": packet["prompt"]["version"],
            "judge_run_id": settings.judge_run_id,
            "evidence_manifest": evidence_manifest(packet)}


def gt_request(case: Case, settings: JudgeSettings, sample: int) -> Request:
    packet = case.packet
    planning = packet["gt_witness"]["planning"]
    variables = {**_common(packet, settings),
                 "input_fingerprint": packet["gt_compilation"]["fingerprint"] or "",
                 "gt_annotations": "\n".join(f"- `{i['interval']}`: {i['label']}"
                                             for i in planning)}
    return Request(GT_ROLE, case.case_id, None, sample,
                   _fill(packet["prompt"]["text"], variables), _images(packet, case.folder),
                   packet["prompt"]["version"])


def role_request(ev: Evaluation, role: str, case: Case, gt: str, reports: dict[str, str],
                 settings: JudgeSettings, sample: int) -> Request:
    packet = ev.packets[role]
    info = packet["evaluation"]
    variables = {
        **_common(packet, settings), "system": ev.system, "evaluation_id": ev.evaluation_id,
        "input_modality": info["modality"], "candidate_scope": candidate_scope(info),
        "gt_compilation_ref": gt,
        "gt_intervals": ", ".join(f"`{i['interval']}`"
                                  for i in case.packet["gt_witness"]["planning"]),
        **{var: reports.get(r, "") for r, var in _REPORT_VARIABLES.items()},
    }
    return Request(role, ev.case_id, ev.evaluation_id, sample,
                   _fill(packet["prompt"]["text"], variables), _images(packet, ev.folder),
                   packet["prompt"]["version"])


# --- answers ------------------------------------------------------------------------------


def parse_answer(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object an answer holds (a fenced block or the outermost braces), or the reason
    it holds none."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None, "the answer holds no JSON object"
    try:
        value = json.loads(body[start:end + 1])
    except ValueError as exc:
        return None, f"the answer is not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, "the answer is not a JSON object"
    return value, None


_HALLUCINATION_KEYS = ("entity", "locus", "contradictory_observations", "affected_chain",
                       "severity")


def judgment_record(ev: Evaluation, critic: dict[str, Any], attempt: int, kind: str,
                    settings: JudgeSettings) -> tuple[dict[str, Any] | None, str | None]:
    """The judgment record of an accepted critic answer: its metrics, hallucinations (the
    schema's fields) and evidence, with benchlake's identity and judge metadata; or why the
    answer is not one."""
    verdict = critic.get("verdict")
    if verdict != "accept":
        return None, f"critic verdict is {json.dumps(verdict)}, not \"accept\""
    inner = critic.get("record")
    if not isinstance(inner, dict):
        return None, "critic answer has no record object"
    info = ev.packets["critic"]["evaluation"]
    hallucinations = inner.get("hallucinations", [])
    if isinstance(hallucinations, list):
        hallucinations = [{k: h[k] for k in _HALLUCINATION_KEYS if k in h}
                          if isinstance(h, dict) else h for h in hallucinations]
    record = {
        "system": ev.system, "case_id": ev.case_id, "judge_run_id": settings.judge_run_id,
        "attempt": attempt, "attempt_kind": kind, "metrics": inner.get("metrics"),
        "hallucinations": hallucinations, "evidence": inner.get("evidence"),
        "judge": {"model": settings.model, "reasoning": settings.reasoning or "default",
                  "prompt_version": ev.packets["critic"]["prompt"]["version"],
                  "input_modality": info["modality"], "candidate_scope": candidate_scope(info),
                  "context_sharing": CONTEXT_SHARING},
    }
    return record, None


def gt_record(case: Case, answer: dict[str, Any], run_id: str,
              settings: JudgeSettings) -> dict[str, Any]:
    version = case.packet["prompt"]["version"]
    return {"case_id": case.case_id, "fingerprint": case.packet["gt_compilation"]["fingerprint"],
            "prompt_version": version, "judge_run_id": run_id,
            "compilation": answer.get("compilation"),
            "judge": {"model": settings.model, "reasoning": settings.reasoning or "default",
                      "prompt_version": version}}
