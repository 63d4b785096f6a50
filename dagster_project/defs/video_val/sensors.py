"""videorl-video-val sensors: new response files."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, drop_folder_sensor_result, raw_key
from dagster_project.defs.video_val.assets import RESPONSE_TABLES

RESPONSE_ASSETS = [raw_key(name) for name in (*RESPONSE_TABLES, "vv_scored_responses")]


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets(*RESPONSE_ASSETS).downstream()
           - dg.AssetSelection.groups("reports"))
def vv_responses_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches RESPONSES_DIR (cursor: path → content hash) and launches the response assets on
    new content; they read the whole folder,
    and the views downstream of them are rebuilt and tested."""
    root = benchlake.settings().responses_root()
    return drop_folder_sensor_result(root, context.cursor, "RESPONSES_DIR",
                                     benchlake.settings().home, "vv_response_files",
                                     benchlake.settings().stat_cache("responses"))
