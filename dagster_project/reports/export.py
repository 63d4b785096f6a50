"""Report exports: every mart as CSV, Parquet, Markdown and JSON, PNG charts, and a manifest.

`export_reports` reads the published catalog read-only, as `benchlake sql` does
(`warehouse.catalog.connect`), so a materialization running meanwhile never blocks it. Which
views it writes, in which order and under which caption is declared beside each view, in its dbt
YAML (`config.meta.export`), and read from the dbt manifest (`report_views`).
Everything is written into a hidden temp folder beside the target and renamed at the end, so a
half-written export never appears. The same warehouse and stamp give byte-identical files (fixed
row order, number formatting, chart size/dpi, no PNG timestamps), so exports can be diffed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dagster_project.reports.charts import _write_charts
from dagster_project.reports.html import write_html
from dagster_project.reports.markdown import (
    NULL_MARK,
    _json_value,
    _render_csv,
    _render_markdown,
)
from dagster_project.settings import SQL_DIR
from dagster_project.tables import atomic_write_bytes, write_table
from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.project import DBT_PROJECT
from dagster_project.warehouse.seeds import read_seed

FORMATS = ("csv", "parquet", "md", "json")


@dataclass(frozen=True)
class ReportView:
    """A view the export writes, as its dbt YAML declares it: `config.meta.export` of the model
    (or seed) holds `order` (place in the export), `caption` (as written, note included) and
    `optional` (exported only where the warehouse defines it; absent, it is not listed as
    skipped)."""

    name: str
    order: int
    caption: str
    optional: bool


@cache
def _report_views_of(manifest_path: str, mtime: float) -> tuple[ReportView, ...]:
    nodes = json.loads(Path(manifest_path).read_text(encoding="utf-8"))["nodes"].values()
    found = [ReportView(n["name"], int(e["order"]), str(e["caption"]), bool(e["optional"]))
             for n in nodes if n["resource_type"] in ("model", "seed")
             and (e := n["config"].get("meta", {}).get("export")) is not None]
    return tuple(sorted(found, key=lambda v: (v.order, v.name)))


def report_views() -> tuple[ReportView, ...]:
    """Every view the export writes, in export order, from the dbt manifest."""
    path = DBT_PROJECT.manifest_path
    return _report_views_of(str(path), path.stat().st_mtime)


PACKAGES = ("benchlake", "dagster", "duckdb", "polars", "pyarrow", "av", "matplotlib")


class ReportError(ValueError):
    """A user-facing export failure with a one-line message."""


@dataclass
class _ViewExport:
    view: str
    caption: str
    columns: list[str]
    rows: list[dict[str, Any]]
    files: dict[str, str] = field(default_factory=dict)


# --- reading ------------------------------------------------------------------------------


def _strip_sql(sql: str) -> str:
    """The SQL without comments and string literals (for a keyword scan)."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def _has_final_order_by(view: str) -> bool:
    """Whether the view's own top-level query ends with an ORDER BY (then its order is kept)."""
    files = list(SQL_DIR.rglob(f"{view}.sql"))
    if not files:
        return False
    text, depth, top = _strip_sql(files[0].read_text(encoding="utf-8")), 0, []
    for char in text:
        depth += (char == "(") - (char == ")")
        top.append(char if depth == 0 else " ")
    return re.search(r"\border\s+by\b", "".join(top), re.IGNORECASE) is not None


def _relation_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The views of the current database and its tables: a seed (vv_scoring_policies is
    exported) is the table `dbt seed` loaded, not a view."""
    return {r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = current_schema()").fetchall()}


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{view}"').fetchall()]


def _read_view(
    con: duckdb.DuckDBPyConnection, view: str, profiles: Sequence[str]
) -> tuple[pa.Table, list[dict[str, Any]]]:
    cols = _columns(con, view)
    # HUGEINT (DuckDB's sum of integers) becomes Decimal(38,0) in Arrow; counts fit BIGINT.
    # NaN and +-Infinity are no values (and not JSON): NULL in every format, Parquet included.
    select = ", ".join(
        f'CAST("{c}" AS BIGINT) AS "{c}"' if t in ("HUGEINT", "UHUGEINT")
        else f'CASE WHEN isfinite("{c}") THEN "{c}" END AS "{c}"' if t in ("DOUBLE", "FLOAT")
        else f'"{c}"'
        for c, t in cols
    )
    where, params = "", []
    if any(c == "profile" for c, _ in cols):
        # An empty list has no type to bind, and means "no profile" anyway.
        where = " WHERE profile IN (SELECT unnest(?::VARCHAR[]))"
        params = [list(profiles)]
    # A view's own ORDER BY carries meaning (ranks, card order) and DuckDB keeps it through a
    # filter; views without one get a total order so repeated exports are identical.
    order = "" if _has_final_order_by(view) else " ORDER BY ALL"
    relation = con.sql(f'SELECT {select} FROM "{view}"{where}{order}', params=params)
    table = relation.to_arrow_table()
    return table, table.to_pylist()


def _query(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [{k: _json_value(v) for k, v in zip(names, row, strict=True)}
            for row in cur.fetchall()]


def _seed_rows(seed: str, order: Sequence[str]) -> list[dict[str, Any]]:
    """A seed's rows as JSON values, sorted by the `order` columns."""
    rows = sorted(read_seed(seed), key=lambda r: tuple(r[c] for c in order))
    return [{k: _json_value(v) for k, v in r.items()} for r in rows]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


