"""What each dbt node's result is made of, so that a build redoes only what changed.

A node's fingerprint (`Fingerprints.of`) is its definition (`catalog.definitions`; for a data
test, its SQL, arguments and config and the definitions of what it reads) and the contents of
what it reads: every raw table under it (`tables.content_version`), and every table dbt built
that it reads (`table_digest`: its columns and rows, in any order), through the views between.
Equal fingerprints, equal results: a test that passed on them passes again, a mart's preview is
the same, and a table holds what a build would write (`Workspace.outcomes`).

Early cutoff: a table rebuilt from changed raw tables that holds the same rows as before (a
changed candidate video before any judgment of it: the scores are those of the other
candidates) leaves the fingerprints of everything that reads it as they were, so nothing
downstream is rebuilt or tested again. A table whose inputs changed has its query's digest
computed first (`plan`, in DuckDB, without writing): equal to the digest it holds, the table is
recorded as built from the new inputs and not rebuilt. An incremental table is read through (its
readers hold the raw tables under it): it changes whenever they do, and its rows are never read
whole for a digest; a table that reads one being rebuilt is rebuilt after it, never digested
before (its query would read the rows the incremental table held).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from dagster_project.warehouse import catalog

CONTENT = "content:"  # the outcomes key of a table's digest, with the state it was taken in
# The raw tables (as dbt source ids) whose new parts an incremental model reads by itself
# (`macros/raw_parts.sql`): each names a part by the key of what its rows were made from.
PART_SOURCES = frozenset({"source.benchlake.video_val_raw.vv_question_scores",
                          "source.benchlake.rynn_vp_raw.rvp_judgments"})


def _nodes() -> dict[str, Any]:
    return catalog.dbt_manifest()["nodes"]


def materialized(uid: str) -> str | None:
    return _nodes()[uid]["config"].get("materialized")


def is_table(uid: str) -> bool:
    """A model materialized as a table (a mart whose every read would otherwise recompute it
    over the campaign), incremental or not: rebuilt when what it reads changes."""
    return materialized(uid) in ("table", "incremental")


def incremental_over(uid: str) -> str | None:
    """The raw table whose new parts an incremental model reads by itself (the one of
    `PART_SOURCES` under it), else None."""
    if materialized(uid) != "incremental":
        return None
    nodes, todo, under = _nodes(), [uid], set()
    while todo:
        for dep in nodes.get(todo.pop(), {}).get("depends_on", {}).get("nodes", []):
            if dep not in under:
                under.add(dep)
                todo.append(dep)
    (source,) = under & PART_SOURCES  # one: a model is kept over one raw table's parts
    return source


def relation(uid: str) -> str:
    """The name of a model's relation in the workspace."""
    node = _nodes()[uid]
    return node.get("alias") or node["name"]


def _digested(uid: str) -> bool:
    """A table whose readers' fingerprints hold its digest (every table but the incremental)."""
    return materialized(uid) == "table"


