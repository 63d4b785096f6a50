"""`benchlake`: the command line of the contract (demo, materialize, sql, export, ui)."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dagster_project.settings import Settings
from dagster_project.warehouse.objectstore import synced

warnings.filterwarnings("ignore", module="dagster")  # beta/preview notices are not for users

app = typer.Typer(help="benchlake: an evaluation lakehouse for video benchmarks.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
out = Console()
err = Console(stderr=True)


class CliError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 1."""


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (CliError, FileNotFoundError, ValueError, OSError) as exc:
            err.print(f"benchlake: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except Exception as exc:  # noqa: BLE001 - the one-line contract covers everything
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            err.print(f"benchlake: {type(exc).__name__}: {first}", markup=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def _settings() -> Settings:
    return Settings.from_env()


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN/Infinity are not JSON, nor a value: shown as NULL in every format
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_cell(v) for v in value]
    if isinstance(value, dict):
        return {k: _cell(v) for k, v in value.items()}
    return value


def _render(columns: list[str], rows: list[tuple], fmt: str, title: str | None = None) -> None:
    if fmt == "json":
        data = [{c: _cell(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        sys.stdout.write(json.dumps(data, default=str, ensure_ascii=False, allow_nan=False)
                         + "\n")
    elif fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in row] for row in rows])
    else:
        table = Table(title=title, show_lines=False)
        for c in columns:
            table.add_column(c, overflow="fold")
        for row in rows:
            table.add_row(*("" if v is None else str(_cell(v)) for v in row))
        if out.is_terminal:
            out.print(table)
        else:  # a log or a pipe: Rich would wrap at 80 columns; use the content's width
            if title:
                table.title = None
                sys.stdout.write(title + "\n")
            Console(width=100_000).print(table)


def run_materialize(settings: Settings, select: str | None, verbose: bool = False) -> None:
    """One run of the asset job: each step told on stderr as it finishes; dbt's own log (every
    model and test) goes to a file under `$BENCHLAKE_HOME/logs/`, named at the end, or to the
    terminal too with `verbose`."""
    from dagster_project.runner import dagster_instance, materialize
    from dagster_project.warehouse.project import prepare_manifest

    started = time.perf_counter()
    prepare_manifest()
    for setting, folder in settings.default_drop_folders().items():
        err.print(f"{setting} is not set: reading the drop folder {folder} (empty until you put "
                  "files there)", soft_wrap=True, markup=False)
    log_path = settings.home / "logs" / f"materialize-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    instance = dagster_instance(settings)
    with log_path.open("w", encoding="utf-8") as log, _dbt_output(log, verbose):
        result = materialize(settings, select, instance=instance, raise_on_error=False,
                             launched_by="benchlake cli", progress=True)
    if not result.success:
        _print_refusals(settings)
        failed = result.failures()
        for f in failed:
            where = f" (input: {f.input_file})" if f.input_file else ""
            names = ", ".join(f.assets) if len(f.assets) <= 4 else \
                f"{f.step} ({len(f.assets)} assets)"
            err.print(f"benchlake: {names} failed: {f.message}{where}",
                      soft_wrap=True, markup=False)
        steps = "; ".join(f.step for f in failed) or "?"
        raise CliError(f"materialization failed in {len(failed)} step(s) ({steps}); run "
                       f"{result.run_id} is in `benchlake ui`; dbt's log: {log_path}")
    n = len(result.get_asset_materialization_events())
    checks = result.get_asset_check_evaluations()
    failed_checks = sum(not c.passed for c in checks)
    err.print(f"materialized {n} asset(s), ran {len(checks)} check(s)"
              f"{f' ({failed_checks} failed)' if failed_checks else ''} in "
              f"{time.perf_counter() - started:.1f}s; run {result.run_id}; "
              f"catalog: {settings.catalog_path}; dbt's log: {log_path}",
              soft_wrap=True, markup=False)
    _print_refusals(settings)
    errors = result.failed_checks()
    if errors:  # the data is there, but something it must satisfy does not hold
        shown = ", ".join(errors[:5]) + (f" and {len(errors) - 5} more" if len(errors) > 5
                                         else "")
        raise CliError(f"{len(errors)} check(s) failed with ERROR severity: {shown}; see "
                       "`benchlake ui` for what each found")


def _print_refusals(settings: Settings) -> None:
    """What the warehouse refuses, per rejects view, whenever anything is (a run that accepted
    5 of 15 cases must not read like a clean one)."""
    from dagster_project.warehouse.refusals import refusals, summary

    try:
        lines = summary(refusals(settings.home))
    except Exception as error:  # noqa: BLE001 - no catalog (a failed first run): nothing to add
        first = (str(error).strip().splitlines() or ["?"])[0]
        lines = [f"(refusals not listed: {first})"] if settings.catalog_path.exists() else []
    for line in lines:
        err.print(line, markup=False, soft_wrap=True, highlight=False)


@contextlib.contextmanager
def _dbt_output(log: Any, verbose: bool) -> Iterator[None]:
    """dbt's lines (each model and test it runs, what failed and why) into `log`, and the
    terminal too if `verbose`, for the block: dbt writes them on stdout when `DBT_LOG_LEVEL`
    says so (`warehouse/project._flags`)."""
    from dagster_project.warehouse.project import environment

    target = _Tee(log, sys.stdout) if verbose else log
    with environment({"DBT_LOG_LEVEL": "info"}), contextlib.redirect_stdout(target):
        yield


class _Tee:
    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def query(settings: Settings, sql: str) -> tuple[list[str], list[tuple]]:
    from dagster_project.warehouse.catalog import connect

    if not sql.strip():
        raise CliError("the query is empty")
    con = connect(settings.home)
    try:
        cur = con.execute(sql)
    except Exception as exc:
        raise CliError(str(exc).strip().splitlines()[0]) from None
    columns = [d[0] for d in cur.description] if cur.description else []
    rows = cur.fetchall()
    from dagster_project.status import incomplete_tables

    for table, detail in incomplete_tables(con, sql).items():
        err.print(f"benchlake: warning: {table} is incomplete: {detail}; see benchlake_status",
                  markup=False, soft_wrap=True)
    return columns, rows


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
@one_line_errors
def demo(verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                                help="stream dbt's log too")] = False) -> None:
    """Build the embedded demo inputs if missing, materialize every asset, print a summary."""
    settings = _settings()
    with synced(settings):
        _demo(settings, verbose)


