"""The judge in Dagster: the asset that sends the judge packets to JUDGE_BASE_URL and keeps the
ledger (the logic: `dagster_project/rynn_vp/judge.py`), and `rvp_judge_job`, the job `benchlake
judge` launches (the packets brought up to date, then the judging)."""

import dagster as dg
import pyarrow as pa
from pydantic import Field

from dagster_project.defs.resources import (
    BenchlakeSettings,
    JudgeResource,
    raw_key,
    started,
    write_and_describe,
)
from dagster_project.rynn_vp.judge import Judge, ledger_tables, load_work, run_totals
from dagster_project.rynn_vp.judgment_parts import CONTEXT_INPUTS
from dagster_project.warehouse.previews import markdown_preview

GROUP = "rynn_vp"
JUDGE_JOB = "rvp_judge_job"
# what the judge reads: the packets, and the tables a record is checked against
_DEPS = [raw_key("rvp_judge_packets"), *(raw_key(t) for t in CONTEXT_INPUTS)]


class JudgeConfig(dg.Config):
    send: bool = Field(default=False, description=(
        "Send the packets to JUDGE_BASE_URL (what rvp_judge_job does). Off, the step only "
        "writes the ledger again from the journals: materializing everything never calls a "
        "paid endpoint."))


@dg.multi_asset(
    group_name=GROUP,
    specs=[
        dg.AssetSpec(raw_key("rvp_judge_calls"), kinds={"parquet"}, deps=_DEPS,
                     description="The judge's ledger: one row per request (cache hits too), "
                     "from the journals under $BENCHLAKE_HOME/judge/calls/."),
        dg.AssetSpec(raw_key("rvp_judge_rejects"), kinds={"parquet"}, deps=_DEPS,
                     description="Judge answers that made no valid record: raw answer and "
                     "reason."),
    ],
)
def rvp_judge(context: dg.AssetExecutionContext, config: JudgeConfig,
              benchlake: BenchlakeSettings, judge: JudgeResource):
    """With `send` (rvp_judge_job): every evaluation whose packets are current is judged through
    the OpenAI-compatible endpoint of JUDGE_BASE_URL, the GT compilation once per case, then
    the five roles; answers come from the cache when their request was answered before, and
    the records are written to `$BENCHLAKE_HOME/judge/judgments/`, which the judgment records
    asset reads beside JUDGMENTS_DIR. The run stops before it would exceed JUDGE_BUDGET_USD.
    Either way the ledger and the rejects are written from every journal."""
    started(context, benchlake)
    s = benchlake.settings()
    extra: dict[str, object] = {}
    if config.send:
        js = judge.settings()
        if not js.base_url or not js.model:
            raise dg.Failure("JUDGE_BASE_URL and JUDGE_MODEL must be set to judge")
        work = load_work(s.home)
        outcome = Judge(s.home, s.judge_dir, js, context.run.run_id, context.log.info).run(work)
        extra = {"judge_run_id": js.judge_run_id, "requests_sent": outcome.sent,
                 "cache_hits": outcome.cache_hits, "cost_usd": round(outcome.cost, 6),
                 "spent_usd": round(outcome.spent_before + outcome.cost, 6),
                 "budget_usd": js.budget_usd, "budget_reached": outcome.budget_reached,
                 "evaluations_judged": outcome.evaluations,
                 "records_written": outcome.records_written,
                 "gt_compilations_written": outcome.gt_written,
                 "answers_rejected": outcome.rejects, "unscored": outcome.unscored,
                 "unfinished": outcome.unfinished, "stale_packets": outcome.stale}
        context.log.info(f"judge run {js.judge_run_id}: {outcome.sent} request(s) sent, "
                         f"{outcome.cache_hits} answered from the cache, ${outcome.cost:.4f}; "
                         f"{outcome.records_written} record(s) written")
        if outcome.budget_reached:
            context.log.warning(
                f"judge run {js.judge_run_id} stopped before exceeding its budget "
                f"(${js.budget_usd:.2f}; spent ${outcome.spent_before + outcome.cost:.4f}): "
                f"{len(outcome.unfinished)} evaluation(s) not judged")
    calls, rejects = ledger_tables(s.judge_dir / "calls")
    totals = run_totals(calls)
    # totals per judge run (the view rvp_judge_runs has them too)
    per_run = markdown_preview(pa.Table.from_pylist(totals)) if totals else "-"
    yield write_and_describe(context, benchlake, "rvp_judge_calls", calls, **extra,
                             totals_per_judge_run=dg.MetadataValue.md(per_run))
    yield write_and_describe(context, benchlake, "rvp_judge_rejects", rejects)


rvp_judge_job = dg.define_asset_job(
    JUDGE_JOB,
    selection=dg.AssetSelection.assets(raw_key("rvp_judge_packets"), rvp_judge),
    config={"ops": {"rvp_judge": {"config": {"send": True}}}},
    description="`benchlake judge`: the judge packets brought up to date, then every evaluation "
    "whose packets are current judged through JUDGE_BASE_URL (cached answers are not sent "
    "again); the records land in $BENCHLAKE_HOME/judge/judgments/ for the judgments ingest.",
)
