"""Monitor: refit as evaluations arrive, forecast at the budget, advise in words."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import rlcurves
from rlcurves import sigmoid
from rlcurves.decide import DEFAULT_RULE
from rlcurves.monitor import (
    ADVICE,
    CONTINUE,
    ON_TRACK,
    PEAKED,
    STOP_ADVICE,
    TOO_EARLY,
    UNLIKELY_BASELINE,
    UNLIKELY_TARGET,
    Monitor,
    identified,
    live_forecast_record,
)

TRUTH = dict(A=0.6, B=1.5, C_mid=1000.0, R0=0.1)


def simulated(n=40, end=4000.0, seed=0, sd=0.01, **params):
    p = {**TRUTH, **params}
    c = np.linspace(0, end, n)
    r = sigmoid(c, **p) + np.random.default_rng(seed).normal(0, sd, n)
    return c, r


def feed(monitor, c, r):
    """One report per evaluation, as a running job would produce them."""
    return [monitor.update(ci, ri) for ci, ri in zip(c, r, strict=True)]


def final(monitor, c, r):
    """The report after all evaluations: two refits (a stop advice must hold on two consecutive
    refits spanning the rule's hold_span of the budget), the first without the last 5%."""
    c, r = np.asarray(c), np.asarray(r)
    early = c <= c.max() - 0.05 * monitor.budget
    monitor.update(c[early], r[early])
    return monitor.update(c[~early], r[~early])


def test_better_run_goes_from_too_early_to_on_track():
    c, r = simulated()
    reports = feed(Monitor(4000.0, baseline=0.5, n_samples=200), c, r)
    assert all(rep.advice == TOO_EARLY for rep in reports[:7])  # min_points = 8
    assert reports[-1].advice == ON_TRACK
    assert reports[-1].p_beat > 0.99
    # the forecast at the budget brackets the true curve there
    true_end = sigmoid(4000.0, **TRUTH)
    assert reports[-1].lower < true_end < reports[-1].upper


def test_worse_run_is_unlikely_to_beat_a_fitted_baseline():
    c, r = simulated()
    base = rlcurves.fit_sigmoid(c, r, label="recipe A")
    cw, rw = simulated(seed=1, A=0.45)
    reports = [final(Monitor(4000.0, baseline=base, n_samples=200), cw, rw)]
    assert reports[-1].advice == UNLIKELY_BASELINE and reports[-1].stop
    assert reports[-1].baseline == "recipe A"
    assert reports[-1].p_beat < 0.05


def test_identification_guard_holds_stop_advice_until_its_fraction():
    """require_identified=True never advises a stop from a fit that does not determine the
    ceiling; a fraction holds it until then; the default (issue 43: no guard) lets the
    calibrated forecast of an unidentified fit decide, here against an unreachable baseline."""
    # a run that stops long before its midpoint: A and C_mid trade off, IdentifiabilityWarning
    c, r = simulated(n=12, end=500.0, seed=3)
    with pytest.warns(rlcurves.IdentifiabilityWarning):
        fit = rlcurves.fit_sigmoid(c, r)
    assert not identified(fit)[0]
    # a baseline so high that p(above) is below p_unlikely from the start: a rule on p alone
    # would say stop
    kws = dict(baseline=1.0, min_fraction=0.0, p_unlikely=0.2, n_samples=200)
    reports = feed(Monitor(4000.0, require_identified=True, **kws), c, r)
    assert reports[-1].p_beat is not None and reports[-1].p_beat <= 0.2
    assert all(rep.advice == TOO_EARLY and not rep.stop for rep in reports)
    assert "does not determine the ceiling" in reports[-1].reason
    assert not any(rep.is_identified for rep in reports[-4:])
    reports = feed(Monitor(4000.0, require_identified=0.05, **kws), c, r)
    assert not any(rep.advice != TOO_EARLY for rep in reports if rep.fraction < 0.05)
    assert reports[-1].stop and reports[-1].advice == UNLIKELY_BASELINE
    reports = feed(Monitor(4000.0, **kws), c, r)
    advised = next(rep for rep in reports if rep.advice != TOO_EARLY)
    assert advised.n_points == 8 and advised.pending == UNLIKELY_BASELINE  # min_points, then hold
    assert reports[-1].stop and not reports[-1].is_identified
    # evident stops (StopRule.evident): an unreachable baseline from 4 evaluations, then the hold
    reports = feed(Monitor(4000.0, rule=DEFAULT_RULE.replace(evident=0.0), **kws), c, r)
    advised = next(rep for rep in reports if rep.advice != TOO_EARLY)
    assert advised.n_points == 4 and advised.pending == UNLIKELY_BASELINE
    assert "evident" in advised.reason and reports[-1].stop
    with pytest.raises(rlcurves.RLCurvesError, match="require_identified"):
        Monitor(4000.0, require_identified=1.5)


def test_with_the_guard_every_stop_advice_comes_from_an_identified_fit():
    for seed in range(2):
        c, r = simulated(n=20, seed=seed, A=0.45, sd=0.02)
        mon = Monitor(4000.0, baseline=0.55, n_samples=200, require_identified=True)
        for rep in feed(mon, c, r):
            assert rep.advice in ADVICE
            if rep.stop:
                assert rep.is_identified and identified(rep.fit)[0]


def test_a_run_that_rises_then_falls_has_peaked():
    c, r = simulated(n=30, end=3000.0, seed=4)
    c2 = np.linspace(3100, 4600, 16)
    r2 = sigmoid(3000.0, **TRUTH) - 0.1 * (c2 - 3000) / 1600  # falls 0.1 over the tail
    mon = Monitor(8000.0, n_samples=200)
    reports = feed(mon, np.r_[c, c2], np.r_[r, r2])
    last = reports[-1]
    assert last.advice == PEAKED and last.stop
    assert last.evals_since_peak >= mon.peak_patience
    assert 2500 <= last.peak_compute <= 3600
    # before the fall started, no peak
    assert reports[29].advice != PEAKED


def test_a_plateau_has_peaked_only_when_the_calibrated_forecast_says_so():
    # saturated at C ~ 300 (C_mid 100). With the budget 5% past the data the calibrated interval
    # leaves less than min_gain = 0.02 to gain: peaked. With the budget 4x further it does not:
    # the misspecification term (tau^2 g(d) in reward units, measured on the real runs, which
    # drift on past their fitted plateaus; g = sqrt(d) in the shipped validation calibration, so
    # already 5% past the data it lets the rest add ~0.012) lets the rest add ~0.13, so the
    # honest advice is to continue, saying how much the rest may add (not "still improving").
    c, r = simulated(n=30, end=1000.0, seed=5, C_mid=100.0, B=3.0, sd=0.003)
    rep = final(Monitor(1050.0, min_fraction=0.0, n_samples=200, min_gain=0.02), c, r)
    assert rep.advice == PEAKED
    assert rep.gain < 0.02
    far = final(Monitor(4000.0, min_fraction=0.0, n_samples=200, min_gain=0.02), c, r)
    assert far.advice == CONTINUE and far.gain > 0.02
    assert f"may add up to {far.gain:+.3f}" in far.reason


def test_target_above_the_ceiling_is_unlikely_and_below_is_on_track():
    c, r = simulated()
    high = final(Monitor(4000.0, target=0.8, n_samples=200), c, r)
    assert high.advice == UNLIKELY_TARGET and high.p_target < 0.05
    assert np.isinf(high.target_compute.compute)
    low = final(Monitor(4000.0, target=0.5, n_samples=200), c, r)
    assert low.advice == ON_TRACK and low.p_target > 0.95
    true_c = rlcurves.inverse_sigmoid(0.5, **TRUTH)
    assert low.target_compute.lower < true_c < low.target_compute.upper


def test_a_loss_curve_with_higher_is_better_false():
    c, r = simulated(A=0.5, R0=3.0, sd=0.02)  # falls from 3.0 to 0.5: a loss
    worse = final(Monitor(4000.0, baseline=0.3, higher_is_better=False, n_samples=200), c, r)
    assert worse.advice == UNLIKELY_BASELINE
    better = final(Monitor(4000.0, baseline=1.0, higher_is_better=False, n_samples=200), c, r)
    assert better.advice == ON_TRACK


def test_report_serializes_prints_and_gives_tracker_metrics():
    c, r = simulated()
    mon = Monitor(4000.0, baseline=0.5, target=0.55, n_samples=200, label="run-7")
    rep = final(mon, c, r)
    text = json.dumps(rep.to_dict(), allow_nan=False)
    assert json.loads(text)["advice"] == rep.advice
    assert "run-7" in str(rep) and "advice" in str(rep)
    m = rep.metrics()
    assert {"forecast/mean", "forecast/lower", "forecast/upper", "forecast/p_beat"} <= set(m)
    assert all(isinstance(v, float) and np.isfinite(v) for v in m.values())
    assert mon.report() is rep  # cached until new points arrive


def test_report_before_the_first_fit():
    rep = Monitor(100.0).update([0, 10], [0.1, 0.2])
    assert rep.advice == TOO_EARLY and rep.fit is None and rep.forecast is None
    assert "no fit yet" in rep.reason
    json.dumps(rep.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(budget=0), "budget"),
        (dict(budget=10, p_unlikely=0.9, p_on_track=0.5), "p_unlikely"),
        (dict(budget=10, level=1.5), "level"),
        (dict(budget=10, baseline="no/such/log.jsonl"), "no such file"),
        (dict(budget=10, baseline=[1, 2]), "baseline must be"),
    ],
)
def test_bad_settings_raise_the_documented_error(kwargs, word):
    with pytest.raises(rlcurves.RLCurvesError, match=word):
        Monitor(**kwargs)


