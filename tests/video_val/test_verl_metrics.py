"""verl's validation metrics: benchlake's `validation_metrics` against verl 0.9.1's own
`process_validation_metrics` (read from the wheel, torch & co. stubbed), value for value, on
generated validation passes with n = 1, 4, 8; and the wandb keys verl logs them under."""

from __future__ import annotations

import json
import random
import types
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from benchlake_demo.vv_responses import VERL_N, VERL_ORDER, VERL_RUN, VERL_STEPS
from dagster_project.video_val.schema import SOURCES
from dagster_project.video_val.verl_dumps import BASE_KEYS
from dagster_project.video_val.verl_metrics import sample_sizes, validation_metrics, wandb_keys
from dagster_project.warehouse.catalog import connect
from tests.oracles.wheels import extract, load, wheel


class _Stub:
    """Any name of a stubbed module: a type (annotations such as `torch.Tensor | None` are
    evaluated at import) whose call returns an identity decorator (`@deprecated(...)`)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return lambda f: f


class _Anything(types.ModuleType):
    """A stub module: every attribute is a `_Stub`."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Stub,), {})


@pytest.fixture(scope="module")
def verl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    whl = wheel(request, tmp_path_factory, "verl", "0.9.1")
    path = extract(whl, "verl/trainer/ppo/metric_utils.py", tmp_path_factory.mktemp("verl"))
    names = ["torch", "omegaconf", "transformers", "verl", "verl.utils",
             "verl.utils.torch_functional", "verl.utils.fs", "verl.utils.import_utils",
             "verl.utils.model"]
    stubs = {name: _Anything(name) for name in names}
    for name, module in stubs.items():  # `import a.b.c as x` reads the attributes of a and a.b
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(stubs[parent], child, module)
    return load(path, "verl_oracle_metric_utils", stubs)


def _pass(seed: int, n: int, prompts: int, with_pred: bool = True, gaps: bool = False):
    """A validation pass as verl's _validate collects it: data sources, prompt uids, infos."""
    rng = random.Random(seed)
    sources, uids, infos = [], [], {"reward": [], "acc": [], "format": []}
    if with_pred:
        infos["pred"] = []
    for p in range(prompts):
        source = ["videomme_v1_test", "perceptioncomp_test", "video_holmes_test"][p % 3]
        skill = rng.random()
        for _ in range(n):
            acc = float(rng.random() < skill)
            fmt = float(rng.random() < 0.8)
            sources.append(source)
            uids.append(f"{source}:{p}")
            infos["acc"].append(acc if not (gaps and rng.random() < 0.05) else None)
            infos["format"].append(fmt)
            infos["reward"].append(0.8 * acc + 0.2 * fmt)
            if with_pred:
                infos["pred"].append(rng.choice("ABCD") if rng.random() < 0.6 else "B")
    return sources, uids, infos


@pytest.mark.parametrize("n", [1, 4, 8])
def test_every_value_equals_verls(verl, n):
    sources, uids, infos = _pass(seed=n, n=n, prompts=24)
    ours = validation_metrics(sources, uids, infos)
    theirs = verl.process_validation_metrics(sources, uids, infos)
    assert {s: {v: dict(m) for v, m in vm.items()} for s, vm in theirs.items()} == ours
    if n == 8:
        assert set(ours["videomme_v1_test"]["acc"]) >= {"mean@8", "std@8", "best@2/mean",
                                                        "best@4/std", "worst@8/mean",
                                                        "maj@8/mean", "maj@4/std"}


def test_none_values_and_missing_votes_as_verl(verl):
    """None values are left out (a prompt then has fewer samples and its own mean@k), and a
    prompt whose votes do not line up gets no maj: exactly as verl."""
    sources, uids, infos = _pass(seed=7, n=4, prompts=30, gaps=True)
    ours = validation_metrics(sources, uids, infos)
    theirs = verl.process_validation_metrics(sources, uids, infos)
    assert {s: {v: dict(m) for v, m in vm.items()} for s, vm in theirs.items()} == ours
    assert any("mean@3" in metrics for metrics in (ours[s]["acc"] for s in ours))


