"""Every view and seed a Dagster asset: the dbt project of `sql/` (dagster-dbt), its data tests
the assets' checks. One step runs `dbt build` over exactly what Dagster selected for it and then
publishes the catalog (`warehouse/catalog.py`)."""


import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, dbt_assets
from dagster_dbt.asset_utils import DAGSTER_DBT_UNIQUE_ID_METADATA_KEY
from dagster_dbt.core.dbt_cli_event import DbtCoreCliEventMessage

from dagster_project.defs.resources import BenchlakeSettings, raw_key
from dagster_project.status import mark_started, mark_written
from dagster_project.warehouse import catalog, fingerprints, project
from dagster_project.warehouse.previews import PREVIEW_TAG, preview
from dagster_project.warehouse.project import DBT_PROJECT, current_manifest

MANIFEST = current_manifest()
_MANIFEST = json.loads(MANIFEST.read_text(encoding="utf-8"))  # what dbt parsed, read once
CATALOG = "catalog"  # its name in benchlake_status

# The run markers (`dagster_project/status.py`): written by every Python asset as it starts and
# finishes, read by the `benchlake_status` view.
status_markers = dg.AssetSpec(
    raw_key("status_markers"), group_name="warehouse", kinds={"json"},
    description="One marker per raw table under $BENCHLAKE_HOME/status/: the run that last "
    "started writing it and the run that last finished; a table whose last start has no "
    "finish is incomplete.")


class Translator(DagsterDbtTranslator):
    """Keys are the model and seed names (the relations users query); a source is the raw
    table `raw_<table>` a Python asset writes; groups come from `meta.dagster.group`
    (dbt_project.yml)."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        if dbt_resource_props["resource_type"] == "source":
            return raw_key(dbt_resource_props["name"])
        return dg.AssetKey(dbt_resource_props["name"])

    def get_metadata(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = dict(super().get_metadata(dbt_resource_props))
        if dbt_resource_props.get("resource_type") in ("model", "seed"):
            rel = dbt_resource_props["original_file_path"]
            meta["sql_file"] = dg.MetadataValue.path(f"sql/{rel}")
        return meta


TRANSLATOR = Translator()


def _step_nodes(context: dg.AssetExecutionContext) -> dict[str, dg.AssetKey]:
    """The models and seeds Dagster selected in this step, by dbt unique id."""
    specs = context.assets_def.specs_by_key
    return {specs[k].metadata[DAGSTER_DBT_UNIQUE_ID_METADATA_KEY]: k
            for k in context.selected_asset_keys}


def _step_tests(context: dg.AssetExecutionContext) -> dict[str, dg.AssetCheckKey]:
    """The data tests of exactly the checks Dagster put in this step, by dbt unique id."""
    assets_def = context.assets_def
    return {assets_def.get_spec_for_check_key(k).metadata[DAGSTER_DBT_UNIQUE_ID_METADATA_KEY]: k
            for k in context.selected_asset_check_keys}


def _selection(context: dg.AssetExecutionContext, build: set[str], tests: set[str],
               redefined: set[str]) -> tuple[list[str], list[str]]:
    """The dbt nodes to run, named explicitly: the models and seeds to (re)build, the data
    tests to run, and the unit tests of the models whose definition changed (a table rebuilt
    for new data needs none: unit tests read fixtures). A test that reads two models runs
    in the step that builds the model it belongs to, after the other one (its check declares
    that dependency): never early, never skipped. Second, the unit tests to exclude: dbt
    selects a model's unit tests with the model, whatever the indirect selection."""
    nodes = _MANIFEST
    # unit tests go with the checks: a run without checks (a test of the tables) has neither
    unit = ([u for u in nodes.get("unit_tests", {}).values()
             if set(u["depends_on"]["nodes"]) & redefined]
            if context.selected_asset_check_keys else [])
    found = [nodes["nodes"][i] for i in sorted(build | tests)] + unit
    unwanted = [u for u in nodes.get("unit_tests", {}).values()
                if set(u["depends_on"]["nodes"]) & build and u not in unit]
    return (sorted(".".join(n["fqn"]) for n in found),
            sorted(".".join(n["fqn"]) for n in unwanted))


