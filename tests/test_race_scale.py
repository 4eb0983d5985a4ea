"""Race at sweep scale (issue 43, item 5) decides exactly as before: the new ``Race.report()``
against today's code (``benchmarks/race_reference.py``: rlcurves/race.py and the sweep-level
functions of rlcurves/decide.py as issue 41 left them, 33ce880, before the change; made by
scripts/make_race_reference.py) on real and simulated sweeps, over several reports with
evaluations added between them, stops, ended and failed runs, seeds of one recipe and another
seed; and the benchmark page's table is what the benchmark printed.

The per-run forecasts are the same code in both, and the sweep-level rule is rearranged, not
approximated (maxima and the draws' pairings are the same numbers), so the reports must be equal
exactly, not to a tolerance. Since the sweep's risk became exact and a stopped run's draws
frozen (issue 43, item 4), the new Race is compared with its risk computed as today's
(``benchmarks.race_scale.paired_class``: one pairing of the draws, nothing frozen); the exact
risk has its own tests (tests/test_decide_sweep.py).
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from benchmark_modules import benchmark

from rlcurves import Race
from rlcurves import decide as D

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ref():
    return benchmark("race_reference")


@pytest.fixture(scope="module")
def scale():
    return benchmark("race_scale")


# ---- the sweep-level functions: the same numbers as today's ---------------------------------


def _random_runs(rng, k: int, n: int, digits: int | None = None) -> dict[str, np.ndarray]:
    runs = {
        f"r{i}": rng.normal(rng.normal(0.5, 0.05), rng.uniform(0.005, 0.05), n) for i in range(k)
    }
    if digits is not None:  # ties between runs' draws, and within a row's maximum
        runs = {name: d.round(digits) for name, d in runs.items()}
    return runs


@pytest.mark.parametrize("seed", range(6))
def test_sweep_level_functions_give_todays_numbers_exactly(ref, seed):
    """prob_best, prob_regret_above, stop_set, sweep_baseline (and sweep_baselines, the batch of
    them) on random sweeps with ties, both signs, with and without runs already stopped and
    alpha already spent, candidates repeated or already stopped: equal to today's functions."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k = int(rng.integers(2, 30))
        runs = _random_runs(rng, k, int(rng.choice([40, 400, 4000])), rng.choice([None, 2, 3]))
        names = list(runs)
        kw = dict(sign=int(rng.choice([1, -1])), seed=int(rng.integers(0, 4)))
        tol = float(rng.choice([0.0, 0.01]))
        stopped = list(rng.choice(names, int(rng.integers(0, k)), replace=False))
        candidates = list(rng.choice(names, int(rng.integers(0, k + 2))))
        alpha = float(rng.choice([0.01, 0.05, 0.3, 0.9]))
        spent = None if rng.random() < 0.3 else float(rng.uniform(0, alpha))
        assert D.prob_best(runs, **kw) == ref.prob_best(runs, **kw)
        got = D.prob_regret_above(runs, stopped, tolerance=tol, method="paired", **kw)
        assert got == ref.prob_regret_above(runs, stopped, tolerance=tol, **kw)
        got = D.stop_set(
            runs, candidates, alpha=alpha, tolerance=tol, stopped=stopped, spent=spent,
            method="paired", **kw,
        )  # fmt: skip
        want = ref.stop_set(
            runs, candidates, alpha=alpha, tolerance=tol, stopped=stopped, spent=spent, **kw
        )
        assert got == want
        batch = D.sweep_baselines(runs, [*names, "outsider"], tolerance=tol, **kw)
        for name in names:
            want = ref.sweep_baseline(runs, name, tolerance=tol, **kw)
            assert np.array_equal(D.sweep_baseline(runs, name, tolerance=tol, **kw), want)
            assert np.array_equal(batch[name], want)
        with_outsider = {**runs, "outsider": runs[names[0]]}
        want = ref.sweep_baseline(with_outsider, "outsider", tolerance=tol, **kw)
        assert np.array_equal(batch["outsider"], want)


def test_sweep_level_functions_with_draws_of_different_counts_and_nothing_kept(ref):
    """Runs whose draws differ in count are resampled as before; a set that would keep no run
    is never chosen, whatever was stopped before."""
    rng = np.random.default_rng(5)
    runs = {
        "a": rng.normal(0.3, 0.1, 100),
        "b": rng.normal(0.5, 0.1, 300),
        "c": rng.normal(size=300),
    }
    for kw in ({"seed": 2}, {"seed": 3, "sign": -1}):
        assert D.prob_best(runs, **kw) == ref.prob_best(runs, **kw)
        assert D.stop_set(runs, ["a", "b", "c"], alpha=0.5, method="paired", **kw) == (
            ref.stop_set(runs, ["a", "b", "c"], alpha=0.5, **kw)
        )
    every = ["a", "b", "c"]
    for method in D.RISK_METHODS:
        assert D.stop_set(runs, every, alpha=0.5, stopped=every, method=method) == ref.stop_set(
            runs, every, alpha=0.5, stopped=every
        )
    with pytest.raises(D.RLCurvesError, match="no run besides"):
        D.sweep_baselines({"a": runs["a"]}, ["a"])