def _demo(settings: Settings, verbose: bool) -> None:
    run_materialize(settings, "*", verbose)  # every asset, the exports included
    cols, rows = query(settings, "SELECT property, value FROM rvp_dataset_stats")
    _render(cols, rows, "table", title="Rynn-VP dataset statistics (rvp_dataset_stats)")
    cols, rows = query(settings, """
        SELECT data_source, count(*) AS questions, count(DISTINCT video_path) AS videos,
               count(*) FILTER (NOT video_exists) AS missing_videos
        FROM vv_questions GROUP BY data_source ORDER BY data_source""")
    _render(cols, rows, "table", title="videorl-video-val (vv_questions)")
    cols, rows = query(settings, """
        SELECT judge_run_id, modality, rank_in_modality AS rank, system,
               n_scored || '/' || n_cases || ' of ' || n_snapshot_cases AS scored,
               round(final_score, 2) AS final_score,
               '[' || round(final_score_ci_low, 2) || ', ' || round(final_score_ci_high, 2)
                   || ']' AS "95% CI",
               round(legacy_final_score, 2) AS legacy, round(pi, 2) AS pi, round(vr, 2) AS vr,
               round(vq, 2) AS vq
        FROM rvp_leaderboard WHERE profile = 'current'""")
    _render(cols, rows, "table", title="Rynn-VP leaderboard (rvp_leaderboard, profile current)")
    cols, rows = query(settings, """
        SELECT run_id, step, n_responded || '/' || n_rows AS responded,
               round(accuracy, 4) AS accuracy,
               '[' || round(accuracy_ci_low, 4) || ', ' || round(accuracy_ci_high, 4)
                   || ']' AS "95% CI",
               round(format_rate, 4) AS format_rate, round(composite, 4) AS composite, best
        FROM vv_leaderboard WHERE is_default ORDER BY run_id, step""")
    _render(cols, rows, "table", title="videorl-video-val leaderboard (vv_leaderboard, all rows, "
                                       "default scoring policy)")


@app.command("materialize")
@one_line_errors
def materialize_cmd(
    select: Annotated[str | None, typer.Option("--select", help="Dagster asset selection")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="stream dbt's log too")] = False,
) -> None:
    """Materialize assets (default: all but the exports) and run their checks, as one Dagster
    run; the views are rebuilt and tested by dbt and the catalog published."""
    if select is not None and not select.strip():  # `--select "$SEL"` with SEL unset
        raise CliError("--select is empty: leave it out to materialize everything")
    settings = _settings()
    with synced(settings):
        run_materialize(settings, select, verbose)


@app.command()
@one_line_errors
def sql(
    query_text: Annotated[str, typer.Argument(metavar="QUERY", help="SQL over every view")],
    format: Annotated[Format, typer.Option("--format", help="table, csv or json")] = Format.table,
) -> None:
    """Run SQL against every view (in-memory DuckDB over the Parquet: never blocks)."""
    settings = _settings()
    with synced(settings, write=False):
        cols, rows = query(settings, query_text)
    _render(cols, rows, format.value)


