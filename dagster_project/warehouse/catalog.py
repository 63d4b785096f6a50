"""The catalog: the DuckDB file of views that `dbt build` made, published for every reader.

dbt builds into one working database per home (`$BENCHLAKE_HOME/dbt/benchlake.duckdb`), under a
lock, one build at a time. After each build that file is checkpointed, stripped of relations the
project no longer has, and copied whole to `$BENCHLAKE_HOME/benchlake.duckdb` through a temp
file and a rename (`publish`). That copy is what every reader opens, read-only (`connect`):
`benchlake sql`, the exports, the Python assets that read a model, the stock `duckdb` CLI. No
reader ever opens the file dbt writes, so a query never blocks a build nor waits for one, and
what users query is exactly what dbt built and tested: there is no second way views are made.

The working database is created in DuckDB's v1.0.0 storage format (the oldest that holds views),
so the published copy opens in the stock `duckdb` CLI of any 1.x release. Its views name
relations `"benchlake"."main"."<model>"` and read Parquet by absolute path: both files are named
`benchlake.duckdb`, so the copy resolves the same names from any working directory. Seeds (the
rule tables in `sql/seeds/`) are tables in it; everything else is a view over the Parquet.
"""

from __future__ import annotations

import contextlib
import graphlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

DATABASE = "benchlake"


def _project() -> Any:
    """The dbt project module, imported when first needed: it loads dagster-dbt (seconds), which
    a reader of the catalog (`benchlake sql`, `connect`) never needs."""
    from dagster_project.warehouse import project

    return project
STORAGE_VERSION = "v1.0.0"


def catalog_path(home: Path) -> Path:
    return Path(home) / f"{DATABASE}.duckdb"