def _build(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings) -> Iterator[Any]:
    """`dbt build` of the step's models, seeds and tests in the home's dbt workspace, then the
    catalog published (`warehouse/catalog.py`). A model or seed whose definition is the one
    the workspace already holds (`catalog.definitions`: a view reads the Parquet when queried)
    is not built again, only tested; it is reported as materialized, with its compiled SQL.
    A model that does not build or a test that fails (a failed check) fails the step with the
    node's name and the first line of dbt's message (`_failed_nodes`).

    A data test that passed on the same inputs (`fingerprints`: its definition and the
    contents of the raw tables and the tables it reads) is not run again: its check is reported
    passed, with the run it passed in. So is a mart's preview (row count and first rows), and a
    table whose inputs changed but whose query gives the rows it holds is not rebuilt (early
    cutoff, `fingerprints.plan`): a run that adds one checkpoint re-runs only the tests that
    read its tables, and a run where nothing changed runs no dbt at all."""
    home = benchlake.settings().home
    run_id = context.run.run_id
    wanted = _step_nodes(context)
    events: list[Any] = []
    results: list[dict[str, Any]] = []
    tests = _step_tests(context)
    with catalog.workspace(home) as ws:
        current, built, outcomes = catalog.definitions(home), ws.built(), ws.outcomes()
        fp = fingerprints.Fingerprints(home, current,
                                       fingerprints.recorded(ws, built, outcomes))
        plan = fingerprints.plan(ws, fp, wanted, built)
        rebuild, inputs = plan.rebuild, fp.all()
        ws.drop([fingerprints.relation(uid) for uid in sorted(plan.scratch)])
        reused = {uid for uid in tests
                  if inputs[uid] and outcomes.get(uid, {}).get("inputs") == inputs[uid]}
        redefined = {uid for uid in rebuild
                     if (built.get(uid) or "").partition(":")[0] != current[uid]}
        selection, excluded = _selection(context, rebuild, set(tests) - reused, redefined)
        if selection:
            # The catalog is a table of its own in benchlake_status: a build that dies leaves
            # it incomplete (and a marker exists before the status view is first built).
            mark_started(home, CATALOG, run_id)
            # Tests exactly as selected (no indirect selection): see `_selection`. dbt runs
            # in this process (`project.build`); its result events become the step's outputs
            # and check results here, as dagster-dbt makes them of a dbt subprocess's log.
            done = project.build(
                ["build", "--select", " ".join(selection), "--indirect-selection", "empty"]
                + (["--exclude", " ".join(excluded)] if excluded else []),
                home=home, database=ws.database, target=ws.target)
            if done.error is not None:
                raise dg.Failure(description=f"dbt build failed: {_first_line(done.error)}")
            events = [e for raw in done.events for e in DbtCoreCliEventMessage(
                raw_event=raw, event_history_metadata={}).to_default_asset_events(
                    manifest=_MANIFEST, dagster_dbt_translator=TRANSLATOR, context=context,
                    target_path=ws.target, project=DBT_PROJECT)]
            results = done.results
        if selection or plan.unchanged:
            # what each table built holds now, and what reads it is made of
            fingerprints.settle(ws, fp, results, plan.unchanged)
            inputs = fp.all()
            ws.record_outcomes({r["unique_id"]: (
                {"inputs": inputs[r["unique_id"]], "passed_in": run_id}
                if r["status"] == "pass" and inputs.get(r["unique_id"]) else None)
                for r in results if r["unique_id"] in tests})
        if selection:
            catalog.publish(ws)
            mark_written(home, CATALOG, run_id, len(results))
    compiled = {r["unique_id"]: r.get("compiled_code") for r in results}
    previews = _Previews(ws, inputs, outcomes)
    try:
        # every output in dependency order (a view over a rebuilt table is not rebuilt), then
        # the checks
        built_now = {context.assets_def.specs_by_key[context.asset_key_for_output(
            e.output_name)].metadata[DAGSTER_DBT_UNIQUE_ID_METADATA_KEY]: e
            for e in events if isinstance(e, dg.Output)}
        for uid in (u for u in catalog.order() if u in wanted):
            spec = context.assets_def.specs_by_key[wanted[uid]]
            if uid in built_now:
                event = built_now[uid]
                yield event.with_metadata({**event.metadata,
                                           **_model_metadata(spec, compiled, previews)})
            elif uid not in rebuild:
                same = ({"same_rows": dg.MetadataValue.text(
                    "its inputs changed; the rows a build would write are the ones it holds "
                    f"(digest {plan.unchanged[uid][:12]}): not rebuilt")}
                        if uid in plan.unchanged else {})
                yield dg.Output(None, output_name=context.assets_def.
                                get_output_name_for_asset_key(spec.key),
                                metadata={"rebuilt": False, **same, **_model_metadata(
                                    spec, {uid: fingerprints.compiled_before(ws, uid)}, previews)})
        yield from (e for e in events if not isinstance(e, dg.Output))
        for uid in sorted(reused):
            key = tests[uid]
            yield dg.AssetCheckResult(
                asset_key=key.asset_key, check_name=key.name, passed=True,
                metadata={"reused": dg.MetadataValue.text(
                    "passed on the same definition and data in run "
                    f"{outcomes[uid].get('passed_in', '?')}: not run again")})
    finally:
        previews.close()
    failed = _failed_nodes(results)
    if failed:
        # A test that fails is a blocking check (ERROR severity): the step fails either way,
        # here with each node's name and what dbt said, not a count of blocking checks.
        shown = "; ".join(failed[:_SHOWN]) + (
            f"; and {len(failed) - _SHOWN} more" if len(failed) > _SHOWN else "")
        raise dg.Failure(description=shown, metadata={"errors": dg.MetadataValue.md(
            "\n".join(f"- {e}" for e in failed))})


