"""The error bars and tests of the views against their references.

The macros of `sql/macros/statistics.sql` are run through the dbt analyses that compile them
(`sql/analyses/statistics_*.sql`) on inputs made here, and compared with scipy (t quantiles, the t
distribution, the binomial test) and with lmms-eval 0.7.3's own `mean_stderr`, `clustered_stderr`
and `paired_ttest`, read from its wheel (`tests/oracles/wheels.py`). Then every uncertainty column
of the demo warehouse is recomputed from the per-question / per-case rows the views read.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import tempfile
import types
from collections import defaultdict
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from scipy import stats

from dagster_project.settings import SQL_DIR, Settings
from dagster_project.warehouse.catalog import connect
from dagster_project.warehouse.project import dbt_env, dbt_executable
from dagster_project.warehouse.seeds import SEEDS_DIR, column_types, read_seed
from tests.oracles.wheels import extract, load, wheel
from tools import t_quantiles

VARS = yaml.safe_load((SQL_DIR / "dbt_project.yml").read_text())["vars"]


@pytest.fixture(scope="module")
def lmms(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """lmms_eval/api/metrics.py, with its registry decorators and sacrebleu stubbed."""
    whl = wheel(request, tmp_path_factory, "lmms-eval", "0.7.3")
    path = extract(whl, "lmms_eval/api/metrics.py", tmp_path_factory.mktemp("lmms-metrics"))
    registry = types.ModuleType("lmms_eval.api.registry")
    registry.register_metric = lambda **_: (lambda f: f)
    registry.register_aggregation = lambda _name: (lambda f: f)
    stubs = {"sacrebleu": types.ModuleType("sacrebleu"), "lmms_eval": types.ModuleType("lmms_eval"),
             "lmms_eval.api": types.ModuleType("lmms_eval.api"),
             "lmms_eval.api.registry": registry}
    return load(path, "lmms_eval_oracle_metrics", stubs)


@functools.cache
def _analyses() -> dict[str, str]:
    """The statistics analyses as dbt compiles them (every macro expanded), into a temp
    target: {name: SQL}."""
    with tempfile.TemporaryDirectory(prefix="benchlake-analyses-") as tmp:
        env = {**os.environ, **dbt_env("/nowhere", Path(tmp) / "benchlake.duckdb")}
        subprocess.run([dbt_executable(), "compile", "--select", "resource_type:analysis",
                        "--project-dir", str(SQL_DIR), "--profiles-dir", str(SQL_DIR),
                        "--target-path", tmp, "--log-path", tmp, "--quiet"],
                       env=env, check=True, capture_output=True)
        manifest = json.loads((Path(tmp) / "manifest.json").read_text(encoding="utf-8"))
    return {n["name"]: n["compiled_code"] for n in manifest["nodes"].values()
            if n["resource_type"] == "analysis"}


def _analysis(name: str) -> str:
    return _analyses()[name]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    """A database named `benchlake` (as compiled SQL names it) holding the seed
    stat_t_quantiles, loaded as dbt-duckdb loads a seed (DuckDB parses the CSV text into the
    declared types), to run the analyses in."""
    connection = duckdb.connect(":memory:")
    connection.execute("ATTACH ':memory:' AS benchlake")
    connection.execute("USE benchlake")
    types = ", ".join(f"'{c}': '{t}'" for c, t in column_types("stat_t_quantiles").items())
    path = str(SEEDS_DIR / "stat_t_quantiles.csv").replace("'", "''")
    connection.execute(f"CREATE TABLE stat_t_quantiles AS SELECT * FROM read_csv('{path}', "
                       f"header = true, columns = {{{types}}})")
    types = ", ".join(f"'{c}': '{t}'" for c, t in column_types("stat_normal_quantiles").items())
    path = str(SEEDS_DIR / "stat_normal_quantiles.csv").replace("'", "''")
    connection.execute(f"CREATE TABLE stat_normal_quantiles AS SELECT * FROM read_csv('{path}', "
                       f"header = true, columns = {{{types}}})")
    return connection


def _lowbias32_indices(draw: int, n: int, seed: int) -> list[int]:
    """bootstrap_indices, in numpy: lowbias32(draw * 2^20 + j + seed) mod n + 1."""
    mask = np.uint64(0xFFFFFFFF)
    x = (np.uint64(draw) * np.uint64(1 << 20) + np.arange(n, dtype=np.uint64)
         + np.uint64(seed)) & mask
    x = ((x ^ (x >> np.uint64(16))) * np.uint64(0x7FEB352D)) & mask
    x = ((x ^ (x >> np.uint64(15))) * np.uint64(0x846CA68B)) & mask
    x = x ^ (x >> np.uint64(16))
    return [int(v) + 1 for v in x % np.uint64(n)]


def test_the_quantile_table_is_what_scipy_writes(con) -> None:
    text = (SEEDS_DIR / "stat_t_quantiles.csv").read_text(encoding="utf-8")
    assert text == t_quantiles.seed_csv(), "run .venv/bin/python tools/t_quantiles.py"
    want = [(df, float(stats.t.ppf(0.975, df))) for df in range(1, t_quantiles.MAX_DF + 1)]
    # scipy's doubles bit for bit, as Python reads the seed and as DuckDB loads it
    assert [(r["df"], r["t975"]) for r in read_seed("stat_t_quantiles")] == want
    assert con.execute("SELECT df, t975 FROM stat_t_quantiles ORDER BY df").fetchall() == want
    normal = (SEEDS_DIR / "stat_normal_quantiles.csv").read_text(encoding="utf-8")
    assert normal == t_quantiles.normal_seed_csv(), "run .venv/bin/python tools/t_quantiles.py"
    # lmms-eval's power_analysis takes norm.ppf(1 - alpha / 2) and norm.ppf(power)
    want = [(0.8, float(stats.norm.ppf(0.80))), (0.975, float(stats.norm.ppf(1 - 0.05 / 2)))]
    assert [(r["p"], r["z"]) for r in read_seed("stat_normal_quantiles")] == want
    assert con.execute("SELECT p, z FROM stat_normal_quantiles ORDER BY p").fetchall() == want


def test_scalar_macros_equal_scipy(con) -> None:
    grid = [(t, df) for df in (1, 2, 3, 4, 5, 10, 11, 30, 199, 200, 999, 1000, 1001, 5644, 100_000)
            for t in (0.0, 0.3, 1.0, 1.96, 2.5, 4.0, 9.0, -2.2)]
    binomial = [(0, 0), (0, 1), (1, 3), (0, 3), (2, 4), (5, 20), (40, 100), (250, 600),
                (1200, 2600), (7, 7)]
    rows = [(t, df, *binomial[i % len(binomial)], i % 7, 1 + i % 230)
            for i, (t, df) in enumerate(grid)]
    con.execute("CREATE OR REPLACE TABLE macro_inputs (t DOUBLE, df BIGINT, k BIGINT, n BIGINT, "
                "draw BIGINT, n_items BIGINT)")
    con.executemany("INSERT INTO macro_inputs VALUES (?, ?, ?, ?, ?, ?)", rows)
    sql = _analysis("statistics_scalars")
    got = con.execute(sql).fetchall()
    assert len(got) == len(rows)
    for t, df, k, n, draw, n_items, t975, t_p, binom_p, indices in got:
        want = stats.t.ppf(0.975, df)
        if df <= t_quantiles.MAX_DF:
            assert t975 == want, df  # scipy's double, bit for bit
        else:
            assert t975 == pytest.approx(want, rel=1e-14, abs=0), df
        assert t_p == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9, abs=1e-12), (t, df)
        want_binom = 1.0 if n == 0 else stats.binomtest(k, n, 0.5).pvalue
        assert binom_p == pytest.approx(want_binom, rel=1e-9, abs=1e-15), (k, n)
        assert indices == _lowbias32_indices(draw, n_items, VARS["bootstrap_seed"])
    draws = [_lowbias32_indices(d, 200, VARS["bootstrap_seed"]) for d in range(2000)]
    counts = np.bincount(np.concatenate(draws), minlength=201)[1:]
    assert counts.min() > 1700 and counts.max() < 2300  # every case drawn ~2,000 times


def test_clustered_stats_equal_lmms_eval(con, lmms) -> None:
    rng = np.random.default_rng(7)
    rows = []
    for g in range(40):
        n = int(rng.integers(1, 60))
        kind = g % 3  # 0/1 accuracies, 0-100 scores, a few NULLs
        for i in range(n):
            cluster = f"c{int(rng.integers(0, max(1, n // 3)))}" if g % 4 else f"s{i}"
            x = (float(rng.integers(0, 2)) if kind == 0 else float(rng.uniform(0, 100)))
            rows.append((g, cluster, None if kind == 2 and i % 5 == 4 else x))
    con.execute("CREATE OR REPLACE TABLE cluster_inputs (g BIGINT, c VARCHAR, x DOUBLE)")
    con.executemany("INSERT INTO cluster_inputs VALUES (?, ?, ?)", rows)
    sql = _analysis("statistics_clustered")
    got = {g: (se, clusters, n, mean)
           for g, n, mean, se, clusters in con.execute(sql).fetchall()}
    by_group: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for g, c, x in rows:
        if x is not None:
            by_group[g].append((c, x))
    assert set(got) == set(by_group)
    for g, pairs in by_group.items():
        xs, cs = [x for _, x in pairs], [c for c, _ in pairs]
        se, clusters, n, mean = got[g]
        assert clusters == len(set(cs)) and n == len(xs)
        assert mean == pytest.approx(sum(xs) / len(xs), rel=1e-12)
        if len(set(cs)) < 2:  # one value or one cluster: no SE (lmms-eval gives a number)
            assert se is None
            continue
        assert se == pytest.approx(lmms.clustered_stderr(xs, cs), rel=1e-9, abs=1e-12), g
        if len(set(cs)) == len(cs):  # singletons: the CLT form
            assert se == pytest.approx(lmms.mean_stderr(xs), rel=1e-9, abs=1e-12), g



def test_repeated_sample_figures_equal_lmms_eval(con, lmms) -> None:
    """expected_accuracy, consistency_rate and internal_variance from per-question counts (what
    vv_scores_at_k reads) against lmms-eval's functions over the 0/1 scores themselves."""
    rng = np.random.default_rng(11)
    groups: dict[int, list[list[float]]] = {}
    for g in range(60):
        top = 1 if g % 10 == 0 else int(rng.integers(2, 9))  # some groups one sample each
        groups[g] = []
        for _ in range(int(rng.integers(1, 40))):
            n = int(rng.integers(1, top + 1))
            scores = [float(x) for x in rng.permutation(
                [1] * int(rng.integers(0, n + 1)) + [0] * n)[:n]]
            groups[g].append(scores)
    con.execute("CREATE OR REPLACE TABLE sample_inputs (g BIGINT, c BIGINT, n BIGINT)")
    con.executemany("INSERT INTO sample_inputs VALUES (?, ?, ?)",
                    [(g, int(sum(q)), len(q)) for g, qs in groups.items() for q in qs])
    got = {g: rest for g, *rest in con.execute(_analysis("statistics_samples")).fetchall()}
    assert set(got) == set(groups)
    for g, questions in groups.items():
        ea, cr, iv = got[g]
        assert ea == lmms.expected_accuracy(questions), g  # the same division of two integers
        assert cr == lmms.consistency_rate(questions), g
        want = lmms.internal_variance(questions)
        if math.isnan(want):  # no question with two samples: NULL, never NaN
            assert iv is None and all(len(q) == 1 for q in questions)
        else:
            assert iv == pytest.approx(want, rel=1e-12, abs=1e-15), g
    assert sum(math.isnan(lmms.internal_variance(q)) for q in groups.values()) >= 3