@dataclass(frozen=True)
class Workspace:
    """Where one home's dbt builds run: the working database, dbt's target and logs."""

    home: Path

    @property
    def folder(self) -> Path:
        return self.home / "dbt"

    @property
    def database(self) -> Path:
        return self.folder / f"{DATABASE}.duckdb"

    @property
    def target(self) -> Path:
        return self.folder / "target"

    @property
    def _definitions(self) -> Path:
        return self.folder / "definitions.json"

    def built(self) -> dict[str, str]:
        """The definitions of the models and seeds this database holds as dbt last built them
        (unique id -> `definitions()` fingerprint); a relation dropped since is not listed."""
        try:
            recorded = json.loads(self._definitions.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        present = _while_unchanged(("tables", self.database), _files(self.database), lambda: (
            frozenset(t for (t,) in _query(self.database, "SELECT table_name FROM information_"
                                           "schema.tables WHERE table_schema = 'main'"))))
        return {uid: fp for uid, fp in recorded.items() if uid.rsplit(".", 1)[-1] in present}

    @property
    def _outcomes(self) -> Path:
        return self.folder / "outcomes.json"

    def outcomes(self) -> dict[str, dict[str, Any]]:
        """What earlier builds found, per node, with the `fingerprints` of what it was found
        on: `passed` for a data test that passed; `preview` (row count, Markdown) for a mart."""
        try:
            return json.loads(self._outcomes.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}

    def record_outcomes(self, outcomes: Mapping[str, dict[str, Any] | None]) -> None:
        """Keep `outcomes` (a node mapped to None is forgotten: a test that failed)."""
        recorded = self.outcomes()
        for uid, value in outcomes.items():
            if value is None:
                recorded.pop(uid, None)
            else:
                recorded[uid] = value
        _write_json(self._outcomes, recorded)

    def drop(self, tables: Iterable[str]) -> None:
        """Drop `tables` from the working database (an incremental table to build from
        scratch: dbt then creates it whole)."""
        tables = list(tables)
        if not tables:
            return
        con = duckdb.connect(str(self.database))
        try:
            for name in tables:
                con.execute(f'DROP TABLE IF EXISTS "{name}"')
        finally:
            con.close()

    def record_results(self, results: Iterable[Mapping[str, Any]],
                       current: Mapping[str, str | None] | None = None) -> None:
        """Note what a dbt command just built (`run_results.json`'s results) and forget those
        whose build failed (`current`: what each node is now, `definitions(home)` by default;
        for a model materialized as a table, the `inputs` it was built from)."""
        current = definitions(self.home) if current is None else current
        recorded = self.built()
        for r in results:
            uid = r["unique_id"]
            if uid in current and r["status"] == "success":
                recorded[uid] = current[uid]
            elif uid in current:
                recorded.pop(uid, None)
        _write_json(self._definitions, recorded)


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=0, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def workspace(home: Path) -> Iterator[Workspace]:
    """The home's dbt workspace, locked for the block (one build per home at a time), its
    working database created in the catalog's storage format if it does not exist yet. A home
    that was moved or copied (its views still read the Parquet of where it was) first has every
    view rebuilt here, so a build of some models never publishes views of two homes."""
    ws = Workspace(Path(home))
    with _project().locked(ws.folder / ".lock"):
        if not ws.database.exists():
            con = duckdb.connect(":memory:")
            try:
                con.execute(f"ATTACH '{_quote(ws.database)}' AS {DATABASE} "
                            f"(STORAGE_VERSION '{STORAGE_VERSION}')")
            finally:
                con.close()
        elif built_for(ws.database) - {_home_text(ws.home)}:
            _rebuild_views(ws)
            publish(ws)
        yield ws


_READS = re.compile(r"'([^']*?)/tables/raw/")


def _home_text(home: Path | str) -> str:
    return str(Path(home).resolve()) if "://" not in str(home) else str(home).rstrip("/")


def built_for(database: Path) -> set[str]:
    """The homes whose Parquet the views of `database` read (one, unless it was moved). Asked
    each time the workspace is opened (a run opens it ~5 times, ~30 ms each to open the
    database and read every view's SQL), so the answer is kept while the database and its WAL
    are the files they were (`_while_unchanged`)."""

    def homes() -> frozenset[str]:
        texts = [t for (t,) in _query(database,
                                      "SELECT sql FROM duckdb_views() WHERE NOT internal")]
        return frozenset(m.group(1).replace("''", "'") for t in texts for m in _READS.finditer(t))

    return set(_while_unchanged(("homes", database), _files(database), homes))


def _query(database: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(database), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _files(database: Path) -> tuple[Path, Path]:
    """A DuckDB database's files: itself and its WAL."""
    return database, database.with_name(f"{database.name}.wal")


def _while_unchanged(key: tuple, files: Iterable[Path], compute: Callable[[], Any]) -> Any:
    """`compute()` (an immutable value), kept under `key` while `files` are the files they were
    (modification time, size, inode); a stamp no older than `_RACY_NS` when it was read is not
    trusted (a write in the same clock tick leaves the same stamp)."""
    stamp = tuple(_stamp(p) for p in files)
    kept = _KEPT.get(key)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    read_at = time.time_ns()
    value = compute()
    if all(s is None or s[0] < read_at - _RACY_NS for s in stamp):
        _KEPT[key] = (stamp, value)
    return value


_KEPT: dict[tuple, tuple[tuple, Any]] = {}
_RACY_NS = 50_000_000


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _rebuild_views(ws: Workspace) -> None:
    """`dbt run` of every model (views only, no tests) over the moved home's Parquet, in this
    process (`project.build`: the workspace's kept parse, not a new dbt process's ~10 s)."""
    done = _project().build(["run"], home=ws.home, database=ws.database, target=ws.target)
    # a model that fails here is in dbt's log (and fails again, named, in the build);
    # `rebuild.log` says why dbt did not run at all
    if done.error is not None:
        (ws.folder / "rebuild.log").write_text(done.error)
    # A view dbt could not create here (its raw table is not written yet in this home, or a
    # model it reads failed) is dropped, never left reading the other home: it is built when
    # a build selects it.
    here = _home_text(ws.home)
    con = duckdb.connect(str(ws.database))
    try:
        for name, sql in con.execute("SELECT view_name, sql FROM duckdb_views() "
                                     "WHERE NOT internal").fetchall():
            if {m.group(1).replace("''", "'") for m in _READS.finditer(sql)} - {here}:
                con.execute(f'DROP VIEW IF EXISTS "{name}"')
        con.execute("CHECKPOINT")
    finally:
        con.close()
    if done.results:
        ws.record_results(done.results)


def definitions(home: Path | str) -> dict[str, str]:
    """A fingerprint of what each model and seed of the project is, over `home`: its SQL or CSV
    (dbt's checksum), config and column contract, the macros it calls (transitively), the
    project file, the dbt and DuckDB versions, and the same of everything it reads, down to
    the raw tables of this home. A view whose fingerprint is the one recorded when it was last
    built (`Workspace.built`) is what a new `dbt build` would create again: a view reads the
    Parquet when it is queried, so new data needs no new view. (dbt's own `state:modified`
    compares one whole manifest with another; here the state is per relation, since any
    selection builds some of them, and includes the home the views read.)"""
    manifest = dbt_manifest()
    macros, nodes, sources = manifest["macros"], manifest["nodes"], manifest["sources"]
    project = (Path(_project().DBT_PROJECT.project_dir) / "dbt_project.yml").read_bytes()
    base = [hashlib.sha256(project).hexdigest(), _home_text(home),
            *(importlib.metadata.version(p) for p in ("dbt-core", "dbt-duckdb", "duckdb"))]
    done: dict[str, str] = {}

    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()
                              ).hexdigest()

    def macro(uid: str, seen: frozenset[str] = frozenset()) -> str:
        if uid not in done:
            m = macros.get(uid, {})
            inner = [macro(d, seen | {uid}) for d in sorted(m.get("depends_on", {}).get(
                "macros", [])) if d not in seen | {uid}]
            done[uid] = digest([m.get("macro_sql"), inner])
        return done[uid]

    def node(uid: str) -> str:
        if uid not in done:
            if uid in sources:
                s = sources[uid]
                done[uid] = digest([base, s.get("config"), s.get("external"),
                                    {c: v.get("data_type") for c, v in s["columns"].items()}])
            else:
                n = nodes[uid]
                dep = n.get("depends_on", {})
                done[uid] = digest([base, n["checksum"]["checksum"], n["config"],
                                    {c: (v.get("data_type"), v.get("constraints"))
                                     for c, v in n["columns"].items()},
                                    [macro(m) for m in sorted(dep.get("macros", []))],
                                    [node(p) for p in sorted(dep.get("nodes", []))
                                     if p in nodes or p in sources]])
        return done[uid]

    return {uid: node(uid) for uid, n in nodes.items() if n["resource_type"] in ("model", "seed")}


def dbt_manifest() -> dict[str, Any]:
    """The dbt manifest, read once per version of the file (`definitions` and `inputs` both
    walk it on every build; never modified by a caller)."""
    path = _project().DBT_PROJECT.manifest_path
    return _manifest_of(str(path), path.stat().st_mtime_ns)


@cache
def _manifest_of(manifest_path: str, mtime_ns: int) -> dict[str, Any]:
    return json.loads(Path(manifest_path).read_text(encoding="utf-8"))


def order() -> tuple[str, ...]:
    """Every node of the project (dbt unique ids), each after the nodes it reads."""
    path = _project().DBT_PROJECT.manifest_path
    return _order_of(str(path), path.stat().st_mtime_ns)


@cache
def _order_of(manifest_path: str, mtime_ns: int) -> tuple[str, ...]:
    nodes = _manifest_of(manifest_path, mtime_ns)["nodes"]
    return tuple(graphlib.TopologicalSorter(
        {uid: set(n["depends_on"].get("nodes", [])) for uid, n in nodes.items()}).static_order())


def _quote(path: Path | str) -> str:
    return str(path).replace("'", "''")


@cache
def _project_relations(manifest_path: str, mtime: float) -> frozenset[str]:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    return frozenset(n["name"] for n in manifest["nodes"].values()
                     if n["resource_type"] in ("model", "seed"))


def project_relations() -> frozenset[str]:
    """The names of the project's models and seeds (what the catalog may hold)."""
    path = _project().DBT_PROJECT.manifest_path
    return _project_relations(str(path), path.stat().st_mtime)


@dataclass(frozen=True)
class Node:
    """A model or seed of the dbt project, as the manifest describes it."""

    name: str
    resource_type: str
    depends_on: tuple[str, ...]  # the models and seeds it reads
    tags: tuple[str, ...]
    path: str  # under sql/


def nodes() -> list[Node]:
    """Every model and seed of the project, by name."""
    path = _project().DBT_PROJECT.manifest_path
    return list(_nodes_of(str(path), path.stat().st_mtime_ns))


@cache
def _nodes_of(manifest_path: str, mtime_ns: int) -> tuple[Node, ...]:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    kept = {uid: n for uid, n in manifest["nodes"].items()
            if n["resource_type"] in ("model", "seed")}
    return tuple(sorted((Node(n["name"], n["resource_type"],
                              tuple(sorted(kept[d]["name"] for d in n.get("depends_on", {})
                                           .get("nodes", []) if d in kept)),
                              tuple(n.get("tags", [])), n["original_file_path"])
                         for n in kept.values()), key=lambda n: n.name))


def raw_tables_read() -> dict[str, frozenset[str]]:
    """The raw tables each model and seed reads, directly or through other models, by name (a
    model materialized as a table keeps no SQL in the catalog to trace them by)."""
    manifest = dbt_manifest()
    nodes, sources = manifest["nodes"], manifest["sources"]
    found: dict[str, frozenset[str]] = {}

    def reads(uid: str) -> frozenset[str]:
        if uid in sources:
            return frozenset([sources[uid]["name"]])
        if uid not in found:
            found[uid] = frozenset()  # a cycle reads nothing more
            found[uid] = frozenset().union(*(reads(d) for d in nodes.get(uid, {}).get(
                "depends_on", {}).get("nodes", [])))
        return found[uid]

    return {n["name"]: reads(uid) for uid, n in nodes.items()
            if n["resource_type"] in ("model", "seed")}


def unique_ids() -> dict[str, str]:
    """Every model and seed's dbt unique id (the key of `inputs` and the outcomes), by name."""
    return {n["name"]: uid for uid, n in dbt_manifest()["nodes"].items()
            if n["resource_type"] in ("model", "seed")}


def _nodes(resource_type: str) -> list[str]:
    return [n.name for n in nodes() if n.resource_type == resource_type]


def marts() -> list[str]:
    """The models users query: every model outside staging and intermediate, sorted."""
    return [n for n in _nodes("model") if not n.startswith(("stg_", "int_"))]


def seeds() -> list[str]:
    """The rule tables: dbt seeds (`sql/seeds/*.csv`), read by SQL and Python alike."""
    return _nodes("seed")


def publish(ws: Workspace) -> Path:
    """Copy the working database, as the last build left it, to the catalog. Call it inside
    `workspace()`: no build writes the file meanwhile."""
    con = duckdb.connect(str(ws.database))
    try:  # relations of models deleted from the project since they were built
        keep = project_relations()
        stale = con.execute("SELECT table_name, table_type FROM information_schema.tables "
                            "WHERE table_schema = 'main'").fetchall()
        for name, kind in stale:
            if name not in keep:
                con.execute(f'DROP {"VIEW" if kind == "VIEW" else "TABLE"} IF EXISTS "{name}"')
        con.execute("CHECKPOINT")
    finally:
        con.close()
    target = catalog_path(ws.home)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(ws.database, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def ensure_published(home: Path) -> None:
    """Publish the catalog again when it is missing (it holds nothing of its own: a user may
    delete it) or was built for another home (a moved or copied home: its views are rebuilt
    here first), though this materialization built no view."""
    ws = Workspace(Path(home))
    catalog = catalog_path(ws.home)
    if ws.database.exists() and (not catalog.exists()
                                 or built_for(catalog) - {_home_text(ws.home)}):
        with workspace(ws.home):
            publish(ws)


def rehome(home: Path) -> bool:
    """Point the views of `home`'s published catalog at this home's Parquet when it was built
    for another one (an `s3://` home's catalog, pulled into this machine's mirror from the
    machine that built it): each view's SQL with the other home's paths replaced. No dbt run:
    the views are the same, only where they read. Whether anything changed."""
    path = catalog_path(home)
    if not path.exists():
        return False
    others = built_for(path) - {_home_text(home)}
    if not others:
        return False
    here = _home_text(home).replace("'", "''")
    con = duckdb.connect(str(path))
    try:
        for sql, in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall():
            new = sql
            for other in others:
                new = new.replace(f"'{other.replace(chr(39), chr(39) * 2)}/", f"'{here}/")
            if new != sql:
                con.execute(new.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1))
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return True


def connect(home: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the published catalog of `home` attached read-only as
    `benchlake` (the current schema): every view and seed, as the last `dbt build` made them."""
    path = catalog_path(Path(home))
    if not path.exists():
        raise FileNotFoundError(f"{path}: no catalog yet: run `benchlake materialize` (or "
                                "`benchlake demo`) first")
    others = built_for(path) - {_home_text(home)}
    if others:  # a moved or copied home: its views would read another home's tables
        raise ValueError(f"{path} was built for {', '.join(sorted(others))}, not this home: "
                         "run `benchlake materialize` here to rebuild its views")
    # No replacement scans: a name that is not a view must fail, never silently resolve to a
    # Python variable of the calling frame.
    con = duckdb.connect(":memory:", config={"python_enable_replacements": False})
    con.execute(f"ATTACH '{_quote(path)}' AS {DATABASE} (READ_ONLY)")
    con.execute(f"USE {DATABASE}")
    return con


def view_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every relation of the catalog (views and seed tables), sorted."""
    rows = con.execute("SELECT table_name FROM information_schema.tables "
                       f"WHERE table_catalog = '{DATABASE}' ORDER BY table_name").fetchall()
    return [r[0] for r in rows]


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None
         ) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
