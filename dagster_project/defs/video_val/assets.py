"""videorl-video-val assets: parquets → questions (remapped video paths) → video probes → the
frame plan qwen-vl-utils 0.0.14 would compute → the planned frames (per data_source); and
RESPONSES_DIR → responses → scored responses.

Each asset `raw_<table>` writes `tables/raw/<table>.parquet`; the logic lives in
`dagster_project/video_val/`, the views (scores, breakdowns, policies) in `sql/models/video_val/`.
The source parquets are only read, never modified: the remapped paths are new columns.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import polars as pl

from dagster_project.defs.resources import (
    BenchlakeSettings,
    demo_generator,
    described_again,
    parts_result,
    raw_key,
    started,
    step_inputs,
    write_and_describe,
)
from dagster_project.dropfolder import (
    VERSIONS_SCHEMA,
    drop_folder_listing,
    escapes,
    listing_version,
    stat_listing,
)
from dagster_project.hub import parse_hub_uri
from dagster_project.status import file_identity, mark_written
from dagster_project.tables import content_version, read_table, rows_to_table, write_table
from dagster_project.video_val.frame_plan import FRAME_PLAN_SCHEMA, plan_video
from dagster_project.video_val.frames import FRAMES_VERSION, sync_frames
from dagster_project.video_val.policies import default_policy
from dagster_project.video_val.question_scores import QUESTION_SCORES_VERSION, question_score_parts
from dagster_project.video_val.read import (
    QUESTIONS_SCHEMA,
    VAL_REJECTS_SCHEMA,
    inside_roots,
    parse_prefix_map,
    read_val_parquet,
    remap_uri,
    video_roots,
)
from dagster_project.video_val.response_parts import (
    TOOL_QUESTION_COLUMNS,
    PartsResult,
    archive_and_parse,
    score_parts,
    verl_metric_parts,
)
from dagster_project.video_val.responses import PARSER_VERSION
from dagster_project.video_val.schema import SOURCES
from dagster_project.video_val.scoring import SCORING_VERSION
from dagster_project.video_val.source import SOURCE_SCHEMA, acquire_val_source
from dagster_project.video_val.verl_metrics import METRICS_VERSION
from dagster_project.video_val.videos import VIDEOS_SCHEMA, probe_row

GROUP = "video_val"



def _write_val_rejects(benchlake: BenchlakeSettings, stage: str, rejects: list[dict]) -> None:
    rows = sorted(rejects, key=lambda r: (r["source_file"] or "", r["row_index"] or -1,
                                          r["reason"]))
    write_table(rows_to_table(rows, VAL_REJECTS_SCHEMA),
                benchlake.table_path("vv_rejects", stage))


# --- what is read: observed sources (see defs/rynn_vp/assets.py) ------------------------------


@dg.observable_source_asset(group_name=GROUP, description=(
    "VIDEO_VAL_SOURCE: the folder of val parquets (or `hf://` revision) that is read; observed "
    "by the size and modification time of each parquet."))
def video_val_source(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    if s.uses_demo_video_val():
        demo_generator().ensure_video_val_demo(s)
    source = s.video_val_source_or_demo()
    listing = {} if parse_hub_uri(source) else stat_listing(Path(source), "*.parquet")
    version = listing_version({**listing, "\0source": source})
    return dg.ObserveResult(data_version=dg.DataVersion(version),
                            metadata={"source": source, "parquets": len(listing)})


@dg.observable_source_asset(group_name=GROUP, description=(
    "RESPONSES_DIR: the drop folder of model responses (benchlake records, verl validation "
    "dumps, lmms-eval sample logs); observed by the content hash of each file (the same listing "
    "`vv_responses_sensor` keeps)."))
def responses_dir(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    if s.uses_demo_responses():
        demo_generator().ensure_responses_demo(s)
    listing = drop_folder_listing(s.responses_root(), s.stat_cache("responses"))
    return dg.ObserveResult(data_version=dg.DataVersion(listing_version(listing)),
                            metadata={"folder": str(s.responses_root()), "files": len(listing)})


# --- questions, videos, frames ----------------------------------------------------------------


@dg.asset(key=raw_key("vv_source"), group_name=GROUP, kinds={"parquet"},
          deps=[video_val_source])
def vv_source(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Where the val parquets come from: a folder (any subset of the three files) or
    `hf://datasets/<repo>@<rev>` (parquets and docs only; the revision is pinned and recorded)."""
    started(context, benchlake)
    s = benchlake.settings()
    if s.uses_demo_video_val():
        demo_generator().ensure_video_val_demo(s)
    src = acquire_val_source(s.video_val_source_or_demo(), s.hub_cache_dir)
    if not src.files:
        raise dg.Failure(f"VIDEO_VAL_SOURCE {src.local_path}: none of "
                         f"{', '.join(SOURCES)} found")
    base = {k: getattr(src, k) for k in ("source", "local_path", "hub_repo_id",
                                         "requested_revision", "resolved_revision")}
    rows = [{**base, "file_name": name, "data_source": SOURCES[name], "file_path": path}
            for name, path in sorted(src.files.items())]
    for name in src.unknown_files:
        context.log.warning(f"{name}: not one of the published parquet names; ignored")
    return write_and_describe(context, benchlake, "vv_source", rows_to_table(rows, SOURCE_SCHEMA),
                              unknown_files=dg.MetadataValue.json(src.unknown_files))