def test_power_macros_equal_lmms_eval(con, lmms) -> None:
    """The smallest detectable difference and the questions needed, as lmms-eval 0.7.3's
    power_analysis computes them for the same standard deviation of the paired differences."""
    rng = np.random.default_rng(5)
    rows, refs = [], {}
    for g in range(300):
        std_a, std_b = float(rng.uniform(0.05, 0.6)), float(rng.uniform(0.05, 0.6))
        rho, diff = float(rng.uniform(-0.9, 0.95)), float(rng.choice([0.005, 0.01, 0.03, 0.1]))
        n = int(rng.integers(2, 6000))
        ref = lmms.power_analysis(diff, std_a=std_a, std_b=std_b, correlation=rho, current_n=n)
        # lmms-eval's std_diff, as it computes it
        sd = math.sqrt(std_a**2 + std_b**2 - 2 * rho * std_a * std_b)
        rows.append((g, diff, sd, n))
        refs[g] = ref
    con.execute("CREATE OR REPLACE TABLE power_inputs (g BIGINT, diff DOUBLE, sd DOUBLE, "
                "n BIGINT)")
    con.executemany("INSERT INTO power_inputs VALUES (?, ?, ?, ?)", rows)
    got = con.execute(_analysis("statistics_power")).fetchall()
    assert len(got) == len(rows)
    for g, mde, needed in got:
        assert needed == refs[g]["min_n"], g  # the same doubles, the same ceil
        # lmms-eval rounds the effect to 4 places
        assert mde == pytest.approx(refs[g]["min_detectable_effect"], abs=5e-5 + 1e-12), g
    assert sum(round(mde, 4) == refs[g]["min_detectable_effect"] for g, mde, _ in got) > 295


