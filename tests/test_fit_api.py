"""fit_sigmoid's contract: the result object, options, scales, weights and the other methods."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import curve_fit

from rlcurves import SigmoidFit, fit_sigmoid, sigmoid


def test_recovers_paper_parameters(paper_curve):
    compute, reward, truth = paper_curve
    fit = fit_sigmoid(compute, reward, min_compute=1500)
    assert isinstance(fit, SigmoidFit) and fit.converged
    for name in ("A", "B", "C_mid"):
        # truth within 4 standard errors (a loose but honest check of estimate and its error)
        assert abs(fit.params[name] - truth[name]) < 4 * fit.stderr[name], name
    assert fit.n == int((compute >= 1500).sum()) and fit.dof == fit.n - 4


def test_matches_curve_fit_started_at_the_truth(paper_curve):
    compute, reward, truth = paper_curve
    fit = fit_sigmoid(compute, reward)
    p, pcov = curve_fit(
        lambda c, A, B, Cm, R0: sigmoid(c, A, B, Cm, R0),
        compute,
        reward,
        p0=[truth["A"], truth["B"], truth["C_mid"], truth["R0"]],
    )
    np.testing.assert_allclose([fit.A, fit.B, fit.C_mid, fit.R0], p, rtol=1e-6)
    np.testing.assert_allclose(fit.cov.to_numpy(), pcov, rtol=1e-4)


def test_compute_scale_invariance(paper_curve):
    # GPU-hours and FLOPs (x 1e18 here) are the same problem in log compute.
    compute, reward, _ = paper_curve
    a = fit_sigmoid(compute, reward)
    b = fit_sigmoid(compute * 3.6e21, reward)
    np.testing.assert_allclose([a.A, a.B, a.R0], [b.A, b.B, b.R0], rtol=1e-7)
    np.testing.assert_allclose(a.C_mid * 3.6e21, b.C_mid, rtol=1e-7)
    np.testing.assert_allclose(a.rss, b.rss, rtol=1e-9)


def test_fixed_r0(paper_curve):
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward, r0=0.3)
    assert fit.R0 == 0.3 and np.isnan(fit.stderr["R0"])
    assert list(fit.cov.index) == ["A", "B", "C_mid"] and fit.dof == fit.n - 3
    assert "(fixed)" in fit.summary()


def test_sigma_weights_match_curve_fit(paper_curve, rng):
    compute, reward, _truth = paper_curve
    sigma = rng.uniform(0.004, 0.02, compute.size)
    fit = fit_sigmoid(compute, reward, sigma=sigma, absolute_sigma=True)
    p, pcov = curve_fit(
        lambda c, A, B, Cm, R0: sigmoid(c, A, B, Cm, R0),
        compute,
        reward,
        p0=[fit.A, fit.B, fit.C_mid, fit.R0],
        sigma=sigma,
        absolute_sigma=True,
    )
    np.testing.assert_allclose([fit.A, fit.B, fit.C_mid, fit.R0], p, rtol=1e-6)
    np.testing.assert_allclose(fit.cov.to_numpy(), pcov, rtol=1e-4)


def test_dataframe_columns_and_window(paper_curve):
    compute, reward, _ = paper_curve
    df = pd.DataFrame({"gpu_hours": compute, "pass_rate": reward})
    a = fit_sigmoid("gpu_hours", "pass_rate", data=df, min_compute=1500, max_compute=12000)
    window = (compute >= 1500) & (compute <= 12000)
    b = fit_sigmoid(compute[window], reward[window])
    np.testing.assert_allclose([a.A, a.B, a.C_mid, a.R0], [b.A, b.B, b.C_mid, b.R0], rtol=1e-9)
    assert a.compute.size == compute.size  # nothing lost: the full data is kept with its window


def test_predict_inverse_and_loglog(paper_curve):
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward)
    c = np.array([0.0, 500.0, 2542.0, 10000.0])
    r = fit.predict(c)
    assert r[0] == pytest.approx(fit.R0)
    np.testing.assert_allclose(fit.compute_to_reach(r[1:]), c[1:], rtol=1e-9)
    assert fit.compute_to_reach(fit.A + 0.01) == np.inf
    assert fit.compute_to_reach(fit.R0) == 0.0
    assert isinstance(fit.predict(1000.0), float)
    # on the fitted curve, log F(R) = B log C exactly: the log-log view has slope B
    ll = fit.loglog(c[1:], r[1:])
    np.testing.assert_allclose(ll["log_F"], fit.B * np.log(c[1:]), rtol=1e-9)
    data_view = fit.loglog()
    assert len(data_view) == fit.n and {"log_compute", "log_F"} <= set(data_view.columns)


def test_compute_zero_is_the_start():
    c = np.array([0, 100, 300, 1000, 3000, 10000, 30000.0])
    r = sigmoid(c, 0.6, 1.5, 2000, 0.2)
    fit = fit_sigmoid(c, r)
    np.testing.assert_allclose([fit.A, fit.B, fit.C_mid, fit.R0], [0.6, 1.5, 2000, 0.2], rtol=1e-6)


def test_decreasing_curve():
    c = np.geomspace(0.1, 100, 20)
    r = sigmoid(c, 0.5, 2.0, 5.0, 7.5)  # A < R0: a dose-response decline
    fit = fit_sigmoid(c, r)
    np.testing.assert_allclose([fit.A, fit.B, fit.C_mid, fit.R0], [0.5, 2.0, 5.0, 7.5], rtol=1e-6)


def test_pass_rate_bounds_are_automatic_and_overridable():
    # A rise that has not bent yet: unbounded, A would run above 1.
    c = np.linspace(100, 2000, 30)
    r = np.clip(0.2 + 0.0004 * c, 0, 1)
    with pytest.warns(Warning):
        fit = fit_sigmoid(c, r)
    assert 0 <= fit.A <= 1 and 0 <= fit.R0 <= 1
    assert "bound" in fit.message or "search range" in fit.message
    free = fit_sigmoid(c, r, bounds={"A": (0, 5), "R0": (0, 1)})
    assert free.bounds.A == (0.0, 5.0)


def test_not_identified_fit_says_so(rng):
    # All points far below C_mid: the ceiling is not identified.
    c = np.linspace(10, 1500, 25)
    r = sigmoid(c, 0.8, 2.0, 5000, 0.1) + rng.normal(0, 0.005, c.size)
    with pytest.warns(Warning):
        fit = fit_sigmoid(c, r)
    assert not fit.converged or "poorly identified" in fit.message
    vague = [p for p in ("A", "B", "C_mid") if fit.stderr[p] > 0.5 * abs(fit.params[p])]
    assert vague and all(p in fit.message for p in vague)


def test_summary_to_dict_and_repr(paper_curve):
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward, label="run-1")
    text = fit.summary()
    for token in ("[[Parameters]]", "A ", "B ", "C_mid", "R0", "converged", "run-1"):
        assert token in text
    d = fit.to_dict()
    json.dumps(d)
    assert d["params"]["A"] == fit.A and d["converged"] is True
    assert "SigmoidFit(A=" in repr(fit)
    assert fit.aic < fit.bic  # n > e^2: the BIC penalty is larger


def test_plot_returns_figure(paper_curve):
    compute, reward, _ = paper_curve
    fit = fit_sigmoid(compute, reward, min_compute=1500, max_compute=8000)
    fig = fit.plot()
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("compute") and len(ax.lines) >= 2


def test_paper_grid_reproduces_the_grid_optimum(paper_curve):
    compute, reward, _ = paper_curve
    a_grid = np.round(np.arange(0.58, 0.64, 0.005), 3)
    c_grid = np.linspace(1500, 3500, 21)
    fit = fit_sigmoid(
        compute,
        reward,
        r0=0.3,
        method="paper-grid",
        options={"A_grid": a_grid, "C_mid_grid": c_grid},
    )
    assert fit.method == "paper-grid"
    assert fit.A in a_grid and fit.C_mid in c_grid
    exact = fit_sigmoid(compute, reward, r0=0.3)
    # the grid answer is quantized: within a grid step of the exact optimum, never better
    assert abs(fit.A - exact.A) <= 0.005 and abs(fit.C_mid - exact.C_mid) <= 100
    assert fit.rss >= exact.rss * (1 - 1e-12)


def test_lmfit_model_reaches_the_same_optimum(paper_curve):
    from rlcurves.lmfit_model import SigmoidModel

    compute, reward, _ = paper_curve
    exact = fit_sigmoid(compute, reward)
    via = fit_sigmoid(compute, reward, method="lmfit")
    np.testing.assert_allclose(
        [via.A, via.B, via.C_mid, via.R0], [exact.A, exact.B, exact.C_mid, exact.R0], rtol=1e-5
    )
    model = SigmoidModel()
    params = model.guess(reward, compute=compute)
    # start lmfit from a perturbed point: it must come back to the exact optimum
    params["C_mid"].set(value=exact.C_mid * 1.3)
    result = model.fit(reward, params, compute=compute)
    assert result.success
    np.testing.assert_allclose(result.params["A"].value, exact.A, rtol=1e-5)
    np.testing.assert_allclose(2 * 0.5 * np.sum(result.residual**2), exact.rss, rtol=1e-7)
    assert "C_mid" in result.fit_report()
