"""Partition definitions shared by assets, sensors and the runner.

Rynn-VP evidence is partitioned by case (dynamic: the keys are the accepted `case_id`s, synced
from `rvp_cases` by a sensor or by the runner); the val frames by data_source (a fixed set).
"""

from __future__ import annotations

import dagster as dg
import pyarrow.parquet as pq

from dagster_project.settings import Settings
from dagster_project.tables import table_path
from dagster_project.video_val.schema import SOURCES

RVP_CASE_PARTITIONS = dg.DynamicPartitionsDefinition(name="rvp_case")
VV_SOURCE_PARTITIONS = dg.StaticPartitionsDefinition(sorted(SOURCES.values()))


def rvp_case_keys(settings: Settings) -> list[str]:
    """The accepted case ids, i.e. the partition keys `rvp_case` should hold."""
    path = table_path(settings.home, "rvp_cases")
    if not path.exists():
        return []
    return sorted(pq.read_table(path, columns=["case_id"]).column("case_id").to_pylist())


def sync_dynamic_partitions(
    instance: dg.DagsterInstance, settings: Settings
) -> tuple[list[str], list[str]]:
    """Make the instance's `rvp_case` keys equal to the accepted cases; returns (added, removed)."""
    wanted = rvp_case_keys(settings)
    have = instance.get_dynamic_partitions(RVP_CASE_PARTITIONS.name)
    added = [k for k in wanted if k not in set(have)]
    removed = [k for k in have if k not in set(wanted)]
    if added:
        instance.add_dynamic_partitions(RVP_CASE_PARTITIONS.name, added)
    for key in removed:
        instance.delete_dynamic_partition(RVP_CASE_PARTITIONS.name, key)
    return added, removed
