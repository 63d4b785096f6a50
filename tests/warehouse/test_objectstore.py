"""The warehouse on an S3-compatible server (moto in server mode on 127.0.0.1): a home that is
an `s3://` URI works for every command (`warehouse/objectstore.py`), and the same dbt project
built right over the bucket's Parquet (dbt-duckdb registers the fsspec filesystem: no DuckDB
extension is downloaded) gives the same answers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
import s3fs
import yaml

from dagster_project.settings import SQL_DIR
from dagster_project.warehouse.catalog import connect
from tests.conftest import LOOPBACK, dbt_views

BENCHLAKE = str(Path(sys.executable).parent / "benchlake")
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
    reader = s3fs.S3FileSystem(key="test", secret="test",
                               client_kwargs={"endpoint_url": s3_endpoint})
    reader.makedirs("benchlake", exist_ok=True)
    written = 0
    for folder, pattern in (("tables", "*.parquet"), ("status", "*.json")):  # what views read
        for path in sorted((demo_warehouse.home / folder).rglob(pattern)):
            rel = path.relative_to(demo_warehouse.home).as_posix()
            reader.put_file(str(path), f"benchlake/warehouse/{rel}")
            written += 1
    assert written > 20
    assert reader.ls("benchlake/warehouse/tables/raw/rvp_evidence_frames")  # the parts too
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


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([BENCHLAKE, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _local_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("BENCHLAKE_", "RYNN_VP_", "VIDEO_VAL_", "CANDIDATES_", "JUDGMENTS_", "RESPONSES_",
         "AWS_"))}
    return {**env, **values}


@pytest.mark.slow
def test_a_home_on_s3_works_for_every_command(s3_endpoint, ray_address, tmp_path):
    """`BENCHLAKE_HOME=s3://…`, the per-item work on a Ray cluster: the demo materialized there
    writes the bytes a local home gets on local processes, as whole objects; another machine
    (a fresh mirror) queries and exports from the bucket; no credential is written anywhere."""
    secret = "s3cr3t-never-written"
    remote = {"BENCHLAKE_HOME": "s3://benchlake/team/home", "AWS_ENDPOINT_URL": s3_endpoint,
              "AWS_ACCESS_KEY_ID": "benchlake-key", "AWS_SECRET_ACCESS_KEY": secret,
              "AWS_DEFAULT_REGION": "us-east-1"}
    first = _local_env(**remote, **LOOPBACK, XDG_CACHE_HOME=str(tmp_path / "machine-1"),
                       BENCHLAKE_RAY_ADDRESS=ray_address)
    local = _local_env(BENCHLAKE_HOME=str(tmp_path / "local-home"))
    runs = [subprocess.Popen([BENCHLAKE, "materialize"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for env in (first, local)]
    for run in runs:  # both at once
        out, _ = run.communicate(timeout=1200)
        assert run.returncode == 0, out[-3000:]

    fs = s3fs.S3FileSystem(key="benchlake-key", secret=secret,
                           client_kwargs={"endpoint_url": s3_endpoint})
    objects = {k[len("benchlake/team/home/"):]: k for k in fs.find("benchlake/team/home")}
    ours = {rel: fs.cat_file(key) for rel, key in objects.items() if rel.startswith("tables/")}
    theirs = {p.relative_to(tmp_path / "local-home").as_posix(): p.read_bytes()
              for p in sorted((tmp_path / "local-home" / "tables").rglob("*")) if p.is_file()}
    assert len(ours) > 50 and sorted(ours) == sorted(theirs)
    assert [rel for rel in ours if ours[rel] != theirs[rel]] == []
    assert any(rel.startswith("evidence/") and rel.endswith(".jpg") for rel in objects)
    assert "benchlake.duckdb" in objects  # the catalog too
    assert not any(rel.startswith(("dagster/", "logs/")) for rel in objects)  # machine-local

    # another machine: nothing local yet; it reads the bucket
    second = _local_env(**remote, XDG_CACHE_HOME=str(tmp_path / "machine-2"))
    board = ("SELECT system, judge_run_id, n_scored, final_score FROM rvp_leaderboard "
             "WHERE profile = 'current' ORDER BY ALL")
    there = json.loads(_cli("sql", board, "--format", "json", env=second).stdout)
    here = json.loads(_cli("sql", board, "--format", "json", env=local).stdout)
    assert there == here and len(there) >= 3
    _cli("export", env=second)
    exported = [k for k in fs.find("benchlake/team/home/exports") if k.endswith("index.html")]
    assert exported  # the export is written to the bucket by the machine that made it

    # no credential in any object written, nor in either mirror
    for key in fs.find("benchlake/team/home"):
        assert secret.encode() not in fs.cat_file(key), key
    for path in tmp_path.rglob("*"):
        if path.is_file() and "local-home" not in path.parts:
            assert secret.encode() not in path.read_bytes(), path


def test_an_input_folder_on_s3_is_pulled_as_it_changes(s3_endpoint, tmp_path, monkeypatch):
    """An `s3://` drop folder is read through its mirror: a command pulls what is new or
    changed (by ETag), drops what was deleted, and downloads nothing unchanged again."""
    from dagster_project.settings import Settings
    from dagster_project.warehouse.objectstore import synced

    for key, value in {"XDG_CACHE_HOME": str(tmp_path / "cache"), "AWS_ENDPOINT_URL": s3_endpoint,
                       "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint})
    fs.makedirs("inputs", exist_ok=True)
    for name, data in {"a.jsonl": b"a1\n", "b.jsonl": b"b1\n", "sub/c.jsonl": b"c1\n"}.items():
        fs.pipe_file(f"inputs/judgments/{name}", data)
    settings = Settings.from_env({"BENCHLAKE_HOME": str(tmp_path / "home"),
                                  "JUDGMENTS_DIR": "s3://inputs/judgments"})
    folder = Path(settings.judgments_dir)
    assert str(folder).startswith(str(tmp_path / "cache"))
    with synced(settings):
        pass
    assert {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.jsonl")
            } == {"a.jsonl": b"a1\n", "b.jsonl": b"b1\n", "sub/c.jsonl": b"c1\n"}
    unchanged = (folder / "sub/c.jsonl").stat()
    fs.pipe_file("inputs/judgments/a.jsonl", b"a2\n")
    fs.rm("inputs/judgments/b.jsonl")
    with synced(settings):
        pass
    assert (folder / "a.jsonl").read_bytes() == b"a2\n"
    assert not (folder / "b.jsonl").exists()
    again = (folder / "sub/c.jsonl").stat()
    assert (again.st_ino, again.st_mtime_ns) == (unchanged.st_ino, unchanged.st_mtime_ns)
    assert fs.find("inputs/judgments") == ["inputs/judgments/a.jsonl",
                                           "inputs/judgments/sub/c.jsonl"]  # never pushed