# --- manifest -----------------------------------------------------------------------------


def _package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _rvp_inputs(con: duckdb.DuckDBPyConnection, available: set[str]) -> dict[str, Any] | None:
    if "stg_rvp_snapshot" not in available:
        return None
    snapshots = _query(con, "SELECT * FROM stg_rvp_snapshot")
    info: dict[str, Any] = dict(snapshots[0]) if snapshots else {}
    sums: dict[str, Any] = {}
    local = info.get("local_abspath")
    if local and (Path(local) / "SHA256SUMS.txt").is_file():
        sums["file_sha256"] = _sha256_file(Path(local) / "SHA256SUMS.txt")
    if "stg_rvp_checksums" in available:
        listed = con.execute("SELECT expected_sha256, rel_path FROM stg_rvp_checksums "
                             "WHERE expected_sha256 IS NOT NULL ORDER BY rel_path").fetchall()
        # A digest of what was verified (sorted "sha  path" lines), stable even when the
        # SHA256SUMS.txt file itself is no longer at hand.
        listing = "".join(f"{sha}  {rel}\n" for sha, rel in listed)
        sums["listing_sha256"] = hashlib.sha256(listing.encode()).hexdigest()
        sums["n_files"] = len(listed)
        sums["status_counts"] = {r["status"]: r["n"] for r in _query(
            con, "SELECT status, count(*) AS n FROM stg_rvp_checksums GROUP BY status "
                 "ORDER BY status")}
    if sums:
        info["sha256sums"] = sums
    return info


def _manifest(con: duckdb.DuckDBPyConnection, available: set[str], home: Path,
              profiles: Sequence[str], stamp: str, exports: dict[str, _ViewExport],
              skipped: dict[str, str], charts: list[str],
              file_rows: dict[str, int | None], out_dir: Path) -> dict[str, Any]:
    # The rules are the seeds' rows (what the views were built from), in the order the manifest
    # always listed them: profiles by name, weights by all columns, policies by name.
    profile_rows = [p for p in _seed_rows("rvp_reporting_profiles", ("profile",))
                    if p["profile"] in profiles]
    weights = _seed_rows("rvp_metric_weights",
                         ("profile", "axis", "metric", "plan_rule", "weight"))
    for p in profile_rows:
        p["metric_weights"] = [{k: v for k, v in w.items() if k != "profile"}
                               for w in weights if w["profile"] == p["profile"]]

    inputs: dict[str, Any] = {"rynn_vp": _rvp_inputs(con, available)}
    if "vv_questions" in available:
        inputs["video_val_parquets"] = _query(con, """
            SELECT source_file, source_fingerprint, data_source, count(*) AS n_rows
            FROM vv_questions GROUP BY ALL ORDER BY ALL""")
    if "rvp_judgment_files" in available:
        inputs["judgment_files"] = _query(con, """
            SELECT source_file, version, sha256, size_bytes, is_current
            FROM rvp_judgment_files ORDER BY source_file, version""")
    response_view = next((v for v in ("vv_response_files", "stg_vv_response_files")
                          if v in available), None)
    if response_view:
        inputs["response_files"] = _query(con, f"""
            SELECT source_file, version, sha256, size_bytes, is_current
            FROM {response_view} ORDER BY source_file, version""")

    denominators: dict[str, Any] = {}
    for view, keys in (("rvp_leaderboard", ("profile", "judge_run_id", "system", "modality",
                                             "n_scored", "n_cases", "n_snapshot_cases")),
                       ("vv_scores", ("policy", "run_id", "step", "data_source", "n_rows",
                                      "n_responded"))):
        if view in exports:
            cols = [k for k in keys if k in exports[view].columns]
            denominators[view] = [{k: _json_value(r[k]) for k in cols}
                                  for r in exports[view].rows]

    policy = _seed_rows("vv_scoring_policies", ("policy",))

    files = {name: {"rows": rows, "bytes": (out_dir / name).stat().st_size,
                    "sha256": _sha256_file(out_dir / name)}
             for name, rows in sorted(file_rows.items())}
    return {
        "stamp": stamp,
        "warehouse": str(home),
        "profiles": profile_rows,
        "inputs": inputs,
        "denominators": denominators,
        "packages": _package_versions(),
        "scoring_policies": policy,
        "views": {v: {"caption": e.caption, "rows": len(e.rows), "columns": e.columns,
                      "files": [e.files[f] for f in FORMATS]} for v, e in exports.items()},
        "charts": charts,
        "files": files,
        "skipped": skipped,
    }