_SHOWN = 3  # failed nodes named in the step's one-line failure (the metadata lists them all)


def _failed_nodes(results: list[dict[str, Any]]) -> list[str]:
    """`dbt <model|seed|test|unit test> failed: <name>: <first line of dbt's message>` for
    every node of a build that errored or failed (a data test that found rows, a unit test
    whose rows differ), in run order."""
    manifest = _MANIFEST
    known = {**manifest["nodes"], **manifest.get("unit_tests", {})}
    out = []
    for r in results:
        if r["status"] not in ("error", "fail"):
            continue
        uid = r["unique_id"]
        kind = uid.split(".", 1)[0].replace("_", " ")
        name = known.get(uid, {}).get("name", uid)
        out.append(f"dbt {kind} failed: {name}: {_first_line(r.get('message'))}")
    return out


# Two dbt ops, so that the graph of steps has no cycle and each runs as ONE `dbt build`
# (Dagster splits a multi-asset into a step per layer when a Python asset sits between its
# models): first the rule tables (seeds) and the models a Python asset reads (tagged
# `python_input`, with their upstream models), then every other model. (Each selects its
# nodes by name: tests are never selected but by name, in `_selection`.)


def _python_inputs(manifest: Mapping[str, Any]) -> set[str]:
    """The models tagged `python_input`, the models they read, and the models their tests read
    (a relationships test runs with the model it belongs to, so what it compares with must be
    built before)."""
    nodes = manifest["nodes"]
    models = {uid for uid, n in nodes.items() if n["resource_type"] == "model"}
    wanted = {uid for uid in models if "python_input" in nodes[uid].get("tags", [])}
    todo = list(wanted)
    while todo:
        uid = todo.pop()
        parents = set(nodes[uid]["depends_on"]["nodes"])
        for test in (t for t, n in nodes.items() if n["resource_type"] == "test"
                     and n.get("attached_node") == uid):
            parents |= set(nodes[test]["depends_on"]["nodes"])
        for parent in (parents & models) - wanted:
            wanted.add(parent)
            todo.append(parent)
    return {nodes[uid]["name"] for uid in wanted}


def _views_selector(nodes: Mapping[str, Any], first: set[str]) -> dict[str, Any]:
    """The second op's nodes as a dbt YAML selector: every model but the first op's (`first`),
    with every test that reads one of them (eager, as dagster-dbt selects). A plain `--exclude`
    of the first op's models would also drop the tests that read a model of each op (e.g.
    relationships to rvp_cases: no check would exist), so those are added back by name. dbt
    evaluates this in a few passes over the nodes, where the list of ~115 names took one pass
    per name: 0.26 s of every process that loads the definitions (0.07 s now)."""
    def models(of_first: bool) -> set[str]:
        return {uid for uid, n in nodes.items() if n["resource_type"] == "model"
                and (n["name"] in first) == of_first}
    theirs, ours = models(True), models(False)
    shared = sorted({n["name"] for n in nodes.values() if n["resource_type"] == "test"
                     and set(n["depends_on"]["nodes"]) & theirs
                     and set(n["depends_on"]["nodes"]) & ours})
    return {"name": "benchlake_views", "definition": {"union": [
        {"union": [{"method": "resource_type", "value": "model"},
                   {"exclude": [{"method": "fqn", "value": nodes[uid]["name"]}
                                for uid in sorted(theirs)]}]},
        *({"method": "fqn", "value": name} for name in shared)]}}


