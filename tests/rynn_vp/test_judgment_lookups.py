"""A judgment file's part is kept across a changed context while what its check looked up there
is the same (`judgment_lookups`): only the files whose records name what changed are checked
again, and the rows are those of checking everything in the new context."""

from __future__ import annotations

import dataclasses

import pytest

from dagster_project.rynn_vp import judgment_lookups
from dagster_project.rynn_vp.judgment_lookups import traced
from dagster_project.rynn_vp.judgment_parts import judgment_store, sync_parts
from dagster_project.rynn_vp.judgment_records import CandidateInfo
from dagster_project.rynn_vp.judgments import ingest
from tests.rynn_vp.test_judgment_records import (
    CTX,
    PLAIN,
    PLANNED,
    STORY,
    VEO,
    Drop,
    gt_record,
)
from tests.rynn_vp.test_judgment_records import record as judgment


def test_a_check_reads_the_context_by_lookups_it_notes():
    ctx, owner_of, seen = traced(CTX, {"x#S0": "a/b"}.get)
    assert VEO in ctx.systems and "nope" not in ctx.systems
    assert ctx.cases.get(PLAIN) == CTX.cases[PLAIN] and ctx.candidates.get((STORY, PLANNED)) is None
    assert owner_of("x#S0") == "a/b"
    assert seen == {("systems", VEO), ("systems", "nope"), ("cases", PLAIN),
                    ("candidates", (STORY, PLANNED)), ("owner", "x#S0")}
    with pytest.raises(TypeError, match="by key"):  # a whole field would be an unnoted read
        list(ctx.cases)


def test_a_changed_context_checks_again_the_files_it_changes(tmp_path):
    """A part is kept while what its check looked up in the context finds the same values
    (`judgment_lookups`): a new system, a replaced candidate, new evidence ids or a new owner
    of a cited evidence id check again the files whose records name them, and only those; the
    rows are those of checking everything in the new context."""
    drop = Drop(tmp_path / "drop")
    files = [drop.jsonl("veo-plain.jsonl", [judgment()]),
             drop.jsonl("veo-planned.jsonl", [judgment(case_id=PLANNED)]),
             drop.jsonl("story.jsonl", [judgment(STORY)]),
             # cites an id no evaluation has yet: checked again once one owns it
             drop.jsonl("cites.jsonl", [judgment(evidence=["new/" + PLAIN + "#S0"])]),
             drop.jsonl("new.jsonl", [judgment("new")]),  # an unknown system, until it is not
             drop.json("gt_compilations/g.json", gt_record())]
    store = judgment_store(tmp_path / "cache")
    parts, written = sync_parts(store, files, CTX)
    assert len(written) == len(files)
    again, written = sync_parts(store, files, CTX)
    assert again == parts and written == []

    def rechecked(ctx) -> list[str]:
        nonlocal parts
        now, written = sync_parts(store, files, ctx)
        assert ingest(files, ctx, now) == ingest(files, ctx)  # as checking all of them
        assert all(now[sf] == parts[sf] for sf in files if now[sf].stem not in written)
        parts = now
        return sorted(sf.source_file for sf in files if now[sf].stem in written)

    new_system = dataclasses.replace(
        CTX, systems=CTX.systems | {"new"},
        candidates={**CTX.candidates, ("new", PLAIN): CandidateInfo("video", frozenset())},
        evidence_ids={**CTX.evidence_ids, f"new/{PLAIN}": frozenset({f"new/{PLAIN}#S0"})})
    assert rechecked(new_system) == ["cites.jsonl", "new.jsonl"]
    replaced = dataclasses.replace(new_system, candidates={
        **new_system.candidates, (VEO, PLANNED): CandidateInfo("images", frozenset({"01"}))})
    assert rechecked(replaced) == ["veo-planned.jsonl"]
    assert rechecked(dataclasses.replace(replaced, gt_fingerprints={
        **CTX.gt_fingerprints, PLAIN: "f" * 64})) == ["gt_compilations/g.json"]
    assert rechecked(replaced) == ["gt_compilations/g.json"]
    # kept lookups not as written: never taken on trust. A part named for the context it was
    # checked in is valid in it; the others are checked again.
    store.folder.with_name(judgment_lookups.LOOKUPS_FILE).write_text("{torn")
    assert rechecked(replaced) == ["cites.jsonl", "new.jsonl", "story.jsonl", "veo-plain.jsonl"]
    assert rechecked(replaced) == []
