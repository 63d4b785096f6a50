"""The rule tables of the dbt project (`sql/seeds/<name>.csv`), read by Python from the same files
dbt loads, so each rule is written once: the metric list, the reporting profiles and their
weights, the scoring policies and format rules, the t quantiles.

Each seed declares its column types in `sql/seeds/<name>.yml` (`config.column_types`): dbt loads
the CSV with them, and `read_seed` converts the values the same way, so Python and the views see
the same numbers. No Dagster import: the pure modules that need a rule read it from here.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from functools import cache
from typing import Any

import yaml

from dagster_project.settings import SQL_DIR

SEEDS_DIR = SQL_DIR / "seeds"


def _bool(text: str) -> bool:
    # Only the spellings the CSVs use: anything else is an error, not a guess.
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return lowered == "true"


# The SQL types the seeds declare, as Python converters (DuckDB names and their aliases).
_CONVERTERS: dict[str, Callable[[str], Any]] = {
    **dict.fromkeys(("varchar", "text", "string"), str),
    **dict.fromkeys(("double", "float", "float8", "real", "float4"), float),
    **dict.fromkeys(("integer", "int", "int4", "bigint", "int8", "smallint", "tinyint"), int),
    **dict.fromkeys(("boolean", "bool"), _bool),
}


@cache
def column_types(name: str) -> dict[str, str]:
    """{column: SQL type} as `sql/seeds/<name>.yml` declares them for dbt."""
    spec = yaml.safe_load((SEEDS_DIR / f"{name}.yml").read_text(encoding="utf-8"))
    [seed] = [s for s in spec.get("seeds", []) if s.get("name") == name]
    return {column: str(sql_type).lower()
            for column, sql_type in seed["config"]["column_types"].items()}


@cache
def _rows(name: str) -> tuple[tuple[tuple[str, Any], ...], ...]:
    types = column_types(name)
    with (SEEDS_DIR / f"{name}.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        undeclared = [c for c in reader.fieldnames or () if c not in types]
        if undeclared:
            raise ValueError(f"seed {name}: no column type declared for {undeclared}")
        unknown = {c: t for c, t in types.items() if t not in _CONVERTERS}
        if unknown:
            raise ValueError(f"seed {name}: types read_seed does not convert: {unknown}")
        converters = {c: _CONVERTERS[t] for c, t in types.items()}
        # An empty field is NULL, as dbt loads it.
        return tuple(tuple((c, None if v == "" else converters[c](v)) for c, v in row.items())
                     for row in reader)


def read_seed(name: str) -> list[dict[str, Any]]:
    """The rows of seed `name`, in file order, each value of its declared type (str, float, int
    or bool; None for an empty field). Parsed once per process; each call returns fresh dicts."""
    return [dict(row) for row in _rows(name)]
