"""rlcurves.calibrate: the corpus, calibration by family and by tail, and forecast's use of it."""

import json
import math
from importlib import resources

import numpy as np
import pandas as pd
import pytest

import rlcurves
from rlcurves import RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.calibrate import (
    METRIC_KINDS,
    Calibration,
    calibrate,
    default_calibration,
    load_corpus,
    score_runs,
)
from rlcurves.ensemble import EnsembleConfig

SETTING = dict(config=EnsembleConfig(0.25, 0.5), growth="d", nu=math.inf, tau_factor=1.0)


def test_corpus_is_read_through_the_registry():
    gsm8k = load_corpus("gsm8k")
    assert len(gsm8k) == 12  # 9 sweep runs + 4 budget variants, one of which repeats a sweep run
    for name, frame in gsm8k.items():
        assert list(frame.columns) == ["compute", "reward"]
        assert frame["compute"].is_monotonic_increasing and len(frame) > 300
        assert frame["reward"].between(0, 1).all() and frame.attrs["family"] == "gsm8k"
        assert frame.attrs["source"].startswith("rlcurves/data/curves/deepgrpo_gsm8k")
        assert "Qwen2.5-0.5B" in name
    with (
        resources.files("rlcurves.data").joinpath("curves", "deepgrpo_gsm8k_sweeps.csv").open() as f
    ):
        assert "github.com/befocuss/Deep-GRPO at commit 8e7df46e" in f.readline()
    math_runs = load_corpus("math")
    assert len(math_runs) == 17 and "no_baseline_lr4e-5" in math_runs  # the sag is kept
    # every family by default, keyed family/run (names repeat across families)
    every = load_corpus()
    listed = rlcurves.datasets.list_corpus()
    assert len(every) == len(listed)
    assert set(every) == {f"{f}/{r}" for f, r in zip(listed["family"], listed["run"], strict=True)}
    with pytest.raises(RLCurvesError, match="family"):
        load_corpus("code")


