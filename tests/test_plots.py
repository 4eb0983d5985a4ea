"""Every figure: returns a Figure, draws into a given axes, has labelled axes, renders to PNG."""

import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from rlcurves import fit_sigmoid, sigmoid
from rlcurves import plot as P
from rlcurves.backtest import backtest
from rlcurves.compare import compare
from rlcurves.forecast import forecast
from rlcurves.powerlaw import compare_models
from rlcurves.runs import fit_runs

matplotlib.use("Agg")
C = np.linspace(0, 16000, 61)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def half_fit():
    r = sigmoid(C, 0.61, 1.92, 2542, 0.3) + np.random.default_rng(1).normal(0, 0.006, C.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(C, r, min_compute=1500, max_compute=8000, label="half")


@pytest.fixture(scope="module")
def comparison():
    rng = np.random.default_rng(2)
    curves = {
        name: (C, sigmoid(C, a, b, 2500, 0.3) + rng.normal(0, 0.006, C.size))
        for name, a, b in (("base", 0.61, 1.8), ("b", 0.605, 2.3), ("low", 0.52, 1.9))
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare(curves, min_compute=1500, n_samples=100, method="normal")


def _check(fig, ax, tmp_path, name):
    assert isinstance(fig, Figure)
    assert ax.get_xlabel() and ax.get_ylabel()
    path = tmp_path / f"{name}.png"
    fig.savefig(path, dpi=60)
    assert path.stat().st_size > 5000


def _own_axes():
    fig, ax = plt.subplots()
    return fig, ax


def test_plot_fit_with_forecast_band(half_fit, tmp_path):
    fc = forecast(half_fit, np.linspace(1500, 16000, 50), seed=0, progress=False, n=100)
    fig, ax = _own_axes()
    out = P.plot_fit(half_fit, ax=ax, band=fc)
    assert out is fig
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    # prediction band (a faint fill, its edges dotted lines) and curve band from the Forecast
    labels = [b.get_label() for b in bands]
    assert len(bands) >= 2 and any("interval" in s for s in labels)
    assert any("prediction" in str(ln.get_label()) for ln in ax.lines)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "held out (after the fit window)" in legend and "excluded from fit" in legend
    assert "extrapolation" in legend
    _check(out, ax, tmp_path, "fit")


def test_plot_fit_keeps_tuple_band(half_fit, tmp_path):
    grid = np.linspace(1500, 16000, 20)
    pred = half_fit.predict(grid)
    fig = P.plot_fit(half_fit, band=(grid, pred - 0.01, pred + 0.01), logx=True)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    _check(fig, ax, tmp_path, "fit_tuple")


def test_plot_forecast(half_fit, tmp_path):
    fig, ax = _own_axes()
    out = P.plot_forecast(half_fit, ax=ax, seed=0)
    assert out is fig
    # the dashed extrapolation reaches twice the fit window's end (the data's end here)
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert max(line.get_xdata().max() for line in dashed) == pytest.approx(16000)
    _check(out, ax, tmp_path, "forecast")


def test_plot_comparison_and_loglog(comparison, tmp_path):
    fig, ax = _own_axes()
    assert P.plot_comparison(comparison, ax=ax) is fig
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "base (baseline)" in legend and "low" in legend
    _check(fig, ax, tmp_path, "comparison")
    fig2, ax2 = _own_axes()
    assert P.plot_loglog(comparison, ax=ax2) is fig2
    # issue 26: every variant, refitted at the shared A; "low", whose own ceiling is not shown
    # equal to the baseline's, is kept and marked (dashed, named in the legend), not dropped
    assert len(ax2.lines) == 3
    styles = {line.get_label().split(":")[0]: line.get_linestyle() for line in ax2.lines}
    assert styles["low"] == "--" and styles["base"] == "-"
    legend2 = " ".join(t.get_text() for t in ax2.get_legend().get_texts())
    assert "ceiling not shown equal" in legend2 and "shared A" in ax2.get_title()
    ll = comparison.loglog()
    assert set(ll["variant"]) == {"base", "b", "low"}
    assert not ll[ll["variant"] == "low"]["same_ceiling"].any()
    assert ll[ll["variant"] == "base"]["same_ceiling"].all()
    _check(fig2, ax2, tmp_path, "loglog")
    fig3 = P.plot_loglog(dict(comparison.fits))
    assert len(fig3.axes[0].lines) == 3


def test_plot_backtest(tmp_path):
    r = sigmoid(C, 0.61, 1.92, 2542, 0.3) + np.random.default_rng(3).normal(0, 0.006, C.size)
    bt = backtest(C, r, min_compute=1500, n_samples=100)
    fig, ax = _own_axes()
    assert P.plot_backtest(bt, ax=ax) is fig
    assert len(ax.containers) == 2  # forecast and A error bars
    _check(fig, ax, tmp_path, "backtest")


def test_plot_models_and_runs(tmp_path):
    c = np.linspace(0, 100000, 201)
    r = sigmoid(c, 0.645, 1.7, 10000, 0.3) + np.random.default_rng(4).normal(0, 0.005, c.size)
    mc = compare_models(c, r, min_compute=1500)
    fig, ax = _own_axes()
    assert P.plot_models(mc, ax=ax) is fig
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "power law: A = 1.000" in legend
    _check(fig, ax, tmp_path, "models")
    rng = np.random.default_rng(5)
    df = pd.concat(
        pd.DataFrame(
            {"compute": C, "reward": sigmoid(C, a, 1.9, 2500, 0.3) + rng.normal(0, 0.006, C.size)}
        ).assign(run=f"s{i}")
        for i, a in enumerate((0.6, 0.61, 0.62))
    )
    rf = fit_runs(df, min_compute=1500, n_boot=60)
    fig, ax = _own_axes()
    assert P.plot_runs(rf, ax=ax) is fig
    assert len(ax.lines) == 4  # three runs and the pooled curve
    _check(fig, ax, tmp_path, "runs")


def test_result_plot_methods(comparison):
    fig, ax = _own_axes()
    assert comparison.plot(ax=ax) is fig
    fig2, ax2 = _own_axes()
    assert comparison.plot_loglog(ax=ax2, shared=False) is fig2
    assert len(ax2.lines) == 3 and "shared" not in ax2.get_title()


# --- issue 17 ----------------------------------------------------------------------------------


def _quiet_fit(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(*args, **kw)


def test_point2_units_travel_from_attrs_into_labels_and_titles():
    from rlcurves.datasets import load_example

    tokens = load_example("recipe_loo_scalerl", compute="tokens_total")
    fit = _quiet_fit("compute", "reward", data=tokens, label="scalerl")
    assert fit.units == {"compute": "tokens_total (as logged)", "reward": "val_pass_rate"}
    ax = fit.plot().axes[0]
    assert ax.get_xlabel() == "compute: tokens_total (as logged)"
    assert "GPU-hours" not in ax.get_xlabel() + ax.get_title()
    assert ax.get_ylabel() == "val_pass_rate"
    assert "scalerl" in ax.get_title() and "tokens_total" in ax.get_title()  # C_mid with its unit
    sim = load_example("simulated_scalerl_8b")
    gpu = _quiet_fit("compute", "reward", data=sim, min_compute=1500, max_compute=8000)
    ax = P.plot_forecast(gpu, seed=0).axes[0]
    assert ax.get_xlabel() == "compute (GPU-hours)"
    # bare arrays claim no unit
    bare = _quiet_fit(np.asarray(sim["compute"]), np.asarray(sim["reward"]))
    assert bare.units == {} and bare.plot().axes[0].get_xlabel() == "compute"


def test_point3_plot_fits_one_colour_and_one_legend_entry_per_run():
    rng = np.random.default_rng(3)
    fits = {}
    for i in range(12):
        r = sigmoid(C, 0.5 + 0.01 * i, 1.5 + 0.05 * i, 2500, 0.3) + rng.normal(0, 0.004, C.size)
        fits[f"variant {i}"] = _quiet_fit(C, r, label=f"variant {i}")
    fig = P.plot_fits(fits)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(t.startswith("variant ") for t in texts) == 12  # one entry per run, no repeats
    colours = {
        line.get_color() for line in ax.get_lines() if line.get_label().startswith("variant")
    }
    assert len(colours) == 12
    assert len(set(P.PALETTE)) >= 12 and len({P.style(i) for i in range(12)}) == 12
    # legend outside the axes: it covers no point
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 >= ax.get_window_extent().x1
    # a list of fits works too (named by label); bands optional
    P.plot_fits(list(fits.values())[:2], bands=True, level=0.8)
    with pytest.raises(Exception, match="different compute axes"):
        a, b = list(fits.values())[:2]
        a.units, b.units = {"compute": "GPU-hours"}, {"compute": "FLOPs"}
        P.plot_fits([a, b])


def test_point3_comparison_scatter_legend_clear_of_points_names_baseline_and_axis(comparison):
    fig = P.plot_comparison(comparison)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    assert repr(comparison.baseline) in ax.get_title() and "compute axis" in ax.get_title()
    curves = comparison.plot_curves()
    assert len(curves.axes[0].get_legend().get_texts()) >= len(comparison.fits)


def test_point8_backtest_legend_draws_the_whole_run_fit_as_it_is_drawn():
    from rlcurves.datasets import load_example

    df = load_example("simulated_scalerl_8b")
    bt = backtest("compute", "reward", data=df, fractions=(0.5,), n_samples=100, progress=False)
    ax = bt.plot().axes[0]
    refs = [line for line in ax.get_lines() if line.get_label().startswith("whole-run fit")]
    assert len(refs) == 2  # both references are real, drawn lines (no grey proxy)
    for line in refs:
        assert line.get_linestyle() == "--" and np.isfinite(line.get_ydata()).all()
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {line.get_label() for line in refs} <= legend
    assert ax.get_xlabel() == "compute fitted up to (GPU-hours)"


def test_point3_fit_plot_into_shared_axes_one_colour_and_entry_per_fit():
    _fig, ax = plt.subplots()
    rng = np.random.default_rng(4)
    for i in range(4):
        r = sigmoid(C, 0.5 + 0.03 * i, 1.8, 2500, 0.3) + rng.normal(0, 0.004, C.size)
        _quiet_fit(C, r, label=f"run {i}").plot(ax=ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts.count("fitted data") == 1  # the marker's meaning once, not four times
    assert sum(t.startswith("run ") for t in texts) == 4
    colours = {line.get_color() for line in ax.get_lines() if line.get_label().startswith("run ")}
    assert len(colours) == 4
    assert "4 fits" in ax.get_title()


def test_regression_plot_fits_of_something_not_a_fit():
    # plot_fits({"a": 3}) was an AttributeError ('int' object has no attribute 'compute')
    from rlcurves import RLCurvesError

    with pytest.raises(RLCurvesError, match="plot_fits: 'a' is a int, not a fit"):
        P.plot_fits({"a": 3})