def table_digest(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    """A digest of the columns and rows of `relation` (a relation's name, or a query in
    parentheses), in any order: two 64-bit hashes of each row summed, and the row count."""
    columns = [tuple(c[:2]) for c in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
    rows = con.execute(f"SELECT count(*), sum(hash(t)), sum(hash(t, 1)) FROM {relation} AS t"
                       ).fetchone()
    return hashlib.sha256(json.dumps([columns, [str(v) for v in rows]]).encode()).hexdigest()


def recorded(ws: catalog.Workspace, built: Mapping[str, str],
             outcomes: Mapping[str, Any]) -> dict[str, str]:
    """The contents of every table the workspace holds: the digest taken when it was built as
    it now is, else (never digested) the state it was built in, which determines its rows."""
    out = {}
    for uid, state in built.items():
        if uid in _nodes() and _digested(uid):
            entry = outcomes.get(CONTENT + uid) or {}
            out[uid] = entry["digest"] if entry.get("state") == state else f"built:{state}"
    return out


class Fingerprints:
    """The fingerprints of `home`'s nodes; `contents` (table id -> digest; None: not known
    yet) default to what the workspace recorded."""

    def __init__(self, home: Path | str, current: Mapping[str, str] | None = None,
                 contents: Mapping[str, str | None] | None = None) -> None:
        from dagster_project.tables import content_version

        manifest = catalog.dbt_manifest()
        self.nodes, sources = manifest["nodes"], manifest["sources"]
        self.current = catalog.definitions(home) if current is None else current
        if contents is None:
            ws = catalog.Workspace(Path(home))
            try:
                contents = recorded(ws, ws.built(), ws.outcomes())
            except duckdb.Error:  # a build elsewhere holds the database: no table is known
                contents = {}
        self.contents: dict[str, str | None] = dict(contents)
        self.versions: dict[str, str | None] = {}
        for uid, s in sources.items():
            location = str((s.get("external") or {}).get("location") or
                           s.get("meta", {}).get("external_location") or
                           s.get("source_meta", {}).get("external_location") or "")
            self.versions[uid] = (content_version(Path(home), s["name"])
                                  if "/tables/raw/" in location else None)
        self._reads: dict[str, frozenset[str]] = {}

    def reads(self, uid: str) -> frozenset[str]:
        """The raw tables (dbt source ids) and the digested tables `uid` reads, directly or
        through views, seeds and incremental tables."""
        return frozenset(t for t in self._under(uid) if t in self.versions or _digested(t))

    def reads_through(self, uid: str) -> frozenset[str]:
        """The incremental tables `uid` reads, directly or through views and seeds (`reads`
        reads through them, to the raw tables they are made of)."""
        return frozenset(t for t in self._under(uid)
                         if t in self.nodes and is_table(t) and not _digested(t))

    def _under(self, uid: str) -> frozenset[str]:
        """What `uid` reads down to the raw and the digested tables, these included."""
        if uid not in self._reads:
            self._reads[uid] = frozenset()  # a cycle cannot occur in dbt; this guards recursion
            found: set[str] = set()
            for dep in self.nodes.get(uid, {}).get("depends_on", {}).get("nodes", []):
                if dep in self.versions or (dep in self.nodes and self.nodes[dep][
                        "resource_type"] == "model" and _digested(dep)):
                    found.add(dep)
                elif dep in self.nodes:
                    found |= {dep} | self._under(dep)
            self._reads[uid] = frozenset(found)
        return self._reads[uid]

    def of(self, uid: str, without: Iterable[str] = ()) -> str | None:
        """`uid`'s fingerprint; None when anything it reads is not a raw table (the run markers
        of benchlake_status) or a table whose contents are not known: never reused.
        `without`: sources left out (the raw table an incremental model keeps up with)."""
        n = self.nodes[uid]
        if n["resource_type"] in ("model", "seed"):
            own: Any = self.current.get(uid)
        else:
            own = [n.get("raw_code"), n.get("test_metadata"), n["config"],
                   [self.current.get(d) for d in sorted(n["depends_on"]["nodes"])]]
        leaves = sorted(self.reads(uid) - set(without))
        values = [self.versions[t] if t in self.versions else self.contents.get(t)
                  for t in leaves]
        if any(v is None for v in values):
            return None
        return hashlib.sha256(json.dumps([own, list(zip(leaves, values, strict=True))],
                                         sort_keys=True, default=str).encode()).hexdigest()

    def state(self, uid: str) -> str | None:
        """What a model is as built now: a view its definition (it reads the Parquet when
        queried); a table also its fingerprint; an incremental table also the fingerprint of
        all but the raw table it keeps up with (what changing rebuilds it from scratch)."""
        if not is_table(uid):
            return self.current[uid]
        full = self.of(uid)
        if full is None:
            return None
        if (source := incremental_over(uid)) is None:
            return f"{self.current[uid]}:{full}"
        others = self.of(uid, without={source})
        return f"{self.current[uid]}:{others}:{full}" if others else None

    def all(self) -> dict[str, str | None]:
        """Every model's, seed's and data test's fingerprint."""
        return {uid: self.of(uid) for uid, n in self.nodes.items()
                if n["resource_type"] in ("model", "seed", "test")}


def inputs(home: Path | str, current: Mapping[str, str] | None = None
           ) -> dict[str, str | None]:
    """Every node's fingerprint over what the workspace holds now (`Fingerprints`)."""
    return Fingerprints(home, current).all()


@dataclass
class Plan:
    """What a build of `wanted` must do: the models to rebuild, and the tables whose inputs
    changed but whose rows are the ones they hold (digest by id: recorded, not rebuilt)."""

    rebuild: set[str]
    unchanged: dict[str, str] = field(default_factory=dict)
    # The incremental tables to build from scratch (dropped first): an incremental table reads
    # the new parts of the raw table it is kept over by itself; anything else it is made of
    # changing rebuilds it whole.
    scratch: set[str] = field(default_factory=set)


def plan(ws: catalog.Workspace, fp: Fingerprints, wanted: Iterable[str],
         built: Mapping[str, str]) -> Plan:
    """Decide, table by table in dependency order, what must be rebuilt (`fp.contents` then
    holds what each table will hold: its query's digest, or None for a table that reads one
    being rebuilt, not known before it is built)."""
    wanted = set(wanted)
    con: duckdb.DuckDBPyConnection | None = None
    out = Plan(rebuild=set())
    changing: set[str] = set()  # tables to rebuild: their relations still hold the old rows
    try:
        for uid in (u for u in catalog.order() if u in wanted and is_table(u)):
            state = fp.state(uid)
            if state is not None and built.get(uid) == state:
                continue
            changing.add(uid)
            if not _digested(uid):
                continue  # an incremental table: rebuilt, never digested
            compiled = compiled_before(ws, uid)
            if (compiled is None or (built.get(uid) or "").partition(":")[0] != fp.current[uid]
                    or (fp.reads(uid) | fp.reads_through(uid)) & changing):
                fp.contents[uid] = None  # its rows are known once it is built
                continue
            if con is None:
                con = duckdb.connect(str(ws.database), read_only=True)
            digest = table_digest(con, f"(\n{compiled}\n)")
            if digest == fp.contents.get(uid):
                out.unchanged[uid] = digest
                changing.discard(uid)
            else:
                fp.contents[uid] = digest
    finally:
        if con is not None:
            con.close()
    for uid in wanted:
        state = fp.state(uid)
        if uid not in out.unchanged and (state is None or built.get(uid) != state):
            out.rebuild.add(uid)
            if incremental_over(uid) and (state is None or (built.get(uid) or "").rpartition(
                    ":")[0] != state.rpartition(":")[0]):
                out.scratch.add(uid)
    return out


def compiled_before(ws: catalog.Workspace, uid: str) -> str | None:
    """The compiled SQL the last build of a model left in the workspace's target folder."""
    node = _nodes()[uid]
    path = ws.target / "compiled" / node["package_name"] / node["original_file_path"]
    return path.read_text(encoding="utf-8") if path.is_file() else None


def settle(ws: catalog.Workspace, fp: Fingerprints, results: list[Mapping[str, Any]],
           unchanged: Mapping[str, str]) -> None:
    """After a build (`results`, run_results.json's): the digest of every table it built, then
    every model's state with them recorded as what the workspace holds (`record_results`; a
    table `plan` found `unchanged` as if built, its rows being what a build would write), each
    digest kept in the outcomes with the state it was taken in."""
    done = [r["unique_id"] for r in results
            if r["status"] == "success" and r["unique_id"] in fp.nodes
            and _digested(r["unique_id"])]
    if done:
        con = duckdb.connect(str(ws.database), read_only=True)
        try:
            for uid in done:
                fp.contents[uid] = table_digest(con, f'"{relation(uid)}"')
        finally:
            con.close()
    state = {uid: fp.state(uid) for uid in [*(r["unique_id"] for r in results), *unchanged]
             if uid in fp.current}
    ws.record_results([*results, *({"unique_id": u, "status": "success"} for u in unchanged)],
                      state)
    ws.record_outcomes({CONTENT + uid: {"state": state[uid], "digest": fp.contents[uid]}
                        for uid in [*done, *unchanged] if state[uid]})
