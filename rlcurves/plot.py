"""Figures (matplotlib), one function each; every function takes results, returns the Figure and
accepts ``ax=`` to draw into an existing axes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._format import compute_label as _compute_label
from ._format import format_compute, unit_name
from .errors import RLCurvesError
from .model import sigmoid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .backtest import Backtest
    from .compare import Comparison
    from .forecast import Forecast
    from .powerlaw import ModelComparison
    from .result import SigmoidFit
    from .runs import RunsFit

# Twelve colours for a dozen variants, safe with the common forms of colour blindness: the
# Okabe-Ito set (Okabe & Ito 2008; yellow last, it is faint on white) extended with the darker
# colours of Paul Tol's "muted" scheme and a grey. Past eight colours, markers keep neighbours
# apart too (MARKERS cycles with a different period), so no two of a dozen variants look alike.
PALETTE = [
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#332288",  # indigo (Tol)
    "#882255",  # wine (Tol)
    "#999933",  # olive (Tol)
    "#777777",  # grey
    "#F0E442",  # yellow
]
MARKERS = ["o", "s", "D", "^", "v", "P", "X"]


def style(i: int) -> tuple[str, str]:
    """(colour, marker) of the i-th series: twelve colours, seven markers, 84 distinct pairs."""
    return PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]


def _unit(fit: SigmoidFit) -> str | None:
    return getattr(fit, "units", {}).get("compute")


def _reward_label(fit: SigmoidFit) -> str:
    return getattr(fit, "units", {}).get("reward") or "reward"


def _shared_unit(fits) -> str | None:
    units = {_unit(f) for f in fits}
    known = units - {None}
    if len(known) > 1:
        raise RLCurvesError(
            f"these fits are on different compute axes ({sorted(known)}); they cannot share a "
            "figure. Read them on one axis (read_log(..., compute=...)) and refit.",
            units=sorted(known),
        )
    return known.pop() if known else None


def _axes(ax: Axes | None, figsize=(6.4, 4.2)) -> tuple[Figure, Axes]:
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        return fig, ax
    return ax.figure, ax


def plot_fit(
    fit: SigmoidFit,
    ax: Axes | None = None,
    *,
    extrapolate_to: float | None = None,
    band: Forecast | tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    logx: bool = False,
    color: str | None = None,
    label: str | None = None,
    compute_label: str | None = None,
    reward_label: str | None = None,
    show_asymptote: bool = True,
    title: str | None = None,
    **scatter_kws: Any,
) -> Figure:
    """Data and fitted curve; the extrapolated segment dashed, the excluded window shaded.

    Parameters
    ----------
    fit : SigmoidFit
        The fit to draw.
    ax : matplotlib Axes, optional
        Draw into this axes; a new figure otherwise.
    extrapolate_to : float, optional
        Extend the curve (dashed) to this compute; default: the largest compute in the data.
    band : Forecast or (compute, lower, upper), optional
        An interval band to shade around the curve. A :class:`rlcurves.forecast.Forecast` (e.g.
        ``forecast(fit, np.linspace(...))``) also draws its wider prediction band (the range of
        one new evaluation) lightly.
    logx : bool
        Log-scale compute axis.
    color, label : str, optional
        Curve colour and legend label (default: the fit's label).
    compute_label, reward_label, title : str, optional
        Axis labels and title; default: the compute unit and reward column the data carried
        (``fit.units``), and the fit's label with its parameters. To draw several fits in one
        figure use :func:`plot_fits` (one colour and one legend entry each).
    """
    fig, ax = _axes(ax)
    # drawn into axes that already hold fits: the next colour, one legend entry per fit (the
    # markers' and bands' meanings were given by the first), parameters in the legend
    n_drawn = getattr(ax, "_rlcurves_fits", 0)
    ax._rlcurves_fits = n_drawn + 1
    color = color or style(n_drawn)[0]
    label = label or fit.label or "fit"
    if n_drawn:
        label = f"{label}: A = {fit.A:.3f}, B = {fit.B:.2f}"

    def aux(text: str) -> str:
        return text if n_drawn == 0 else "_nolegend_"

    c_all, r_all = fit.compute, fit.reward
    inside = fit.window
    c_fit = fit.fit_compute
    lo_fit, hi_fit = c_fit.min(), c_fit.max()
    early, late = ~inside & (c_all < lo_fit), ~inside & (c_all > hi_fit)
    ax.scatter(
        c_all[inside],
        r_all[inside],
        s=14,
        color=color,
        alpha=0.8,
        lw=0,
        label=aux("fitted data"),
        zorder=3,
        **scatter_kws,
    )
    if early.any():
        ax.scatter(
            c_all[early],
            r_all[early],
            s=14,
            facecolors="none",
            edgecolors=color,
            alpha=0.7,
            label=aux("excluded from fit"),
            zorder=3,
        )
    if late.any():
        ax.scatter(
            c_all[late],
            r_all[late],
            s=16,
            marker="D",
            color="0.35",
            alpha=0.75,
            lw=0,
            label=aux("held out (after the fit window)"),
            zorder=3,
        )
    end = max(extrapolate_to or 0.0, c_all.max())
    if band is not None and hasattr(band, "prediction_upper"):
        end = max(end, float(np.max(band.at)))
    positive = c_all[c_all > 0]
    start = max(positive.min() if positive.size else lo_fit, 1e-12)
    grid = np.geomspace(start, end, 400) if logx else np.linspace(0.0, end, 400)
    within = (grid >= lo_fit) & (grid <= hi_fit)
    ax.plot(grid[within], fit.predict(grid[within]), color=color, lw=2, label=label, zorder=4)
    before = grid <= lo_fit
    after = grid >= hi_fit if end > hi_fit * (1 + 1e-9) else np.zeros_like(grid, dtype=bool)
    if before.any():
        ax.plot(grid[before], fit.predict(grid[before]), color=color, lw=1, ls=":", alpha=0.8)
    if after.any():
        ax.plot(
            grid[after],
            fit.predict(grid[after]),
            color=color,
            lw=2,
            ls="--",
            label=aux("extrapolation"),
            zorder=4,
        )
    if band is not None:
        if hasattr(band, "prediction_upper"):
            bc = np.atleast_1d(band.at)
            level = f"{band.level:.0%} " if getattr(band, "level", None) else ""
            # the prediction band (one evaluation) is often barely wider than the curve's:
            # drawn as its own dotted edges over a faint fill, so the two stay apart
            plo = np.atleast_1d(band.prediction_lower)
            phi = np.atleast_1d(band.prediction_upper)
            ax.fill_between(bc, plo, phi, color=color, alpha=0.07, lw=0)
            ax.plot(bc, plo, color=color, lw=0.9, ls=(0, (1, 1.5)), alpha=0.9,
                    label=aux(f"{level}prediction (one evaluation)"))  # fmt: skip
            ax.plot(bc, phi, color=color, lw=0.9, ls=(0, (1, 1.5)), alpha=0.9)
            ax.fill_between(
                bc,
                np.atleast_1d(band.lower),
                np.atleast_1d(band.upper),
                color=color,
                alpha=0.28,
                lw=0,
                label=aux(f"{level}interval of the curve"),
            )
        else:
            bc, blo, bhi = band
            ax.fill_between(bc, blo, bhi, color=color, alpha=0.18, lw=0, label=aux("interval"))
    if fit.min_compute is not None and fit.min_compute > 0:
        ax.axvspan(
            start if logx else 0.0,
            fit.min_compute,
            color="0.85",
            alpha=0.5,
            lw=0,
            label=aux("excluded window"),
        )
    if show_asymptote and n_drawn == 0:
        ax.axhline(fit.A, color=color, lw=0.8, ls="-.", alpha=0.6)
        ax.annotate(
            f"A = {fit.A:.3f}",
            (end, fit.A),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            va="bottom",
            color=color,
            fontsize=9,
        )
    if logx:
        ax.set_xscale("log")
    unit = _unit(fit)
    ax.set_xlabel(compute_label or _compute_label(unit))
    ax.set_ylabel(reward_label or _reward_label(fit))
    params = (
        f"A={fit.A:.3f}  B={fit.B:.2f}  C_mid={format_compute(fit.C_mid, unit)}  R0={fit.R0:.3f}"
    )
    if n_drawn:
        params = f"{n_drawn + 1} fits, parameters in the legend"
    ax.set_title(
        title or (f"{fit.label}\n{params}" if fit.label and not n_drawn else params), fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_fits(
    fits,
    ax: Axes | None = None,
    *,
    bands: bool = False,
    level: float = 0.9,
    seed: int | None = 0,
    extrapolate_to: float | None = None,
    logx: bool = False,
    title: str | None = None,
    legend: str = "outside",
) -> Figure:
    """Several fits in one figure: one colour (and marker) per run, one legend entry each.

    Parameters
    ----------
    fits : dict of SigmoidFit, list of SigmoidFit, or Comparison
        The curves (a list is named by each fit's label; a Comparison by its variants).
    ax : matplotlib Axes, optional
    bands : bool
        Shade each curve's ``level`` interval (:func:`rlcurves.forecast.forecast`, the
        calibrated bootstrap; a few seconds per fit).
    level, seed
        Of the bands.
    extrapolate_to : float, optional
        Draw every curve (dashed past its fit window) up to this compute; default: the largest
        compute of any run.
    logx : bool
        Log-scale compute axis.
    title : str, optional
        Default: the number of runs and the compute axis.
    legend : {"outside", "inside"}
        "outside" (default) puts the legend right of the axes, clear of the points.

    Raises
    ------
    RLCurvesError
        Fits on different compute axes (say GPU-hours and tokens), or no fits.

    Examples
    --------
    >>> fits = {}
    >>> for name in ("scalerl", "batch_64"):
    ...     run = rlcurves.read_log(f"example:recipe_loo_{name}", compute="tokens_total")
    ...     fits[name] = rlcurves.fit_sigmoid("compute", "reward", data=run, label=name)
    ...
    >>> fig = rlcurves.plot_fits(fits)
    >>> fig.savefig("curves.png")
    """
    if hasattr(fits, "fits") and hasattr(fits, "baseline"):
        fits = fits.fits
    if not isinstance(fits, dict):
        fits = {(f.label or f"fit {i + 1}"): f for i, f in enumerate(fits)}
    if not fits:
        raise RLCurvesError("plot_fits needs at least one fit; pass a dict or list of fits.")
    for name, fit in fits.items():  # an AttributeError deep in the drawing before
        if not (hasattr(fit, "predict") and hasattr(fit, "compute")):
            raise RLCurvesError(
                f"plot_fits: {name!r} is a {type(fit).__name__}, not a fit; pass fits from "
                "rlcurves.fit_sigmoid (or a Comparison)"
            )
    unit = _shared_unit(fits.values())
    fig, ax = _axes(ax, figsize=(8.2, 4.6) if legend == "outside" else (6.4, 4.2))
    end = max([extrapolate_to or 0.0, *(float(f.compute.max()) for f in fits.values())])
    for i, (name, fit) in enumerate(fits.items()):
        color, marker = style(i)
        c, r, inside = fit.compute, fit.reward, fit.window
        ax.scatter(c[inside], r[inside], s=12, color=color, marker=marker, alpha=0.7, lw=0)
        if (~inside).any():
            ax.scatter(
                c[~inside],
                r[~inside],
                s=12,
                marker=marker,
                facecolors="none",
                edgecolors=color,
                alpha=0.6,
            )
        lo, hi = float(fit.fit_compute.min()), float(fit.fit_compute.max())
        start = max(lo, 1e-12) if logx else lo
        grid = np.geomspace(start, end, 300) if logx else np.linspace(start, end, 300)
        within = grid <= hi
        ax.plot(
            grid[within],
            fit.predict(grid[within]),
            color=color,
            lw=2,
            marker=marker,
            markevery=[0],
            ms=5,
            label=f"{name}: A = {fit.A:.3f}, B = {fit.B:.2f}",
        )
        if (~within).any():
            ax.plot(grid[~within], fit.predict(grid[~within]), color=color, lw=1.6, ls="--")
        if bands:
            from .forecast import forecast

            band = forecast(fit, grid, level=level, seed=seed, progress=False, band=True)
            ax.fill_between(grid, band.lower, band.upper, color=color, alpha=0.15, lw=0)
    # the line styles, once, in grey: what solid, dashed and hollow mean
    ax.plot([], [], color="0.4", lw=2, label="fitted window")
    ax.plot([], [], color="0.4", lw=1.6, ls="--", label="extrapolation")
    if any((~f.window).any() for f in fits.values()):
        ax.scatter(
            [], [], s=12, facecolors="none", edgecolors="0.4", label="outside the fit window"
        )
    if bands:
        ax.fill_between([], [], [], color="0.4", alpha=0.15, lw=0, label=f"{level:.0%} interval")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(_compute_label(unit))
    rewards = {_reward_label(f) for f in fits.values()}
    ax.set_ylabel(rewards.pop() if len(rewards) == 1 else "reward")
    ax.set_title(
        title
        or f"{len(fits)} runs, one colour each (compute: {unit_name(unit) or 'unit not given'})",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    if legend == "outside":
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=8, loc="best")
    return fig


def plot_forecast(
    fit: SigmoidFit,
    forecast: Forecast | None = None,
    ax: Axes | None = None,
    *,
    to: float | None = None,
    level: float = 0.9,
    seed: int | None = 0,
    **kwargs: Any,
) -> Figure:
    """A fit with its forecast band: fitted window solid, extrapolation dashed, held-out points.

    Parameters
    ----------
    fit : SigmoidFit
        The fit (e.g. on half the budget; the points after its window are drawn as held out).
    forecast : Forecast, optional
        Band to draw; default: :func:`rlcurves.forecast.forecast` on 200 points up to ``to``.
    to : float, optional
        Where the forecast ends (default: twice the fit window's end, or the data's end if later).
    level, seed
        Used when the forecast is computed here.
    **kwargs
        Passed to :func:`plot_fit`.
    """
    if forecast is None:
        from .forecast import forecast as make_forecast

        end = to or max(2.0 * float(fit.fit_compute.max()), float(fit.compute.max()))
        start = float(fit.fit_compute.min())
        grid = np.linspace(start, end, 200)
        forecast = make_forecast(fit, grid, level=level, seed=seed, progress=False, band=True)
    kwargs.setdefault("extrapolate_to", float(np.max(forecast.at)))
    fig = plot_fit(fit, ax, band=forecast, **kwargs)
    ax = fig.axes[0] if ax is None else ax
    hi = float(fit.fit_compute.max())
    ax.axvline(hi, color="0.4", lw=0.8, ls=":")
    ax.annotate(
        "fit window ends",
        (hi, 0.98),
        xycoords=("data", "axes fraction"),
        xytext=(3, 0),
        va="top",
        textcoords="offset points",
        fontsize=8,
        color="0.3",
    )
    return fig


def plot_loglog(
    source: Comparison | dict[str, SigmoidFit],
    ax: Axes | None = None,
    *,
    shared: bool = True,
) -> Figure:
    """The paper's efficiency view: ``log F(R)`` against ``log C``, each variant a line of slope B.

    Parameters
    ----------
    source : Comparison or dict of SigmoidFit
        A comparison (with ``shared``, its curves refitted with their mean A first, the paper's
        practice, so that slopes compare), or fits to draw as they are.
    ax : matplotlib Axes, optional
    shared : bool
        Use the shared-A refits of a Comparison.
    """
    fig, ax = _axes(ax)
    same: set | None = None
    if hasattr(source, "loglog"):
        names = list(source.fits)
        fits = source.shared_a(names).fits if shared else source.fits
        shared_a = source.shared_a(names).A if shared else None
        same = set(source.same_ceiling())
    else:
        fits, shared_a = dict(source), None
    marked = []
    for i, (name, fit) in enumerate(fits.items()):
        color = style(i)[0]
        equal = same is None or name in same
        df = fit.loglog().dropna()
        ax.scatter(
            df["log_compute"],
            df["log_F"],
            s=12,
            color=color if equal else "none",
            edgecolors=color,
            alpha=0.7,
            lw=0 if equal else 0.8,
        )
        x = np.linspace(df["log_compute"].min(), df["log_compute"].max(), 2)
        label = f"{name}: slope B = {fit.B:.2f}"
        if not equal:
            marked.append(name)
            label += f" (own A {source.fits[name].A:.3f}: ceiling not shown equal)"
        ax.plot(x, fit.B * x, color=color, lw=2, ls="-" if equal else "--", label=label)
    unit = unit_name(_shared_unit(fits.values()))
    ax.set_xlabel(f"log C  (C in {unit})" if unit else "log C")
    ax.set_ylabel("log F(R),  F = C_mid^B / ((A - R0)/(R - R0) - 1)")
    title = "log-log efficiency view"
    if shared_a is not None:
        title += f" (all refitted with shared A = {shared_a:.3f})"
    if marked:
        title += f"\ndashed, hollow: ceiling not shown equal to the baseline's ({len(marked)})"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_comparison(comparison: Comparison, ax: Axes | None = None) -> Figure:
    """Variants in the (B, A) plane: efficiency across, ceiling up, with intervals both ways.

    The baseline is ringed and its A margin (the paper's +-0.02) shaded: a variant inside the
    band has the same ceiling within noise and is compared on B at a shared A. Variants whose A or
    B the data do not determine, or whose curve falls (A below R0), are left out and named in the
    title.
    """
    fig, ax = _axes(ax, figsize=(8.4, 4.8))
    t = comparison.table
    base = t[t["variant"] == comparison.baseline].iloc[0]
    ax.axhspan(
        base["A"] - comparison.margin,
        base["A"] + comparison.margin,
        color="0.9",
        lw=0,
        label=f"baseline A +- {comparison.margin:g}",
    )
    from .compare import falls, undetermined_shape

    undetermined = [n for n, f in comparison.fits.items() if undetermined_shape(f)]
    falling = [n for n, f in comparison.fits.items() if falls(f) and n not in undetermined]
    shown = t[~t["variant"].isin(undetermined + falling)]
    lo, hi = _b_axis(shown)
    clipped = False
    for i, row in t.reset_index(drop=True).iterrows():
        if row["variant"] in undetermined + falling:  # their B is no efficiency
            continue
        color, marker = style(i)
        is_base = row["variant"] == comparison.baseline
        # a barely determined B's interval (0.04 to 2,000) would squash every other bar: the
        # axis spans the point estimates, and a bar that runs off it ends in an arrow
        b_lo, b_hi = max(row["B_lower"], lo), min(row["B_upper"], hi)
        for end, edge, arrow in ((row["B_lower"], lo, "<"), (row["B_upper"], hi, ">")):
            if end < lo or end > hi:
                clipped = True
                ax.plot([edge], [row["A"]], marker=arrow, ms=8, color=color, clip_on=False,
                        zorder=4)  # fmt: skip
        ax.errorbar(
            row["B"],
            row["A"],
            xerr=[[max(row["B"] - b_lo, 0.0)], [max(b_hi - row["B"], 0.0)]],
            yerr=[[row["A"] - row["A_lower"]], [row["A_upper"] - row["A"]]],
            fmt=marker,
            ms=7 if is_base else 6,
            color=color,
            capsize=3,
            lw=1.4,
            mfc="white" if is_base else color,
            mew=2,
            label=_baseline_label(row["variant"]) if is_base else row["variant"],
        )
    if hi > 20 * lo:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    pad = (hi / lo) ** 0.03 if ax.get_xscale() == "log" else None
    ax.set_xlim(*((lo / pad, hi * pad) if pad else (lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo))))
    if clipped:
        ax.plot([], [], marker=">", ls="none", color="0.4",
                label=f"B interval runs off the axis ({lo:.3g} to {hi:.3g})")  # fmt: skip
    ax.set_xlabel("B, steepness (higher: steeper; which run gets there sooner also needs C_mid)")
    ax.set_ylabel("A, asymptotic pass rate (ceiling)")
    unit = unit_name(_shared_unit(comparison.fits.values()))
    title = (
        f"{len(t)} variants against baseline {comparison.baseline!r}, "
        f"{comparison.level:.0%} intervals\ncompute axis: {unit or 'unit not given'}"
    )
    if undetermined:
        title += f"\nnot shown (A or B not determined): {', '.join(undetermined)}"
    if falling:
        title += f"\nnot shown (falls: A below R0): {', '.join(falling)}"
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    # beside the axes, never over a point (nine variants fill any corner)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def _b_axis(shown) -> tuple[float, float]:
    """The B axis of the (B, A) plot: every point estimate (with 30% to spare), widened by each
    interval end that lies within a factor of 4 of them (one reaching further runs off it)."""
    if not len(shown):
        return 0.1, 10.0
    b = shown["B"].to_numpy(dtype=float)
    b_lo, b_hi = float(np.min(b)), float(np.max(b))
    ends = shown[["B_lower", "B_upper"]].to_numpy(dtype=float).ravel()
    ends = ends[np.isfinite(ends) & (ends > 0)]
    # room past the outermost estimates, so a bar that runs off ends clear of its point
    lo = min([b_lo / 1.3, *ends[ends >= b_lo / 4]])
    hi = max([b_hi * 1.3, *ends[ends <= b_hi * 4]])
    if hi <= lo:
        lo, hi = lo / 1.5, hi * 1.5
    return lo, hi


def _baseline_label(name: str) -> str:
    return name if "baseline" in name.lower() else f"{name} (baseline)"


def plot_backtest(backtest: Backtest, ax: Axes | None = None) -> Figure:
    """How the forecast of the run's final value, and of A, converge as more of the run is fitted.

    Each fitted prefix gives a forecast of the final value and an estimate of A, with intervals;
    the whole run's fit is the dashed reference for both.
    """
    fig, ax = _axes(ax)
    t = backtest.table.dropna(subset=["forecast"])
    x = t["fit_to"].to_numpy(dtype=float)
    dx = 0.012 * (backtest.final_compute)
    final = float(backtest.full.predict(backtest.final_compute))
    unit = _unit(backtest.full)
    at = format_compute(backtest.final_compute, unit)
    for values, lo, hi, ref, color, name, ref_name, shift in (
        (
            "forecast",
            "forecast_lower",
            "forecast_upper",
            final,
            PALETTE[0],
            f"forecast of R at C = {at}",
            f"whole-run fit's R at C = {at}",
            -dx,
        ),
        (
            "A",
            "A_lower",
            "A_upper",
            backtest.full.A,
            PALETTE[1],
            "estimate of A (ceiling)",
            "whole-run fit's A",
            dx,
        ),
    ):
        y = t[values].to_numpy(dtype=float)
        ax.errorbar(
            x + shift,
            y,
            yerr=[y - t[lo].to_numpy(float), t[hi].to_numpy(float) - y],
            fmt="o",
            color=color,
            capsize=3,
            label=name,
        )
        # the reference is drawn as its legend shows it: dashed, in the colour of what it checks
        ax.axhline(ref, color=color, lw=1, ls="--", alpha=0.8, label=ref_name)
    name = unit_name(unit)
    ax.set_xlabel(f"compute fitted up to ({name})" if name else "compute fitted up to")
    ax.set_ylabel(_reward_label(backtest.full))
    ax.set_xlim(0, backtest.final_compute * 1.02)
    ax.set_title(f"backtest: forecasts from prefixes ({backtest.level:.0%} intervals)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


def plot_models(
    comparison: ModelComparison, ax: Axes | None = None, *, logx: bool = False
) -> Figure:
    """Sigmoid and power law fitted on the first part of a run, extrapolated over the rest."""
    fig, ax = _axes(ax)
    sig = comparison.train_fits["sigmoid"]
    c, r = sig.compute, sig.reward
    split = comparison.split_compute
    train = sig.window
    early = ~train & (c <= split)
    ax.scatter(c[train], r[train], s=10, color="0.2", lw=0, alpha=0.7, label="fitted part")
    if early.any():
        ax.scatter(
            c[early],
            r[early],
            s=10,
            facecolors="none",
            edgecolors="0.3",
            alpha=0.7,
            label="excluded from fit",
        )
    if sig.min_compute:
        ax.axvspan(0, sig.min_compute, color="0.85", alpha=0.5, lw=0)
    ax.scatter(
        c[c > split],
        r[c > split],
        s=12,
        marker="D",
        color="0.55",
        lw=0,
        alpha=0.7,
        label="held out (forecast)",
    )
    end = float(c.max())
    positive = c[c > 0]
    grid = np.geomspace(positive.min(), end, 400) if logx else np.linspace(positive.min(), end, 400)
    t = comparison.table.set_index("model")
    styles = {"sigmoid": PALETTE[0], "power_law": PALETTE[1]}
    for name, fit in comparison.train_fits.items():
        color = styles[name]
        pred = np.asarray(fit.predict(grid), dtype=float)
        label = (
            f"{name.replace('_', ' ')}: A = {fit.A:.3f}, "
            f"held-out RMSE {t.loc[name, 'holdout_rmse']:.3f}"
        )
        ax.plot(grid[grid <= split], pred[grid <= split], color=color, lw=2, label=label)
        ax.plot(grid[grid >= split], pred[grid >= split], color=color, lw=2, ls="--")
    ax.axvline(split, color="0.4", lw=0.8, ls=":")
    lo = float(np.nanmin(r[c > 0]))
    ax.set_ylim(lo - 0.05 * (r.max() - lo), r.max() + 0.25 * (r.max() - lo))
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(_compute_label(_unit(sig)))
    ax.set_ylabel(_reward_label(sig))
    ax.set_title(
        f"fitted up to C = {format_compute(split, _unit(sig))}, dashed: extrapolation",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_runs(runs: RunsFit, ax: Axes | None = None, *, level: float | None = None) -> Figure:
    """Several seeds: each run's points and curve, the pooled curve with its run-level band."""
    fig, ax = _axes(ax)
    level = runs.level if level is None else level
    pooled = runs.pooled
    c_max = float(pooled.compute.max())
    grid = np.linspace(float(pooled.fit_compute.min()), c_max, 300)
    for i, (name, fit) in enumerate(runs.per_run.items()):
        color = style(i + 1)[0]
        ax.scatter(fit.compute, fit.reward, s=8, color=color, alpha=0.45, lw=0)
        ax.plot(
            grid, fit.predict(grid), color=color, lw=1, alpha=0.9, label=f"{name}: A = {fit.A:.3f}"
        )
    s = runs.samples
    cols = [s[p].to_numpy()[:, None] for p in ("A", "B", "C_mid", "R0")]
    curves = sigmoid(grid[None, :], *cols)
    lo, hi = np.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)
    ax.fill_between(
        grid, lo, hi, color=PALETTE[0], alpha=0.25, lw=0, label=f"{level:.0%} run-level band"
    )
    ax.plot(
        grid, pooled.predict(grid), color=PALETTE[0], lw=2.2, label=f"pooled: A = {pooled.A:.3f}"
    )
    ax.set_xlabel(_compute_label(_unit(pooled)))
    ax.set_ylabel(_reward_label(pooled))
    ax.set_title(f"{len(runs.runs)} runs of one recipe", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig
