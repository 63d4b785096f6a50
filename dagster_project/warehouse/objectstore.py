"""The warehouse on object storage: `BENCHLAKE_HOME=s3://bucket/prefix` (S3 or any
S3-compatible server; endpoint and credentials from the standard `AWS_*` settings, e.g.
`AWS_ENDPOINT_URL`, read by botocore at run time and never written anywhere).

Decision: a command works on a local mirror of the home and the bucket is the home's truth.
The mirror is `$XDG_CACHE_HOME/benchlake/s3/<bucket>/<prefix>` (`mirror_of`; `~/.cache` by
default), so every step, dbt and DuckDB work on local files as they do for a local home. Each
command (`synced`) first pulls what changed in the bucket since this mirror last saw it (by
ETag), and when it ends, done or failed, pushes every file it wrote or changed as one whole
object (a PUT: readers never see a torn object) and deletes the objects of files it removed.
So another machine (or a fresh mirror) sees the tables, evidence images, packets, exports and
the catalog of the last command that finished, whichever machine ran it.

Local only (never pushed): `dagster/` (the Dagster instance: run history in SQLite, one per
machine), `logs/`, dbt's `target/` and `logs/` in `dbt/` (rebuilt by any build), and hidden
files (locks, temporary files, the mirror's own state `.benchlake-sync.json`). Runs launched
from the UI write the mirror; `benchlake ui` pushes when it stops. Two machines writing one
home at the same time is not supported (the last push of a file wins).

Needs the `s3` extra (`s3fs`), imported only for an `s3://` home.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagster_project.settings import Settings

SCHEME = "s3://"
_STATE = ".benchlake-sync.json"
_LOCAL_ONLY = ("dagster/", "logs/", "dbt/target/", "dbt/logs/")


def mirrors_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "benchlake" / "s3"


def mirror_of(uri: str) -> Path:
    """The local mirror of home `uri` (`s3://bucket/prefix`)."""
    rest = uri[len(SCHEME):].strip("/")
    if not rest or ".." in rest.split("/"):
        raise ValueError(f"BENCHLAKE_HOME={uri!r} is not an s3://bucket/prefix URI")
    return mirrors_root() / rest


def remote_of(home: Path) -> str | None:
    """The `s3://` URI `home` mirrors, None for a local home."""
    try:
        rel = Path(home).resolve().relative_to(mirrors_root())
    except ValueError:
        return None
    return SCHEME + rel.as_posix()


def filesystem() -> Any:
    """s3fs over the endpoint of `AWS_ENDPOINT_URL` (else AWS), credentials as botocore finds
    them (environment, profile, instance role)."""
    import s3fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint} if endpoint else {},
                             use_listings_cache=False, skip_instance_cache=True)


def _local_only(rel: str) -> bool:
    return rel.startswith(_LOCAL_ONLY) or any(part.startswith(".") for part in rel.split("/"))


def _state(home: Path) -> dict[str, list]:
    try:
        return json.loads((home / _STATE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _save(home: Path, state: dict[str, list]) -> None:
    tmp = home / f".{_STATE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    os.replace(tmp, home / _STATE)


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def pull(home: Path, fs: Any = None) -> int:
    """Bring the mirror `home` up to its bucket: download each object whose ETag this mirror
    has not seen, remove the files whose object was deleted since; the number of files
    downloaded. A file written here and not pushed yet is left as it is."""
    uri = remote_of(home)
    assert uri is not None, home
    fs = fs or filesystem()
    base = uri[len(SCHEME):].strip("/")
    home.mkdir(parents=True, exist_ok=True)
    state = _state(home)
    try:
        listing = fs.find(base, detail=True)
    except FileNotFoundError:
        listing = {}
    seen, got = set(), 0
    for key, info in listing.items():
        rel = key[len(base) + 1:]
        if not rel or _local_only(rel) or info.get("type") == "directory":
            continue
        seen.add(rel)
        etag = info.get("ETag") or info.get("etag")
        local = home / rel
        known = state.get(rel)
        if known and known[2] == etag and local.is_file() and _stat(local) == known[:2]:
            continue
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{os.getpid()}.tmp")
        fs.get_file(key, str(tmp))
        os.replace(tmp, local)
        state[rel] = [*_stat(local), etag]
        got += 1
    for rel in [r for r in state if r not in seen]:  # deleted in the bucket since
        (home / rel).unlink(missing_ok=True)
        del state[rel]
    from dagster_project.warehouse.catalog import DATABASE, rehome

    catalog = f"{DATABASE}.duckdb"
    if catalog in state and rehome(home):  # built on another machine, for its mirror
        state[catalog][:2] = _stat(home / catalog)  # the same object: nothing to push
    _save(home, state)
    return got


def push(home: Path, fs: Any = None) -> int:
    """Upload every file of the mirror `home` written or changed since it was last synced, each
    as one whole object, and delete the objects of files removed here; the number uploaded."""
    uri = remote_of(home)
    assert uri is not None, home
    fs = fs or filesystem()
    base = uri[len(SCHEME):].strip("/")
    fs.makedirs(base.split("/")[0], exist_ok=True)  # the bucket
    state = _state(home)
    present, put = set(), 0
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        rel = path.relative_to(home).as_posix()
        if _local_only(rel):
            continue
        present.add(rel)
        stat = _stat(path)
        if rel in state and state[rel][:2] == stat:
            continue
        fs.put_file(str(path), f"{base}/{rel}")
        info = fs.info(f"{base}/{rel}")
        state[rel] = [*stat, info.get("ETag") or info.get("etag")]
        put += 1
    gone = [rel for rel in state if rel not in present]
    if gone:
        fs.rm([f"{base}/{rel}" for rel in gone])
        for rel in gone:
            del state[rel]
    _save(home, state)
    return put


@contextlib.contextmanager
def synced(settings: Settings, write: bool = True) -> Iterator[None]:
    """For a command with `settings`: every `s3://` input folder pulled into its mirror (only
    read: never pushed), and an `s3://` home pulled before and (`write`) pushed after, whether
    the command succeeded or not (what it wrote is whole: every write is a rename). Local
    folders: nothing."""
    from dagster_project.settings import INPUT_FOLDERS

    named = [str(getattr(settings, name)) for name in INPUT_FOLDERS]
    inputs = [Path(n) for n in named if n and remote_of(Path(n)) is not None]
    home = settings.home if remote_of(settings.home) is not None else None
    if not inputs and home is None:
        yield
        return
    fs = filesystem()
    for mirror in inputs:
        pull(mirror, fs)
    if home is None:
        yield
        return
    pull(home, fs)
    try:
        yield
    finally:
        if write:
            push(home, fs)