def test_macros_on_degenerate_input_are_null_never_nan(con) -> None:
    """Where a statistic is undefined the macros give NULL: a t of NaN or a df below 1 has no p
    and no quantile; one value, one cluster or no value has no SE (no value: no mean either);
    no variance over several clusters is an SE of 0; an infinite t (SE 0, mean not 0) a p of 0."""
    nan, inf = float("nan"), float("inf")
    rows = [(nan, 5), (inf, 5), (-inf, 5), (1.0, 0), (None, 3), (0.0, 1)]
    con.execute("CREATE OR REPLACE TABLE macro_inputs (t DOUBLE, df BIGINT, k BIGINT, n BIGINT, "
                "draw BIGINT, n_items BIGINT)")
    con.executemany("INSERT INTO macro_inputs VALUES (?, ?, 0, 0, 0, 1)", rows)
    got = {(None if t is None or math.isnan(t) else t, df): (t975, p)
           for t, df, *_, t975, p, _binom, _idx in con.execute(_analysis("statistics_scalars"))
           .fetchall()}
    assert got == {(None, 5): (stats.t.ppf(0.975, 5), None), (inf, 5): (stats.t.ppf(0.975, 5), 0.0),
                   (-inf, 5): (stats.t.ppf(0.975, 5), 0.0), (1.0, 0): (None, None),
                   (None, 3): (stats.t.ppf(0.975, 3), None), (0.0, 1): (stats.t.ppf(0.975, 1), 1.0)}
    groups = {1: [("a", 0.5)], 2: [("a", 0.0), ("a", 1.0), ("a", 1.0)],
              3: [("a", 0.5), ("b", 0.5), ("c", 0.5)], 4: [("a", None), ("b", None)],
              5: [("a", 0.0), ("b", 1.0)]}
    con.execute("CREATE OR REPLACE TABLE cluster_inputs (g BIGINT, c VARCHAR, x DOUBLE)")
    con.executemany("INSERT INTO cluster_inputs VALUES (?, ?, ?)",
                    [(g, c, x) for g, members in groups.items() for c, x in members])
    got = {g: (n, mean, se, clusters) for g, n, mean, se, clusters in
           con.execute(_analysis("statistics_clustered")).fetchall()}
    assert got == {1: (1, 0.5, None, 1), 2: (3, pytest.approx(2 / 3), None, 1),
                   3: (3, 0.5, 0.0, 3), 4: (0, None, None, 0),
                   5: (2, 0.5, pytest.approx(0.5), 2)}

