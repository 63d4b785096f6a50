"""verl's validation metrics, as verl 0.9.1 computes them, from the rows of a verl dump.

`validation_metrics` is `process_validation_metrics` (verl/trainer/ppo/metric_utils.py) value for
value: per data source, per prompt, per numeric variable `mean@N`, `std@N` (ddof 0) and, for
n = 2, 4, ... < N and N, `best@n/mean|std` and `worst@n/mean|std` from `bootstrap_metric` (1,000
draws of n with replacement after `np.random.seed(42)`), `maj@n/mean|std` (the value of the first
sample of the most common `pred`, the first to reach the count on a tie) when every sample has a
`pred`; then each metric averaged over the prompts that have it. String variables are skipped,
None values left out. Tests hold it against verl's own functions.

verl re-seeds before every bootstrap, so the draws depend only on (N, n): they are drawn once
and applied to every prompt at once (numpy over prompts × draws × n), which is what makes a
validation pass of 45,000 rows take a second instead of minutes.

`dump_metrics` applies it to one dump twice: to the variables verl recorded (the reward's extra
keys: `reward`, `acc`, `pred`, ...), named as verl names them (`acc/mean@4`) with the wandb key
verl logs them under (`val-core/<data_source>/acc/mean@4`); and to benchlake's own scoring of the
same outputs under the default policy, `benchlake_correct` and `benchlake_composite`, with
benchlake's extracted letter as the vote.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from dagster_project.tables import raw_schema

N_BOOTSTRAP = 1000
SEED = 42
# Bump when the computation changes: every dump's metrics are computed again.
METRICS_VERSION = "1"
# The most booleans one vectorised majority vote holds at once (prompts × draws × n × n).
_MAJ_CELLS = 32_000_000


@functools.cache
def bootstrap_indices(n_data: int, subset: int) -> np.ndarray:
    """verl's draws: `np.random.seed(42); np.random.choice(n_data, (1000, subset))`."""
    indices = np.random.RandomState(SEED).choice(n_data, size=(N_BOOTSTRAP, subset), replace=True)
    indices.setflags(write=False)
    return indices


def sample_sizes(n_resps: int) -> list[int]:
    """verl's `gen_ns`: 2, 4, 8, ... below n_resps, then n_resps."""
    if n_resps <= 1:
        return []
    ns, n = [], 2
    while n < n_resps:
        ns.append(n)
        n *= 2
    return [*ns, n_resps]


def _mean_std(draws: np.ndarray) -> tuple[list[float], list[float]]:
    """Per row of (prompts × draws): np.mean(row), np.std(row), as verl takes them of each
    prompt's 1,000 draws. Reduced along the contiguous last axis, numpy sums each row in the
    same (pairwise) order as verl's 1-D calls: the oracle tests hold it to equality."""
    draws = np.ascontiguousarray(draws)
    return draws.mean(axis=-1).tolist(), draws.std(axis=-1).tolist()


