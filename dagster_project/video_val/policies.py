"""The val suite's scoring policies as Python reads them: the rows of the dbt seed
`vv_scoring_policies` (`sql/seeds/`), the same rows the views expand every score under, so a
policy is written once. No Dagster import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagster_project.warehouse.seeds import read_seed


@dataclass(frozen=True)
class DefaultPolicy:
    """What benchlake's own verl metrics are scored under (vv_scoring_policies' default row).
    Its repr is part of the key a verl metrics part is kept by: rename nothing lightly."""

    format_rule: str  # a rule of vv_format_rules (`card`, `exact`): the scored column format_<rule>
    accuracy_weight: float
    format_weight: float


def default_policy_row() -> dict[str, Any]:
    """The row marked `is_default` in the seed (exactly one, as a dbt test requires): policy,
    format_rule, accuracy_weight, format_weight, is_default, description."""
    defaults = [p for p in read_seed("vv_scoring_policies") if p["is_default"]]
    if len(defaults) != 1:
        raise ValueError(f"vv_scoring_policies has {len(defaults)} default policies, not one")
    return defaults[0]


def default_policy() -> DefaultPolicy:
    """The default policy's format rule and composite weights."""
    p = default_policy_row()
    return DefaultPolicy(p["format_rule"], p["accuracy_weight"], p["format_weight"])