def _interval(mean: float, se: float, clusters: int, low: float, high: float):
    if se == 0:
        return mean, mean
    if clusters < 2:
        return None, None
    half = stats.t.ppf(0.975, clusters - 1) * se
    return max(low, mean - half), min(high, mean + half)


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="module")
def warehouse(demo_warehouse: Settings):
    connection = connect(demo_warehouse.home)
    return connection


def test_val_scores_and_breakdowns_carry_lmms_eval_clustered_errors(warehouse, lmms) -> None:
    rows = warehouse.sql("SELECT policy, run_id, step, uid, data_source, video, accuracy, "
                         "composite FROM int_vv_row_scores").fetchall()
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for policy, run, step, _uid, source, video, acc, comp in rows:
        for scope in (source, "all"):
            groups[(policy, run, step, scope)].append((video, acc, comp))
    scores = warehouse.sql("SELECT policy, run_id, step, data_source, accuracy, accuracy_se, "
                           "accuracy_ci_low, accuracy_ci_high, composite, composite_se, "
                           "composite_ci_low, composite_ci_high, se_method FROM vv_scores "
                           "WHERE data_source <> 'macro' AND n_responded > 0").fetchall()
    assert len(scores) == len(groups) and len(scores) > 20
    checked = 0
    for policy, run, step, scope, acc, acc_se, lo, hi, comp, comp_se, clo, chi, method in scores:
        members = groups[(policy, run, step, scope)]
        videos = [m[0] for m in members]
        assert method == "clustered:video"
        for idx, (mean, se, low, high) in ((1, (acc, acc_se, lo, hi)),
                                           (2, (comp, comp_se, clo, chi))):
            xs = [m[idx] for m in members]
            assert mean == pytest.approx(sum(xs) / len(xs), rel=1e-12)
            if len(set(videos)) < 2:
                assert se is None
                continue
            assert se == pytest.approx(lmms.clustered_stderr(xs, videos), rel=1e-9, abs=1e-12)
            want = _interval(mean, se, len(set(videos)), 0.0, 1.0)
            assert _close(low, want[0]) and _close(high, want[1]), (policy, run, step, scope)
            checked += 1
    assert checked > 40
    # Video-MME asks several questions per video: the clustered SE differs from the CLT one there
    mme = [k for k in groups if k[3] == "videomme_v1_test"]
    assert any(len({m[0] for m in groups[k]}) < len(groups[k]) for k in mme)
    # breakdowns: the same macro over the questions carrying the attribute value
    attrs = dict(warehouse.sql("SELECT uid, question_type FROM vv_questions "
                               "WHERE question_type IS NOT NULL").fetchall())
    by_value: dict[tuple, list[tuple]] = defaultdict(list)
    for policy, run, step, uid, source, video, acc, _ in rows:
        if uid in attrs:
            by_value[(policy, run, step, source, attrs[uid])].append((video, acc))
    breakdowns = warehouse.sql("SELECT policy, run_id, step, data_source, value, accuracy_se "
                               "FROM vv_breakdowns WHERE dimension = 'question_type' "
                               "AND n_responded > 1").fetchall()
    assert breakdowns
    for *key, se in breakdowns:
        members = by_value[tuple(key)]
        if len({m[0] for m in members}) < 2:
            assert se is None
            continue
        assert se == pytest.approx(lmms.clustered_stderr([m[1] for m in members],
                                                         [m[0] for m in members]), rel=1e-9)


