"""Rynn-VP sensors: new judgment files."""

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
