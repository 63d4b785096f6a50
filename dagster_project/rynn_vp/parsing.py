"""Pure parsing of Rynn-VP identifiers and annotations (no I/O beyond what callers pass in)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# `<source_group>-<scene>-Room_<nn>-Task_<nn>-Variant_<nn>-<nnn>`. Scene labels may contain spaces
# (`Home Office`), underscores (`Living_Room`) and in principle hyphens, so the id is parsed from
# both ends: one token from the left, four from the right, the scene is whatever remains.
_ROOM = re.compile(r"^Room_(\d+)$")
_TASK = re.compile(r"^Task_(\d+)$")
_VARIANT = re.compile(r"^Variant_(\d+)$")
_INSTANCE = re.compile(r"^(\d+)$")
_SOURCE = re.compile(r"^source\d+_\d+$")


class ParseError(ValueError):
    """A value that does not follow the published format; the message says what is wrong."""


@dataclass(frozen=True)
class CaseId:
    case_id: str
    source_group: str
    scene: str
    room_id: str
    room_no: int
    task_no: int
    variant_no: int
    instance_no: int


def parse_case_id(case_id: str) -> CaseId:
    parts = case_id.split("-")
    if len(parts) < 6:
        raise ParseError(
            f"case id {case_id!r} has {len(parts)} '-'-separated parts; expected "
            "<source_group>-<scene>-Room_NN-Task_NN-Variant_NN-NNN"
        )
    source, *scene_parts, room, task, variant, instance = parts
    scene = "-".join(scene_parts)
    checks = [
        (_SOURCE, source, "source group"),
        (_ROOM, room, "room"),
        (_TASK, task, "task"),
        (_VARIANT, variant, "variant"),
        (_INSTANCE, instance, "instance number"),
    ]
    matches = []
    for pattern, value, what in checks:
        match = pattern.match(value)
        if not match:
            raise ParseError(f"case id {case_id!r}: {what} part {value!r} is malformed")
        matches.append(match)
    if not scene.strip():
        raise ParseError(f"case id {case_id!r}: empty scene label")
    return CaseId(
        case_id=case_id,
        source_group=source,
        scene=scene,
        room_id=room,
        room_no=int(matches[1].group(1)),
        task_no=int(matches[2].group(1)),
        variant_no=int(matches[3].group(1)),
        instance_no=int(matches[4].group(1)),
    )


# `0.0s-2.2s`; tolerate spaces around the dash and an optional unit on either side, nothing else.
_NUMBER = r"(\d+(?:\.\d+)?)"
_INTERVAL = re.compile(rf"^\s*{_NUMBER}\s*s?\s*-\s*{_NUMBER}\s*s?\s*$")


def parse_interval(text: str) -> tuple[float, float]:
    """`'0.0s-2.2s'` → `(0.0, 2.2)`. Raises ParseError for anything else (incl. end < start)."""
    match = _INTERVAL.match(text)
    if not match:
        raise ParseError(f"interval {text!r} is not of the form '<start>s-<end>s'")
    start, end = float(match.group(1)), float(match.group(2))
    if end < start:
        raise ParseError(f"interval {text!r} ends before it starts")
    return start, end


# Only these two spellings are terminal labels. The release's single final `Down.` is kept as
# written and NOT reclassified (dataset card: "preserved as written").
DONE_LABELS = frozenset({"Done", "Done."})


def normalize_whitespace(text: str) -> str:
    return " ".join(text.split())
