"""One declaration per raw table: the staging model's YAML (sql/models/<domain>/staging/
stg_<t>.yml). Python writes the table with `tables.raw_schema(t)`, built from it; dbt's enforced
contract checks the view against it. These checks need no dbt run: what Python writes, DuckDB
reads back as exactly the YAML's columns and types."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from dagster_project.settings import SQL_DIR
from dagster_project.tables import PATH_METADATA, raw_columns, raw_schema, staging_yaml

# Sources with no staging YAML of their own, and why.
NOT_DECLARED_BY_STAGING = {
    # JSON run markers written by every run (dagster_project/status.py), not a Parquet table of
    # one asset: their columns are the `columns` of the source's read_json, and the one view
    # over them (benchlake_status) is contracted like every model.
    "status_markers",
}


def _sources() -> dict[str, Path]:
    found = {}
    for path in sorted((SQL_DIR / "models").rglob("_sources.yml")):
        for source in yaml.safe_load(path.read_text())["sources"]:
            for table in source["tables"]:
                found[table["name"]] = path
    return found


RAW_TABLES = sorted(set(_sources()) - NOT_DECLARED_BY_STAGING)


def _model(table: str) -> dict:
    [model] = [m for m in yaml.safe_load(staging_yaml(table).read_text())["models"]
               if m["name"] == f"stg_{table}"]
    return model


def test_every_source_table_is_declared_by_its_staging_yaml():
    assert len(RAW_TABLES) >= 29
    for table, sources_yml in _sources().items():
        if table in NOT_DECLARED_BY_STAGING:
            continue
        path = staging_yaml(table)
        assert path.parent == sources_yml.parent, (table, path)
        assert path.with_suffix(".sql").exists(), table
        columns = _model(table)["columns"]
        assert columns and all(c.get("data_type") and c.get("description") for c in columns), (
            table)


@pytest.mark.parametrize("table", RAW_TABLES)
def test_raw_schema_is_what_the_staging_yaml_declares(table: str, tmp_path: Path):
    schema = raw_schema(table)
    declared = raw_columns(table)
    assert schema.names == [c["name"] for c in declared]
    # written as Parquet and read by DuckDB (as the sources are), every column has exactly the
    # YAML's type
    path = tmp_path / f"{table}.parquet"
    pq.write_table(schema.empty_table(), path)
    described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    assert [(name, typ) for name, typ, *_ in described] == [
        (c["name"], c["data_type"]) for c in declared]
    # path columns carry the path-field metadata (stored home-relative), and only they do
    paths = {c["name"] for c in declared if (c.get("meta") or {}).get("path")}
    assert {f.name for f in schema if f.metadata == PATH_METADATA} == paths
    assert all(f.metadata is None for f in schema if f.name not in paths)


@pytest.mark.parametrize("table", RAW_TABLES)
def test_view_only_columns_are_the_abspaths_and_part_names_the_staging_sql_adds(table: str):
    model = _model(table)
    derived = [c["name"] for c in model["columns"] if (c.get("meta") or {}).get("derived")]
    paths = {c["name"] for c in raw_columns(table) if (c.get("meta") or {}).get("path")}
    sql = staging_yaml(table).with_suffix(".sql").read_text()
    added = dict(re.findall(r"abspath\('(\w+)'\)\s*}}\s+AS\s+(\w+)", sql, flags=re.I))
    # the file a row of a parted table comes from (the incremental tables keep it)
    parts = re.findall(r"parse_filename\(filename\)\s+AS\s+(\w+)", sql, flags=re.I)
    # ... and what the view decides over the rows, in the place the contract gives it
    # (`is_final`: no written row depends on a later record)
    decided = [c for c in ("is_final",) if re.search(rf"\bAS\s+{c}\b", sql, flags=re.I)]
    assert sorted([*added.values(), *parts, *decided]) == sorted(derived), table
    assert set(added) <= paths, table
    # the abspaths and part names come last, after the raw table's own
    tail = [c for c in derived if c not in decided]
    assert [c["name"] for c in model["columns"]][len(model["columns"]) - len(tail):] == tail


def test_tables_sharing_a_python_schema_declare_the_same_columns():
    from dagster_project.dropfolder import VERSIONS_SCHEMA

    for table in ("rvp_judgment_files", "vv_response_files"):
        assert raw_schema(table).equals(VERSIONS_SCHEMA, check_metadata=True), table


def test_columns_python_derives_from_its_constants_are_declared():
    from dagster_project.rynn_vp.fingerprint import GT_INPUT_FILES
    from dagster_project.rynn_vp.judgment_records import METRIC_COLUMNS

    fingerprints = raw_schema("rvp_gt_fingerprints").names
    assert [c for c in fingerprints if c.endswith("_sha256")] == [
        f"{n.replace('.', '_')}_sha256" for n in GT_INPUT_FILES]
    judgments = raw_schema("rvp_judgments")
    metrics = list(METRIC_COLUMNS.values())
    assert [c for c in judgments.names if c in metrics] == metrics
    assert all(str(judgments.field(c).type) == "double" for c in metrics)