def test_without_pred_no_majority(verl):
    sources, uids, infos = _pass(seed=3, n=4, prompts=30, with_pred=False)
    ours = validation_metrics(sources, uids, infos)
    assert ours == {s: {v: dict(m) for v, m in vm.items()} for s, vm in
                    verl.process_validation_metrics(sources, uids, infos).items()}
    assert not any(name.startswith("maj") for s in ours for m in ours[s].values() for name in m)


def test_sample_sizes_as_verl():
    assert [sample_sizes(n) for n in (1, 2, 3, 4, 5, 8, 16)] == [
        [], [2], [2, 3], [2, 4], [2, 4, 5], [2, 4, 8], [2, 4, 8, 16]]


def test_wandb_keys_split_core_and_aux():
    metrics = {"acc": {"mean@4": 0.5, "std@4": 0.1, "best@2/mean": 0.6, "best@4/mean": 0.7,
                       "maj@4/mean": 0.55},
               "reward": {"mean@4": 0.4}}
    keys = wandb_keys("videomme_v1_test", metrics)
    assert keys[("acc", "mean@4")] == "val-core/videomme_v1_test/acc/mean@4"
    assert keys[("acc", "maj@4/mean")] == "val-core/videomme_v1_test/acc/maj@4/mean"
    assert keys[("acc", "best@2/mean")] == "val-aux/videomme_v1_test/acc/best@2/mean"
    assert keys[("acc", "std@4")] == "val-aux/videomme_v1_test/acc/std@4"
    assert keys[("reward", "mean@4")] == "val-aux/videomme_v1_test/reward/mean@4"


def test_the_demo_dumps_metrics_equal_verls(verl, demo_tables):
    """End to end: the demo's verl run ingested and scored by the assets; vv_verl_metrics equals
    verl's process_validation_metrics over the dump's own rows (uids by position) for verl's
    variables, and over benchlake's scores of the same rows for benchlake's."""
    con = connect(demo_tables.home)
    got = {(r[0], r[1], r[2]): r[3] for r in con.execute(
        "SELECT step, data_source, metric, value FROM vv_verl_metrics").fetchall()}
    sizes = {ds: pq.read_metadata(Path(demo_tables.video_val_source_or_demo()) / name).num_rows
             for name, ds in SOURCES.items()}
    order = [f"{ds}:{i}" for ds in VERL_ORDER for i in range(sizes[ds])]
    expected = {}
    for step in VERL_STEPS:
        lines = [json.loads(x) for x in (demo_tables.responses_root() / VERL_RUN /
                                          f"{step}.jsonl").read_text().splitlines()]
        uids = [order[i // VERL_N] for i in range(len(lines))]
        sources = [u.split(":")[0] for u in uids]
        infos = {k: [x[k] for x in lines] for k in lines[0] if k not in BASE_KEYS}
        scored = {(r[0], r[1]): r[2:] for r in con.execute(
            "SELECT uid, sample_idx, correct, composite, extracted FROM vv_scored_responses "
            "WHERE run_id = ? AND step = ? AND policy = 'card'", [VERL_RUN, step]).fetchall()}
        own = [scored[(u, i % VERL_N)] for i, u in enumerate(uids)]
        ours = {"benchlake_correct": [float(c) for c, _, _ in own],
                "benchlake_composite": [m for _, m, _ in own], "pred": [e for _, _, e in own]}
        for group in (infos, ours):
            for ds, var2metric in verl.process_validation_metrics(sources, uids, group).items():
                for var, metrics in var2metric.items():
                    for name, value in metrics.items():
                        expected[(step, ds, f"{var}/{name}")] = value
    assert got == expected
    assert (50, "videomme_v1_test", "acc/maj@4/mean") in got
    assert (100, "perceptioncomp_test", "benchlake_composite/best@4/std") in got
