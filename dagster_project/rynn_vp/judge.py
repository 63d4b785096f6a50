"""The judge: the judge packets sent to an OpenAI-compatible `/v1/chat/completions` endpoint,
the answers turned into judgment records, every request accounted. No Dagster import (the asset
`raw_rvp_judge_calls` wires it, `benchlake judge` launches that asset's job).

Per case, the GT compilation packet is sent once; per evaluation, the five candidate roles in
order (observer, vr_vq_judge, hallucination_auditor, pi_judge, critic), each prompt rendered from
its packet (the prompt text unchanged, `{{name}}` filled from the packet's variables, the
evidence manifest, the GT compilation and the reports of the roles before), with the evidence
images as base64 data URLs (S0, the GT anchors, then the storyboards of a video or the steps of
ordered images). The critic's record, with benchlake's own identity and judge metadata, is the
judgment record; it is checked by the ingest's own rules (`judgment_records.judgment_reasons`).

Files, under `$BENCHLAKE_HOME/judge/` (`Settings.judge_dir`):

- `cache/<kk>/<key>.json`: one answer per request key, written atomically. The key is a digest of
  what determines the answer: endpoint, model, prompt version, the rendered messages (images by
  their SHA-256, not their bytes), decoding settings and sample index. A request whose key is
  there is never sent again: a rerun sends nothing, a killed run resumes, a changed candidate
  changes only its evaluation's keys. Errors, empty answers and refusals are never cached.
- `calls/<dagster run id>.jsonl`: the journal, one line per request as it ends (cache hits too)
  and one per rejected answer, flushed line by line: a killed run's calls are still accounted.
  The ledger table `rvp_judge_calls` and `rvp_judge_rejects` are made from every journal.
- `judgments/`: the records, `<judge_run_id>/<system>/<case_id>/<key>.json`, and the GT
  compilations, `gt_compilations/<case_id>.<key>.json`, each file written once (named by the
  request that made it): the judgments ingest reads this folder beside JUDGMENTS_DIR.

An answer that does not make a valid record is a reject (role, raw answer, reason) and the
evaluation is judged again from that role with the next sample index as a `retry` attempt, up to
`MAX_ATTEMPTS`; an evaluation without a valid record stays unscored.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa

from dagster_project.rynn_vp.judgment_parts import eval_context
from dagster_project.rynn_vp.judgment_records import (
    EvalContext,
    canonical_json,
    gt_reasons,
    judgment_reasons,
)
from dagster_project.rynn_vp.packets import CANDIDATE_ROLES, GT_ROLE
from dagster_project.settings import JudgeSettings
from dagster_project.tables import (
    atomic_write_bytes,
    raw_schema,
    read_table,
    rows_to_table,
    table_path,
)
from dagster_project.warehouse.seeds import read_seed

MAX_ATTEMPTS = 2  # an evaluation's initial attempt and one retry
MAX_TRIES = 5  # HTTP tries of one request (429, 5xx, timeouts, connection errors)
BACKOFF_S = 1.0  # first wait after a failed try without Retry-After; doubled each time
MAX_WAIT_S = 60.0
CONTEXT_SHARING = "fresh context per role"
# Image tokens as OpenAI counts a high-detail image: 85 + 170 per 512-px tile (an estimate for
# other servers too); text tokens as characters / 4. Only for the budget and the dry run: the
# ledger holds what the server reports.
IMAGE_BASE_TOKENS, IMAGE_TILE_TOKENS, TILE_PX, CHARS_PER_TOKEN = 85, 170, 512, 4
_REPORT_VARIABLES = {"observer": "observer_report", "vr_vq_judge": "vr_vq_report",
                     "hallucination_auditor": "hallucination_report", "pi_judge": "pi_report"}
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

CALLS_SCHEMA = raw_schema("rvp_judge_calls")
REJECTS_SCHEMA = raw_schema("rvp_judge_rejects")


class BudgetReached(Exception):
    """The next request would take the judge run past its budget: nothing more is sent."""


# --- prices ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    input_per_1k: float
    output_per_1k: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_1k + output_tokens * self.output_per_1k) / 1000


def price_of(settings: JudgeSettings) -> Price | None:
    """The model's price per 1,000 tokens from the price table (JUDGE_PRICES, else the seed
    `rvp_judge_prices`), None when the table does not list the model."""
    if settings.prices:
        import csv

        path = Path(settings.prices).expanduser()
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        try:
            table = {r["model"]: Price(float(r["input_usd_per_1k"]),
                                       float(r["output_usd_per_1k"])) for r in rows}
        except (KeyError, ValueError) as exc:
            raise ValueError(f"JUDGE_PRICES {path}: want columns model, input_usd_per_1k, "
                             f"output_usd_per_1k with numbers ({exc})") from None
    else:
        table = {r["model"]: Price(r["input_usd_per_1k"], r["output_usd_per_1k"])
                 for r in read_seed("rvp_judge_prices")}
    return table.get(settings.model)


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
    rows = read_table(table_path(home, "rvp_judge_packets"), home).to_pylist()
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


# --- the endpoint --------------------------------------------------------------------------


def endpoint(settings: JudgeSettings) -> str:
    """The chat-completions URL, without credentials or a query (what keys and tables hold)."""
    parts = urlsplit(settings.base_url.strip())
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    path = parts.path.rstrip("/")
    path = path if path.endswith("/v1") else f"{path}/v1"
    return urlunsplit((parts.scheme, host, f"{path}/chat/completions", "", ""))


@dataclass
class Reply:
    status: str  # ok, empty, refusal, http_<code>, timeout, error
    text: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    request_id: str | None = None
    http_status: int | None = None
    latency_s: float = 0.0
    retry_after: float | None = None
    detail: str | None = None


class RateLimit:
    """At most `rpm` request starts per minute, evenly spaced, across threads."""

    def __init__(self, rpm: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 60.0 / rpm if rpm > 0 else 0.0
        self.clock, self.sleep = clock, sleep
        self.lock = threading.Lock()
        self.next = 0.0

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = self.clock()
            start = max(now, self.next)
            self.next = start + self.interval
        if start > now:
            self.sleep(start - now)


class Client:
    """One HTTP try of a chat completion (`send`), its outcome as a `Reply`; the key goes into
    the Authorization header only, and no text of an error that could hold it is kept."""

    def __init__(self, settings: JudgeSettings) -> None:
        import requests

        self.settings = settings
        self.url = endpoint(settings)
        self.session = requests.Session()
        self.session.headers["Content-Type"] = "application/json"
        if settings.api_key:
            self.session.headers["Authorization"] = f"Bearer {settings.api_key}"

    def _clean(self, text: str) -> str:
        key = self.settings.api_key
        text = text.replace(key, "***") if key else text
        return text[:300]

    def send(self, body: dict[str, Any]) -> Reply:
        import requests

        started = time.monotonic()
        try:
            resp = self.session.post(self.url, data=json.dumps(body),
                                     timeout=(min(10.0, self.settings.timeout_s),
                                              self.settings.timeout_s))
        except requests.Timeout:
            return Reply("timeout", latency_s=time.monotonic() - started)
        except requests.RequestException as exc:
            return Reply("error", latency_s=time.monotonic() - started,
                         detail=type(exc).__name__)
        latency = time.monotonic() - started
        request_id = resp.headers.get("x-request-id")
        if resp.status_code != 200:
            return Reply(f"http_{resp.status_code}", http_status=resp.status_code,
                         latency_s=latency, request_id=request_id,
                         retry_after=_retry_after(resp.headers.get("Retry-After")),
                         detail=self._clean(resp.text))
        try:
            data = resp.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return Reply("error", http_status=200, latency_s=latency, request_id=request_id,
                         detail="not a chat-completions response")
        usage = data.get("usage") or {}
        reply = Reply("ok", text=message.get("content") or "", http_status=200,
                      latency_s=latency, request_id=data.get("id") or request_id,
                      input_tokens=usage.get("prompt_tokens"),
                      output_tokens=usage.get("completion_tokens"))
        if message.get("refusal") or choice.get("finish_reason") == "content_filter":
            reply.status, reply.detail = "refusal", self._clean(str(message.get("refusal")
                                                                     or "content_filter"))
        elif not reply.text.strip():
            reply.status = "empty"
        return reply


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _retryable(reply: Reply) -> bool:
    code = reply.http_status or 0
    return reply.status in ("timeout", "error") and code != 200 or code == 429 or code >= 500


# --- cache and journal ---------------------------------------------------------------------


class AnswerCache:
    """One JSON file per request key (atomic writes): the answer and what it cost."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        atomic_write_bytes(self.path(key), (json.dumps(entry, sort_keys=True, ensure_ascii=False)
                                            + "\n").encode())


