"""The rule tables (dbt seeds under `sql/seeds/`) as Python reads them: every seed declares a type
for each of its columns (dbt loads it with them, `read_seed` converts with them), and the values
come back typed."""

from __future__ import annotations

import csv

import pytest
import yaml

from dagster_project.warehouse import seeds
from dagster_project.warehouse.seeds import SEEDS_DIR, column_types, read_seed

SEEDS = sorted(p.stem for p in SEEDS_DIR.glob("*.csv"))


def test_the_rule_tables_are_seeds() -> None:
    assert {"rvp_reporting_profiles", "rvp_metric_weights", "vv_scoring_policies",
            "stat_t_quantiles", "rvp_metrics", "vv_format_rules"} <= set(SEEDS)


@pytest.mark.parametrize("name", SEEDS)
def test_every_seed_is_described_and_typed(name: str) -> None:
    """A YAML beside each CSV: the seed and each column described, each column's type fixed."""
    spec = yaml.safe_load((SEEDS_DIR / f"{name}.yml").read_text(encoding="utf-8"))
    [seed] = [s for s in spec["seeds"] if s["name"] == name]
    with (SEEDS_DIR / f"{name}.csv").open(encoding="utf-8", newline="") as fh:
        header = next(csv.reader(fh))
    assert seed["description"].strip()
    assert list(column_types(name)) == header
    assert [c["name"] for c in seed["columns"]] == header
    assert all(c["description"].strip() for c in seed["columns"])
    assert seed["config"]["meta"]["dagster"]["group"] in ("rynn_vp", "video_val", "warehouse")
    assert read_seed(name)  # every value converts to its declared type


def test_values_have_their_declared_types() -> None:
    [default] = [p for p in read_seed("vv_scoring_policies") if p["is_default"] is True]
    assert default["policy"] == "card"
    assert (default["accuracy_weight"], default["format_weight"]) == (0.8, 0.2)
    weights = read_seed("rvp_metric_weights")
    assert all(type(w["weight"]) is float for w in weights)
    assert [type(q["df"]) for q in read_seed("stat_t_quantiles")] == [int] * 1000


def test_read_seed_returns_fresh_rows() -> None:
    rows = read_seed("vv_scoring_policies")
    rows[0]["policy"] = "changed"
    rows.append({})
    assert read_seed("vv_scoring_policies")[0]["policy"] == "card"
    assert len(read_seed("vv_scoring_policies")) == len(rows) - 1


def test_booleans_are_only_true_or_false() -> None:
    assert (seeds._bool("true"), seeds._bool("False")) == (True, False)
    with pytest.raises(ValueError, match="not a boolean"):
        seeds._bool("1")
