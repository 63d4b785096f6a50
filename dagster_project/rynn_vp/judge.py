"""The judge: the judge packets sent to an OpenAI-compatible `/v1/chat/completions` endpoint,
the answers turned into judgment records, every request accounted. No Dagster import (the asset
`raw_rvp_judge_calls` wires it, `benchlake judge` launches that asset's job).

Per case, the GT compilation packet is sent once; per evaluation, the five candidate roles in
order (observer, vr_vq_judge, hallucination_auditor, pi_judge, critic), each rendered from its
packet with the evidence images (`judge_requests`). The critic's record, with benchlake's own
identity and judge metadata, is the judgment record; it is checked by the ingest's own rules
(`judgment_records.judgment_reasons`).

Files, under `$BENCHLAKE_HOME/judge/` (`Settings.judge_dir`):

- `cache/<kk>/<key>.json`: one answer per request key (`judge_client`). The key is a digest of
  what determines the answer: endpoint, model, prompt version, the rendered messages (images by
  their SHA-256, not their bytes), decoding settings and sample index. A request whose key is
  there is never sent again: a rerun sends nothing, a killed run resumes, a changed candidate
  changes only its evaluation's keys. Errors, empty answers and refusals are never cached.
- `calls/<dagster run id>.jsonl`: the journal of every request and rejected answer, as they
  happen; the tables `rvp_judge_calls` (the ledger) and `rvp_judge_rejects` are made from them.
- `judgments/`: the records, `<judge_run_id>/<system>/<case_id>/<key>.json`, and the GT
  compilations, `gt_compilations/<case_id>.<key>.json`, each file written once (named by the
  request that made it): the judgments ingest reads this folder beside JUDGMENTS_DIR.

An answer that does not make a valid record is a reject (role, raw answer, reason) and the
evaluation is judged again from that role with the next sample index as a `retry` attempt, up to
`MAX_ATTEMPTS`; an evaluation without a valid record stays unscored.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dagster_project.rynn_vp.judge_client import (
    AnswerCache,
    Client,
    Journal,
    RateLimit,
    endpoint,
    price_of,
    retryable,
    spent,
)
from dagster_project.rynn_vp.judge_requests import (
    Case,
    Evaluation,
    Request,
    Work,
    gt_record,
    gt_request,
    judgment_record,
    load_work,
    parse_answer,
    role_request,
)
from dagster_project.rynn_vp.judgment_parts import eval_context
from dagster_project.rynn_vp.judgment_records import (
    EvalContext,
    canonical_json,
    gt_reasons,
    judgment_reasons,
)
from dagster_project.rynn_vp.packets import CANDIDATE_ROLES
from dagster_project.settings import JudgeSettings
from dagster_project.tables import atomic_write_bytes, connect_raw, table_files

MAX_ATTEMPTS = 2  # an evaluation's initial attempt and one retry
MAX_TRIES = 5  # HTTP tries of one request (429, 5xx, timeouts, connection errors)
BACKOFF_S = 1.0  # first wait after a failed try without Retry-After; doubled each time
MAX_WAIT_S = 60.0


class BudgetReached(Exception):
    """The next request would take the judge run past its budget: nothing more is sent."""


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
    """A request that got no usable answer: errors on every try, or one not worth retrying."""


class Judge:
    """One judging: what `run` does, journaled under `judge_dir/calls/<run_id>.jsonl`."""

    def __init__(self, home: Path, judge_dir: Path, settings: JudgeSettings, run_id: str,
                 log: Callable[[str], None], backoff_s: float = BACKOFF_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.home, self.settings, self.log = home, settings, log
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
            except BaseException:
                with self.lock:
                    self.reserved -= estimate
                raise
            cost = (self.price.cost(reply.input_tokens or 0, reply.output_tokens or 0)
                    if self.price else 0.0)
            with self.lock:  # the claim becomes the cost at once: no request slips between
                self.reserved -= estimate
                self.outcome.sent += 1
                self.outcome.cost += cost
            self._record({**base, "cache_hit": False, "try_no": try_no, "status": reply.status,
                          "request_id": reply.request_id, "http_status": reply.http_status,
                          "input_tokens": reply.input_tokens, "output_tokens":
                          reply.output_tokens, "latency_s": round(reply.latency_s, 3),
                          "cost": cost, "detail": reply.detail})
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
            if not retryable(reply) or try_no == MAX_TRIES:
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
              owner_of: Callable[[str], str | None]) -> bool:
        """Judge one evaluation: True when its record is there (written now or before), False
        when every attempt was rejected (unscored)."""
        folder = self.out / self.settings.judge_run_id / ev.system / ev.case_id
        samples = dict.fromkeys(CANDIDATE_ROLES, 0)
        reports: dict[str, str] = {}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            failed_role = None
            for role in CANDIDATE_ROLES:
                if role in reports:  # answered in an attempt before, and kept
                    continue
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
            try:  # None: every answer rejected; missing: no answer (ask again next time)
                gts[cid] = self.compile_gt(work.cases[cid], ctx)
            except (BudgetReached, _Failed) as exc:
                self.log(f"GT compilation of {cid} not done: {_why(exc)}")

        def judge_one(ev: Evaluation) -> None:
            gt = gts.get(ev.case_id)
            if gt is None:
                with self.lock:
                    (self.outcome.unscored if ev.case_id in gts
                     else self.outcome.unfinished).append(ev.evaluation_id)
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
    if not table_files(home, "rvp_judgments"):
        return {}
    con = connect_raw(home, ["rvp_judgments"])
    try:
        rows = con.execute("SELECT system, case_id, max(attempt) FROM raw.rvp_judgments "
                           "WHERE judge_run_id = ? GROUP BY ALL", [judge_run_id]).fetchall()
    finally:
        con.close()
    return {(system, case_id): attempt for system, case_id, attempt in rows}


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


# --- what the asset and the command do and say -------------------------------------------


def judge_step(home: Path, judge_dir: Path, settings: JudgeSettings, run_id: str,
               log: Any) -> dict[str, Any]:
    """Judge every evaluation whose packets are current (the asset, asked to send); what it
    did, as the metadata the UI shows and `benchlake judge` reports (`report`). `log`: a logger
    (`info`, `warning`)."""
    settings.require_endpoint()
    o = Judge(home, judge_dir, settings, run_id, log.info).run(load_work(home))
    done = {"judge_run_id": settings.judge_run_id, "requests_sent": o.sent,
            "cache_hits": o.cache_hits, "cost_usd": round(o.cost, 6),
            "spent_usd": round(o.spent_before + o.cost, 6), "budget_usd": settings.budget_usd,
            "budget_reached": o.budget_reached, "evaluations_judged": o.evaluations,
            "records_written": o.records_written, "gt_compilations_written": o.gt_written,
            "answers_rejected": o.rejects, "unscored": o.unscored, "unfinished": o.unfinished,
            "stale_packets": o.stale}
    summary, problem = report(done)
    log.info(summary)
    if problem:
        log.warning(problem)
    return done


def report(done: dict[str, Any]) -> tuple[str, str | None]:
    """What a judging did in one line, and what is left undone (the budget, errors), if any."""
    summary = (f"judge run {done['judge_run_id']}: {done['requests_sent']} request(s) sent, "
               f"{done['cache_hits']} answered from the cache, ${done['cost_usd']:.4f} now "
               f"(${done['spent_usd']:.4f} in all); {done['records_written']} record(s) and "
               f"{done['gt_compilations_written']} GT compilation(s) written, "
               f"{done['answers_rejected']} answer(s) rejected, {len(done['unscored'])} "
               "evaluation(s) unscored")
    left = len(done["unfinished"])
    if done["budget_reached"]:
        return summary, (f"judge run {done['judge_run_id']} stopped before exceeding its budget "
                         f"of ${done['budget_usd']:.2f} (spent ${done['spent_usd']:.4f}): "
                         f"{left} evaluation(s) not judged")
    if left:
        return summary, (f"{left} evaluation(s) got no answer (errors after every retry, see "
                         f"rvp_judge_calls), e.g. {done['unfinished'][0]}: run `benchlake "
                         "judge` again to ask only for those")
    return summary, None


def dry_run_text(home: Path, judge_dir: Path, settings: JudgeSettings) -> str:
    est = dry_run(home, judge_dir, settings)
    cost = (f"${est.cost:.4f}" if est.cost is not None
            else f"unknown (no price for {settings.model} in the price table)")
    return (f"{est.calls} call(s) to {endpoint(settings)} (model {settings.model}, judge run "
            f"{settings.judge_run_id}); {est.cached} answer(s) cached; estimated input "
            f"{est.input_tokens:,} tokens, output at most {est.output_tokens:,} tokens "
            f"(max_tokens {settings.max_tokens} per call); cost at most {cost}")
