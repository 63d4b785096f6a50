"""Verify a dataset snapshot against its ``SHA256SUMS.txt`` (GNU ``sha256sum`` format).

Pure Python (no Dagster) so it can run from the CLI, tests and benchmarks alike.
Hashing is streamed through a reusable buffer and spread over threads: both ``readinto``
and hashlib's ``update`` on large buffers release the GIL, so several files hash truly in
parallel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from dagster_project.roots import OutsideRoot, Root
from dagster_project.tables import Reject, raw_schema

log = logging.getLogger(__name__)

DEFAULT_MANIFEST_NAME = "SHA256SUMS.txt"
SETTING = "RYNN_VP_SOURCE"  # names the snapshot root in reasons

Status = Literal["ok", "mismatch", "missing", "not_downloaded", "unlisted"]
ProgressFn = Callable[[int], None]

# `<64 hex><space><space|*><path>`; the optional leading backslash is GNU's marker for an
# escaped file name (names containing "\\", "\n" or "\r").
_LINE_RE = re.compile(r"^(?P<esc>\\)?(?P<hex>[0-9A-Fa-f]{64}) (?P<mode>[ *])(?P<path>.+)$")
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}


class ManifestError(Exception):
    """The manifest file itself is missing or unreadable (bad lines are `ManifestProblem`s)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read checksum manifest {path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class ManifestProblem:
    line_no: int  # 1-based, as an editor shows it
    text: str
    reason: str


@dataclass(frozen=True)
class FileStatus:
    rel_path: str
    size_bytes: int | None
    expected_sha256: str | None
    actual_sha256: str | None
    status: Status
    problem: str | None = None  # what is wrong beyond the status (a link leaving the root)


# --------------------------------------------------------------------------- parsing


def _unescape_gnu(name: str) -> str | None:
    """Undo GNU sha256sum's file-name escaping; None if an unknown escape is present."""
    out: list[str] = []
    i = 0
    while i < len(name):
        if name[i] == "\\":
            pair = name[i : i + 2]
            if pair not in _UNESCAPE:
                return None
            out.append(_UNESCAPE[pair])
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _normalize_rel_path(raw: str) -> str | None:
    """POSIX-normalise a manifest path; None if it could escape the snapshot root."""
    p = PurePosixPath(raw)  # also folds "./a" and "a//b"
    if p.is_absolute() or ".." in p.parts or str(p) in ("", "."):
        return None
    return p.as_posix()


def parse_sha256sums(path: Path) -> tuple[dict[str, str], list[ManifestProblem]]:
    """Parse a ``sha256sum``-format manifest into ``{rel_path: lowercase hex}``.

    Bad lines are collected as problems instead of raised, so one typo doesn't hide the
    verification of every other file. Blank lines (e.g. a trailing newline) are skipped.
    """
    try:
        # The manifest sits at the snapshot root: a link leading out of it is not read.
        where = Path(os.path.abspath(path))
        data = Root(where.parent, SETTING).check(where).read_bytes()
    except OutsideRoot as exc:
        raise ManifestError(Path(path), str(exc)) from exc
    except OSError as exc:
        raise ManifestError(Path(path), exc.strerror or str(exc)) from exc

    entries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    problems: list[ManifestProblem] = []
    # Split on \n only: str.splitlines() would also break on \x0b, \x1c, U+2028, ... which
    # are legal (if odd) in file names.
    for line_no, raw_line in enumerate(data.split(b"\n"), start=1):
        raw_line = raw_line.removesuffix(b"\r")  # CRLF manifests from Windows editors
        if line_no == 1:
            raw_line = raw_line.removeprefix(b"\xef\xbb\xbf")  # UTF-8 BOM
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError:
            text = raw_line.decode("utf-8", errors="replace")
            problems.append(ManifestProblem(line_no, text, "not valid UTF-8"))
            continue
        if not line.strip():
            continue

        m = _LINE_RE.match(line)
        if m is None:
            problems.append(ManifestProblem(line_no, line, "expected '<64 hex digits>  <path>'"))
            continue
        name = m["path"]
        if m["esc"]:
            unescaped = _unescape_gnu(name)
            if unescaped is None:
                problems.append(ManifestProblem(line_no, line, "invalid escape in file name"))
                continue
            name = unescaped
        rel = _normalize_rel_path(name)
        if rel is None:
            problems.append(
                ManifestProblem(line_no, line, "path is absolute, empty or contains '..'")
            )
            continue

        digest = m["hex"].lower()
        previous = entries.get(rel)
        if previous is None:
            entries[rel] = digest
            first_line[rel] = line_no
        elif previous != digest:
            # Keep the first digest: the file then verifies against exactly one claim and the
            # conflict is surfaced here rather than silently resolved.
            problems.append(
                ManifestProblem(
                    line_no,
                    line,
                    f"duplicate path with a different digest than line {first_line[rel]}",
                )
            )
    return entries, problems


# --------------------------------------------------------------------------- hashing


def _locked(progress: ProgressFn | None) -> ProgressFn | None:
    """Serialise calls so callers may pass a non-thread-safe callback (e.g. tqdm.update)."""
    if progress is None:
        return None
    lock = threading.Lock()

    def report(nbytes: int) -> None:
        with lock:
            progress(nbytes)

    return report


def _sha256_file(path: Path, buf: memoryview, progress: ProgressFn | None) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as f:
            if hasattr(os, "posix_fadvise"):
                # Cold-cache reads benefit from aggressive kernel readahead.
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while n := f.readinto(buf):
                h.update(buf[:n])
                if progress is not None:
                    progress(n)
    except OSError:
        return None
    return h.hexdigest()


def hash_files(
    root: Path,
    rel_paths: Sequence[str],
    *,
    workers: int = 2,
    chunk_size: int = 1 << 20,
    progress: ProgressFn | None = None,
) -> dict[str, str | None]:
    """SHA-256 of each ``root/rel_path``; None for files that are missing or unreadable.

    Files are hashed concurrently by ``workers`` threads, each streaming through its own
    reusable ``chunk_size`` buffer. ``progress(nbytes)`` is called after every chunk.
    """
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    root = Path(root)
    unique = list(dict.fromkeys(rel_paths))
    report = _locked(progress) if workers > 1 else progress

    def size_of(rel: str) -> int:
        try:
            return (root / rel).stat().st_size
        except OSError:
            return 0

    # Largest first (LPT scheduling) so one big file doesn't start last and run alone.
    order = sorted(unique, key=size_of, reverse=True)
    results: dict[str, str | None] = {}

    if workers <= 1 or len(order) <= 1:
        buf = memoryview(bytearray(chunk_size))
        for rel in order:
            results[rel] = _sha256_file(root / rel, buf, report)
    else:
        local = threading.local()

        def task(rel: str) -> tuple[str, str | None]:
            buf = getattr(local, "buf", None)
            if buf is None:
                buf = local.buf = memoryview(bytearray(chunk_size))
            return rel, _sha256_file(root / rel, buf, report)

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
            results.update(pool.map(task, order))

    return {rel: results[rel] for rel in unique}


# --------------------------------------------------------------------------- verification


def default_ignore(rel_path: str) -> bool:
    """Ignore files inside hidden directories (e.g. huggingface_hub's ``.cache/huggingface/``)."""
    return any(part.startswith(".") for part in rel_path.split("/")[:-1])


def verify_snapshot(
    root: Path,
    *,
    manifest_name: str = DEFAULT_MANIFEST_NAME,
    ignore: Callable[[str], bool] | None = None,
    absent_ok: Callable[[str], bool] | None = None,
    workers: int = 2,
    progress: ProgressFn | None = None,
    on_problem: Callable[[ManifestProblem], None] | None = None,
) -> list[FileStatus]:
    """Check every manifest entry under ``root`` and report unlisted files, sorted by path.

    Statuses: ``ok``, ``mismatch``, ``missing`` (listed but absent or unreadable),
    ``not_downloaded`` (listed, absent and ``absent_ok(rel_path)``) and ``unlisted``.
    ``ignore`` only filters the unlisted scan; listed files are always verified. Nothing outside
    ``root`` is read (`roots`): a listed file behind a link that leaves it is ``missing`` and an
    unlisted such link ``unlisted``, both with the link and its target as ``problem``.
    Malformed manifest lines go to ``on_problem`` (default: a logged warning).
    Raises `ManifestError` if the manifest cannot be read.
    """
    root = Path(root)
    manifest_path = root / manifest_name
    expected, problems = parse_sha256sums(manifest_path)
    for problem in problems:
        if on_problem is not None:
            on_problem(problem)
        else:
            log.warning(
                "%s:%d: %s: %r", manifest_path, problem.line_no, problem.reason, problem.text
            )

    ignore = default_ignore if ignore is None else ignore
    manifest_rel = PurePosixPath(manifest_name).as_posix()
    walls = Root(root, SETTING)
    walk = walls.walk()  # never follows a link out of the snapshot

    present: list[str] = []
    statuses: list[FileStatus] = []
    for rel, digest in expected.items():
        st = walk.files.get(rel)
        if st is not None:
            present.append(rel)
            continue
        problem = None
        if rel in walk.files:
            problem = "listed in SHA256SUMS.txt but not a regular file (a dangling link, ...)"
        else:
            try:
                walls.join(rel)
            except OutsideRoot as exc:  # behind a link that leaves the snapshot: never read
                problem = str(exc)
        status: Status = ("not_downloaded" if problem is None and absent_ok and absent_ok(rel)
                          else "missing")
        statuses.append(FileStatus(rel, None, digest, None, status, problem))

    actual = hash_files(root, present, workers=workers, progress=progress)
    for rel in present:
        got = actual[rel]
        # A None digest means the path exists but could not be read (permissions, ...).
        status = "missing" if got is None else "ok" if got == expected[rel] else "mismatch"
        size = walk.files[rel]
        statuses.append(FileStatus(rel, size.st_size if size else None, expected[rel], got,
                                   status))

    for rel, st in walk.files.items():
        if rel in expected or rel == manifest_rel or ignore(rel):
            continue
        statuses.append(FileStatus(rel, st.st_size if st else None, None, None, "unlisted"))
    for esc in walk.escapes:
        # A listed path behind this link has its own row (missing, with this reason).
        if ignore(esc.rel) or any(rel == esc.rel or rel.startswith(esc.rel + "/")
                                  for rel in expected):
            continue
        statuses.append(FileStatus(esc.rel, None, None, None, "unlisted", esc.reason))

    statuses.sort(key=lambda s: s.rel_path)
    return statuses


def unlisted_files(root: Path) -> list[FileStatus]:
    """Every file of the snapshot as `unlisted` (what there is to say without a manifest)."""
    walk = Root(root, SETTING).walk()
    out = [FileStatus(rel, st.st_size if st else None, None, None, "unlisted")
           for rel, st in walk.files.items()
           if rel != DEFAULT_MANIFEST_NAME and not rel.startswith(".")]
    out += [FileStatus(e.rel, None, None, None, "unlisted", e.reason) for e in walk.escapes
            if not e.rel.startswith(".")]
    return sorted(out, key=lambda s: s.rel_path)


_REASONS = {
    "mismatch": "SHA-256 differs from SHA256SUMS.txt",
    "missing": "listed in SHA256SUMS.txt but missing",
    "unlisted": "present but not listed in SHA256SUMS.txt",
}


def status_row(st: FileStatus) -> dict:
    """The raw_rvp_checksums row of a file's verdict."""
    row = dataclasses.asdict(st)
    del row["problem"]  # said in the reject
    return {**row, "case_id": case_of(st.rel_path)}


def status_reject(st: FileStatus) -> Reject | None:
    """The rvp_rejects row of a verdict that refuses the file (None for ok / not_downloaded)."""
    if st.status not in _REASONS:
        return None
    reason = st.problem or _REASONS[st.status]
    return Reject(st.rel_path, reason, case_of(st.rel_path), "rvp_checksums")


def manifest_total_bytes(root: Path, rel_paths: Sequence[str]) -> int:
    """Total size of the files that exist inside the snapshot, e.g. to size a progress bar
    before hashing."""
    walls = Root(root, SETTING)
    total = 0
    for rel in rel_paths:
        with suppress(OSError, OutsideRoot):
            total += walls.join(rel).stat().st_size
    return total


@contextmanager
def hash_progress_bar(
    total_bytes: int, *, desc: str = "sha256", disable: bool | None = None
) -> Iterator[ProgressFn]:
    """Yield a ``progress(nbytes)`` callable backed by a tqdm byte bar.

    ``disable=None`` lets tqdm hide the bar when stderr is not a TTY (logs, CI).
    """
    from tqdm import tqdm  # imported lazily: only interactive callers need it

    with tqdm(
        total=total_bytes,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=disable,
        miniters=1,
    ) as bar:
        yield bar.update


# raw_rvp_checksums: one row per snapshot file with its verdict
CHECKSUMS_SCHEMA = raw_schema("rvp_checksums")
MEDIA_FILES = frozenset({"gt.mp4", "initial.png"})  # what a metadata-only snapshot leaves out


def check_snapshot(root: Path, metadata_only: bool, log_error: Callable[[str], None]
                   ) -> tuple[list[dict], list[Reject], dict[str, object]]:
    """The rows of raw_rvp_checksums for the snapshot at `root` (every file against its
    SHA256SUMS.txt, streamed, in parallel, with a progress bar; with `metadata_only`, media not
    downloaded are `not_downloaded`), the rejects (each problem line of the manifest and each
    file that fails) and what the UI shows of them (`status_counts`, `manifest_found`). Without
    a manifest nothing can be verified: every file is unlisted (so every case is refused
    downstream), and why is told to `log_error`."""
    def absent_ok(rel: str) -> bool:
        return metadata_only and rel.rsplit("/", 1)[-1] in MEDIA_FILES

    rejects: list[Reject] = []

    def on_problem(problem: ManifestProblem) -> None:
        rejects.append(Reject(DEFAULT_MANIFEST_NAME, f"line {problem.line_no}: "
                              f"{problem.reason}: {problem.text!r}", None, "rvp_checksums"))

    try:
        listed, _ = parse_sha256sums(root / DEFAULT_MANIFEST_NAME)
        with hash_progress_bar(manifest_total_bytes(root, list(listed))) as progress:
            statuses = verify_snapshot(root, absent_ok=absent_ok, progress=progress,
                                       on_problem=on_problem)
        found = True
    except ManifestError as exc:
        log_error(str(exc))
        rejects.append(Reject(DEFAULT_MANIFEST_NAME, str(exc), None, "rvp_checksums"))
        statuses, found = unlisted_files(root), False
    rejects.extend(r for r in map(status_reject, statuses) if r is not None)
    rows = [status_row(st) for st in statuses]
    counts = dict(Counter(row["status"] for row in rows))
    return rows, rejects, {"status_counts": counts, "manifest_found": found}


def case_of(rel_path: str) -> str | None:
    parts = rel_path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "cases" else None
