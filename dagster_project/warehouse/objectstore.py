"""The warehouse on object storage (S3 or any S3-compatible server).

The Parquet tables are mirrored under a URI (`s3://bucket/prefix/tables/...`, same layout as
`$BENCHLAKE_HOME/tables/`) with PyArrow's S3 filesystem, and read back by DuckDB through an
fsspec filesystem registered on the connection (`warehouse.views.connect(home_uri,
filesystem=...)`), so no DuckDB extension has to be downloaded. Needs the `s3` extra (`s3fs`).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs


def s3_filesystems(endpoint_url: str | None = None, *, key: str | None = None,
                   secret: str | None = None, region: str = "us-east-1"):
    """(pyarrow S3FileSystem for writing, s3fs filesystem for DuckDB) for one endpoint."""
    import s3fs

    kwargs: dict = {"region": region, "allow_bucket_creation": True}
    if key is not None:
        kwargs.update(access_key=key, secret_key=secret)
    if endpoint_url:
        url = urlparse(endpoint_url)
        kwargs.update(endpoint_override=url.netloc, scheme=url.scheme or "https")
    client = {"region_name": region, **({"endpoint_url": endpoint_url} if endpoint_url else {})}
    reader = s3fs.S3FileSystem(key=key, secret=secret, client_kwargs=client)
    return pafs.S3FileSystem(**kwargs), reader


def publish_tables(tables_dir: Path, uri: str, filesystem: pafs.FileSystem,
                   pattern: str = "*.parquet") -> list[str]:
    """Copy every file matching `pattern` under `tables_dir` (the Parquet tables, or the status
    markers) to `uri` (an `s3://bucket/prefix` URI) with the same relative layout; returns the
    object paths written."""
    parsed = urlparse(uri)
    base = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
    filesystem.create_dir(parsed.netloc)  # the bucket (no-op when it exists)
    written = []
    for path in sorted(tables_dir.rglob(pattern)):
        dest = f"{base}/{path.relative_to(tables_dir).as_posix()}"
        with path.open("rb") as src, filesystem.open_output_stream(dest) as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
        written.append(dest)
    return written
