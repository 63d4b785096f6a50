"""Entry point for Dagster tools: everything under `defs/` is discovered and merged."""

from pathlib import Path

import dagster as dg

from dagster_project.interpreter import tune_gc

# The processes Dagster's tools start load this module (code server, daemon, the run workers of
# runs launched from the UI): the same collector as `benchlake`'s (`interpreter`).
tune_gc()
defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