def _readme(stamp: str, profiles: Sequence[str], exports: dict[str, _ViewExport],
            charts: list[str], skipped: dict[str, str]) -> str:
    lines = [f"# benchlake export {stamp}", "",
             f"Profiles: {', '.join(profiles) or NULL_MARK}. Every view is written as CSV, "
             "Parquet, Markdown (`.md`, for pasting into a report) and JSON (an array of row "
             "objects); `manifest.json` records inputs, denominators, package versions and the "
             "scoring policies.", "",
             "| view | rows | files | what |", "|---|---:|---|---|"]
    for view, e in exports.items():
        files = ", ".join(f"[{Path(e.files[f]).suffix[1:]}]({e.files[f]})" for f in FORMATS)
        lines.append(f"| {view} | {len(e.rows)} | {files} | {e.caption.replace('|', '/')} |")
    if charts:
        lines += ["", "Charts:", ""] + [f"- [{c}]({c})" for c in charts]
    if skipped:
        lines += ["", "Not available in this warehouse (not exported):", ""]
        lines += [f"- `{v}`: {reason}" for v, reason in skipped.items()]
    return "\n".join(lines) + "\n"


# --- the export ---------------------------------------------------------------------------


def _prepare_out(out_root: Path, stamp: str) -> Path:
    """Create out_root and a temp folder inside it now, so an unwritable target fails before
    any work is done."""
    try:
        out_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{stamp}.", suffix=".tmp", dir=out_root))
    except OSError as exc:
        raise ReportError(f"cannot write to {out_root}: {exc.strerror or exc}") from None


def _resolve_profiles(profiles: list[str] | None) -> list[str]:
    known = sorted({p["profile"] for p in read_seed("rvp_reporting_profiles")})
    if profiles is None:
        return known
    chosen = list(dict.fromkeys(profiles))  # keep order, drop repeats
    for name in chosen:
        if name not in known:
            raise ReportError(f"unknown profile {name!r}; profiles: "
                              f"{', '.join(known) or '(none)'}")
    return chosen


def export_reports(
    home: Path,
    out_root: Path,
    profiles: list[str] | None = None,
    stamp: str | None = None,
) -> Path:
    """Export every available report view, charts, README.md and manifest.json into
    `<out_root>/<stamp>/` and return that folder. `profiles=None` exports every profile."""
    home, out_root = Path(home), Path(out_root)
    empty = ReportError(f"the warehouse at {home} is empty: run `benchlake materialize` first")
    if not (home / "tables").is_dir():
        raise empty
    con = connect(home)
    try:
        # One thread: ties in a view's ORDER BY and hash aggregates come out in the same order
        # every time (the marts are small, so this costs little).
        con.execute("SET threads = 1")
        available = _relation_names(con)
        exported = report_views()
        views = [v for v in exported if v.name in available]
        if not views:
            raise empty
        chosen = _resolve_profiles(profiles)
        explicit = stamp is not None
        stamp = stamp or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        if "/" in stamp or stamp.startswith("."):
            raise ReportError(f"invalid export stamp {stamp!r}")
        final = out_root / stamp
        if final.exists() and explicit:
            raise ReportError(f"the export folder {final} already exists")
        for n in range(2, 1000):  # two exports in the same second get -2, -3, …
            if not final.exists():
                break
            final = out_root / f"{stamp}-{n}"
        tmp = _prepare_out(out_root, stamp)
        try:
            _write_export(con, tmp, home, available, exported, views, chosen, final.name)
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would hide it from others
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        con.close()
    return final


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_export(con: duckdb.DuckDBPyConnection, out: Path, home: Path,
                  available: set[str], exported: Sequence[ReportView],
                  views: Sequence[ReportView], profiles: list[str], stamp: str) -> None:
    exports: dict[str, _ViewExport] = {}
    file_rows: dict[str, int | None] = {}
    for report in views:
        view = report.name
        table, rows = _read_view(con, view, profiles)
        export = _ViewExport(view, report.caption, table.column_names, rows)
        export.files = {fmt: f"{view}.{fmt}" for fmt in FORMATS}
        atomic_write_bytes(out / export.files["csv"],
                           _render_csv(export.columns, rows).encode("utf-8"))
        write_table(table, out / export.files["parquet"])
        atomic_write_bytes(out / export.files["md"],
                           _render_markdown(export, table, profiles).encode("utf-8"))
        data = [{c: _json_value(r[c]) for c in export.columns} for r in rows]
        atomic_write_bytes(out / export.files["json"], _dumps(data).encode("utf-8"))
        file_rows.update({name: len(rows) for name in export.files.values()})
        exports[view] = export
    # the catalog holds what dbt built: a view missing from it was never materialized
    skipped = {v.name: "not in the catalog (not materialized)"
               for v in exported if v.name not in available and not v.optional}
    charts = _write_charts(exports, profiles, out / "charts")
    file_rows.update({c: None for c in charts})
    file_rows.update({page: None for page in write_html(con, out, profiles, charts, stamp,
                                                        list(exports))})
    readme = _readme(stamp, profiles, exports, charts, skipped)
    atomic_write_bytes(out / "README.md", readme.encode("utf-8"))
    file_rows["README.md"] = None
    manifest = _manifest(con, available, home, profiles, stamp, exports, skipped, charts,
                         file_rows, out)
    atomic_write_bytes(out / "manifest.json", _dumps(manifest).encode("utf-8"))