# ---- Race: the same reports as today's ------------------------------------------------------
# Today's per-run forecasts are not reproducible to the last bit: the same fit, made twice in one
# process, can differ by 1e-11 where the bounded solver polishes an optimum on a bound (the
# sigmoid refit of a 5-point backtest window: 3 answers in 300 calls, with one thread for numba
# and BLAS alike), so that two runs of today's Race on one sweep differ in the last digits of a
# forecast now and then. The reports are therefore compared in two parts: the decisions, exactly,
# with both codes given the same refits (each entry's, made once by the new code and handed to
# today's: what differs between them is the report built on the refits); and the refits, each
# code its own, to a relative 1e-6.

REFIT_FIELDS = ("fit", "forecast", "extra", "seed", "window", "identified", "why")


def _sharing(cls, refits: dict):
    """``cls`` whose refits go through ``refits`` ((entry, key) -> fields): an entry refit once
    by one race is handed to every other race sharing the dict."""

    class Sharing(cls):
        def _refit(self, e, i):
            key = tuple((n, self._rung(r), r.failed, r.ended) for n, r in e.runs.items())
            if key == e.key:
                return
            hit = refits.get((e.name, key))
            if hit is None:
                super()._refit(e, i)
                refits[(e.name, key)] = tuple(getattr(e, f) for f in REFIT_FIELDS)
                return
            e.key, e.fresh = key, True
            for f, v in zip(REFIT_FIELDS, hit, strict=True):
                setattr(e, f, v)

    return Sharing


def _race_both(ref, scale, budget: float, steps, **kws):
    """Run the new Race and today's side by side through ``steps`` (each changes a race: new
    evaluations, an end, a failure; a stopped run gets nothing more), today's taking the new
    one's refits, and compare every report exactly (the new one with today's sweep-level risk,
    :func:`benchmarks.race_scale.paired_class`); return the new reports."""
    refits: dict = {}
    new = _sharing(scale.paired_class(Race), refits)(budget, **kws)
    old = _sharing(ref.Race, refits)(budget, **kws)
    reports = []
    stopped: set[str] = set()
    for step in steps:
        step(new, stopped)
        step(old, stopped)
        a, b = new.report(), old.report()
        diffs = scale.same_reports(a, b)
        assert diffs == [], f"report {len(reports) + 1} differs: {diffs}"
        stopped |= set(a.stop)
        reports.append(a)
    return reports


def _feed(runs: dict, lo: float, hi: float, group: dict | None = None):
    """A step: every run not stopped gets its evaluations in (lo, hi]."""

    def step(race, stopped):
        for name, (compute, reward) in runs.items():
            if name in stopped:
                continue
            sel = (compute > lo) & (compute <= hi)
            if sel.any():
                race.update(name, compute[sel], reward[sel], group=(group or {}).get(name))

    return step


@pytest.mark.slow
def test_race_reports_are_todays_on_a_real_sweep(ref, scale):
    """math_lr (6 real GRPO runs of Qwen2.5-Math-1.5B, budget 200 steps) raced at five rungs,
    defaults: the runs stopped on the way (the sweep's losers) and every report equal."""
    from benchmarks.race_replay import load_sweeps

    (sweep,) = [s for s in load_sweeps() if s.name == "math_lr"]
    runs = {k: (df["compute"].to_numpy(), df["reward"].to_numpy()) for k, df in sweep.runs.items()}
    cuts = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7]
    steps = [_feed(runs, lo * sweep.budget, hi * sweep.budget) for lo, hi in pairwise(cuts)]
    reports = _race_both(ref, scale, sweep.budget, steps)
    assert reports[-1].stop, "the sweep's losers were stopped on the way"


@pytest.mark.slow
def test_race_reports_are_todays_on_a_simulated_sweep_with_seeds_ends_and_failures(ref, scale):
    """Simulated runs of every kind (sigmoids, a decline, a late take-off, a flat run), two
    seeds of one recipe racing as one entry, runs that end (one stopped before, one running:
    its value at the budget a forecast, advice 'ended') and one that fails between reports,
    another seed and stops at once (confirm=1, alpha 0.2): every report equal."""
    runs = scale.simulated_sweep(7, seed=4, n_evals=40)
    names = list(runs)
    group = {names[5]: "recipe", names[6]: "recipe"}
    steps = [_feed(runs, 0, 30, group), _feed(runs, 30, 40, group)]

    def end_and_fail(race, stopped):
        _feed(runs, 40, 52, group)(race, stopped)
        race.end(names[1])
        race.fail(names[2], "diverged")

    def end_one_running(race, stopped):
        _feed(runs, 52, 64, group)(race, stopped)
        race.end(names[3])  # short of the budget, not stopped: its value there is a forecast

    rest = {k: v for k, v in runs.items() if k != names[3]}  # the ended run gets nothing more
    steps += [end_and_fail, end_one_running, _feed(rest, 64, 80, group)]
    reports = _race_both(ref, scale, 100.0, steps, seed=3, confirm=1, alpha=0.2)
    table = reports[-1].table.set_index("run")
    assert table.loc[names[2], "status"] == "failed"
    assert table.loc[names[3], "advice"] == "ended"
    assert table.loc["recipe", "runs"] == [names[5], names[6]]
    assert any(r.stopped_now for r in reports), "some run was stopped on the way"


