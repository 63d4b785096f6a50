"""The judge's endpoint and its books: one HTTP try of a chat completion (`Client`), the pace
(`RateLimit`), the answer cache, the journal of every request, the ledger and rejects tables
made from the journals, the price table and the dry run. No Dagster import.

- `cache/<kk>/<key>.json` (under `$BENCHLAKE_HOME/judge/`): one answer per request key, written
  atomically; errors, empty answers and refusals are never written.
- `calls/<dagster run id>.jsonl`: one line per request as it ends (cache hits too) and one per
  rejected answer, flushed line by line, so a killed run's calls are accounted too.
"""

from __future__ import annotations

import csv
import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa

from dagster_project.settings import JudgeSettings
from dagster_project.tables import atomic_write_bytes, raw_schema, rows_to_table
from dagster_project.warehouse.seeds import read_seed

CALLS_SCHEMA = raw_schema("rvp_judge_calls")
REJECTS_SCHEMA = raw_schema("rvp_judge_rejects")


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


def retryable(reply: Reply) -> bool:
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