def _records(errors_by_family, distance=1.0, fraction=0.5):
    """Records of one setting whose run's own variance is 1e-8 (the scores are then the
    errors over tau sqrt(d)): {family: {run: [errors]}}."""
    rows = [
        {"run": f"{fam}/{run}", "family": fam, "fraction": fraction, "tail": 0.25,
         "shrink": 0.5, "error": e, "error_one": e, "fit_var": 1e-8, "noise_var": 0.0,
         "noise_var_one": 0.0, "distance": distance, "noise_sd": 0.01, "n_fit": 20,
         "w_power_law": 0.0, "forecast": 0.5, "observed": 0.5 + e}
        for fam, runs in errors_by_family.items()
        for run, errs in runs.items()
        for e in errs
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _families(rng, taus, n_runs=12, per_run=3, skew=0.0):
    """Errors of tau-scaled families: each run a shared shift plus per-record noise (its
    records correlated, as a run's fractions are), optionally skewed upward."""
    out = {}
    for f, tau in enumerate(taus):
        runs = {}
        for r in range(n_runs):
            shared = rng.standard_normal()
            e = 0.8 * shared + 0.6 * rng.standard_normal(per_run)
            e = e + skew * (np.exp(0.7 * e) - np.exp(0.245))  # a heavier upper side
            runs[f"r{r}"] = list(tau * e)
        out[f"f{f}"] = runs
    return out


def test_a_known_family_gets_its_scale_and_a_new_family_the_spread():
    rng = np.random.default_rng(0)
    taus = [0.005, 0.01, 0.02, 0.04]
    cal = Calibration(_records(_families(rng, taus, n_runs=15)), "toy", **SETTING)
    assert cal.family is None and "a new family" in cal.name and cal.n == 60
    small, large = cal.for_family("f0"), cal.for_family("f3")
    assert small.tau == pytest.approx(0.005, rel=0.5) and large.tau == pytest.approx(0.04, rel=0.5)
    # a new family's scale is the root mean square over the families' spread: above their
    # geometric mean
    assert cal.tau > math.exp(np.mean(np.log(taus)))
    # the same records, standardized as the forecast of each kind would be
    assert not np.allclose(small.scores, cal.scores)
    with pytest.raises(RLCurvesError, match="unknown family"):
        cal.for_family("f9")
    # one family: it is the family forecasts are for
    one = Calibration(_records({"only": _families(rng, [0.01], 25)["f0"]}), "one", **SETTING)
    assert one._mode() == "only" and one.tau == pytest.approx(one.pooled.family_tau["only"])


def test_tails_support_and_the_nearest_supported_level():
    rng = np.random.default_rng(1)
    cal = Calibration(_records(_families(rng, [0.01], n_runs=12)), "twelve runs", **SETTING)
    assert cal.n == 12 and cal.min_tail == pytest.approx(1 / 13)
    # a 90% interval needs 19 runs (each 5% tail 1 / 0.05 - 1): 12 support up to 1 - 2/13
    assert cal.max_level == pytest.approx(11 / 13)
    assert cal.supported_level(0.9) == pytest.approx(11 / 13) and cal.supported_level(0.5) == 0.5
    lo, hi = cal.multipliers(0.9)
    assert math.isinf(lo[0]) and math.isinf(hi[0])
    lo, hi = cal.multipliers(cal.max_level)
    assert np.isfinite(lo[0]) and np.isfinite(hi[0])
    with pytest.raises(RLCurvesError, match="level"):
        cal.multipliers(1.2)
    # the draws' central intervals are the multipliers (every supported level, both sides)
    z = cal.z_values(4000)[:, 0]
    for level in (0.5, 0.7):
        lo, hi = cal.multipliers(level)
        q_lo, q_hi = np.quantile(z, [(1 - level) / 2, (1 + level) / 2])
        assert q_hi == pytest.approx(hi[0], rel=0.05) and -q_lo == pytest.approx(lo[0], rel=0.05)


def test_new_family_intervals_hold_on_families_never_seen():
    """Truths from a process other than the forecast: families whose runs' errors have their
    own scale (taus a factor of 8 apart) and a heavier upper side; a calibration of 6 families
    forecasts the records of a seventh, new one, 30 times over (30 families of 12 runs, 1,080
    records, in clusters of a family). Pass when 84-96% of the new families' records fall
    inside the 90% interval and each tail misses at most 8%: the clusters put the coverage's
    sd near 2%, so a true 90% fails with probability under 1%, while a calibration that ignored
    the families' spread (the f3-sized families' scale for all) or the skew (one symmetric
    multiplier) misses by far more (checked on the same draws)."""
    rng = np.random.default_rng(2)
    inside = below = above = total = 0
    for _ in range(30):
        taus = np.exp(rng.normal(np.log(0.012), 0.6, 7))
        fams = _families(rng, taus, n_runs=12, skew=0.3)
        rec = _records(fams)
        train, test = rec[rec["family"] != "f6"], rec[rec["family"] == "f6"]
        cal = Calibration(train, "six families", **SETTING)
        lo, hi = cal.multipliers(0.9, 1.0)
        s = np.sqrt(cal.variance(test))
        err = test["error"].to_numpy()
        below += int(np.sum(err < -lo[0] * s))
        above += int(np.sum(err > hi[0] * s))
        total += len(test)
    inside = total - below - above
    assert 0.84 <= inside / total <= 0.96, (inside, below, above, total)
    assert below / total <= 0.08 and above / total <= 0.08, (below, above, total)


def test_without_subset_and_the_artifact_round_trip():
    rng = np.random.default_rng(3)
    rec = _records(_families(rng, [0.01, 0.02, 0.03], n_runs=8))
    cal = Calibration(rec, "toy", **SETTING)
    one_out = cal.without("f0/r0")
    assert one_out.n == 23 and one_out.config == cal.config and one_out.growth == cal.growth
    assert cal.subset(["f1/r1", "f2/r2"]).n == 2
    d = json.loads(json.dumps(cal.to_dict()))
    assert d["version"] == 2 and d["growth"] == "d" and d["config"] == {"tail": 0.25, "shrink": 0.5}
    back = Calibration.from_dict(d)
    assert back.tau == pytest.approx(cal.tau) and back.nu == math.inf
    np.testing.assert_allclose(back.scores, cal.scores)
    d["version"] = 1
    with pytest.raises(RLCurvesError, match="version"):
        Calibration.from_dict(d)
    with pytest.raises(RLCurvesError, match="lack columns"):
        Calibration(rec.drop(columns=["family"]), "toy")
    with pytest.raises(RLCurvesError, match="no forecast"):
        Calibration(rec, "toy", config=EnsembleConfig(0.5, 0.5), growth="d", nu=5.0,
                    tau_factor=1.0)  # fmt: skip


def test_tau_with_takes_a_sweeps_own_backtests_under_the_families_spread():
    rng = np.random.default_rng(4)
    cal = Calibration(_records(_families(rng, [0.008, 0.012, 0.02, 0.03], 15)), "t", **SETTING)
    sweep = _records({"sweep": _families(rng, [0.006], 40)["f0"]})
    own = cal.tau_with(sweep)
    assert own < cal.tau and own == pytest.approx(0.006, rel=0.4)
    assert cal.tau_with(sweep, prior_runs=1000.0) > own  # a heavier prior holds it nearer
    assert cal.tau_with(None) == cal.tau == cal.tau_with(sweep.iloc[:0])
    with pytest.raises(RLCurvesError, match="prior_runs"):
        cal.tau_with(sweep, prior_runs=0)


def test_shipped_calibration_is_the_corpus_scored_by_this_code():
    """The shipped artifact's records are what score_runs gives for the corpus's runs (two
    runs rescored here: a run's resamples depend on its name, not on the runs scored with it;
    `python -m benchmarks.calibration --write-calibration` rewrites the whole file), and the
    settings it chose are among the candidates."""
    listed = rlcurves.datasets.list_corpus()
    corpus = load_corpus()
    family_of = {k: v.attrs["family"] for k, v in corpus.items()}
    for kind in METRIC_KINDS:  # one shipped calibration per kind of metric, of all its runs
        shipped = default_calibration(kind)
        families = set(listed.loc[listed["metric_kind"] == kind, "family"])
        assert set(shipped.families) == families
        assert shipped.n == sum(f in families for f in family_of.values())
        assert shipped.family is None and 0.0 < shipped.min_tail < 0.5
    shipped = default_calibration()  # validation runs: the default
    assert 0.0 < shipped.min_tail <= 0.05  # supports a 90% interval (the training reward's
    # three families map a new family's tails more coarsely: 0.075, an 85% interval)
    picked = [k for k in corpus if k.startswith("math/")][:1] + [
        k for k in corpus if k.startswith("countdown_qwen/")
    ][:1]
    again = score_runs({k: corpus[k] for k in picked}, fractions=(0.5,), progress=False,
                       configs=(shipped.config,))  # fmt: skip
    mine = shipped.records[
        shipped.records["run"].isin(picked) & (shipped.records["fraction"] == 0.5)
    ]
    for col in ("error", "fit_var", "noise_var", "distance", "forecast"):
        np.testing.assert_allclose(
            again.sort_values("run")[col], mine.sort_values("run")[col], atol=1e-6, err_msg=col
        )


def _toy_runs(rng, n_runs=6):
    runs = {}
    for i in range(n_runs):
        c = np.linspace(0, 4000, 60)
        y = sigmoid(c, 0.6 + 0.01 * i, 1.5, 900.0, 0.3) + rng.normal(0, 0.01, c.size)
        runs[f"run{i}"] = pd.DataFrame({"compute": c, "reward": y})
    return runs


def test_calibrate_accepts_a_long_frame_and_forecast_uses_it():
    rng = np.random.default_rng(3)
    runs = _toy_runs(rng)
    long = pd.concat([f.assign(seed=k) for k, f in runs.items()], ignore_index=True)
    cal = calibrate(long, run="seed", progress=False, name="my sweep", n_boot=60)
    same = calibrate(runs, progress=False, name="my sweep", n_boot=60)
    np.testing.assert_allclose(cal.scores, same.scores)
    assert cal.n == 6 and cal.n_scores == 42 and "my sweep" in repr(cal)
    assert cal.families == ["runs"] and cal._mode() == "runs"
    c, y = runs["run0"]["compute"].to_numpy(), runs["run0"]["reward"].to_numpy()
    fit = fit_sigmoid(c[c <= 2000], y[c <= 2000])
    fc = rlcurves.forecast(fit, 4000.0, calibration=cal, seed=0, progress=False, n=100)
    # 6 runs support one-sided tails down to 1/7: a 90% interval is given at 1 - 2/7, and says so
    assert fc.calibration.startswith("my sweep") and fc.calibration_n == 6
    assert not fc.unbounded and fc.info["level_used"] == pytest.approx(5 / 7)
    assert "needs at least 19 calibration runs" in fc.note and "71.4% one" in fc.note
    fc = rlcurves.forecast(fit, 4000.0, calibration=cal, seed=0, progress=False, n=100, level=0.6)
    assert fc.info["level_used"] == 0.6 and "needs at least" not in fc.note
    # backtest passes it through to every prefix's forecast
    bt = rlcurves.backtest(
        c, y, fractions=(0.5,), calibration=cal, n_samples=100, progress=False, level=0.6
    )
    again = rlcurves.forecast(
        bt.fits[0.5], c.max(), calibration=cal, seed=0, progress=False, n=100, level=0.6
    )
    assert bt.table["forecast_upper"].iloc[0] == pytest.approx(again.upper)
    with pytest.raises(RLCurvesError, match="lacks columns"):
        calibrate(long, progress=False)
    with pytest.raises(RLCurvesError, match="at least 2"):
        calibrate({"one": runs["run0"]}, progress=False)


def test_window_records_backtest_a_running_run_within_its_window():
    """A run at 40% of its compute, fitted on the first 50% and 70% of what it has seen, each
    forecast scored on its level now: one record per split, its distance about ln(1 / split)
    (measured to the middle of the level's window, the last 10% of the compute; the last point
    fitted may fall short of the split) and its observed value the level of that window; too
    few points for a fit: no records, the columns still there."""
    from rlcurves.calibrate import WINDOW_SPLITS, level_target, window_records

    run = next(iter(load_corpus("gsm8k").values()))
    part = run[run["compute"] <= 0.4 * run["compute"].max()]
    c, r = part["compute"].to_numpy(float), part["reward"].to_numpy(float)
    rec = window_records(c, r, "gsm8k-run", n_boot=50)
    assert list(rec["fraction"]) == list(WINDOW_SPLITS) and set(rec["run"]) == {"gsm8k-run"}
    assert set(rec["family"]) == {"sweep"}
    for split, d in zip(rec["fraction"], rec["distance"], strict=True):
        assert math.log(0.9 / split) <= d <= math.log(1 / split) + 0.15
    assert np.allclose(rec["observed"], level_target(c, r))
    assert np.allclose(rec["error"], rec["observed"] - rec["forecast"])
    empty = window_records(c[:5], r[:5], "short")
    assert empty.empty and "distance" in empty.columns


def test_default_calibration_names_the_kinds_it_has():
    with pytest.raises(RLCurvesError, match=r"metric_kind='loss'.*validation.*training reward"):
        default_calibration("loss")


def test_remembered_draws_and_multipliers_are_the_computed_ones(monkeypatch):
    """A calibration remembers its draws and multipliers by their arguments (a sweep asks for the
    same ones run after run): the answers are those computed afresh with the memory off, at
    other distances too, and a caller changing the array it got does not change the next
    answer."""
    import importlib

    calibrate_module = importlib.import_module("rlcurves.calibrate")
    cal = default_calibration().for_family(None)
    asks = [(0.3, False, False), (0.3, True, False), (0.7, False, True), (1.2, True, True)]
    remembered = {}
    for d, one, smooth in asks * 2:  # the second pass answers from the memory
        z = cal.z_values(500, d, one=one, smooth=smooth)
        lo, hi = cal.multipliers(0.8, d, one=one)
        remembered[(d, one, smooth)] = (z.copy(), lo.copy(), hi.copy())
        z[:] = 0.0  # the caller's copy
        lo[:] = 0.0
    monkeypatch.setattr(calibrate_module, "MEMO_KEEP", 0)
    fresh = default_calibration().for_family(None)
    for (d, one, smooth), (z, lo, hi) in remembered.items():
        np.testing.assert_array_equal(z, fresh.z_values(500, d, one=one, smooth=smooth))
        got_lo, got_hi = fresh.multipliers(0.8, d, one=one)
        np.testing.assert_array_equal(lo, got_lo)
        np.testing.assert_array_equal(hi, got_hi)
    assert len(cal.__dict__["_memo_cache"]) == 2 * len(asks) + 1  # and n


def test_regression_calibrate_refuses_a_run_with_nan_instead_of_leaving_it_out():
    # a run with one NaN reward failed every fit inside and was left out of the calibration
    # without a word (3 of 4 runs calibrated); all runs NaN said "runs need more evaluations"
    runs = dict(list(load_corpus("gsm8k").items())[:3])
    first = next(iter(runs))
    frame = runs[first].copy()
    frame.loc[frame.index[2], "reward"] = np.nan
    with pytest.raises(RLCurvesError, match=rf"run '{first}' has 1 missing.*'reward'.*dropna"):
        rlcurves.calibrate({**runs, first: frame}, fractions=(0.5,), n_boot=20, progress=False)
    # runs too short: the reason of one of them is said
    short = {k: v.head(3) for k, v in runs.items()}
    with pytest.raises(RLCurvesError, match=r"need more evaluations \(run .* only 2 point"):
        rlcurves.calibrate(short, fractions=(0.5,), n_boot=20, progress=False)


def test_regression_calibrate_checks_fractions_seed_and_n_boot():
    # fractions=0.5 and fractions='x' were TypeErrors, fractions=() "runs need more
    # evaluations", seed=-1 numpy's error; n_boot=0 calibrated with no model variance at all
    runs = dict(list(load_corpus("gsm8k").items())[:3])
    kw = dict(progress=False)
    for bad in ("x", (), (0.5, 1.5)):
        with pytest.raises(RLCurvesError, match=r"fractions= must be fractions .* in \(0, 1\)"):
            rlcurves.calibrate(runs, fractions=bad, n_boot=20, **kw)
    with pytest.raises(RLCurvesError, match="seed= takes a non-negative integer, got -1"):
        rlcurves.calibrate(runs, fractions=(0.5,), n_boot=20, seed=-1, **kw)
    for n_boot in (0, 1, 2.5):
        with pytest.raises(RLCurvesError, match="n_boot= must be an integer >= 2"):
            rlcurves.calibrate(runs, fractions=(0.5,), n_boot=n_boot, **kw)
    one = rlcurves.calibrate(runs, fractions=0.5, n_boot=20, **kw)  # one fraction, not a tuple
    assert one.fractions == (0.5,) and one.n == 3


def test_regression_a_malformed_calibration_artifact_is_an_rlcurves_error():
    # a calibration file cut short or edited was a KeyError, TypeError or ValueError
    good = default_calibration().to_dict()
    cases = {
        "records": {k: v for k, v in good.items() if k != "records"},
        "the dict of Calibration.to_dict": "calibration.json",
        "malformed": {**good, "nu": "many"},
        "malformed ": {**good, "config": {"tails": 0.5}},
        "version": {**good, "version": "two"},
    }
    for words, d in cases.items():
        with pytest.raises(RLCurvesError, match=words.strip()):
            Calibration.from_dict(d)
    assert Calibration.from_dict(json.loads(json.dumps(good))).n == default_calibration().n
