"""How the results browser writes a number: one rounding per kind of column, whatever page it
is on, so 52.06, 58.259 and 56.0736 never sit side by side.

- `score`: a Rynn-VP score 0–100 (pi, vr, vq, final, a metric), its SE or interval end: `75.1`
- `diff`: a difference of two scores: `+16.0`
- `rate`: a share 0–1 (accuracy, format_rate, composite), its SE or interval end: `52.3 %`
- `rate_diff`: a difference of two shares, in percentage points: `+5.0 pp`
- `p`: a p-value, three significant digits: `0.0342`, `0.600`
- `seconds`: a time: `4.68 s`

Every formatter shows a missing value (None, NaN, ±inf) as the report's NULL mark. Templates
use them as Jinja filters (`{{ r.final_score | score }}`), registered by `FILTERS`; the cell
carries the kind as its class, so a test can hold every page to these patterns (`PATTERNS`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from dagster_project.reports.markdown import NULL_MARK


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _fixed(number: float, decimals: int, signed: bool = False) -> str:
    text = f"{number:.{decimals}f}"
    if float(text) == 0:
        text = text.lstrip("-")  # no "-0.0"
    return "+" + text if signed and not text.startswith("-") else text


def score(value: Any) -> str:
    """A 0–100 score (or its SE or interval end): one decimal."""
    number = _finite(value)
    return NULL_MARK if number is None else _fixed(number, 1)


def diff(value: Any) -> str:
    """A difference of two 0–100 scores: signed, one decimal."""
    number = _finite(value)
    return NULL_MARK if number is None else _fixed(number, 1, signed=True)


def rate(value: Any) -> str:
    """A share 0–1 (or its SE or interval end) as a percentage with one decimal."""
    number = _finite(value)
    return NULL_MARK if number is None else f"{_fixed(100 * number, 1)} %"


def rate_diff(value: Any) -> str:
    """A difference of two shares, in percentage points, signed, one decimal."""
    number = _finite(value)
    return NULL_MARK if number is None else f"{_fixed(100 * number, 1, signed=True)} pp"


def p_value(value: Any) -> str:
    """A p-value with three significant digits (0.0342, 0.600, 1.00)."""
    number = _finite(value)
    return NULL_MARK if number is None else f"{number:#.3g}"


def seconds(value: Any) -> str:
    """A time in seconds, two decimals (frame times are 1/25 s apart in the demo)."""
    number = _finite(value)
    return NULL_MARK if number is None else f"{_fixed(number, 2)} s"


FILTERS: dict[str, Callable[[Any], str]] = {
    "score": score, "diff": diff, "rate": rate, "rate_diff": rate_diff, "p": p_value,
    "seconds": seconds,
}

# What a cell of each kind may hold (a test checks every page of an export against these).
PATTERNS: dict[str, re.Pattern[str]] = {
    "score": re.compile(r"^-?\d+\.\d$"),
    "diff": re.compile(r"^[+-]\d+\.\d$"),
    "rate": re.compile(r"^-?\d+\.\d %$"),
    "rate_diff": re.compile(r"^[+-]\d+\.\d pp$"),
    "p": re.compile(r"^(\d\.\d\d|0\.0*[1-9]\d\d|\d\.\d\de-\d+)$"),
    "seconds": re.compile(r"^\d+\.\d\d s$"),
}

# The range each kind of interval is clipped to (macros/statistics.sql `interval`).
_BOUNDS = {"score": (0.0, 100.0), "diff": (-100.0, 100.0), "rate": (0.0, 1.0),
           "rate_diff": (-1.0, 1.0)}
WIDE_T = 2.5  # t(0.975, df) above this: df <= 5, i.e. six clusters or fewer


def interval_note(kind: str, mean: Any, se: Any, low: Any, high: Any) -> str | None:
    """Why a 95 % interval is not mean ± 2 SE, when it is not: its t quantile is large (few
    clusters: the interval is mean ± t(0.975, clusters - 1)·SE, and t is 12.7 at df 1), or an end
    is clipped to the score's range. None for an ordinary interval (or no interval)."""
    values = [_finite(v) for v in (mean, se, low, high)]
    if any(v is None for v in values) or kind not in _BOUNDS or not values[1]:
        return None
    m, e, lo, hi = values
    floor, ceiling = _BOUNDS[kind]
    eps = 1e-9 * (ceiling - floor)
    clipped = [name for name, hit in (("low", lo <= floor + eps), ("high", hi >= ceiling - eps))
               if hit]
    half = (m - lo) if "low" not in clipped else (hi - m) if "high" not in clipped else None
    notes = []
    if half is not None and half / e > WIDE_T:
        notes.append(f"t = {half / e:.1f} (few clusters)")
    if clipped:
        notes.append(f"clipped to {FILTERS[kind](floor)} – {FILTERS[kind](ceiling)}")
    return "; ".join(notes) or None
