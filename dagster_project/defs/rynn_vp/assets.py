"""Rynn-VP assets: snapshot → checksums → media → cases and intervals → candidates → evidence
(per case) → GT fingerprints → judgment records → judge packets → judge.

Each asset `raw_<table>` writes `tables/raw/<table>.parquet` (refusals under
`tables/raw/rvp_rejects/<stage>.parquet`); the logic lives in `dagster_project/rynn_vp/`, the
views over these tables in `sql/models/rynn_vp/`. Only the evidence reads a view: the Done rule
and the clamping of `rvp_intervals`, which it declares as a dependency.
"""

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import dagster as dg

from dagster_project.defs.resources import (
    BenchlakeSettings,
    JudgeConfig,
    JudgeResource,
    demo_generator,
    describe_written,
    described_again,
    raw_key,
    started,
    step_inputs,
    write_and_describe,
)
from dagster_project.dropfolder import (
    VERSIONS_SCHEMA,
    archive_versions,
    escapes,
    stat_listing,
)
from dagster_project.parts import file_rows
from dagster_project.rynn_vp.candidates import CANDIDATES_SCHEMA, scan_candidates
from dagster_project.rynn_vp.checksums import CHECKSUMS_SCHEMA, check_snapshot
from dagster_project.rynn_vp.evidence import EVIDENCE_POLICY_VERSION, EVIDENCE_TABLES
from dagster_project.rynn_vp.evidence_parts import (
    EVIDENCE_INPUTS,
    accepted_cases,
    images_untouched,
    sync_evidence,
)
from dagster_project.rynn_vp.fingerprint import (
    FINGERPRINTS_SCHEMA,
    GT_INPUT_FILES,
    gt_fingerprint,
)
from dagster_project.rynn_vp.ingest import (
    CASE_STAGES,
    CASES_SCHEMA,
    INTERVALS_SCHEMA,
    MEDIA_SCHEMA,
    list_case_dirs,
    probe_case,
    read_cases,
    refused_cases,
)
from dagster_project.rynn_vp.judge import judge_step
from dagster_project.rynn_vp.judge_client import ledger_tables
from dagster_project.rynn_vp.judgment_parts import (
    CHECKS_VERSION,
    CONTEXT_INPUTS,
    Incomplete,
    check_parts,
    complete,
    eval_context,
    judgment_store,
)
from dagster_project.rynn_vp.judgment_records import SourceFile
from dagster_project.rynn_vp.judgments import JUDGMENT_TABLES, judgment_table_stores, write_tables
from dagster_project.rynn_vp.packets import (
    PACKET_INPUTS,
    PACKETS_VERSION,
    packet_store,
    packets_present,
    prompts_for,
    prompts_version,
    sync_packets,
)
from dagster_project.rynn_vp.snapshot import SNAPSHOT_SCHEMA, acquire_snapshot, snapshot_root
from dagster_project.status import mark_written
from dagster_project.tables import (
    Reject,
    content_version,
    rejects_table,
    rows_to_table,
    table_files,
    table_path,
    write_table,
)

GROUP = "rynn_vp"



def _write_rejects(benchlake: BenchlakeSettings, stage: str, rejects: list[Reject]) -> int:
    write_table(rejects_table(rejects), _rejects_part(benchlake, stage))
    return len(rejects)


def _rejects_part(benchlake: BenchlakeSettings, stage: str) -> Path:
    return benchlake.table_path("rvp_rejects", stage)


def _snapshot_inputs(benchlake: BenchlakeSettings, *more: object) -> str:
    """The `inputs` of a step that reads the snapshot's files: the root, the media mode and the
    identity of every file (the listing `rynn_vp_source` observes)."""
    root, media_mode = snapshot_root(benchlake.settings().home)
    return step_inputs(str(root), media_mode, stat_listing(root), *more)


# The observed sources (defs/rynn_vp/sources.py), by key.
RYNN_VP_SOURCE, CANDIDATES_DIR, JUDGMENTS_DIR, JUDGE_JUDGMENTS_DIR, RVP_PROMPTS = (
    dg.AssetKey(n) for n in ("rynn_vp_source", "candidates_dir", "judgments_dir",
                             "judge_judgments_dir", "rvp_prompts"))


# --- ingestion ---------------------------------------------------------------------------------


@dg.asset(key=raw_key("rvp_snapshot"), group_name=GROUP, kinds={"parquet"}, deps=[RYNN_VP_SOURCE])
def rvp_snapshot(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The Rynn-VP snapshot to read: a local folder or `hf://datasets/<repo>@<rev>` (downloaded
    with huggingface_hub, limited to metadata when RYNN_VP_MEDIA=metadata). Records the source
    and the revision actually resolved."""
    started(context, benchlake)
    s = benchlake.settings()
    if s.uses_demo_rynn_vp():
        demo_generator().ensure_rynn_vp_demo(s)
    snap = acquire_snapshot(s.rynn_vp_source_or_demo(), s.rynn_vp_media, s.hub_cache_dir)
    context.log.info(f"snapshot at {snap.local_path} (revision {snap.resolved_revision})")
    table = rows_to_table([dataclasses.asdict(snap)], SNAPSHOT_SCHEMA)
    return write_and_describe(context, benchlake, "rvp_snapshot", table,
                              resolved_revision=snap.resolved_revision or "local folder")


@dg.asset(key=raw_key("rvp_checksums"), group_name=GROUP, kinds={"parquet"},
          deps=[rvp_snapshot])
def rvp_checksums(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every file of the snapshot against SHA256SUMS.txt (streamed, in parallel, with a progress
    bar): ok, mismatch, missing, not_downloaded (metadata mode) or unlisted. Nothing is read
    again while no file of the snapshot changed."""
    inputs = _snapshot_inputs(benchlake)
    if (done := described_again(context, benchlake, inputs, "rvp_checksums")):
        return done[0]
    started(context, benchlake)
    root, media_mode = snapshot_root(benchlake.settings().home)
    rows, rejects, shown = check_snapshot(root, media_mode == "metadata", context.log.error)
    n_rejects = _write_rejects(benchlake, "rvp_checksums", rejects)
    return write_and_describe(context, benchlake, "rvp_checksums",
                              rows_to_table(rows, CHECKSUMS_SCHEMA), inputs=inputs,
                              also=[_rejects_part(benchlake, "rvp_checksums")], **shown,
                              rejects=n_rejects)


@dg.asset(key=raw_key("rvp_media"), group_name=GROUP, kinds={"parquet"}, deps=[rvp_checksums])
def rvp_media(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """A PyAV probe of every gt.mp4 without a full decode (metadata duration, decodable range,
    fps, frame count, size, codec, first/last frame decode) and the size of initial.png.
    Nothing is read again while no file of the snapshot changed."""
    inputs = _snapshot_inputs(benchlake)
    if (done := described_again(context, benchlake, inputs, "rvp_media")):
        return done[0]
    started(context, benchlake)
    root, _ = snapshot_root(benchlake.settings().home)
    rows, rejects = [], []
    cache = benchlake.settings().file_cache
    with ThreadPoolExecutor(max_workers=2) as pool:
        for row, rej in pool.map(lambda d: probe_case(d, cache), list_case_dirs(root)[0]):
            if row is not None:
                rows.append(row)
            rejects.extend(rej)
    _write_rejects(benchlake, "rvp_media", rejects)
    return write_and_describe(context, benchlake, "rvp_media", rows_to_table(rows, MEDIA_SCHEMA),
                              inputs=inputs, also=[_rejects_part(benchlake, "rvp_media")],
                              rejects=len(rejects))


@dg.multi_asset(
    group_name=GROUP,
    specs=[
        dg.AssetSpec(raw_key("rvp_cases"), deps=[rvp_checksums, rvp_media], kinds={"parquet"},
                     description="Accepted cases: the case id parsed, the instruction, the "
                     "annotation task raw and normalized, the explicit plan if any."),
        dg.AssetSpec(raw_key("rvp_intervals"), deps=[rvp_checksums, rvp_media],
                     kinds={"parquet"},
                     description="Planning intervals of accepted cases in JSON order."),
    ],
)
def rvp_cases_and_intervals(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Parses every case folder. A case with any problem here, a failed checksum, or media that
    does not decode is left out whole; each problem is in rvp_rejects. Nothing is read again
    while no file of the snapshot and no refusal of the stages before changed."""
    # the cases refused by the stages before this one (a failed checksum, media that do not
    # decode): their reject parts, as those stages wrote them
    folder = _rejects_part(benchlake, "rvp_cases").parent
    refusals = {n: v for n, v in stat_listing(folder).items()
                if n.removesuffix(".parquet") in CASE_STAGES[:-1]}
    inputs = _snapshot_inputs(benchlake, refusals)
    if (done := described_again(context, benchlake, inputs, "rvp_cases", "rvp_intervals")):
        yield from done
        return
    started(context, benchlake)
    root, media_mode = snapshot_root(benchlake.settings().home)
    bad_elsewhere = refused_cases(benchlake.settings().home, CASE_STAGES[:-1])
    cases, intervals, rejects = read_cases(root, media_mode == "full", bad_elsewhere)
    if not cases:
        context.log.warning(f"no case of {root} was accepted; see rvp_rejects")
    _write_rejects(benchlake, "rvp_cases", rejects)
    yield write_and_describe(context, benchlake, "rvp_cases", rows_to_table(cases, CASES_SCHEMA),
                             inputs=inputs, also=[_rejects_part(benchlake, "rvp_cases")],
                             rejects=len(rejects),
                             excluded_by_other_stages=len(bad_elsewhere))
    yield write_and_describe(context, benchlake, "rvp_intervals",
                             rows_to_table(intervals, INTERVALS_SCHEMA), inputs=inputs)


# --- candidates and evidence -------------------------------------------------------------------


@dg.asset(key=raw_key("rvp_candidates"), group_name=GROUP, kinds={"parquet"},
          deps=[raw_key("rvp_cases"), CANDIDATES_DIR])
def rvp_candidates(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Candidates found under CANDIDATES_DIR: `<system>/<case_id>/candidate.mp4` (video) or
    `<system>/<case_id>/steps/<step_id>.(png|jpg)` (ordered images), with fingerprints,
    durations / step counts; every other file there is a reject with its reason. Nothing is
    read again while no file there and no accepted or refused case changed."""
    s = benchlake.settings()
    if s.uses_demo_candidates():
        demo_generator().ensure_candidates_demo(s)
    root = s.open_drop_folder("CANDIDATES_DIR")
    refused = refused_cases(s.home)
    inputs = step_inputs(str(root.resolve()), stat_listing(root),
                         content_version(s.home, "rvp_cases"), refused)
    if (done := described_again(context, benchlake, inputs, "rvp_candidates")):
        return done[0]
    started(context, benchlake)
    rows, rejects = scan_candidates(root, set(accepted_cases(s.home)), s.file_cache, refused)
    _write_rejects(benchlake, "rvp_candidates", rejects)
    return write_and_describe(context, benchlake,
        "rvp_candidates", rows_to_table(rows, CANDIDATES_SCHEMA),
                              inputs=inputs, also=[_rejects_part(benchlake, "rvp_candidates")],
                              systems=len({r["system"] for r in rows}), rejects=len(rejects))


@dg.multi_asset(
    group_name=GROUP,
    specs=[
        dg.AssetSpec(raw_key("rvp_evidence_frames"), kinds={"parquet"},
                     code_version=EVIDENCE_POLICY_VERSION,
                     deps=[raw_key("rvp_cases"), raw_key("rvp_media"), raw_key("rvp_checksums"),
                           raw_key("rvp_candidates"), dg.AssetKey("rvp_intervals")],
                     description="Every source frame a judge sees, with provenance: S0, GT "
                     "anchors, candidate panels or steps."),
        dg.AssetSpec(raw_key("rvp_storyboards"), kinds={"parquet"},
                     code_version=EVIDENCE_POLICY_VERSION, deps=[raw_key("rvp_candidates")],
                     description="Five 2x3 storyboards of the 30 panels per video candidate."),
        dg.AssetSpec(raw_key("rvp_evaluations"), kinds={"parquet"},
                     code_version=EVIDENCE_POLICY_VERSION, deps=[raw_key("rvp_candidates")],
                     description="One row per evaluation: clip boundaries, truncation, steps "
                     "shown, evidence gaps, extra evidence."),
    ],
)
def rvp_evidence(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The card's evidence policy for every evaluation, ≤ 50 source frames each,
    a part per case keyed by its inputs (`rynn_vp/evidence_parts.py`): a changed case decodes
    only its evaluations whose inputs changed, over two processes. Nothing is read while the
    raw tables it reads, the code and the images did not change since it wrote."""
    s = benchlake.settings()
    inputs = step_inputs(EVIDENCE_POLICY_VERSION,
                         {t: content_version(s.home, t) for t in EVIDENCE_INPUTS})
    if images_untouched(s.home) and (
            done := described_again(context, benchlake, inputs, *EVIDENCE_TABLES)):
        yield from done
        return
    started(context, benchlake)
    result = sync_evidence(s.home, context.log.info, ray_address=s.ray_address)
    for table in EVIDENCE_TABLES:
        yield describe_written(context, benchlake, table, inputs, result.work(table),
                               cases=result.cases)


REJECTING_STAGES = ("rvp_checksums", "rvp_media", "rvp_cases", "rvp_candidates",
                    "rvp_evaluations")


@dg.asset(key=raw_key("rvp_rejects"), group_name=GROUP, kinds={"parquet"},
          deps=[raw_key(t) for t in REJECTING_STAGES])
def rvp_rejects(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every input the Rynn-VP ingest refused, with the file and why. Each stage writes its own
    part as it refuses (`tables/raw/rvp_rejects/<stage>.parquet`, the evidence's per case);
    this asset comes after them all and counts them."""
    started(context, benchlake)
    home = benchlake.settings().home
    schema_part = table_path(home, "rvp_rejects", "_schema")
    if not schema_part.exists():  # the view reads every part: one there, even before a stage
        write_table(rejects_table([]), schema_part)
    files = table_files(home, "rvp_rejects")
    rows = sum(file_rows(files))
    mark_written(home, "rvp_rejects", context.run.run_id, rows)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(content_version(home, "rvp_rejects")),
        metadata={"dagster/row_count": rows, "parts": len(files) - 1,
                  "path": dg.MetadataValue.path(str(schema_part.parent))})


# --- judging -----------------------------------------------------------------------------------


@dg.asset(key=raw_key("rvp_gt_fingerprints"), group_name=GROUP, kinds={"parquet"},
          deps=[raw_key("rvp_checksums"), raw_key("rvp_cases"), RVP_PROMPTS])
def rvp_gt_fingerprints(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The GT compilation cache key of every accepted case: SHA-256 over the digests of its four
    files and the prompt version in effect (the Skill's prompts if the snapshot has them, else
    the project's templates)."""
    started(context, benchlake)
    prompts = prompts_for(benchlake.settings())
    digests: dict[str, dict[str, str]] = {}
    for r in benchlake.read("rvp_checksums").to_pylist():
        if r["case_id"] is not None:
            # metadata-only snapshots have no media bytes: the published digest stands in
            name = r["rel_path"].rsplit("/", 1)[-1]
            digests.setdefault(r["case_id"], {})[name] = r["actual_sha256"] or r["expected_sha256"]
    rows = []
    for case_id in sorted(benchlake.read("rvp_cases", ["case_id"]).column(0).to_pylist()):
        d = digests.get(case_id, {})
        if not all(d.get(n) for n in GT_INPUT_FILES):
            continue
        rows.append({"case_id": case_id, "fingerprint": gt_fingerprint(d, prompts.version),
                     "prompt_version": prompts.version, "prompt_source": prompts.source,
                     **{f"{n.replace('.', '_')}_sha256": d[n] for n in GT_INPUT_FILES}})
    return write_and_describe(context, benchlake, "rvp_gt_fingerprints",
                              rows_to_table(rows, FINGERPRINTS_SCHEMA),
                              prompt_version=prompts.version, prompt_source=prompts.source)


JUDGMENT_RECORD_TABLES = {"rvp_judgment_files": VERSIONS_SCHEMA, **JUDGMENT_TABLES}


@dg.multi_asset(
    group_name=GROUP,
    specs=[dg.AssetSpec(raw_key(name), kinds={"parquet"},
                        deps=[*(raw_key(t) for t in CONTEXT_INPUTS), JUDGMENTS_DIR,
                              JUDGE_JUDGMENTS_DIR],
                        # what is replayed from the checked parts follows their version
                        code_version=None if name == "rvp_judgment_files" else CHECKS_VERSION)
           for name in JUDGMENT_RECORD_TABLES],
)
def rvp_judgment_records(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Reads every version of every file in JUDGMENTS_DIR (and `$BENCHLAKE_HOME/judge/
    judgments/`, where `benchlake judge` writes) once (`judgment_parts`: a version checked in
    this context before is replayed from its part): judgment records (every attempt kept,
    stg_rvp_judgments marks the final), hallucinations, GT compilations (gt_compilations/), the
    stages each evaluation ran and every refused record (file, line, reason, raw text); a part
    per segment of files. Nothing is read while the inputs are the same."""
    s = benchlake.settings()
    if s.uses_demo_judgments():
        demo_generator().ensure_judgments_demo(s)
    roots = [s.open_drop_folder("JUDGMENTS_DIR"), s.judge_judgments_dir]
    # links leading out of the folder: refused, never read (`roots`)
    escaped = [{"source_file": e.rel, "reason": e.reason}
               for root, setting in zip(roots, ("JUDGMENTS_DIR", "the judge's folder"),
                                        strict=True) for e in escapes(root, setting)]
    copies: dict | None = {}  # new files the checks copy into the archive (`check_parts`)
    while True:
        versions = archive_versions(s.archive_dir / "judgments", roots, benchlake.table_path(
            "rvp_judgment_files"), s.home, s.file_cache, copies)
        files = SourceFile.current(versions, roots)
        # no current file: nothing is checked against the context
        inputs = step_inputs(CHECKS_VERSION, [str(r) for r in roots], versions, escaped,
                             {t: content_version(s.home, t) for t in CONTEXT_INPUTS}
                             if files else {})
        if (done := described_again(context, benchlake, inputs, *JUDGMENT_RECORD_TABLES)):
            yield from done
            return
        started(context, benchlake)
        ctx = eval_context(s.home)
        for name in JUDGMENT_TABLES:  # as an earlier version wrote it, whole
            benchlake.table_path(name).unlink(missing_ok=True)
        with suppress(Incomplete), check_parts(judgment_store(s.cache_dir), files, ctx,
                                               copies) as parts:  # replayed as checked
            result = write_tables(files, ctx, judgment_table_stores(s.home), s.cache_dir, parts,
                                  escaped, s.cache_dir / "judgment_replay")  # kept
            if not copies or complete(parts):
                break
        copies = None  # a file rewritten or removed since it was listed: listed again
    written = parts.written()
    context.log.info(f"{len(written)} file versions read and checked, "
                     f"{len(files) - len(written)} replayed from their parts")
    # the versions last: the sensor's cursor reads them as ingested
    yield write_and_describe(context, benchlake, "rvp_judgment_files",
                             rows_to_table(versions, VERSIONS_SCHEMA), inputs=inputs)
    for name in JUDGMENT_TABLES:
        extra = {"duplicates_ignored": result.duplicates} if name == "rvp_judgments" else {}
        work = ({"file_versions_checked": len(written), "segments_written": result.segments[0]}
                if name == "rvp_judgments" else {})
        yield describe_written(context, benchlake, name, inputs, work, **extra)


@dg.asset(key=raw_key("rvp_judge_packets"), group_name=GROUP, kinds={"parquet", "json"},
          deps=[*(raw_key(t) for t in PACKET_INPUTS), RVP_PROMPTS], code_version=PACKETS_VERSION)
def rvp_judge_packets(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One packet per (system, case, role) for the five candidate roles, and one GT compilation
    packet per case: JSON plus the evidence files it names, under `$BENCHLAKE_HOME/packets/`.
    Each evaluation's packets (and each case's GT packet) are built once per key of what they
    are made of (`packets.sync_packets`); nothing is read while the tables they are made of, the
    prompts and the packet files are as when they were written."""
    s = benchlake.settings()
    prompts = prompts_for(s)
    inputs = step_inputs(PACKETS_VERSION, {t: content_version(s.home, t) for t in PACKET_INPUTS},
                         prompts_version(prompts), sorted(prompts.files.items()),
                         str(s.packets_dir))
    if packets_present(s.home) and (
            done := described_again(context, benchlake, inputs, "rvp_judge_packets")):
        return done[0]
    started(context, benchlake)
    result = sync_packets(s.home, s.packets_dir, prompts, packet_store(s.cache_dir))
    context.log.info(f"judge packets: {len(result.built)} units built, "
                     f"{len(result.removed)} removed")
    return write_and_describe(context, benchlake, "rvp_judge_packets", result.table,
                              inputs=inputs, work={"units_built": len(result.built)},
                              packets_dir=str(s.packets_dir))


JUDGE_TABLES = ("rvp_judge_calls", "rvp_judge_rejects")  # the ledger, rejected answers


@dg.multi_asset(group_name=GROUP, specs=[dg.AssetSpec(
    raw_key(name), kinds={"parquet"},
    deps=[raw_key("rvp_judge_packets"), *(raw_key(t) for t in CONTEXT_INPUTS)])
    for name in JUDGE_TABLES])
def rvp_judge(context: dg.AssetExecutionContext, config: JudgeConfig,
              benchlake: BenchlakeSettings, judge: JudgeResource):
    """With `send` (rvp_judge_job): the packets judged through JUDGE_BASE_URL (`rynn_vp/
    judge.py`). Always: the ledger and rejects from the journals, when they changed."""
    s = benchlake.settings()
    calls = s.judge_dir / "calls"
    inputs = None if config.send else step_inputs(stat_listing(calls))
    if inputs and (again := described_again(context, benchlake, inputs, *JUDGE_TABLES)):
        yield from again
        return
    started(context, benchlake)
    done = (judge_step(s.home, s.judge_dir, judge.settings(), context.run.run_id, context.log)
            if config.send else {})
    for name, table in zip(JUDGE_TABLES, ledger_tables(calls), strict=True):
        yield write_and_describe(context, benchlake, name, table, inputs=inputs,
                                 **(done if name == "rvp_judge_calls" else {}))