def test_bad_points_raise_the_documented_error():
    mon = Monitor(10.0)
    with pytest.raises(rlcurves.RLCurvesError, match="same length"):
        mon.update([1, 2], [0.1])
    with pytest.raises(rlcurves.RLCurvesError, match="finite"):
        mon.update(float("nan"), 0.1)


def test_update_from_waits_for_a_half_written_last_line(tmp_path):
    c, r = simulated(n=12)
    log = tmp_path / "log.jsonl"
    rows = [json.dumps({"step": i, "gpu_hours": ci, "val_pass_rate": ri}) for i, (ci, ri) in
            enumerate(zip(c, r, strict=True))]  # fmt: skip
    log.write_text("\n".join(rows[:-1]) + "\n" + rows[-1][:17])
    mon = Monitor(4000.0, n_samples=200)
    rep = mon.update_from(log)
    assert rep.n_points == 11
    assert any("half-written" in n for n in rep.notes)
    log.write_text("\n".join(rows) + "\n")
    rep = mon.update_from(log)
    assert rep.n_points == 12 and not rep.notes


def test_baseline_from_a_log_path_and_a_frame_agree():
    path = "rlcurves/data/runs/recipe_loo_scalerl"
    df = rlcurves.read_log(path, compute="tokens_total")
    kw = dict(read_log_kws={"compute": "tokens_total"}, n_samples=200)
    a = Monitor(1.3e6, baseline=path, **kw)
    b = Monitor(1.3e6, baseline=df, **kw)
    assert a.baseline_name == "recipe_loo_scalerl"
    assert a._baseline["mean"] == pytest.approx(b._baseline["mean"])