@dg.multi_asset(group_name=GROUP, specs=[
    dg.AssetSpec(raw_key("vv_questions"), kinds={"parquet"}, deps=[vv_source],
                 description="One row per accepted val parquet row, flattened, with the video "
                 "path remapped."),
    dg.AssetSpec(raw_key("vv_rejects"), kinds={"parquet"}, deps=[vv_source],
                 description="Refused val parquet files and rows, and noted irregularities, "
                 "with the file, the row and why.")])
def vv_questions(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One row per accepted parquet row (`uid = <data_source>:<row_index>`): question text and
    option letters parsed from the user message, ground truth, extra_info flattened, video
    settings, source file and fingerprint, and the video path remapped per
    VIDEO_VAL_PREFIX_MAP (new columns; the parquets are never modified); every refused file or
    row, and every noted irregularity, in vv_rejects. Not read again while the parquets, the
    mapping, the roots and what each video path found are as they were."""
    s = benchlake.settings()
    prefix_map = parse_prefix_map(s.video_val_prefix_map_or_demo())
    roots = video_roots(prefix_map, s.video_val_roots)
    sources = benchlake.read("vv_source").to_pylist()
    inputs = step_inputs([(src["file_path"], file_identity(src["file_path"])) for src in sources],
                         prefix_map, [str(r) for r in roots])
    if _videos_as_found(benchlake, roots) and (
            done := described_again(context, benchlake, inputs, "vv_questions")):
        yield from done
        yield _val_rejects_result(context, benchlake)
        return
    started(context, benchlake)
    if not roots:
        context.log.warning("no video roots: set VIDEO_VAL_ROOTS or VIDEO_VAL_PREFIX_MAP; no "
                            "val video is opened until then")
    rows, rejects = [], []
    looked_at: dict[str, tuple[bool, bool]] = {}  # a video's (in the roots, exists), once
    for src in sources:
        result = read_val_parquet(Path(src["file_path"]), src["data_source"])
        rejects.extend(result.rejects)
        for row in result.rows:
            path, matched = remap_uri(row["video_uri"], prefix_map)
            if path is not None and path not in looked_at:
                # Only a path inside a configured root is ever looked at (stat'ed, probed).
                in_roots = inside_roots(path, roots)
                looked_at[path] = (in_roots, in_roots and Path(path).is_file())
            in_roots, exists = looked_at[path] if path is not None else (False, False)
            row.update(video_path=path, prefix_matched=matched, video_in_roots=in_roots,
                       video_exists=exists)
            rows.append(row)
    rows.sort(key=lambda r: (r["data_source"], r["row_index"]))
    _write_val_rejects(benchlake, "vv_questions", rejects)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["data_source"]] = counts.get(r["data_source"], 0) + 1
    yield write_and_describe(context, benchlake, "vv_questions",
                             rows_to_table(rows, QUESTIONS_SCHEMA), inputs=inputs,
                             also=[benchlake.table_path("vv_rejects", "vv_questions")],
                             rows_per_source=counts)
    yield _val_rejects_result(context, benchlake)


def _videos_as_found(benchlake: BenchlakeSettings, roots: list) -> bool:
    """Whether every video path of the last vv_questions is still inside the roots and
    exists exactly when it did (what its rows say of it)."""
    if not benchlake.table_path("vv_questions").exists():
        return False
    seen = benchlake.read("vv_questions", ["video_path", "video_in_roots", "video_exists"])
    for path, in_roots, exists in set(zip(*(seen[c].to_pylist() for c in seen.column_names),
                                          strict=True)):
        if path is None:
            continue
        now_in = inside_roots(path, roots)
        if now_in != in_roots or (now_in and Path(path).is_file()) != exists:
            return False
    return True


def _val_rejects_result(context: dg.AssetExecutionContext,
                        benchlake: BenchlakeSettings) -> dg.MaterializeResult:
    """vv_rejects as vv_questions left it (the other stages add their parts later)."""
    home = benchlake.settings().home
    actions = read_table(benchlake.table_path("vv_rejects", "vv_questions"), home,
                         ["action"])["action"].to_pylist()
    mark_written(home, "vv_rejects", context.run.run_id, len(actions))
    return dg.MaterializeResult(
        asset_key=raw_key("vv_rejects"),
        data_version=dg.DataVersion(content_version(home, "vv_rejects")),
        metadata={"dagster/row_count": len(actions),
                  "rejected": sum(a != "noted" for a in actions),
                  "noted": sum(a == "noted" for a in actions)})


@dg.asset(key=raw_key("vv_videos"), group_name=GROUP, kinds={"parquet"},
          deps=[raw_key("vv_questions")])
def vv_videos(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """One PyAV probe per distinct (remapped) video inside the video roots, the same probe as
    rvp_media; a missing or unreadable file is a row with `ok = false` and the reason. Paths
    outside the roots are never opened (`vv_unresolved_videos` lists them). Not done again
    while every video file and its count of questions is as it was."""
    counts: dict[str, int] = {}
    for q in benchlake.read("vv_questions", ["video_path", "video_in_roots"]).to_pylist():
        if q["video_in_roots"]:
            counts[q["video_path"]] = counts.get(q["video_path"], 0) + 1
    inputs = step_inputs([(p, n, file_identity(p)) for p, n in sorted(counts.items())])
    if (done := described_again(context, benchlake, inputs, "vv_videos")):
        return done[0]
    started(context, benchlake)
    with ThreadPoolExecutor(max_workers=2) as pool:
        cache = benchlake.settings().file_cache
        rows = list(pool.map(lambda p: probe_row(p, counts[p], cache), sorted(counts)))
    return write_and_describe(context, benchlake, "vv_videos", rows_to_table(rows, VIDEOS_SCHEMA),
                              inputs=inputs, failed=sum(not r["ok"] for r in rows))


class FramePlanConfig(dg.Config):
    patch_size: int = 14  # Qwen2.5-VL uses 14 (resize factor 28); Qwen3-VL uses 16 (factor 32)


@dg.asset(key=raw_key("vv_frame_plan"), group_name=GROUP, kinds={"parquet"},
          deps=[vv_videos, raw_key("vv_questions")])
def vv_frame_plan(context: dg.AssetExecutionContext, config: FramePlanConfig,
                  benchlake: BenchlakeSettings):
    """Exactly what qwen-vl-utils 0.0.14 computes for each video under its row's settings:
    nframes, the frame indices, sample_fps and the resized size. Total frames and fps come from
    the probe (demux frame count, average rate); a video that cannot be planned gets a reason."""
    home = benchlake.settings().home
    inputs = step_inputs(content_version(home, "vv_videos"), content_version(home, "vv_questions"),
                         config.patch_size)
    if (done := described_again(context, benchlake, inputs, "vv_frame_plan")):
        return done[0]
    started(context, benchlake)
    videos = {v["video_path"]: v for v in benchlake.read("vv_videos").to_pylist()}
    keys = sorted({(q["video_path"], q["fps"], q["max_frames"], q["min_pixels"], q["max_pixels"])
                   for q in benchlake.read("vv_questions").to_pylist() if q["video_in_roots"]},
                  key=lambda k: tuple("" if v is None else str(v) for v in k))
    rows = []
    for path, fps, max_frames, min_pixels, max_pixels in keys:
        v = videos.get(path, {})
        row = {"video_path": path, "fps": fps, "max_frames": max_frames,
               "min_pixels": min_pixels, "max_pixels": max_pixels,
               "patch_size": config.patch_size, "total_frames": v.get("frame_count"),
               "video_fps": v.get("fps"), "height": v.get("height"), "width": v.get("width")}
        if not v.get("ok"):
            row["error"] = f"video cannot be planned: {v.get('error') or 'not probed'}"
        else:
            plan = plan_video(total_frames=v["frame_count"], video_fps=v["fps"],
                              height=v["height"], width=v["width"], fps=fps,
                              max_frames=max_frames, min_pixels=min_pixels,
                              max_pixels=max_pixels, patch_size=config.patch_size)
            row.update(nframes=plan.nframes, frame_indices=list(plan.frame_indices) or None,
                       sample_fps=plan.sample_fps, resized_height=plan.resized_height,
                       resized_width=plan.resized_width,
                       max_pixels_used=plan.max_pixels_used, error=plan.error)
        rows.append(row)
    return write_and_describe(context, benchlake,
        "vv_frame_plan", rows_to_table(rows, FRAME_PLAN_SCHEMA), inputs=inputs,
                              unplannable=sum(r.get("error") is not None for r in rows))



@dg.asset(key=raw_key("vv_frames"), group_name=GROUP, kinds={"parquet"},
          deps=[vv_frame_plan, raw_key("vv_questions")], code_version=FRAMES_VERSION)
def vv_frames(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """The planned frames of every planned video, at the planned size: one part per planned
    video keyed by the video's content and its plan (`video_val/frames.py`), so an unchanged
    video is never decoded again; the videos to decode fanned out over two processes."""
    started(context, benchlake)
    s = benchlake.settings()
    result = sync_frames(s.home, s.file_cache, context.log.info, ray_address=s.ray_address)
    return parts_result(context, benchlake, "vv_frames", videos=result.videos,
                        parts_written=len(result.decoded), parts_removed=len(result.removed))


RESPONSE_TABLES = ("vv_response_files", "vv_responses", "vv_response_rejects")


def _parts_result(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings, name: str,
                  result: PartsResult) -> dg.MaterializeResult:
    return parts_result(context, benchlake, name, parts_written=len(result.written),
                        parts_removed=len(result.removed), rows_written=result.rows_written)


@dg.multi_asset(
    group_name=GROUP,
    specs=[dg.AssetSpec(raw_key(name), kinds={"parquet"},
                        deps=[raw_key("vv_questions"), responses_dir],
                        # the parsed parts are keyed by PARSER_VERSION; the file list by none
                        code_version=None if name == "vv_response_files" else PARSER_VERSION)
           for name in RESPONSE_TABLES],
)
def vv_responses(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every version of every file in RESPONSES_DIR, parsed once into its own part: the
    well-formed records (run_id, step, uid, sample_idx, response, file, version, line) and the
    malformed ones with their reasons. verl validation dumps are resolved to questions by
    position, lmms-eval sample logs by content (hence the dependency on vv_questions). Unknown
    uids, duplicates and conflicts are decided by the views over all parts (`vv_responses`,
    `vv_response_rejects`)."""
    started(context, benchlake)
    s = benchlake.settings()
    if s.uses_demo_responses():
        demo_generator().ensure_responses_demo(s)
    root = s.open_drop_folder("RESPONSES_DIR")
    versions, result = archive_and_parse(
        s.archive_dir / "responses", root, benchlake.table_path("vv_response_files"), s.home,
        s.file_cache, lambda: pl.from_arrow(benchlake.read("vv_questions",
                                                           TOOL_QUESTION_COLUMNS)))
    refused = escapes(root, "RESPONSES_DIR")  # never read (`roots`)
    for e in refused:
        context.log.warning(f"RESPONSES_DIR {e.rel}: refused: {e.reason}")
    context.log.info(f"{len(result.written)} file versions parsed, {result.kept} already "
                     f"parsed, {len(result.removed)} parts removed")
    # the versions after their parts: the sensor's cursor reads them as ingested
    yield write_and_describe(context, benchlake, "vv_response_files",
                             rows_to_table(versions, VERSIONS_SCHEMA),
                             links_leading_out=dg.MetadataValue.json(
                                 {e.rel: e.reason for e in refused}))
    for name in RESPONSE_TABLES[1:]:
        yield _parts_result(context, benchlake, name, result)


@dg.multi_asset(group_name=GROUP, specs=[
    dg.AssetSpec(raw_key(name), kinds={"parquet"},
                 deps=[raw_key("vv_responses"), raw_key("vv_questions")],
                 code_version=SCORING_VERSION)
    for name in ("vv_scored_responses", "vv_unknown_uids")])
def vv_scored_responses(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Every response scored once, part by part: the letter from the last balanced \\boxed{} in
    the last <answer> block, else lmms-eval 0.7.3's extract_mcq_answer, and the format flag under
    each format rule (`card`, `exact`); a response whose uid is no question is not scored but
    kept in vv_unknown_uids (one part per scored part). A part is scored again only when the
    questions it was scored against change. Policies (which rule, which weights) are data (the
    dbt seed `vv_scoring_policies`); the views expand these rows per policy."""
    started(context, benchlake)
    questions = pl.from_arrow(benchlake.read(
        "vv_questions", ["uid", "data_source", "option_letters", "ground_truth"]))
    result, unknown = score_parts(benchlake.settings().home, questions)
    context.log.info(f"{len(result.written)} parts scored ({result.rows_written} responses, "
                     f"{unknown.rows_written} of unknown uids), {result.kept} already scored")
    yield _parts_result(context, benchlake, "vv_scored_responses", result)
    yield _parts_result(context, benchlake, "vv_unknown_uids", unknown)


@dg.multi_asset(group_name=GROUP, specs=[
    dg.AssetSpec(raw_key(name), kinds={"parquet"}, deps=[raw_key("vv_scored_responses")],
                 code_version=QUESTION_SCORES_VERSION)
    for name in ("vv_question_scores", "vv_later_records")])
def vv_question_scores(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """Per checkpoint and question: the samples counted (first record of each key), the correct
    ones, each format rule's passes and the majority letter; and per checkpoint the records
    that are not first of their key (vv_later_records). One part per checkpoint, rewritten
    only when a scored part holding that checkpoint changed (`video_val/question_scores.py`).
    Every score view reads these rows, not the responses."""
    started(context, benchlake)
    scores, later = question_score_parts(benchlake.settings().home)
    context.log.info(f"{len(scores.written)} checkpoints counted ({scores.rows_written} "
                     f"question rows, {later.rows_written} later records), {scores.kept} "
                     "unchanged")
    yield _parts_result(context, benchlake, "vv_question_scores", scores)
    yield _parts_result(context, benchlake, "vv_later_records", later)


@dg.asset(key=raw_key("vv_verl_metrics"), group_name=GROUP, kinds={"parquet"},
          deps=[raw_key("vv_scored_responses"), dg.AssetKey("vv_scoring_policies")],
          code_version=METRICS_VERSION)
def vv_verl_metrics(context: dg.AssetExecutionContext, benchlake: BenchlakeSettings):
    """verl's validation metrics (as verl 0.9.1's process_validation_metrics computes them) of
    every verl dump in RESPONSES_DIR, once per dump: for the variables verl recorded (`acc`,
    `reward`, ...) under the names and wandb keys verl logs, and for benchlake's own
    `benchlake_correct` / `benchlake_composite` under the default scoring policy (the seed
    vv_scoring_policies)."""
    started(context, benchlake)
    result = verl_metric_parts(benchlake.settings().home, default_policy())
    context.log.info(f"{len(result.written)} dumps' metrics computed, {result.kept} kept")
    return _parts_result(context, benchlake, "vv_verl_metrics", result)