@app.command()
@one_line_errors
def export(
    out_dir: Annotated[str | None, typer.Option(
        "--out", help="parent folder of the export (default $BENCHLAKE_HOME/exports)")] = None,
    profile: Annotated[str | None, typer.Option(
        "--profile", help="only this reporting profile (default: every profile)")] = None,
) -> None:
    """Write every report view as CSV/Parquet/Markdown/JSON, PNG charts, manifest.json and the
    HTML results browser (index.html) into <out>/<UTC timestamp>/."""
    from dagster_project.reports import export_reports

    settings = _settings()
    root = Path(out_dir).expanduser() if out_dir else settings.exports_dir
    with synced(settings):
        folder = export_reports(settings.home, root, [profile] if profile else None)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    out.print(str(folder), markup=False, soft_wrap=True)
    formats = ",".join(Path(f).suffix[1:] for f in next(iter(manifest["views"].values()))["files"])
    rows = [(f"{view}.{{{formats}}}", info["rows"]) for view, info in manifest["views"].items()]
    rows += [(chart, "chart") for chart in manifest["charts"]]
    rows += [(name, "") for name in ("README.md", "manifest.json")]
    _render(["files", "rows"], rows, "table",
            title=f"benchlake export {manifest['stamp']} "
                  f"(profiles: {', '.join(p['profile'] for p in manifest['profiles']) or '-'})")
    if manifest["skipped"]:
        err.print(f"not available (skipped): {', '.join(manifest['skipped'])}", markup=False,
                  soft_wrap=True)
    out.print(f"results browser: {(folder / 'index.html').as_uri()}", markup=False,
              soft_wrap=True)


@app.command()
@one_line_errors
def packets(
    system: Annotated[str | None, typer.Option("--system", help="only this system")] = None,
    case: Annotated[str | None, typer.Option("--case", help="only this case_id")] = None,
) -> None:
    """Write judge packets (JSON + evidence files) for the chosen evaluations, from the
    materialized evidence; the `rvp_judge_packets` asset writes them all."""
    from dagster_project.rynn_vp.packets import build_packets, prompts_for
    from dagster_project.tables import table_path

    settings = _settings()
    if not table_path(settings.home, "rvp_evaluations").with_suffix("").is_dir():
        raise CliError(f"the warehouse at {settings.home} has no Rynn-VP evidence yet: run "
                       "`benchlake materialize` first")
    with synced(settings):
        rows = build_packets(settings.home, settings.packets_dir, prompts_for(settings),
                             system=system, case_id=case)
    if not rows:
        raise CliError(f"no evaluation matches --system {system!r} --case {case!r}")
    _render(["system", "case_id", "role", "n_evidence", "packet_path"],
            [(r["system"] or "(GT)", r["case_id"], r["role"], r["n_evidence"], r["packet_path"])
             for r in rows], "table", title=f"{len(rows)} judge packet(s)")


# What `judge` and `review` ingest after writing records: what the judge's folder feeds.
JUDGMENTS_INGEST = "key:judge_judgments_dir+ and not group:reports"


@app.command()
@one_line_errors
def judge(
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the calls, tokens and cost it would spend; send nothing")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="stream dbt's log too")] = False,
) -> None:
    """Judge every evaluation whose packets are current through JUDGE_BASE_URL (cached answers
    are not asked again), then ingest the records and rebuild the views."""
    from dagster_project.rynn_vp import judge as judging
    from dagster_project.settings import JudgeSettings

    settings, js = _settings(), JudgeSettings.from_env().require_endpoint()
    if dry_run:
        with synced(settings, write=False):
            out.print(judging.dry_run_text(settings.home, settings.judge_dir, js), markup=False,
                      soft_wrap=True)
        return
    with synced(settings):
        _judge(settings, verbose)


def _judge(settings: Settings, verbose: bool) -> None:
    from dagster_project.defs.rynn_vp.jobs import JUDGE_JOB
    from dagster_project.runner import dagster_instance, run_job
    from dagster_project.rynn_vp import judge as judging

    result = run_job(settings, JUDGE_JOB, instance=dagster_instance(settings),
                     launched_by="benchlake cli", progress=True,
                     run_config={"ops": {"rvp_judge": {"config": {"send": True}}}})
    if not result.success:
        raise CliError(f"the judge run failed: {result.failures()[0].message}; run "
                       f"{result.run_id} is in `benchlake ui`")
    summary, problem = judging.report(result.metadata_of("raw_rvp_judge_calls"))
    err.print(f"{summary}; run {result.run_id}", markup=False, soft_wrap=True)
    run_materialize(settings, JUDGMENTS_INGEST, verbose)
    if problem:
        raise CliError(problem + "; what was judged is ingested")


