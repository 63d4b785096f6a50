"""`benchlake_progress`: a Dagster logger that tells a run's progress on stderr, one line per
step (what it wrote, its checks, how long it took) and the assets' own progress messages. The CLI
runs with it instead of Dagster's console log; runs launched from the UI keep Dagster's."""

import logging
import re
import sys
import time
from typing import Any

import dagster as dg


class _ProgressHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.steps: dict[str, dict] = {}

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        step = meta.get("step_key")
        if event is None:
            # An asset's own progress message (`context.log`), not a library's chatter.
            if step and record.levelno >= logging.INFO and meta.get("log_message_id") and \
                    not str(meta.get("orig_message", "")).startswith(_CHATTER):
                _print(f"    {step}: {meta.get('orig_message', record.getMessage())}")
            return
        kind = event.event_type_value
        state = self.steps.setdefault(step or "", {"assets": 0, "rows": None, "passed": 0,
                                                  "failed": [], "observed": 0,
                                                  "start": time.monotonic()})
        if kind == "STEP_START":
            state["start"] = time.monotonic()
            if sys.stderr.isatty():  # a terminal sees what runs now; a log only what finished
                _print(f"  ... {step}")
        elif kind == "ASSET_MATERIALIZATION":
            state["assets"] += 1
            rows = event.event_specific_data.materialization.metadata.get("dagster/row_count")
            state["rows"] = None if rows is None or state["assets"] > 1 else rows.value
        elif kind == "ASSET_OBSERVATION":
            state["observed"] += 1
        elif kind == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            if data.passed:
                state["passed"] += 1
            else:
                state["failed"].append(f"{data.asset_key.to_user_string()}:{data.check_name}"
                                       f" ({data.severity.value})")
        elif kind == "STEP_SUCCESS":
            took = time.monotonic() - state["start"]
            what = (f"{state['rows']} rows" if state["assets"] == 1 and state["rows"] is not None
                    else "observed" if state["observed"] and not state["assets"]
                    else "check" if not state["assets"]
                    else f"{state['assets']} assets")
            checks = (f"{', checks' if state['assets'] else ''}: {state['passed']} passed"
                      if state["passed"] or state["failed"] else "")
            if state["failed"]:
                checks += f", {len(state['failed'])} failed"
            _print(f"  ok  {step}: {what}{checks} ({took:.1f}s)")
            for name in state["failed"]:
                _print(f"      check failed: {name}")
        elif kind == "STEP_FAILURE":
            _print(f"  FAILED {step}: {_failure_line(event.event_specific_data)}")
        elif kind == "STEP_SKIPPED":
            _print(f"  skipped {step} (an upstream step failed)")


def _failure_line(data: Any) -> str:
    """What a failed step says: the description of the `dg.Failure` it raised (a failed dbt
    node names itself there), else the first line of the innermost error cause, without its
    class's module path."""
    if data.user_failure_data is not None and data.user_failure_data.description:
        return data.user_failure_data.description.strip().splitlines()[0]
    error = data.error
    while error is not None and error.cause is not None:  # the asset's own error
        error = error.cause
    lines = (error.message if error else "").strip().splitlines()
    return re.sub(r"^(?:\w+\.)+(\w+: )", r"\1", lines[0]) if lines else "error"


# dagster-dbt's log lines: what it runs is in dbt's log file, named at the end.
_CHATTER = ("A dbt subsetted execution", "Running dbt command", "Finished dbt command",
            "Copying `", "DBT selection of", "Dependencies for step")


def _print(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@dg.logger(description="One line per step on stderr (what the CLI shows).")
def benchlake_progress(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = logging.Logger("benchlake_progress", level=logging.DEBUG)
    logger.addHandler(_ProgressHandler())
    return logger


@dg.definitions
def loggers() -> dg.Definitions:
    return dg.Definitions(loggers={"benchlake_progress": benchlake_progress})