def test_identified_flags_a_step_fit_of_a_real_run():
    # PPO-off-policy-8 in the leave-one-out study: a flat run fitted as a step (singular)
    df = rlcurves.datasets.load_example("recipe_loo_ppo_off_policy", compute="tokens_total")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = rlcurves.fit_sigmoid("compute", "reward", data=df)
    ok, why = identified(fit)
    assert not ok and "not determined" in why
    df = rlcurves.datasets.load_example("recipe_loo_scalerl", compute="tokens_total")
    assert identified(rlcurves.fit_sigmoid("compute", "reward", data=df)) == (True, "")


def test_live_forecast_record_for_a_trainer_log():
    c, r = simulated()
    mon = Monitor(4000.0, baseline=0.5, n_samples=200)
    mon.update(c[:-1], r[:-1])
    record = live_forecast_record(mon, c[-1], r[-1])
    assert record["forecast/advice"] == ON_TRACK
    assert record["forecast/mean"] == pytest.approx(mon.report().mean)
    json.dumps(record, allow_nan=False)
    assert set(STOP_ADVICE) < set(ADVICE)


def test_plot_monitor_draws_the_budget_and_baseline():
    import matplotlib.pyplot as plt

    c, r = simulated()
    rep = final(Monitor(4000.0, baseline=0.5, target=0.55, n_samples=200), c, r)
    fig = rep.plot()
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("baseline" in t for t in labels) and any("target" in t for t in labels)
    assert rep.advice in fig.axes[0].get_title()
    plt.close(fig)


def test_regression_update_with_words_raises_rlcurves_error():
    # issue 27: Monitor.update(["a"], [0.1]) raised a bare ValueError from numpy
    mon = Monitor(10.0)
    with pytest.raises(rlcurves.RLCurvesError, match="compute must be numbers"):
        mon.update(["a"], [0.1])
    with pytest.raises(rlcurves.RLCurvesError, match="reward must be numbers"):
        mon.update(1.0, "high")
    with pytest.raises(rlcurves.RLCurvesError, match="budget must be a number"):
        Monitor("a lot")


def test_regression_monitor_bad_seed_is_refused_when_built():
    # seed=-1 was accepted, then every refit failed inside and the report said "too early to
    # tell: no fit yet" for the whole run, a stop advice never possible
    c, r = simulated(n=40)
    for seed in (-1, "x", 1.5):
        with pytest.raises(rlcurves.RLCurvesError, match="seed= takes a non-negative integer"):
            Monitor(4000.0, seed=seed)
    assert Monitor(4000.0, seed=None, n_samples=50).update(c, r).fit is not None


