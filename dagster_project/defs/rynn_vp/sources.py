"""The Rynn-VP inputs as observed sources: each observation gives the source a data version (its
files' identities), so a changed input makes every asset downstream stale in the UI, with the
source named as the cause. `benchlake materialize` observes them first; the drop-folder sensors
observe their folders on every tick."""

from pathlib import Path

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, demo_generator
from dagster_project.dropfolder import drop_folder_listing, listing_version, stat_listing
from dagster_project.hub import parse_hub_uri
from dagster_project.rynn_vp.packets import prompts_for, prompts_version

GROUP = "rynn_vp"



@dg.observable_source_asset(group_name=GROUP, description=(
    "RYNN_VP_SOURCE: the Rynn-VP snapshot folder (or `hf://` revision) that is read; "
    "observed by the size and modification time of each of its files."))
def rynn_vp_source(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    if s.uses_demo_rynn_vp():
        demo_generator().ensure_rynn_vp_demo(s)
    source = s.rynn_vp_source_or_demo()
    listing = {} if parse_hub_uri(source) else stat_listing(Path(source))
    version = listing_version({**listing, "\0source": source, "\0media": s.rynn_vp_media})
    return dg.ObserveResult(data_version=dg.DataVersion(version),
                            metadata={"source": source, "files": len(listing)})


@dg.observable_source_asset(group_name=GROUP, description=(
    "CANDIDATES_DIR: the systems' candidate videos and step images; observed by the size and "
    "modification time of each file."))
def candidates_dir(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    if s.uses_demo_candidates():
        demo_generator().ensure_candidates_demo(s)
    root = s.candidates_root()
    listing = stat_listing(root)
    return dg.ObserveResult(data_version=dg.DataVersion(listing_version(listing)),
                            metadata={"folder": str(root), "files": len(listing)})


@dg.observable_source_asset(group_name=GROUP, description=(
    "JUDGMENTS_DIR: the judge harness's drop folder of judgment records; observed by the "
    "content hash of each file (the same listing `rvp_judgments_sensor` keeps)."))
def judgments_dir(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    if s.uses_demo_judgments():
        demo_generator().ensure_judgments_demo(s)
    listing = drop_folder_listing(s.judgments_root(), s.stat_cache("judgments"))
    return dg.ObserveResult(data_version=dg.DataVersion(listing_version(listing)),
                            metadata={"folder": str(s.judgments_root()), "files": len(listing)})


@dg.observable_source_asset(group_name=GROUP, description=(
    "$BENCHLAKE_HOME/judge/judgments/: the judgment records and GT compilations `benchlake "
    "judge` writes, read by the judgments ingest beside JUDGMENTS_DIR; observed by the content "
    "hash of each file (the same listing `rvp_judge_judgments_sensor` keeps)."))
def judge_judgments_dir(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    s = benchlake.settings()
    listing = drop_folder_listing(s.judge_judgments_dir, s.file_cache)
    return dg.ObserveResult(data_version=dg.DataVersion(listing_version(listing)),
                            metadata={"folder": str(s.judge_judgments_dir),
                                      "files": len(listing)})


@dg.observable_source_asset(group_name=GROUP, description=(
    "The judge role prompts in effect: the folder JUDGE_PROMPTS names, else the Skill's frozen "
    "prompts when the snapshot carries them, else the project's templates (assets/prompts/); "
    "observed by version and text. The GT cache keys and the judge packets are made from them."))
def rvp_prompts(benchlake: BenchlakeSettings) -> dg.ObserveResult:
    prompts = prompts_for(benchlake.settings())
    return dg.ObserveResult(data_version=dg.DataVersion(prompts_version(prompts)),
                            metadata={"version": prompts.version, "source": prompts.source})