@app.command()
@one_line_errors
def review(
    evaluation_id: Annotated[str, typer.Argument(metavar="EVALUATION",
                                                 help="<system>/<case_id>")],
    take: Annotated[str, typer.Option("--take", help="the judge run whose record is right")],
    author: Annotated[str, typer.Option("--author", help="who decides")],
    reason: Annotated[str, typer.Option("--reason", help="why")],
) -> None:
    """Settle an evaluation (see rvp_judge_review): judge run TAKE's final record becomes a
    manager_review attempt (author, reason) in every judge run of it; then ingested."""
    from dagster_project.rynn_vp.judge_review import write_reviews

    settings = _settings()
    with synced(settings):
        for path in write_reviews(settings.home, settings.judge_dir, evaluation_id, take, author,
                                  reason):
            err.print(f"review written: {path}", markup=False, soft_wrap=True)
        run_materialize(settings, JUDGMENTS_INGEST)


def _port_free(port: int) -> bool:
    """Whether the webserver can listen on 127.0.0.1:`port` now. Binds as uvicorn does
    (SO_REUSEADDR: a port left in TIME_WAIT counts as free). A port that cannot be bound for
    another reason (a privileged port, say) is a CliError that names it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise CliError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    return True


def _end_group(pgid: int) -> None:
    """Terminate whatever is left in the UI's process group (code servers, run workers)."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)


@app.command()
@one_line_errors
def ui(port: Annotated[int, typer.Option("--port", min=1, max=65535,
                                         help="port of the webserver on 127.0.0.1")] = 3000,
       ) -> None:
    """The Dagster UI (`dagster dev`: webserver and daemon) on 127.0.0.1, with a persistent
    Dagster home under BENCHLAKE_HOME, after printing where the newest HTML results browser of
    the exports is. Launched runs start at once; sensors and the schedule run.
    Ctrl-C or SIGTERM shuts it down cleanly (a second one kills it)."""
    settings = _settings()
    if not _port_free(port):  # before importing dagster: the error comes at once
        raise CliError(f"port {port} on 127.0.0.1 is already in use; pick another with --port")
    from dagster_project.reports.html import latest_report

    report = latest_report(settings.exports_dir)
    err.print(f"latest results browser: {report.as_uri()}" if report else
              "no results browser yet: `benchlake export` writes one", markup=False,
              soft_wrap=True)
    from dagster_project.runner import dagster_instance
    from dagster_project.warehouse.project import prepare_manifest

    prepare_manifest()  # the definitions `dagster dev` loads are built from it
    dagster_instance(settings)  # writes dagster.yaml and sets DAGSTER_HOME
    cmd = [sys.executable, "-m", "dagster", "dev", "-h", "127.0.0.1", "-p", str(port),
           "-m", "dagster_project.definitions"]
    env = dict(os.environ)  # `dg dev` is for dg projects; `dagster dev` is what this wraps
    env["PYTHONWARNINGS"] = ",".join(filter(None, [
        env.get("PYTHONWARNINGS"), "ignore:Function `dev_command` is superseded"]))
    child: subprocess.Popen | None = None
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        if stopping and child is not None and child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # a second Ctrl-C: no more waiting
        elif not stopping:
            stopping = True
            err.print("benchlake: stopping the Dagster UI (again to kill it)", markup=False)
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGINT)

    # An s3:// home: pulled now, what the UI's runs wrote pushed when it stops.
    with synced(settings):
        # The handlers go in first, so no signal can leave `dagster dev` behind. It runs in its own
        # process group: a terminal's Ctrl-C reaches only this process, which asks `dagster dev`
        # once to stop (SIGINT: it then shuts its webserver, daemon and code servers down).
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {sig: signal.signal(sig, stop) for sig in handled}
        try:
            child = subprocess.Popen(cmd, process_group=0, env=env)
            if stopping:  # a signal came while it was starting
                child.send_signal(signal.SIGINT)
            code = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if child is not None:
                if child.poll() is None:
                    child.kill()
                    child.wait()
                _end_group(child.pid)
    if code != 0 and not stopping:
        raise CliError(f"`dagster dev` exited with status {code}")


def main() -> None:
    """The `benchlake` command: the CLI with the process's collector tuned (`interpreter`)."""
    from dagster_project.interpreter import tune_gc

    tune_gc()
    app()


if __name__ == "__main__":
    main()