def test_regression_monitor_settings_given_as_text_name_the_keyword():
    # level="x", n_samples="x", min_points="x"... were TypeErrors or ValueErrors from a
    # comparison or int(); fit_kws with a key fit_sigmoid does not take a TypeError at the first
    # update; resume of something that is not a record an AttributeError
    for kw in ("level", "min_fraction", "p_unlikely", "p_on_track", "n_samples", "min_points",
               "hold", "target"):  # fmt: skip
        with pytest.raises(rlcurves.RLCurvesError, match=f"{kw}= must be a number, got 'x'"):
            Monitor(4000.0, **{kw: "x"})
    with pytest.raises(rlcurves.RLCurvesError, match=r"fit_kws= holds \['rzero'\]"):
        Monitor(4000.0, fit_kws={"rzero": 0.1})
    with pytest.raises(rlcurves.RLCurvesError, match="fit_kws= must be a dict"):
        Monitor(4000.0, fit_kws=0.1)
    for record in (None, "last line", {"n_points": 3, "hold_state": [1, 2]}):
        with pytest.raises(rlcurves.RLCurvesError, match="resume needs a record"):
            Monitor(4000.0).resume(record)


def test_a_finished_baseline_counts_at_its_level_known_to_its_noise():
    # a baseline run that reached the budget: the mean of its last tenth of the budget, with the
    # standard error of that mean -- not the forecast of its fitted curve
    c, r = simulated(n=200, seed=7, sd=0.02)
    frame = pd.DataFrame({"compute": c, "reward": r})
    mon = Monitor(4000.0, baseline=frame, n_samples=100)
    tail = r[c >= 3600]
    assert mon._baseline["mean"] == pytest.approx(tail.mean())
    half = (mon._baseline["upper"] - mon._baseline["lower"]) / 2
    assert half == pytest.approx(1.645 * 0.02 / np.sqrt(tail.size), rel=0.3)
    # one that stopped short of the budget is forecast there (wider: it extrapolates)
    short = Monitor(8000.0, baseline=frame, n_samples=100)
    assert short._baseline["upper"] - short._baseline["lower"] > 2 * half


def test_a_stop_holds_on_two_refits_and_carries_over_a_restart():
    c, r = simulated(n=40, seed=1, A=0.45)
    mon = Monitor(4000.0, baseline=0.6, n_samples=100)
    reports = feed(mon, c, r)
    first = next(i for i, rep in enumerate(reports) if rep.stop)
    assert reports[first - 1].pending == UNLIKELY_BASELINE and not reports[first - 1].stop
    assert "must hold on 2 consecutive refits" in reports[first - 1].reason
    # a new process resumes from the last record: the same refit does not count twice...
    pending = reports[first - 1].to_dict()
    again = Monitor(4000.0, baseline=0.6, n_samples=100)
    again.resume(pending)
    assert again.update(c[:first], r[:first]).pending == UNLIKELY_BASELINE
    # ...the next one does
    again = Monitor(4000.0, baseline=0.6, n_samples=100)
    again.resume(pending)
    assert again.update(c[: first + 1], r[: first + 1]).advice == UNLIKELY_BASELINE
    with pytest.raises(rlcurves.RLCurvesError, match="resume needs"):
        again.resume({"advice": "continue"})


def test_a_first_look_at_a_run_under_way_checks_the_stop_held():
    # one update with the whole run (watch --once on a log): the run as it stood 3.5% of the
    # budget earlier is refit too, so a stop that held is given at once...
    c, r = simulated(n=40, seed=1, A=0.45)
    rep = Monitor(4000.0, baseline=0.6, n_samples=100).update(c, r)
    assert rep.advice == UNLIKELY_BASELINE
    # ...and one that did not hold is not: the run fell only in its last three evaluations (the
    # refit 3.5% of the budget earlier saw one of them: no fall in its running medians of 5)
    r2 = r.copy()
    r2[-3:] -= 0.2
    rep = Monitor(4000.0, n_samples=100).update(c, r2)
    assert not rep.stop and rep.pending == PEAKED
    # against a baseline the fall is reported, not acted on (the forecast decides)
    rep = Monitor(4000.0, baseline=0.40, n_samples=100).update(c, r2)
    assert rep.pending is None and rep.peak.peaked and "peaked at" in rep.reason
    # one outlying evaluation is not a fall at all (the peak test's running medians)
    r2 = r.copy()
    r2[-1] -= 0.3
    rep = Monitor(4000.0, baseline=0.40, n_samples=100).update(c, r2)
    assert rep.pending is None and not rep.peak.peaked


def test_regression_a_fit_window_that_cannot_fit_is_refused_when_the_monitor_is_built():
    # fit_kws={"min_compute": nan} (or text, or r0=inf) was accepted and every refit said
    # "too early to tell: no fit yet", so no advice could ever come
    for kws in ({"min_compute": float("nan")}, {"max_compute": "x"}, {"r0": float("inf")}):
        with pytest.raises(rlcurves.RLCurvesError, match=f"{next(iter(kws))}= must be"):
            Monitor(1000.0, fit_kws=kws)
    Monitor(1000.0, fit_kws={"min_compute": 10.0, "r0": 0.1})  # numbers are taken
