"""Every view a Dagster asset: the dbt models of `sql/` (dagster-dbt), their tests as checks."""


import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, dbt_assets

from dagster_project.defs.resources import BenchlakeSettings
from dagster_project.tables import markdown_preview
from dagster_project.warehouse.project import dbt_env, ensure_manifest, locked
from dagster_project.warehouse.views import connect, create_views, publish_catalog, views

MANIFEST = ensure_manifest()
PREVIEW_TAG = "preview"  # marts users read: row count and first rows in their metadata
PREVIEW_ROWS = 10


class Translator(DagsterDbtTranslator):
    """Keys are the model names (the view names users query); groups come from
    `meta.dagster.group` in dbt_project.yml; raw sources map to the `raw_<table>` assets."""

    def get_metadata(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = dict(super().get_metadata(dbt_resource_props))
        if dbt_resource_props.get("resource_type") == "model":
            rel = dbt_resource_props["original_file_path"]
            meta["sql_file"] = dg.MetadataValue.path(f"sql/{rel}")
        return meta


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """dagster-dbt starts dbt with this process's environment: set ours for the call."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dbt_assets(manifest=MANIFEST, dagster_dbt_translator=Translator(), name="benchlake_views")
def benchlake_views(context: dg.AssetExecutionContext, dbt: DbtCliResource,
                    benchlake: BenchlakeSettings):
    """`dbt build` of the selected models into the dbt working database
    (`$BENCHLAKE_HOME/dbt/benchlake.duckdb`): each view created, its unit tests and data tests
    run (the data tests are this asset's checks). Then the catalog file is published again."""
    home = benchlake.settings().home
    work_dir = home / "dbt"
    database = work_dir / "benchlake.duckdb"
    previews = {v.name for v in views() if PREVIEW_TAG in v.tags}
    with locked(work_dir / ".lock"):  # one dbt build per home at a time (one writer per file)
        import duckdb

        con = duckdb.connect(str(database))
        try:  # the models this build does not select must exist for those it does
            create_views(con, home)
        finally:
            con.close()
        reader, _ = connect(home)
        env = {k: v for k, v in dbt_env(home, database).items()
               if k in ("BENCHLAKE_HOME", "BENCHLAKE_DBT_DATABASE")}
        # A test runs in the step that builds the last of the models it reads (dbt's eager
        # default would run a relationships test as soon as its first parent is built, against
        # a view of a later step that does not exist yet).
        env["DBT_INDIRECT_SELECTION"] = "buildable"
        with _environment(env):
            invocation = dbt.cli(["build"], context=context, target_path=work_dir / "target")
        for event in invocation.stream():
            if isinstance(event, dg.Output):
                key = context.asset_key_for_output(event.output_name)
                name = key.path[-1]
                if name in previews:
                    event = event.with_metadata({**event.metadata, **_preview(reader, name)})
            yield event
        skipped = publish_catalog(home)
    if skipped:
        context.log.info(f"catalog: {len(skipped)} view(s) wait for tables not materialized yet")


def _preview(con: Any, view: str) -> dict[str, Any]:
    table = con.sql(f'SELECT * FROM "{view}" LIMIT {PREVIEW_ROWS}').to_arrow_table()
    count = con.sql(f'SELECT count(*) FROM "{view}"').fetchall()[0][0]
    return {"dagster/row_count": count, "preview": dg.MetadataValue.md(markdown_preview(table))}