def test_val_run_pairs_against_scipy_and_lmms_eval(warehouse, lmms) -> None:
    rows = warehouse.sql("SELECT policy, run_id, step, uid, data_source, video, k, accuracy "
                         "FROM int_vv_row_scores").fetchall()
    per = defaultdict(dict)
    for policy, run, step, uid, source, video, k, acc in rows:
        per[(policy, run, step)][uid] = (source, video, k, acc)
    pairs = warehouse.sql("SELECT policy, run_id, step, base_run_id, base_step, data_source, "
                          "n_common, accuracy_diff, diff_se, diff_ci_low, diff_ci_high, p_value, "
                          "mcnemar_p FROM vv_run_pairs").fetchall()
    assert pairs
    with_mcnemar = 0
    for policy, run, step, brun, bstep, scope, n, diff, se, lo, hi, p, mcnemar in pairs:
        a, b = per[(policy, run, step)], per[(policy, brun, bstep)]
        common = [u for u in a if u in b and scope in ("all", a[u][0])]
        assert n == len(common)
        ds = [a[u][3] - b[u][3] for u in common]
        videos = [a[u][1] for u in common]
        assert diff == pytest.approx(float(np.mean(ds)), abs=1e-12)
        if len(set(videos)) < 2:
            assert se is None and lo is None and hi is None and p is None
            continue
        assert se == pytest.approx(lmms.clustered_stderr(ds, videos), rel=1e-9, abs=1e-12)
        clusters = len(set(videos))
        assert _close(lo, _interval(diff, se, clusters, -1, 1)[0])
        assert _close(hi, _interval(diff, se, clusters, -1, 1)[1])
        if se > 0 and clusters > 1:
            assert p == pytest.approx(2 * stats.t.sf(abs(diff / se), clusters - 1),
                                      rel=1e-9, abs=1e-12)
        if all(a[u][2] == 1 and b[u][2] == 1 for u in common):
            only_a = sum(a[u][3] > b[u][3] for u in common)
            only_b = sum(a[u][3] < b[u][3] for u in common)
            want = (1.0 if only_a + only_b == 0
                    else stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue)
            assert mcnemar == pytest.approx(want, rel=1e-9), (run, step, brun, bstep, scope)
            with_mcnemar += 1
        else:
            assert mcnemar is None
    assert with_mcnemar > 0
    best = warehouse.sql("SELECT policy, run_id, best_step, next_step, best_vs_next_p "
                         "FROM vv_best_checkpoints WHERE next_step IS NOT NULL").fetchall()
    assert best
    for policy, run, best_step, next_step, p in best:
        [(p_value, mcnemar)] = [(r[11], r[12]) for r in pairs
                                if r[:6] == (policy, run, next_step, run, best_step, "all")]
        assert p == (mcnemar if mcnemar is not None else p_value)


