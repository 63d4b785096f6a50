"""Rynn-VP sensors: case partitions kept equal to the accepted cases; new judgment files."""

import dagster as dg

from dagster_project.defs.resources import BenchlakeSettings, drop_folder_sensor_result, raw_key
from dagster_project.defs.rynn_vp.assets import JUDGMENT_RECORD_TABLES
from dagster_project.partitions import RVP_CASE_PARTITIONS, rvp_case_keys


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def rvp_case_partitions_sensor(context: dg.SensorEvaluationContext,
                               benchlake: BenchlakeSettings):
    """Keeps the `rvp_case` partitions equal to the accepted cases of `raw_rvp_cases`."""
    wanted = rvp_case_keys(benchlake.settings())
    have = set(context.instance.get_dynamic_partitions(RVP_CASE_PARTITIONS.name))
    add = [k for k in wanted if k not in have]
    remove = sorted(have - set(wanted))
    requests = []
    if add:
        requests.append(RVP_CASE_PARTITIONS.build_add_request(add))
    if remove:
        requests.append(RVP_CASE_PARTITIONS.build_delete_request(remove))
    if not requests:
        return dg.SkipReason(f"{len(wanted)} case partitions already in sync")
    return dg.SensorResult(dynamic_partitions_requests=requests)


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
