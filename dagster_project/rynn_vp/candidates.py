"""Scanning a `CANDIDATES_DIR` into `rvp_candidates` rows, with every refusal kept as a `Reject`.

Layout: `<system>/<case_id>/candidate.mp4` (video protocol) or
`<system>/<case_id>/steps/<step_id>.(png|jpg)` (ordered-image protocol, step ids numeric).

Nothing is dropped silently: every file under the root is either part of a row (`path` or
`step_paths`) or covered by a `Reject` whose `source_file` is that file or a folder holding it
(an unknown case or an unexpected folder is refused as a whole, not file by file). A symbolic
link that stays inside the root is followed; one that leads out is refused ("symbolic link leads
outside CANDIDATES_DIR: ...") and nothing behind it is read or listed (`roots`).

A candidate whose media is damaged is still listed (ok=False, `problem` says why) and its Reject
added, because "system X submitted something for case Y that cannot be evaluated" is a result
the leaderboard must show, unlike a folder that is not a candidate at all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import UnidentifiedImageError

from dagster_project.dropfolder import file_sha256
from dagster_project.filecache import DIGEST_KIND, DIGEST_VERSION, remembered
from dagster_project.media.probe import decoded_image_size, probe_video_cached
from dagster_project.roots import Root
from dagster_project.tables import Reject, raw_schema

STAGE = "rvp_candidates"
VIDEO_NAME = "candidate.mp4"
STEPS_DIR = "steps"
STEP_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
_NUMERIC = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also accepts "²" or "٣"

# raw_rvp_candidates: one row per candidate found (scan_candidates); a row has exactly its columns
CANDIDATES_SCHEMA = raw_schema("rvp_candidates")


@dataclass
class _Scan:
    root: Root
    rows: list[dict[str, Any]]
    rejects: list[Reject]
    file_cache: Path | None = None  # where digests and probes of unchanged files are remembered

    def rel(self, path: Path) -> str:
        return self.root.rel(path)

    def reject(self, path: Path, reason: str, case_id: str | None = None) -> None:
        self.rejects.append(Reject(self.rel(path), reason, case_id, STAGE))

    def children(self, folder: Path, case_id: str | None = None) -> list[Path]:
        """The entries of `folder`; a link among them that leaves the root is refused (with
        `case_id`), never followed nor listed."""
        inside, escapes = self.root.entries(folder)
        self.rejects.extend(Reject(e.rel, e.reason, case_id, STAGE) for e in escapes)
        return inside

    def count_files(self, folder: Path) -> int:
        return self.root.count_files(folder)


def _unexpected(scan: _Scan, path: Path, where: str, expected: str,
                case_id: str | None = None) -> None:
    """Refuse an entry that has no place in the layout; a folder is refused as a whole."""
    if path.is_dir():
        n = scan.count_files(path)
        scan.reject(path, f"unexpected folder {where} ({n} file(s) inside); expected {expected}",
                    case_id)
    else:
        scan.reject(path, f"unexpected file {where}; expected {expected}", case_id)


def _base_row(system: str, case_id: str, modality: str, path: Path) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(CANDIDATES_SCHEMA.names)
    row.update(system=system, case_id=case_id, modality=modality, path=str(path))
    return row


def _video_row(scan: _Scan, system: str, case_id: str, video: Path) -> dict[str, Any]:
    row = _base_row(system, case_id, "video", video)
    row["fingerprint"] = remembered(video, scan.file_cache, DIGEST_KIND, DIGEST_VERSION,
                                    file_sha256)
    probe = probe_video_cached(video, scan.file_cache)
    row.update(
        duration_s=probe.metadata_duration_s,
        # None from the probe means the file did not even open: nothing to decode, so 0.
        frame_count=probe.frame_count if probe.frame_count is not None else 0,
        first_frame_s=probe.first_frame_s,
        last_frame_s=probe.last_frame_s,
        width=probe.width,
        height=probe.height,
        ok=probe.ok,
        problem=probe.error,
    )
    if not probe.ok:
        scan.reject(video, f"video probe failed: {probe.error}", case_id)
    return row


def _image_error(exc: Exception, path: Path) -> str:
    if isinstance(exc, UnidentifiedImageError):
        return "unrecognized image data (not a readable PNG or JPEG)"
    # Pillow's texts may embed the absolute path; keep reasons independent of where root is.
    return f"{type(exc).__name__}: {exc}".replace(str(path), path.name)


def _images_row(scan: _Scan, system: str, case_id: str, steps_dir: Path) -> dict[str, Any]:
    row = _base_row(system, case_id, "images", steps_dir)
    expected = "<number>.png or <number>.jpg, e.g. 01.png"
    numbered: dict[int, list[Path]] = {}
    for entry in scan.children(steps_dir, case_id):
        if entry.is_dir():
            _unexpected(scan, entry, "in a steps folder", expected, case_id)
        elif entry.suffix.lower() not in STEP_SUFFIXES:
            scan.reject(entry, f"not a step image (suffix {entry.suffix or 'missing'!r}); "
                        f"expected {expected}", case_id)
        elif not _NUMERIC.fullmatch(entry.stem):
            scan.reject(entry, f"step file name {entry.stem!r} is not a number; step ids are "
                        f"numeric so their order is unambiguous; expected {expected}", case_id)
        else:
            numbered.setdefault(int(entry.stem), []).append(entry)

    steps: list[tuple[str, Path, tuple[int, int]]] = []
    for number in sorted(numbered):
        files = numbered[number]
        if len(files) > 1:
            # 1.png vs 01.png, or 01.png vs 01.jpg: no basis to pick one, so neither is a step.
            names = ", ".join(p.name for p in files)
            for p in files:
                scan.reject(p, f"duplicate step number {number} ({names})", case_id)
            continue
        path = files[0]
        try:
            size = decoded_image_size(path, scan.file_cache)
        except Exception as exc:  # Pillow raises many types (OSError, SyntaxError, ...)
            scan.reject(path, f"step image does not decode: {_image_error(exc, path)}", case_id)
            continue
        steps.append((path.stem, path, size))

    # Fingerprint over names and bytes in step order; length prefixes keep it unambiguous.
    digest = hashlib.sha256()
    for _, path, _ in steps:
        name, data = path.name.encode(), path.read_bytes()
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)

    step_problems = [r.source_file.rsplit("/", 1)[-1] for r in scan.rejects
                     if r.source_file.startswith(scan.rel(steps_dir) + "/")]
    row.update(
        fingerprint=digest.hexdigest(),
        step_count=len(steps),
        step_ids=[sid for sid, _, _ in steps],
        step_paths=[str(p) for _, p, _ in steps],
        # The first step's size; steps of one storyboard normally share it.
        width=steps[0][2][0] if steps else None,
        height=steps[0][2][1] if steps else None,
        ok=bool(steps),
    )
    if not steps:
        row["problem"] = "no usable step images"
        scan.reject(steps_dir, "steps folder holds no usable step images", case_id)
    elif step_problems:
        # Still evaluable (a refused step is an evidence gap), but say so on the row too.
        row["problem"] = f"{len(step_problems)} file(s) in steps/ refused: " + ", ".join(
            step_problems)
    return row


def _scan_case(scan: _Scan, system: str, case_dir: Path, known_cases: set[str] | None,
               refused: Mapping[str, str]) -> None:
    case_id = case_dir.name
    if case_id in refused and (known_cases is None or case_id not in known_cases):
        scan.reject(case_dir, refused[case_id], case_id)  # "case refused at <stage>: <why>"
        return
    if known_cases is not None and case_id not in known_cases:
        scan.reject(case_dir, f"unknown case_id {case_id!r}: not a case of the benchmark "
                    f"({scan.count_files(case_dir)} file(s) inside)", case_id)
        return
    expected = f"{VIDEO_NAME} or {STEPS_DIR}/"
    video: Path | None = None
    steps: Path | None = None
    for entry in scan.children(case_dir, case_id):
        if entry.name == VIDEO_NAME and entry.is_file():
            video = entry
        elif entry.name == STEPS_DIR and entry.is_dir():
            steps = entry
        else:
            _unexpected(scan, entry, "in a candidate folder", expected, case_id)
    if video is not None and steps is not None:
        scan.reject(case_dir, f"ambiguous candidate: both {VIDEO_NAME} and {STEPS_DIR}/ are "
                    "present; keep exactly one", case_id)
    elif video is not None:
        scan.rows.append(_video_row(scan, system, case_id, video))
    elif steps is not None:
        scan.rows.append(_images_row(scan, system, case_id, steps))
    else:
        scan.reject(case_dir, f"no candidate: the folder holds neither {expected}", case_id)


def scan_candidates(
    root: Path, known_cases: set[str] | None, file_cache: Path | None = None,
    refused: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], list[Reject]]:
    """One row per (system, case_id) under `root` plus the Rejects; both sorted.

    `known_cases`: the benchmark's case ids; a candidate for any other id is refused. None skips
    that check. `refused`: {case_id: why} of the cases the ingest refused (`refused_cases`): their
    candidates are refused with that reason, not as unknown. Raises FileNotFoundError if `root`
    is not a folder (a setting error, not input). Rows carry the columns of `CANDIDATES_SCHEMA`;
    `path` and `step_paths` are absolute.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"candidates folder {str(root)!r} does not exist")
    scan = _Scan(root=Root(root, "CANDIDATES_DIR"), rows=[], rejects=[], file_cache=file_cache)
    for system_dir in scan.children(root):
        if not system_dir.is_dir():
            _unexpected(scan, system_dir, "at the candidates root", "<system>/ folders")
            continue
        for case_dir in scan.children(system_dir):
            if not case_dir.is_dir():
                _unexpected(scan, case_dir, "in a system folder", "<case_id>/ folders")
                continue
            _scan_case(scan, system_dir.name, case_dir, known_cases, refused or {})
    scan.rows.sort(key=lambda r: (r["system"], r["case_id"]))
    rejects = sorted(scan.rejects, key=lambda r: (r.source_file, r.reason))
    return scan.rows, rejects

