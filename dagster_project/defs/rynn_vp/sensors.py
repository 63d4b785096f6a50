"""Rynn-VP sensors: new judgment files (JUDGMENTS_DIR, and the records `benchlake judge` writes)."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, drop_folder_sensor_result


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets("judgments_dir").downstream()
           - dg.AssetSelection.assets("judgments_dir") - dg.AssetSelection.groups("reports"))
def rvp_judgments_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches JUDGMENTS_DIR: records each look as an observation of `judgments_dir` and, on new
    content (a new file version; the cursor maps each path to its content hash), launches
    everything downstream of it but the exports: the judgment assets read the whole folder, the
    views are rebuilt and tested."""
    s = benchlake.settings()
    return drop_folder_sensor_result(dg.AssetKey("judgments_dir"), s.judgments_root(),
                                     context.cursor, "JUDGMENTS_DIR", s.home,
                                     "rvp_judgment_files", s.stat_cache("judgments"))


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets("judge_judgments_dir").downstream()
           - dg.AssetSelection.assets("judge_judgments_dir")
           - dg.AssetSelection.groups("reports"))
def rvp_judge_judgments_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches `$BENCHLAKE_HOME/judge/judgments/` as `rvp_judgments_sensor` watches
    JUDGMENTS_DIR: a judge run launched from the UI (rvp_judge_job) is ingested when it is done
    (`benchlake judge` ingests its records itself)."""
    s = benchlake.settings()
    return drop_folder_sensor_result(dg.AssetKey("judge_judgments_dir"), s.judge_judgments_dir,
                                     context.cursor, "the judge's judgments folder", s.home,
                                     "rvp_judgment_files", s.file_cache)