@pytest.mark.slow
def test_race_reports_are_todays_for_a_loss_refit_at_every_point(ref, scale):
    """Lower is better, refits at every new point (rungs=None), the calibration's tau: equal."""
    runs = scale.simulated_sweep(4, seed=8, n_evals=20)
    loss = {k: (c, 1.0 - r) for k, (c, r) in runs.items()}
    steps = [_feed(loss, 0, 30), _feed(loss, 30, 34), _feed(loss, 34, 40)]
    kws = dict(higher_is_better=False, rungs=None, misspecification="calibration")
    _race_both(ref, scale, 100.0, steps, **kws)


@pytest.mark.slow
def test_race_refits_are_todays(ref, scale):
    """Each code refits on its own (simulated runs of every kind, two seeds of one recipe): the
    same fits, forecasts, seed spreads and window backtests, to a relative 1e-6 (see above)."""
    runs = scale.simulated_sweep(6, seed=11, n_evals=30)
    group = {"run0004": "recipe", "run0005": "recipe"}
    races = [Race(100.0, seed=5), ref.Race(100.0, seed=5)]
    for race in races:
        _feed(runs, 0, 60, group)(race, set())
        for i, e in enumerate(race._entries.values()):
            race._refit(e, i)
    new, old = (race._entries for race in races)
    assert list(new) == list(old)

    def close(a, b):
        return np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-6, atol=1e-12)

    for k in new:
        a, b = new[k], old[k]
        assert (a.seed, a.identified, a.why, a.key) == (b.seed, b.identified, b.why, b.key)
        assert a.fit.params.keys() == b.fit.params.keys()
        assert close(list(a.fit.params.values()), list(b.fit.params.values())), k
        fa, fb = a.forecast, b.forecast
        assert close([fa.mean, fa.lower, fa.upper], [fb.mean, fb.lower, fb.upper]), k
        assert close(fa.predictive.draws, fb.predictive.draws), k
        assert (a.extra is None) == (b.extra is None) and (
            a.extra is None or close(a.extra, b.extra)
        )
        assert list(a.window.columns) == list(b.window.columns), k
        labels = ["run", "family"]
        assert a.window[labels].equals(b.window[labels]), k
        cols = [c for c in a.window.columns if c not in labels]
        assert {"error", "fit_var", "noise_var", "distance"} <= set(cols)
        assert close(a.window[cols].to_numpy(), b.window[cols].to_numpy()), k
    assert new["recipe"].extra is not None and np.isfinite(new["recipe"].extra).all()


# ---- the benchmark's page ---------------------------------------------------------------------


def test_race_scale_page_tables_are_what_the_benchmark_printed(scale):
    """docs/benchmarks/race_scale.md holds `python -m benchmarks.race_scale`'s tables for the
    results it wrote (benchmarks/results/race_scale.json), row for row, and in the benchmark the
    reports of today's code and the new made the same decisions, their numbers within a
    relative 1e-6, at every size."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_scale.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race_scale.md").read_text()
    tables = [scale.table(res)] + [
        scale.profile_table(res[key]) for key in ("profile", "profile_new") if key in res
    ]
    for table in tables:
        for line in table.splitlines():
            assert line in page, f"the race_scale page lacks the benchmark's row: {line}"
    assert len(res["sizes"]) >= 3
    for r in res["sizes"]:
        assert r["same_decisions"] and r["max_relative_difference"] < 1e-6, r["runs"]


def test_readme_sweep_scale_row_is_the_benchmarks(scale):
    """README's "... at sweep scale" row quotes benchmarks/results/race_scale.json."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_scale.json").read_text())
    row = next(
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| ... at sweep scale |")
    )
    by_runs = {r["runs"]: r for r in res["sizes"]}
    big, mid, small = by_runs[1000], by_runs[100], by_runs[10]
    assert (
        f"in {big['new']['after_one_evaluation_s']:.1f} s (the code before: "
        f"{big['today']['after_one_evaluation_s']:.1f} s, {big['after_one_speedup']:.0f}x)" in row
    )
    assert f"1/{1 / mid['new']['after_one_over_first']:.0f} of a first report at 100 runs" in row
    assert f"the first report itself {mid['first_report_speedup']:.2f}x at 100 runs" in row
    assert f"{small['first_report_speedup']:.2f}x at 10" in row