class Journal:
    """The lines of one Dagster run's journal, appended and flushed one by one (thread-safe)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()
        self.seq = 0

    def write(self, row: dict[str, Any]) -> None:
        with self.lock:
            self.seq += 1
            self.fh.write(json.dumps({**row, "seq": self.seq}, sort_keys=True,
                                     ensure_ascii=False) + "\n")
            self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def read_journals(calls_dir: Path) -> Iterator[dict[str, Any]]:
    """Every line of every journal (a torn last line of a killed run is left out)."""
    for path in sorted(calls_dir.glob("*.jsonl")) if calls_dir.is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield {**row, "dagster_run_id": path.stem}


def spent(calls_dir: Path, judge_run_id: str) -> float:
    return sum(r.get("cost") or 0.0 for r in read_journals(calls_dir)
               if r.get("kind") == "call" and r.get("judge_run_id") == judge_run_id)


def ledger_tables(calls_dir: Path) -> tuple[pa.Table, pa.Table]:
    """`rvp_judge_calls` (every request of every journal, in journal and line order) and
    `rvp_judge_rejects` (each rejected answer once, at its first sight)."""
    rows = sorted(read_journals(calls_dir),
                  key=lambda r: (str(r.get("logged_at")), r["dagster_run_id"], r.get("seq") or 0))
    calls, rejects, seen = [], [], set()
    for row in rows:
        if row.get("kind") == "call":
            calls.append({k: row.get(k) for k in CALLS_SCHEMA.names})
        elif row.get("kind") == "reject":
            key = (row.get("request_key"), row.get("reason"))
            if key not in seen:
                seen.add(key)
                rejects.append({k: row.get(k) for k in REJECTS_SCHEMA.names})
    return rows_to_table(calls, CALLS_SCHEMA), rows_to_table(rejects, REJECTS_SCHEMA)


# --- the run -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one invocation did."""

    evaluations: int = 0  # judged now or before (a record exists for the current answers)
    records_written: int = 0
    gt_written: int = 0
    unscored: list[str] = field(default_factory=list)  # no valid record (rejected every time)
    unfinished: list[str] = field(default_factory=list)  # errors or the budget: judge again
    stale: list[str] = field(default_factory=list)
    sent: int = 0
    cache_hits: int = 0
    cost: float = 0.0
    spent_before: float = 0.0
    budget_reached: bool = False
    rejects: int = 0


