"""Rynn-VP sensors: new judgment files."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, drop_folder_sensor_result, raw_key
from dagster_project.defs.rynn_vp.assets import JUDGMENT_RECORD_TABLES

JUDGMENT_ASSETS = [raw_key(name) for name in (*JUDGMENT_RECORD_TABLES, "rvp_judge_packets")]


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets(*JUDGMENT_ASSETS).downstream()
           - dg.AssetSelection.groups("reports"))
def rvp_judgments_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches JUDGMENTS_DIR. The cursor maps each path to its content hash: a new or changed
    file (a new version) launches the judgment assets, which read the whole folder, and the
    views downstream of them."""
    root = benchlake.settings().judgments_root()
    return drop_folder_sensor_result(root, context.cursor, "JUDGMENTS_DIR",
                                     benchlake.settings().home, "rvp_judgment_files",
                                     benchlake.settings().stat_cache("judgments"))
