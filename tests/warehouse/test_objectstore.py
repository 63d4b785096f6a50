"""The warehouse on an S3-compatible server (moto in server mode on 127.0.0.1): the demo's
Parquet written there, the same dbt project built over it (dbt-duckdb registers the fsspec
filesystem: no DuckDB extension is downloaded), and the views give the same answers."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import duckdb
import pytest
import yaml

from dagster_project.settings import SQL_DIR
from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.objectstore import publish_tables, s3_filesystems
from tests.conftest import dbt_views

VIEWS = ["rvp_dataset_stats", "rvp_leaderboard", "rvp_evidence_frames", "vv_scores",
         "vv_frame_plan", "rvp_judgments"]


@pytest.fixture(scope="module")
def s3_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("moto server did not start")
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.slow
def test_views_read_the_warehouse_from_s3(demo_warehouse, s3_endpoint, tmp_path):
    writer, reader = s3_filesystems(s3_endpoint, key="test", secret="test")
    written = publish_tables(demo_warehouse.tables_dir, "s3://benchlake/warehouse/tables", writer)
    local = sorted(demo_warehouse.tables_dir.rglob("*.parquet"))
    assert len(written) == len(local) > 20
    assert reader.ls("benchlake/warehouse/tables/raw/rvp_evidence_frames")  # the parts too
    assert publish_tables(demo_warehouse.home / "status", "s3://benchlake/warehouse/status",
                          writer, "*.json")  # what benchlake_status reads
    # the dbt project as it is, its profile given the bucket's filesystem
    project = tmp_path / "sql"
    shutil.copytree(SQL_DIR, project, ignore=shutil.ignore_patterns("target", "logs"))
    profiles = yaml.safe_load((project / "profiles.yml").read_text())
    profiles["benchlake"]["outputs"]["default"]["filesystems"] = [{
        "fs": "s3", "key": "test", "secret": "test",
        "client_kwargs": {"endpoint_url": s3_endpoint}}]
    (project / "profiles.yml").write_text(yaml.safe_dump(profiles))
    dbt_views(project, "s3://benchlake/warehouse", tmp_path).close()
    database = tmp_path / "benchlake.duckdb"
    remote = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                "autoload_known_extensions": False})
    remote.register_filesystem(reader)
    remote.execute(f"ATTACH '{database}' AS benchlake (READ_ONLY)")
    remote.execute("USE benchlake")
    here = connect(demo_warehouse.home)
    for view in VIEWS:
        # *_abspath columns resolve against each warehouse's own root, by design
        q = f"SELECT COLUMNS(lambda c: c NOT LIKE '%abspath') FROM {view} ORDER BY ALL"
        # averages may differ in the last bit with DuckDB's parallel aggregation order
        assert _rounded(remote.execute(q).fetchall()) == _rounded(here.execute(q).fetchall()), \
            view


def _rounded(rows: list[tuple]) -> list[tuple]:
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows]