class _Failed(Exception):
    """A request that got no usable answer (errors after every try, the budget)."""


class Judge:
    def __init__(self, home: Path, judge_dir: Path, settings: JudgeSettings, run_id: str,
                 log: Callable[[str], None], backoff_s: float = BACKOFF_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.home, self.settings, self.run_id, self.log = home, settings, run_id, log
        self.cache = AnswerCache(judge_dir / "cache")
        self.calls_dir = judge_dir / "calls"
        self.out = judge_dir / "judgments"
        self.price = price_of(settings)
        if settings.budget_usd and self.price is None:
            raise ValueError(f"no price for model {settings.model!r} in the price table "
                             f"({settings.prices or 'seed rvp_judge_prices'}): the budget "
                             "cannot be kept")
        self.backoff_s, self.sleep = backoff_s, sleep
        self.limit = RateLimit(settings.rpm, sleep=sleep)
        self.lock = threading.Lock()
        self.outcome = Outcome()
        self.outcome.spent_before = spent(self.calls_dir, settings.judge_run_id)
        self.attempts = _attempts_ingested(home, settings.judge_run_id)
        self.reserved = 0.0
        self.stop = threading.Event()
        self.client = Client(settings)
        self.journal = Journal(self.calls_dir / f"{run_id}.jsonl")

    # - one request, from the cache or the endpoint -
    def answer(self, request: Request, attempt: int) -> tuple[str, str, dict[str, Any]]:
        """(answer text, request key, cache entry) of `request`; raises `_Failed`."""
        key = request.key(self.settings)
        base = {"judge_run_id": self.settings.judge_run_id, "evaluation_id":
                request.evaluation_id, "case_id": request.case_id, "role": request.role,
                "attempt": attempt, "sample": request.sample, "request_key": key,
                "model": self.settings.model}
        entry = self.cache.get(key)
        if entry is not None:
            self._record({**base, "cache_hit": True, "try_no": 0, "status": "cached",
                          "request_id": entry.get("request_id"), "input_tokens": 0,
                          "output_tokens": 0, "latency_s": 0.0, "cost": 0.0})
            with self.lock:
                self.outcome.cache_hits += 1
            return entry["answer"], key, entry
        body = request.body(self.settings, with_images=True)
        estimate = self._estimate(request)
        for try_no in range(1, MAX_TRIES + 1):
            self._reserve(estimate)
            self.limit.wait()
            try:
                reply = self.client.send(body)
            finally:
                with self.lock:
                    self.reserved -= estimate
            cost = (self.price.cost(reply.input_tokens or 0, reply.output_tokens or 0)
                    if self.price else 0.0)
            self._record({**base, "cache_hit": False, "try_no": try_no, "status": reply.status,
                          "request_id": reply.request_id, "http_status": reply.http_status,
                          "input_tokens": reply.input_tokens, "output_tokens":
                          reply.output_tokens, "latency_s": round(reply.latency_s, 3),
                          "cost": cost, "detail": reply.detail})
            with self.lock:
                self.outcome.sent += 1
                self.outcome.cost += cost
            if reply.status == "ok":
                entry = {"key": key, "answer": reply.text, "request_id": reply.request_id,
                         "judge_run_id": self.settings.judge_run_id, "model": self.settings.model,
                         "role": request.role, "case_id": request.case_id,
                         "evaluation_id": request.evaluation_id, "sample": request.sample,
                         "input_tokens": reply.input_tokens,
                         "output_tokens": reply.output_tokens, "cost": cost}
                self.cache.put(key, entry)
                return str(reply.text), key, entry
            if reply.status in ("empty", "refusal"):
                # an answer, but none to keep: the attempt fails (never cached)
                return "", key, {"status": reply.status, "detail": reply.detail}
            if not _retryable(reply) or try_no == MAX_TRIES:
                raise _Failed(f"{request.role}: {reply.status} after {try_no} tries")
            wait = reply.retry_after if reply.retry_after is not None else \
                self.backoff_s * 2 ** (try_no - 1)
            self.sleep(min(MAX_WAIT_S, wait))
        raise _Failed(f"{request.role}: no answer")

    def _estimate(self, request: Request) -> float:
        if self.price is None:
            return 0.0
        return self.price.cost(request.estimated_input_tokens(), self.settings.max_tokens)

    def _reserve(self, estimate: float) -> None:
        """Claim the most a request may cost before sending it: past the budget, nothing more
        is sent (requests already under way finish)."""
        budget = self.settings.budget_usd
        with self.lock:
            total = self.outcome.spent_before + self.outcome.cost + self.reserved + estimate
            if self.stop.is_set() or (budget and total > budget):
                self.stop.set()
                self.outcome.budget_reached = bool(budget)
                raise BudgetReached()
            self.reserved += estimate

    def _record(self, row: dict[str, Any]) -> None:
        self.journal.write({"kind": "call", **row, "logged_at": _now()})

    def _reject(self, request: Request, key: str, attempt: int, reason: str, raw: str) -> None:
        self.journal.write({"kind": "reject", "judge_run_id": self.settings.judge_run_id,
                            "evaluation_id": request.evaluation_id, "case_id": request.case_id,
                            "role": request.role, "attempt": attempt,
                            "sample": request.sample, "request_key": key, "reason": reason,
                            "raw": raw, "logged_at": _now()})
        with self.lock:
            self.outcome.rejects += 1
        self.log(f"rejected {request.role} answer of {request.evaluation_id or request.case_id} "
                 f"(attempt {attempt}): {reason}")

    # - the GT compilation of a case -
    def compile_gt(self, case: Case, ctx: EvalContext) -> str | None:
        """The case's GT compilation (its JSON, as the candidate roles see it), its record
        written when new; None when no valid one came (the case's evaluations wait)."""
        for sample in range(MAX_ATTEMPTS):
            request = gt_request(case, self.settings, sample)
            text, key, entry = self.answer(request, sample + 1)
            answer, why = parse_answer(text) if text else (None, _no_answer(entry))
            record = None
            if answer is not None:
                record = gt_record(case, answer, entry.get("judge_run_id") or
                                   self.settings.judge_run_id, self.settings)
                reasons = gt_reasons(record, ctx)
                why = "; ".join(reasons) if reasons else None
            if why is not None:
                self._reject(request, key, sample + 1, why, text)
                continue
            assert record is not None
            path = self.out / "gt_compilations" / f"{case.case_id}.{key[:16]}.json"
            if self._write_once(path, record):
                with self.lock:
                    self.outcome.gt_written += 1
            return canonical_json(record["compilation"])
        return None

    # - one evaluation -
    def judge(self, ev: Evaluation, case: Case, gt: str, ctx: EvalContext,
              owner_of: Callable[[str], str | None]) -> bool | None:
        """Judge one evaluation: True when its record is there (written now or before), False
        when every attempt was rejected (unscored)."""
        folder = self.out / self.settings.judge_run_id / ev.system / ev.case_id
        samples = dict.fromkeys(CANDIDATE_ROLES, 0)
        reports: dict[str, str] = {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            failed_role = None
            for role in CANDIDATE_ROLES:
                request = role_request(ev, role, case, gt, reports, self.settings,
                                       samples[role])
                text, key, entry = self.answer(request, attempt)
                answer, why = parse_answer(text) if text else (None, _no_answer(entry))
                if answer is not None and role != "critic":
                    reports[role] = canonical_json(answer)
                    continue
                if answer is not None:
                    path = folder / f"{key[:16]}.json"
                    if path.exists():  # this very answer was made into a record before
                        return True
                    offset = max(_attempts_before(folder),
                                 self.attempts.get((ev.system, ev.case_id), 0))
                    kind = "retry" if attempt > 1 else "initial"
                    record, why = judgment_record(ev, answer, offset + attempt, kind,
                                                  self.settings)
                    if record is not None:
                        reasons = judgment_reasons(record, ctx, owner_of)
                        why = "; ".join(reasons) if reasons else None
                    if why is None:
                        self._write_once(path, record)
                        with self.lock:
                            self.outcome.records_written += 1
                        return True
                self._reject(request, key, attempt, str(why), text)
                failed_role = role
                break
            assert failed_role is not None
            # judged again from the role that failed, with its next sample; the roles before
            # it keep their answers (cached), the ones after see a new report
            samples[failed_role] += 1
            for role in CANDIDATE_ROLES[CANDIDATE_ROLES.index(failed_role):]:
                reports.pop(role, None)
        return False

    def _write_once(self, path: Path, record: dict[str, Any]) -> bool:
        if path.exists():
            return False
        atomic_write_bytes(path, (json.dumps(record, sort_keys=True, ensure_ascii=False,
                                             indent=1) + "\n").encode())
        return True

    def run(self, work: Work) -> Outcome:
        """Judge every evaluation of `work` (GT compilations first), `concurrency` at a time;
        the journal is closed at the end."""
        self.outcome.stale = list(work.stale)
        ctx = eval_context(self.home)
        owner: dict[str, str] = {eid: ev for ev, ids in ctx.evidence_ids.items() for eid in ids}
        wanted = sorted({ev.case_id for ev in work.evaluations})
        gts: dict[str, str | None] = {}

        def compile_one(cid: str) -> None:
            try:
                gts[cid] = self.compile_gt(work.cases[cid], ctx)
            except (BudgetReached, _Failed) as exc:
                self.log(f"GT compilation of {cid} not done: {_why(exc)}")
                gts[cid] = None

        def judge_one(ev: Evaluation) -> None:
            gt = gts.get(ev.case_id)
            if gt is None:
                with self.lock:
                    self.outcome.unfinished.append(ev.evaluation_id)
                return
            try:
                done = self.judge(ev, work.cases[ev.case_id], gt, ctx, owner.get)
            except (BudgetReached, _Failed) as exc:
                self.log(f"{ev.evaluation_id} not judged: {_why(exc)}")
                with self.lock:
                    self.outcome.unfinished.append(ev.evaluation_id)
                return
            with self.lock:
                if done:
                    self.outcome.evaluations += 1
                else:
                    self.outcome.unscored.append(ev.evaluation_id)

        workers = max(1, self.settings.concurrency)
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(compile_one, wanted))
                list(pool.map(judge_one, work.evaluations))
        finally:
            self.journal.close()
        self.outcome.unfinished.sort()
        self.outcome.unscored.sort()
        return self.outcome


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _why(exc: Exception) -> str:
    return "the budget is reached" if isinstance(exc, BudgetReached) else str(exc)


def _no_answer(entry: dict[str, Any]) -> str:
    status = entry.get("status", "empty")
    detail = entry.get("detail")
    return f"{'empty answer' if status == 'empty' else 'refused'}" + (f": {detail}"
                                                                      if detail else "")


def _attempts_before(folder: Path) -> int:
    """The highest attempt among the records already written for an evaluation (0: none): a
    new judgment (its inputs changed) continues the numbering, as the ingest wants."""
    best = 0
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            best = max(best, int(json.loads(path.read_text(encoding="utf-8"))["attempt"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return best


def _attempts_ingested(home: Path, judge_run_id: str) -> dict[tuple[str, str], int]:
    """(system, case_id) -> the highest attempt of judge run `judge_run_id` ingested so far
    (from any folder: a run id may have records of other origins)."""
    path = table_path(home, "rvp_judgments")
    if not path.exists():
        return {}
    out: dict[tuple[str, str], int] = {}
    for r in read_table(path, home, ["system", "case_id", "judge_run_id", "attempt"]
                        ).to_pylist():
        if r["judge_run_id"] == judge_run_id:
            key = (r["system"], r["case_id"])
            out[key] = max(out.get(key, 0), r["attempt"])
    return out


# --- the dry run ---------------------------------------------------------------------------


@dataclass
class Estimate:
    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0  # at most: max_tokens per call
    cost: float | None = 0.0  # None: the model has no price


def dry_run(home: Path, judge_dir: Path, settings: JudgeSettings) -> Estimate:
    """How many requests `benchlake judge` would send now and their estimated tokens and cost
    (at most: every answer as long as max_tokens), sending nothing. Roles after the first that
    is not cached are counted as calls (their prompts need the answers before them)."""
    work = load_work(home)
    cache = AnswerCache(judge_dir / "cache")
    est = Estimate()

    def count(request: Request) -> None:
        est.calls += 1
        est.input_tokens += request.estimated_input_tokens()
        est.output_tokens += settings.max_tokens

    gts: dict[str, str] = {}
    for cid in sorted({ev.case_id for ev in work.evaluations}):
        request = gt_request(work.cases[cid], settings, 0)
        entry = cache.get(request.key(settings))
        answer = parse_answer(entry["answer"])[0] if entry else None
        if answer is None:
            count(request)
            gts[cid] = ""
        else:
            est.cached += 1
            gts[cid] = canonical_json(answer.get("compilation"))
    for ev in work.evaluations:
        reports: dict[str, str] = {}
        missing = False
        for role in CANDIDATE_ROLES:
            request = role_request(ev, role, work.cases[ev.case_id], gts[ev.case_id], reports,
                                   settings, 0)
            entry = None if missing else cache.get(request.key(settings))
            answer = parse_answer(entry["answer"])[0] if entry else None
            if answer is None:
                missing = True
                count(request)
            else:
                est.cached += 1
                reports[role] = canonical_json(answer)
    price = price_of(settings)
    est.cost = price.cost(est.input_tokens, est.output_tokens) if price else None
    return est


def run_totals(calls: pa.Table) -> list[dict[str, Any]]:
    """Per judge run: requests, cache hits, tokens and cost (what the CLI prints)."""
    totals: dict[str, dict[str, Any]] = {}
    for r in calls.to_pylist():
        t = totals.setdefault(r["judge_run_id"], {"judge_run_id": r["judge_run_id"],
                                                  "requests": 0, "cache_hits": 0,
                                                  "input_tokens": 0, "output_tokens": 0,
                                                  "cost": 0.0})
        t["cache_hits" if r["cache_hit"] else "requests"] += 1
        t["input_tokens"] += r["input_tokens"] or 0
        t["output_tokens"] += r["output_tokens"] or 0
        t["cost"] += r["cost"] or 0.0
    return list(totals.values())


# --- manager review ------------------------------------------------------------------------


def write_reviews(home: Path, judge_dir: Path, evaluation_id: str, take: str, author: str,
                  reason: str) -> list[Path]:
    """A person's verdict on an evaluation: the final judge record of judge run `take` (its
    metrics, hallucinations, evidence and judge, as the record file holds them) written as a
    `manager_review` attempt, with `review` {author, reason}, into every judge run that judged
    the evaluation, so it is final there and counts in the scores. Files under the judge's
    folder (`<run>/<system>/<case_id>/review-<attempt>.json`); the paths written."""
    from dagster_project.records import read_records
    from dagster_project.rynn_vp.judgment_records import MAX_RECORD_BYTES
    from dagster_project.warehouse.catalog import connect

    if not author.strip() or not reason.strip():
        raise ValueError("a review needs an author and a reason")
    con = connect(home)
    try:
        cur = con.execute(
            "SELECT j.judge_run_id, j.attempt, j.attempt_kind, j.source_file, j.line, "
            "f.archived_abspath, max(j.attempt) OVER (PARTITION BY j.judge_run_id) AS last "
            "FROM rvp_judgments AS j JOIN rvp_judgment_files AS f "
            "ON f.source_file = j.source_file AND f.version = j.file_version "
            "WHERE j.evaluation_id = ? ORDER BY j.judge_run_id, j.attempt", [evaluation_id])
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
    if not rows:
        raise ValueError(f"no accepted judgment of {evaluation_id}: nothing to review")
    runs = sorted({r["judge_run_id"] for r in rows})
    judged = [r for r in rows
              if r["judge_run_id"] == take and r["attempt_kind"] != "manager_review"]
    if not judged:
        raise ValueError(f"judge run {take!r} has no judge record of {evaluation_id} (runs: "
                         f"{', '.join(runs)})")
    chosen = judged[-1]  # its final judge record: the highest attempt that is no review
    record = next((r.value for r in read_records(
        Path(chosen["archived_abspath"]), chosen["source_file"], accept=(".json", ".jsonl"),
        max_record_bytes=MAX_RECORD_BYTES) if r.line == chosen["line"]), None)
    if not isinstance(record, dict):
        raise ValueError(f"{chosen['source_file']} line {chosen['line']}: record not found")
    written = []
    for run in runs:
        attempt = max(r["last"] for r in rows if r["judge_run_id"] == run) + 1
        review = {k: v for k, v in record.items() if k not in ("stages", "notes", "review")}
        review.update(judge_run_id=run, attempt=attempt, attempt_kind="manager_review",
                      review={"author": author.strip(), "reason": reason.strip()},
                      notes=f"verdict of judge run {take}, attempt {chosen['attempt']} "
                            f"({chosen['source_file']} line {chosen['line']})")
        system, case_id = record["system"], record["case_id"]
        path = judge_dir / "judgments" / run / system / case_id / f"review-{attempt}.json"
        atomic_write_bytes(path, (json.dumps(review, sort_keys=True, ensure_ascii=False,
                                              indent=1) + "\n").encode())
        written.append(path)
    return written