def test_val_stability_and_power_equal_lmms_eval(warehouse, lmms) -> None:
    """On the demo: vv_scores_at_k's repeated-sample figures are lmms-eval's functions over each
    checkpoint's 0/1 scores, and vv_power / vv_power_plan its power_analysis for the standard
    deviations and correlation of each pair's per-question accuracies."""
    samples: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run, step, uid, source, correct in warehouse.sql(
            "SELECT run_id, step, uid, data_source, correct FROM vv_scored_responses "
            "WHERE policy = 'card'").fetchall():
        for scope in (source, "all"):
            samples[(run, step, scope)][uid].append(float(correct))
    figures = warehouse.sql("SELECT run_id, step, data_source, expected_accuracy, "
                            "consistency_rate, internal_variance FROM vv_scores_at_k").fetchall()
    assert len(figures) == len(samples)
    repeated = 0
    for run, step, scope, ea, cr, iv in figures:
        questions = list(samples[(run, step, scope)].values())
        assert ea == lmms.expected_accuracy(questions)
        assert cr == lmms.consistency_rate(questions)
        want = lmms.internal_variance(questions)
        assert iv is None if math.isnan(want) else iv == pytest.approx(want, rel=1e-12)
        repeated += not math.isnan(want)
    assert repeated >= 9  # base-rl 60 and verl-grpo's two steps, per source and all

    accuracy = defaultdict(dict)
    for run, step, uid, source, acc in warehouse.sql(
            "SELECT run_id, step, uid, data_source, accuracy FROM int_vv_row_scores "
            "WHERE policy = 'card'").fetchall():
        accuracy[(run, step)][uid] = (source, acc)
    needed = {tuple(r[:6]): r[6] for r in warehouse.sql(
        "SELECT run_id, step, base_run_id, base_step, data_source, target_diff, "
        "questions_needed_iid FROM vv_power_plan WHERE policy = 'card'").fetchall()}
    power = warehouse.sql("SELECT run_id, step, base_run_id, base_step, data_source, "
                          "w.n_common, w.diff_sd, w.mde_80, w.mde_80_iid, p.diff_se "
                          "FROM vv_power AS w "
                          "JOIN vv_run_pairs AS p USING (policy, run_id, step, base_run_id, "
                          "base_step, data_source) WHERE policy = 'card'").fetchall()
    checked = 0
    for run, step, base_run, base_step, scope, n, sd, mde, mde_iid, se in power:
        a, b = accuracy[(run, step)], accuracy[(base_run, base_step)]
        common = sorted(u for u in a if u in b and scope in ("all", a[u][0]))
        xs = np.array([a[u][1] for u in common])
        ys = np.array([b[u][1] for u in common])
        assert n == len(common)
        assert sd == pytest.approx(float(np.std(xs - ys, ddof=1)), rel=1e-9, abs=1e-12)
        assert mde == (None if se is None else pytest.approx(
            (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * se, rel=1e-12))
        std_a, std_b = float(np.std(xs, ddof=1)), float(np.std(ys, ddof=1))
        if std_a == 0 or std_b == 0 or sd == 0:  # no correlation to give power_analysis
            continue
        rho = float(np.corrcoef(xs, ys)[0, 1])
        for target in (0.01, 0.05):
            ref = lmms.power_analysis(target, std_a=std_a, std_b=std_b, correlation=rho,
                                      current_n=n)
            assert mde_iid == pytest.approx(ref["min_detectable_effect"], abs=5e-5 + 1e-9)
            exact = ((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / (target / sd)) ** 2
            got = needed[(run, step, base_run, base_step, scope, target)]
            if abs(exact - round(exact)) > 1e-6:  # not at a ceil's edge (sd from other sums)
                assert got == ref["min_n"], (run, step, base_run, base_step, scope, target)
            checked += 1
    assert checked > 40


def test_rynn_vp_leaderboard_pairs_and_judge_agreement(warehouse, lmms) -> None:
    scores = warehouse.sql("SELECT profile, judge_run_id, system, modality, case_id, scene, pi, "
                           "final_score FROM rvp_candidate_scores").fetchall()
    board = warehouse.sql("SELECT profile, judge_run_id, system, modality, n_scored, "
                          "final_score, final_score_se, final_score_ci_low, final_score_ci_high, "
                          "pi_se, se_method FROM rvp_leaderboard").fetchall()
    for profile, run, system, modality, n, mean, se, lo, hi, pi_se, method in board:
        assert method == "clustered:case"
        mine = [r for r in scores if r[:4] == (profile, run, system, modality)]
        xs = [r[7] for r in mine if r[7] is not None]
        assert n == len(xs)
        if n < 2:
            assert se is None
            continue
        assert se == pytest.approx(lmms.mean_stderr(xs), rel=1e-9)
        assert pi_se == pytest.approx(lmms.mean_stderr([r[6] for r in mine if r[6] is not None]),
                                      rel=1e-9)
        want = _interval(mean, se, n, 0, 100)
        assert _close(lo, want[0]) and _close(hi, want[1])
    scene_se = warehouse.sql("SELECT profile, judge_run_id, system, modality, scene, "
                             "final_score_se FROM rvp_by_scene WHERE n_scored > 1").fetchall()
    for *key, se in scene_se:
        xs = [r[7] for r in scores if (*r[:4], r[5]) == tuple(key) and r[7] is not None]
        assert se == pytest.approx(lmms.mean_stderr(xs), rel=1e-9)

    pairs = warehouse.sql("SELECT profile, judge_run_id, modality, system, base_system, n_common, "
                          "final_score_diff, diff_se, diff_ci_low, diff_ci_high, p_value, "
                          "bootstrap_p FROM rvp_system_pairs").fetchall()
    assert pairs
    by_key = {r[:5]: r for r in pairs}
    for profile, run, modality, system, base, n, diff, se, lo, hi, p, boot in pairs:
        a = {r[4]: r[7] for r in scores if r[:4] == (profile, run, system, modality)
             and r[7] is not None}
        b = {r[4]: r[7] for r in scores if r[:4] == (profile, run, base, modality)
             and r[7] is not None}
        common = sorted(set(a) & set(b))
        assert n == len(common)
        ref = lmms.paired_ttest([a[c] for c in common], [b[c] for c in common])
        assert diff == pytest.approx(ref["mean_diff"], rel=1e-12)
        assert se == pytest.approx(ref["se_diff"], rel=1e-9)
        assert lo == pytest.approx(max(-100, ref["ci_lower"]), rel=1e-9)
        assert hi == pytest.approx(min(100, ref["ci_upper"]), rel=1e-9)
        assert p == pytest.approx(ref["p_value"], rel=1e-6, abs=1e-12)
        # the seeded bootstrap, replayed in numpy
        ds = np.array([a[c] - b[c] for c in common])
        draws = VARS["bootstrap_draws"]
        means = np.array([ds[np.array(_lowbias32_indices(d, n, VARS["bootstrap_seed"])) - 1]
                          .mean() for d in range(draws)])
        hits = int(np.sum(np.abs(means - ds.mean()) >= abs(ds.mean())))
        assert boot == pytest.approx((1 + hits) / (draws + 1), abs=1.5 / (draws + 1))
        assert by_key[(profile, run, modality, base, system)][11] == boot  # mirror, same p

    agreement = warehouse.sql("SELECT profile, judge_run_id, base_judge_run_id, metric, "
                              "n_common, correlation, mean_abs_diff, n_systems, kendall_tau "
                              "FROM rvp_judge_agreement WHERE metric = 'final_score'").fetchall()
    assert agreement, "the demo has two judge runs over the same evaluations"
    means = {(r[0], r[1], r[2]): r[5] for r in board}
    for profile, run, base, _, n, corr, mad, n_systems, tau in agreement:
        x = {(r[2], r[4]): r[7] for r in scores if r[:2] == (profile, run) and r[7] is not None}
        y = {(r[2], r[4]): r[7] for r in scores if r[:2] == (profile, base) and r[7] is not None}
        common = sorted(set(x) & set(y))
        assert n == len(common)
        xs, ys = np.array([x[c] for c in common]), np.array([y[c] for c in common])
        assert corr == pytest.approx(stats.pearsonr(xs, ys).statistic, rel=1e-9)
        assert mad == pytest.approx(float(np.mean(np.abs(xs - ys))), rel=1e-12)
        systems = sorted(s for (pr, jr, s), v in means.items() if pr == profile and jr == run
                         and v is not None and means.get((profile, base, s)) is not None)
        assert n_systems == len(systems)
        if len(systems) > 1:
            want = stats.kendalltau([means[(profile, run, s)] for s in systems],
                                    [means[(profile, base, s)] for s in systems]).statistic
            assert tau == pytest.approx(want, rel=1e-12)

