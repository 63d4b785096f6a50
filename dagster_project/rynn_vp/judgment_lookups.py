"""What the check of a judgment file read of its context, so that a changed context checks again
only the files whose records it changes.

A file version is checked against the whole context (`judgment_records.EvalContext`: systems,
cases, candidates, evidence ids, GT fingerprints, refused cases) but reads only the entries its
records name. `traced` hands the check a context that notes each lookup: the field and the key
(a system, a case, a (system, case) candidate, an evaluation's evidence ids, the owner of a cited
evidence id). `Lookups` keeps, per file version, the part it was checked into, those lookups and
a digest of the values they found, in `cache/judgment_lookups.json` (under `CHECKS_VERSION`).
When the context changes (a new system, a replaced candidate), a file whose lookups find the same
values keeps its part under its name, so the replay of the files around it is kept too; the
others are checked again. A check cannot iterate a field of the context (`_Seen` refuses): all it
depends on is a lookup, noted.

A part named for the whole context it was checked in (`judgment_parts.part_key`) is valid in that
context whatever is kept here: losing this file costs checking again, never a wrong part.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dagster_project.parts import digest
from dagster_project.rynn_vp.judgment_records import EvalContext, SourceFile
from dagster_project.tables import keep, read_kept

LOOKUPS_FILE = "judgment_lookups.json"  # beside the parts' folder, under `cache/`
OWNER = "owner"  # the lookup of a cited evidence id's evaluation (`owner_of`)
_FIELDS = ("systems", "cases", "candidates", "evidence_ids", "gt_fingerprints", "refused")

Lookup = tuple[str, Any]  # (field, key); a candidate's key is (system, case_id)


class _Seen(Mapping):
    """A field of the context that notes every key looked up in it into `seen`."""

    def __init__(self, field: str, inner: Mapping[Any, Any], seen: set[Lookup]) -> None:
        self._field, self._inner, self._seen = field, inner, seen

    def __getitem__(self, key: Any) -> Any:
        self._seen.add((self._field, key))
        return self._inner[key]

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen.add((self._field, key))
        return self._inner.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._seen.add((self._field, key))
        return key in self._inner

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(f"a judgment check looks {self._field} up by key: going through all of "
                        "it would make every file depend on every entry")

    def __len__(self) -> int:
        raise TypeError(f"a judgment check looks {self._field} up by key")


def traced(ctx: EvalContext, owner_of: Callable[[str], str | None]
           ) -> tuple[EvalContext, Callable[[str], str | None], set[Lookup]]:
    """`ctx` and `owner_of` as a check reads them, and the set their lookups go into."""
    seen: set[Lookup] = set()
    systems = dict.fromkeys(ctx.systems, True)
    fields = {name: _Seen(name, systems if name == "systems" else getattr(ctx, name), seen)
              for name in _FIELDS}

    def owner(eid: str) -> str | None:
        seen.add((OWNER, eid))
        return owner_of(eid)

    return EvalContext(**fields), owner, seen


def as_json(seen: set[Lookup]) -> list[list[Any]]:
    """The lookups in a fixed order, as JSON keeps them (a candidate's key as a list)."""
    rows = [[field, list(key) if isinstance(key, tuple) else key] for field, key in seen]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _plain(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


def file_id(sf: SourceFile) -> str:
    return f"{sf.source_file}\n{sf.version}\n{sf.sha256}"


class Lookups:
    """The kept lookups of every file version checked (see the module notes), and the values
    they find in `ctx` now (`owner`: evidence id -> its evaluation)."""

    def __init__(self, parts_folder: Path, version: str, ctx: EvalContext,
                 owner: Mapping[str, str]) -> None:
        self.path = Path(parts_folder).with_name(LOOKUPS_FILE)
        self.version = version
        self.ctx, self.owner = ctx, owner
        kept = read_kept(self.path, version)
        self.kept: dict[str, list] = kept if isinstance(kept, dict) else {}
        self._values: dict[Lookup, Any] = {}

    def _value(self, field: str, key: Any) -> Any:
        if field == OWNER:
            return self.owner.get(key)
        if field == "systems":
            return key in self.ctx.systems
        if field not in _FIELDS:
            raise KeyError(field)
        return _plain(getattr(self.ctx, field).get(key))

    def values(self, lookups: list[list[Any]]) -> str:
        """A digest of the lookups and what each finds in the context now."""
        found = []
        for field, key in lookups:
            seen = (field, tuple(key) if isinstance(key, list) else key)  # as the check did
            if seen not in self._values:
                self._values[seen] = self._value(*seen)
            found.append([field, key, self._values[seen]])
        return digest(found)

    def part_of(self, sf: SourceFile) -> str | None:
        """The part `sf` was checked into, if what its check looked up is unchanged now."""
        entry = self.kept.get(file_id(sf))
        try:
            name, values, lookups = entry  # type: ignore[misc]
            return name if self.values(lookups) == values else None
        except (TypeError, ValueError, KeyError):  # none, or not as written: check again
            return None

    def save(self, parts: Mapping[SourceFile, str], checked: Mapping[str, list[list[Any]]]
             ) -> None:
        """Keep the lookups of the current file versions: `parts` (version -> its part's key),
        `checked` (key -> lookups, for the parts checked now); the others keep their entry
        while their part is the one it names."""
        entries = {}
        for sf, key in parts.items():
            fid = file_id(sf)
            if key in checked:
                entries[fid] = [key, self.values(checked[key]), checked[key]]
            elif (old := self.kept.get(fid)) and isinstance(old, list) and old[:1] == [key]:
                entries[fid] = old
        if entries != self.kept:
            keep(self.path, self.version, entries)
