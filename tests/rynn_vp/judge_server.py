"""A small OpenAI-compatible chat-completions server on 127.0.0.1 for the judge tests: it answers
each role of the project's prompts (assets/prompts/v1) deterministically with valid JSON, counts
what it is sent, and fails on demand (429 with Retry-After, 500, a timeout, garbage, an empty
answer). Standard library only, one thread per request."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLE_TITLES = {"GT compilation": "gt_compilation", "Observer": "observer",
               "VR/VQ judge": "vr_vq_judge", "Dense hallucination auditor":
               "hallucination_auditor", "PI judge": "pi_judge", "Independent critic": "critic"}
_TITLE = re.compile(r"^# Rynn-VP · (.+?) · ", re.MULTILINE)
_EVALUATION = re.compile(r"evaluation `([^`]+)`")
_CASE = re.compile(r"- Case: `([^`]+)`")
_PLAN = re.compile(r"Explicit plan (?:supplied by the task )?\(empty when none\): ?(.*)")


@dataclass
class Seen:
    role: str
    subject: str  # evaluation id, or the case id of a GT compilation
    authorization: str | None
    images: int
    image_urls_ok: bool


@dataclass
class Fault:
    matches: Callable[[Seen], bool]
    kind: str  # "429", "500", "timeout", "garbage", "empty"
    times: int  # how many requests it hits (then it is spent)
    retry_after: str | None = None


@dataclass
class JudgeServer:
    api_key: str | None = None
    timeout_sleep_s: float = 3.0
    delay_s: float = 0.0  # before every answer (a slow server, to stop a client midway)
    seen: list[Seen] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    score_shift: dict[str, float] = field(default_factory=dict)  # evaluation -> added points
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inject(self, kind: str, *, role: str | None = None, subject: str | None = None,
               times: int = 1, retry_after: str | None = None) -> None:
        def matches(s: Seen) -> bool:
            return (role is None or s.role == role) and (subject is None or s.subject == subject)
        with self.lock:
            self.faults.append(Fault(matches, kind, times, retry_after))

    def count(self, role: str | None = None, subject: str | None = None) -> int:
        with self.lock:
            return sum((role is None or s.role == role) and (subject is None or s.subject == subject)
                       for s in self.seen)

    def settled_count(self, quiet_s: float = 0.5, timeout_s: float = 30.0) -> int:
        """`count()` once no request has arrived for `quiet_s`: a killed client's requests
        already sent (in the socket's buffers, or accepted but not yet read) are counted first."""
        deadline = time.monotonic() + timeout_s
        last, since = self.count(), time.monotonic()
        while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.count()
            if now != last:
                last, since = now, time.monotonic()
        return last

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()
            self.faults.clear()

    # --- answers ---
    def answer(self, role: str, subject: str, text: str) -> dict[str, Any]:
        def score(metric: str) -> float:
            digest = hashlib.sha256(f"{subject}|{metric}".encode()).digest()
            base = 40 + digest[0] % 50 + digest[1] % 10 / 10
            return round(min(100.0, base + self.score_shift.get(subject, 0.0)), 1)

        if role == "gt_compilation":
            return {"case_id": subject, "prompt_version": "benchlake-prompts-v1",
                    "compilation": {"entity_correspondence": [{"entity": "cup", "s0": "left",
                                                               "intervals": [],
                                                               "evidence": ["S0"]}],
                                    "goal_predicates": [], "necessary_process_evidence": [],
                                    "allowed_alternatives": [], "uncertainties": []}}
        if role == "observer":
            return {"evaluation_id": subject, "entities": [], "state_changes": [],
                    "goal_status": [], "evidence_gaps": [], "defects": []}
        if role == "vr_vq_judge":
            return {"evaluation_id": subject,
                    "metrics": {m: score(m) for m in (*(f"VR-{i}" for i in range(1, 9)), "VQ")},
                    "rationales": {}, "evidence": [f"{subject}#S0"]}
        if role == "hallucination_auditor":
            return {"evaluation_id": subject, "hallucinations": [], "uncertain": [],
                    "evidence": [f"{subject}#S0"]}
        if role == "pi_judge":
            plan = _PLAN.search(text)
            names = ["PI-1", "PI-2", "PI-3", "PI-4", "PI-6"]
            if plan and plan.group(1).strip():
                names.append("PI-5")
            return {"evaluation_id": subject, "program": [],
                    "metrics": {m: score(m) for m in names}, "evidence": [f"{subject}#S0"]}
        metrics: dict[str, float] = {}
        for label in ("VR/VQ judge", "PI judge"):
            start = text.index(f"- {label}: ") + len(f"- {label}: ")
            report, _ = json.JSONDecoder().raw_decode(text[start:])
            metrics.update(report["metrics"])
        return {"verdict": "accept", "findings": [],
                "record": {"metrics": metrics, "hallucinations": [],
                           "evidence": [f"{subject}#S0"]}}


def _handler(server: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path != "/v1/chat/completions":
                return self._send(404, b"{}")
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            content = body["messages"][0]["content"]
            text = content[0]["text"]
            urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
            title = _TITLE.search(text)
            role = ROLE_TITLES[title.group(1)] if title else "?"
            found = (_CASE if role == "gt_compilation" else _EVALUATION).search(text)
            seen = Seen(role, found.group(1) if found else "?",
                        self.headers.get("Authorization"), len(urls),
                        all(u.startswith("data:image/") and ";base64," in u for u in urls))
            fault = None
            with server.lock:
                server.seen.append(seen)
                for f in server.faults:
                    if f.times > 0 and f.matches(seen):
                        f.times -= 1
                        fault = f
                        break
            if server.api_key and seen.authorization != f"Bearer {server.api_key}":
                return self._send(401, b'{"error": "bad key"}')
            if fault is not None and fault.kind == "429":
                return self._send(429, b'{"error": "slow down"}',
                                  {"Retry-After": fault.retry_after or "0"})
            if fault is not None and fault.kind == "500":
                return self._send(500, b'{"error": "boom"}')
            if fault is not None and fault.kind == "timeout":
                time.sleep(server.timeout_sleep_s)
            time.sleep(server.delay_s)
            if fault is not None and fault.kind == "garbage":
                answer = "I think the candidate did fine, about 70 points overall."
            elif fault is not None and fault.kind == "empty":
                answer = ""
            else:
                answer = json.dumps(server.answer(role, seen.subject, text))
            reply = {"id": f"chatcmpl-{len(server.seen)}", "object": "chat.completion",
                     "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": answer}}],
                     "usage": {"prompt_tokens": len(text) // 4 + 255 * len(urls),
                               "completion_tokens": max(1, len(answer) // 4)}}
            # the client may have timed out first
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(200, json.dumps(reply).encode(), {"Content-Type": "application/json"})

    return Handler


class Running:
    """The server on 127.0.0.1 (a free port), in a daemon thread, until `close`."""

    def __init__(self, server: JudgeServer) -> None:
        self.state = server
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
