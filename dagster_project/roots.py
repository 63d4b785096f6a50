"""The configured roots are walls: nothing outside them is opened, hashed, probed or listed.

A root is a folder a setting names (RYNN_VP_SOURCE, CANDIDATES_DIR, JUDGMENTS_DIR, RESPONSES_DIR,
a val video root, the hub cache). A path under it counts as inside when it lies under the root
both as written (no `..`, not absolute) and once its symbolic links are resolved: a link that
stays inside is followed, one that leaves is refused with a reason naming the link and where it
leads. Deciding never opens anything: resolving only reads the links along the path. Every reader
of a root goes through `Root` (`escape` for one path, `entries` for one folder, `walk` for all of
it, `join` for a name read from a file), so there is one rule and one wording.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


class OutsideRoot(ValueError):
    """A path, or a name read from a file, that would lead outside its root."""


@dataclass(frozen=True)
class Escape:
    """An entry under a root that leads outside it: `rel` (posix, relative to the root) and
    why."""

    rel: str
    reason: str


@dataclass(frozen=True)
class Walk:
    """Everything under a root: `files` maps each non-folder entry (posix path relative to the
    root) to its stat, or None when it is no regular file (a dangling link, a FIFO, a socket);
    `escapes` lists the links that leave the root, not followed."""

    files: dict[str, os.stat_result | None]
    escapes: list[Escape]


@dataclass(frozen=True)
class Root:
    """The folder `path` a setting (`setting`, its name in reasons) lets the pipeline read."""

    path: Path
    setting: str
    real: Path = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(os.path.abspath(self.path)))
        object.__setattr__(self, "real", Path(os.path.realpath(self.path)))

    def rel(self, path: Path) -> str:
        return Path(os.path.normpath(path)).relative_to(self.path).as_posix()

    def escape(self, path: Path) -> str | None:
        """Why `path` lies outside the root, or None when it lies inside (as written and with
        every link along it resolved)."""
        if not Path(path).is_absolute():
            return f"path leads outside {self.setting}: {path} is not an absolute path"
        normal = Path(os.path.normpath(path))
        if not normal.is_relative_to(self.path):
            return f"path leads outside {self.setting}: {path}"
        # The path as the system resolves it (links first, then `..`), not its normal form.
        real = Path(os.path.realpath(path))
        if real.is_relative_to(self.real):
            return None
        parts = normal.relative_to(self.path).parts
        for i in range(1, len(parts) + 1):  # name the first link that leads out
            target = Path(os.path.realpath(self.path.joinpath(*parts[:i])))
            if not target.is_relative_to(self.real):
                link = "/".join(parts[:i])
                return f"symbolic link leads outside {self.setting}: {link} -> {target}"
        return f"path leads outside {self.setting}: {path} -> {real}"

    def inside(self, path: Path) -> bool:
        return self.escape(path) is None

    def check(self, path: Path) -> Path:
        """`path`, or OutsideRoot with the reason."""
        why = self.escape(path)
        if why is not None:
            raise OutsideRoot(why)
        return path

    def join(self, name: str) -> Path:
        """The root joined with `name`, a relative posix name read from a file (a manifest
        entry, a media name), or OutsideRoot: absolute names, `..` and links that lead out."""
        pure = PurePosixPath(name)
        if not name or pure.is_absolute() or ".." in pure.parts:
            raise OutsideRoot(f"name {name!r} leads outside {self.setting}: names read from "
                              "files must be relative, without '..'")
        return self.check(self.path.joinpath(*pure.parts))

    def entries(self, folder: Path) -> tuple[list[Path], list[Escape]]:
        """The entries of `folder` (itself inside the root) sorted by name, and those of them
        that are links leading out (left out of the first list, never listed themselves)."""
        inside, escapes = [], []
        with os.scandir(folder) as it:
            found = sorted(it, key=lambda e: e.name)
        for entry in found:
            path = Path(entry.path)
            why = self.escape(path) if entry.is_symlink() else None
            if why is None:
                inside.append(path)
            else:
                escapes.append(Escape(self.rel(path), why))
        return inside, escapes

    def walk(self, folder: Path | None = None, *, hidden: bool = True) -> Walk:
        """Every file under `folder` (default: the root; inside it), links that stay inside
        followed (a linked folder is listed under each of its names; a link back to a folder
        being walked is not followed again, so there is no loop), links that leave reported and
        not followed. `hidden=False` skips names starting with "."."""
        start = Path(os.path.abspath(folder)) if folder is not None else self.path
        files: dict[str, os.stat_result | None] = {}
        escapes: list[Escape] = []
        st = os.stat(start)
        # each folder to list: its path, its name relative to the root (with a trailing "/",
        # joined to each entry's name as a string: pathlib per entry cost most of a walk), and
        # the (device, inode) of it and of the folders above it
        prefix = "" if start == self.path else self.rel(start) + "/"
        stack = [(str(start), prefix, frozenset({(st.st_dev, st.st_ino)}))]
        while stack:
            current, prefix, above = stack.pop()
            with os.scandir(current) as it:
                found = list(it)
            for entry in found:
                if not hidden and entry.name.startswith("."):
                    continue
                rel = prefix + entry.name
                if entry.is_symlink():
                    why = self.escape(Path(entry.path))
                    if why is not None:
                        escapes.append(Escape(rel, why))
                        continue
                try:
                    entry_st: os.stat_result | None = entry.stat()
                except OSError:  # a dangling link, or a file gone meanwhile
                    entry_st = None
                if entry_st is not None and stat.S_ISDIR(entry_st.st_mode):
                    key = (entry_st.st_dev, entry_st.st_ino)
                    if key not in above:
                        stack.append((entry.path, rel + "/", above | {key}))
                    continue
                if entry_st is not None and not stat.S_ISREG(entry_st.st_mode):
                    entry_st = None
                files[rel] = entry_st
        return Walk(dict(sorted(files.items())), sorted(escapes, key=lambda e: e.rel))

    def count_files(self, folder: Path) -> int:
        """How many files are under `folder` (inside the root), links leading out not counted."""
        return len(self.walk(folder).files)
