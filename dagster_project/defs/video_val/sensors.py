"""videorl-video-val sensors: new response files."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, drop_folder_sensor_result


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           asset_selection=dg.AssetSelection.assets("responses_dir").downstream()
           - dg.AssetSelection.assets("responses_dir") - dg.AssetSelection.groups("reports"))
def vv_responses_sensor(context: dg.SensorEvaluationContext, benchlake: BenchlakeSettings):
    """Watches RESPONSES_DIR: records each look as an observation of `responses_dir` and, on new
    content (the cursor maps each path to its content hash), launches everything downstream of
    it but the exports: the response assets read the whole folder, the views are rebuilt and
    tested."""
    s = benchlake.settings()
    return drop_folder_sensor_result(dg.AssetKey("responses_dir"), s.responses_root(),
                                     context.cursor, "RESPONSES_DIR", s.home,
                                     "vv_response_files", s.stat_cache("responses"))