# The first op by names (a short list); never `--exclude`, see `_views_selector`.
_NODES = _MANIFEST["nodes"]
_PYTHON_INPUTS = _python_inputs({"nodes": _NODES})
_RULES = _PYTHON_INPUTS | {n["name"] for n in _NODES.values() if n["resource_type"] == "seed"}
_VIEWS = {n["name"] for n in _NODES.values() if n["resource_type"] == "model"} - _PYTHON_INPUTS
_SELECTABLE = {**_MANIFEST, "selectors": {**_MANIFEST.get("selectors", {}),
                                          "benchlake_views": _views_selector(_NODES, _RULES)}}


@dbt_assets(manifest=_SELECTABLE, project=DBT_PROJECT, dagster_dbt_translator=TRANSLATOR,
            name="benchlake_rules", select=" ".join(sorted(_RULES)))
def benchlake_rules(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The rule tables (`sql/seeds/*.csv`) and the models a Python asset reads (a SQL rule it
    applies), built and tested before the Python assets that read them."""
    yield from _build(context, benchlake)


@dbt_assets(manifest=_SELECTABLE, project=DBT_PROJECT, dagster_dbt_translator=TRANSLATOR,
            name="benchlake_views", selector="benchlake_views")
def benchlake_views(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every other view, built and tested after the Python assets."""
    yield from _build(context, benchlake)


def _first_line(text: str | None) -> str:
    """The first line of what dbt said, past its header: DuckDB's own message in an error
    ("Runtime Error in model x (path)" comes first; the line saying what DuckDB refused
    follows), a failed test's "Got 3 results, configured to fail if != 0"."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if not _HEADER.match(ln) and not ln.startswith(">")]
    return (said or lines or ["failed"])[0]


_HEADER = re.compile(r"^\w+ Error(?: in (?:model|test|seed|unit_test) |$)")  # or bare


class _Previews:
    """Each mart's preview (row count, first rows), computed on the published catalog, or the
    one recorded for the same fingerprint (`fingerprints.inputs`; no query at all)."""

    def __init__(self, ws: catalog.Workspace, inputs: Mapping[str, str | None],
                 outcomes: Mapping[str, dict[str, Any]]) -> None:
        self.ws, self.inputs, self.outcomes = ws, inputs, outcomes
        self.reader: Any = None
        self.computed: dict[str, dict[str, Any]] = {}

    def get(self, uid: str, relation: str) -> tuple[int, str]:
        known = self.outcomes.get(uid, {})
        if self.inputs.get(uid) and known.get("inputs") == self.inputs[uid] and "preview" in known:
            return known["rows"], known["preview"]
        if self.reader is None:
            self.reader = catalog.connect(self.ws.home)
        count, table = preview(self.reader, relation)
        if self.inputs.get(uid):
            self.computed[uid] = {"inputs": self.inputs[uid], "rows": count, "preview": table}
        return count, table

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        if self.computed:
            with catalog.workspace(self.ws.home) as ws:
                ws.record_outcomes(self.computed)


def _model_metadata(spec: dg.AssetSpec, compiled: Mapping[str, str | None],
                    previews: _Previews) -> dict[str, Any]:
    out: dict[str, Any] = {}
    uid = spec.metadata[DAGSTER_DBT_UNIQUE_ID_METADATA_KEY]
    code = compiled.get(uid)
    if code:
        out["compiled_sql"] = dg.MetadataValue.md(f"```sql\n{code.strip()}\n```")
    if PREVIEW_TAG in spec.tags:
        count, table = previews.get(uid, spec.key.path[-1])
        out.update({"dagster/row_count": count, "preview": dg.MetadataValue.md(table)})
    return out