def _winners(votes: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """For every prompt (a row of vote codes) and draw, the position in the draw whose value
    calc_maj_val returns: the first position holding a most common vote is that vote's first
    sample, and of tied votes the one seen first (dict order in calc_maj_val). Computed once per
    distinct pattern of votes (prompts share few)."""
    patterns, inverse = np.unique(votes, axis=0, return_inverse=True)
    m = indices.shape[1]
    out = np.empty((patterns.shape[0], indices.shape[0]), dtype=np.int64)
    step = max(1, _MAJ_CELLS // (indices.shape[0] * m * m))
    for lo in range(0, patterns.shape[0], step):
        c = patterns[lo:lo + step][:, indices]  # patterns × draws × m
        counts = (c[..., :, None] == c[..., None, :]).sum(-1)
        out[lo:lo + step] = np.argmax(counts == counts.max(-1, keepdims=True), axis=-1)
    return out[inverse.reshape(-1)]


def _majority(values: np.ndarray, winners: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """calc_maj_val over every draw of every prompt: (prompts × draws) values."""
    drawn = indices[np.arange(indices.shape[0])[None, :], winners]  # the sample each draw picks
    return values[np.arange(values.shape[0])[:, None], drawn]


def _prompt_metrics(vals: list[list[Any]], preds: list[list[Any] | None],
                    winners_cache: dict[tuple[bytes, int], np.ndarray]
                    ) -> list[dict[str, float]]:
    """verl's per-prompt metric dict of one variable, for prompts with the same sample count.
    `winners_cache`: the majority positions of these votes, shared by the variables."""
    n_resps = len(vals[0])
    values = np.array(vals, dtype=np.float64)
    # row by row along the contiguous axis: the same sums as verl's np.mean(list) per prompt
    metrics: list[dict[str, float]] = [{f"mean@{n_resps}": m}
                                       for m in values.mean(axis=1).tolist()]
    if n_resps == 1:
        return metrics
    for metric, sd in zip(metrics, values.std(axis=1).tolist(), strict=True):
        metric[f"std@{n_resps}"] = sd
    voting = [i for i, p in enumerate(preds) if p is not None]
    codes = np.zeros((len(voting), n_resps), dtype=np.int64)
    for row, i in enumerate(voting):
        seen: dict[Any, int] = {}
        codes[row] = [seen.setdefault(p, len(seen)) for p in preds[i]]  # type: ignore[union-attr]
    for n in sample_sizes(n_resps):
        indices = bootstrap_indices(n_resps, n)
        drawn = values[:, indices]
        best_mean, best_std = _mean_std(drawn.max(axis=-1))
        worst_mean, worst_std = _mean_std(drawn.min(axis=-1))
        for i, metric in enumerate(metrics):
            metric[f"best@{n}/mean"], metric[f"best@{n}/std"] = best_mean[i], best_std[i]
            metric[f"worst@{n}/mean"], metric[f"worst@{n}/std"] = worst_mean[i], worst_std[i]
        if voting:
            key = (codes.tobytes(), n)
            if key not in winners_cache:
                winners_cache[key] = _winners(codes, indices)
            winners = winners_cache[key]
            maj_mean, maj_std = _mean_std(_majority(values[voting], winners, indices))
            for row, i in enumerate(voting):
                metrics[i][f"maj@{n}/mean"], metrics[i][f"maj@{n}/std"] = maj_mean[row], \
                    maj_std[row]
    return metrics


def validation_metrics(data_sources: Sequence[str], uids: Sequence[str],
                       infos: dict[str, Sequence[Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """data_source → variable → metric → value, as verl's `process_validation_metrics`."""
    grouped: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for i, source in enumerate(data_sources):
        var2vals = grouped.setdefault(source, {}).setdefault(uids[i], {})
        for var, values in infos.items():
            var2vals.setdefault(var, []).append(values[i])
    result: dict[str, dict[str, dict[str, float]]] = {}
    for source, uid2vars in grouped.items():
        # per variable, the prompts in order, each prompt's metric dict once computed
        per_var: dict[str, list[dict[str, float] | None]] = {}
        pending: dict[tuple[str, int], list[tuple[int, list[Any], list[Any] | None]]] = {}
        for var2vals in uid2vars.values():
            pred_vals = var2vals.get("pred")
            for var, raw in var2vals.items():
                vals = [v for v in raw if v is not None]
                if not vals or isinstance(vals[0], str):
                    continue
                has_pred = (pred_vals is not None and len(pred_vals) == len(vals)
                            and all(p is not None for p in pred_vals))
                slots = per_var.setdefault(var, [])
                pending.setdefault((var, len(vals)), []).append(
                    (len(slots), vals, pred_vals if has_pred else None))
                slots.append(None)
        winners_cache: dict[tuple[bytes, int], np.ndarray] = {}
        for (var, _), prompts in pending.items():
            computed = _prompt_metrics([p[1] for p in prompts], [p[2] for p in prompts],
                                       winners_cache)
            for (slot, _, _), metric in zip(prompts, computed, strict=True):
                per_var[var][slot] = metric
        out = result.setdefault(source, {})
        for var, slots in per_var.items():
            by_metric: dict[str, list[float]] = {}
            for metric in slots:
                assert metric is not None
                for name, value in metric.items():
                    by_metric.setdefault(name, []).append(value)
            out[var] = {name: float(np.mean(values)) for name, values in by_metric.items()}
    return result


def wandb_keys(source: str, var2metric: dict[str, dict[str, float]]) -> dict[tuple[str, str], str]:
    """(variable, metric) → the key verl logs it under (`_val_metrics_update`): `val-core/` for
    the core variable's (`acc` if recorded, else `reward`) mean, maj and best at the largest n,
    `val-aux/` for everything else."""
    core = "acc" if "acc" in var2metric else "reward"
    keys = {}
    for var, metrics in var2metric.items():
        n_max = max(int(name.split("@")[-1].split("/")[0]) for name in metrics)
        for name in metrics:
            section = ("val-core" if var == core and name.startswith(("mean", "maj", "best"))
                       and f"@{n_max}" in name else "val-aux")
            keys[(var, name)] = f"{section}/{source}/{var}/{name}"
    return keys


def dump_metrics(rows: dict[str, list[Any]], weights: tuple[float, float]) -> list[dict[str, Any]]:
    """The metrics rows of one dump (columns data_source, uid, tool_extras, extracted, correct,
    format_ok, each a list in the dump's line order); `weights`: the default policy's accuracy
    and format weights."""
    extras = [json.loads(e) if e else {} for e in rows["tool_extras"]]
    names: dict[str, None] = {}
    for e in extras:
        names.update(dict.fromkeys(e))
    recorded = {name: [e.get(name) for e in extras] for name in names}
    w_acc, w_fmt = weights
    own = {
        "benchlake_correct": [float(c) for c in rows["correct"]],
        "benchlake_composite": [w_acc * float(c) + w_fmt * float(f)
                                for c, f in zip(rows["correct"], rows["format_ok"], strict=True)],
        "pred": list(rows["extracted"]),
    }
    out = []
    for infos, logged in ((recorded, True), (own, False)):
        result = validation_metrics(rows["data_source"], rows["uid"], infos)
        for source, var2metric in result.items():
            keys = wandb_keys(source, var2metric) if logged else {}
            for var, metrics in var2metric.items():
                for name, value in metrics.items():
                    out.append({"data_source": source, "metric": f"{var}/{name}",
                                "value": value, "wandb_key": keys.get((var, name))})
    return out


# raw_vv_verl_metrics: one part per verl dump version
VERL_METRICS_SCHEMA = raw_schema("vv_verl_metrics")
