"""Figures (matplotlib), one function each; every function takes results, returns the Figure and
accepts ``ax=`` to draw into an existing axes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .result import SigmoidFit

# Okabe-Ito: distinguishable with the common forms of colour blindness.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


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
    band: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    logx: bool = False,
    color: str | None = None,
    label: str | None = None,
    compute_label: str = "compute (GPU-hours)",
    reward_label: str = "validation pass rate",
    show_asymptote: bool = True,
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
    band : (compute, lower, upper), optional
        An interval band to shade around the curve (e.g. from ``rlcurves.forecast``).
    logx : bool
        Log-scale compute axis.
    color, label : str, optional
        Curve colour and legend label (default: the fit's label).
    """
    fig, ax = _axes(ax)
    color = color or PALETTE[0]
    label = label or fit.label or "fit"
    c_all, r_all = fit.compute, fit.reward
    inside = fit.window
    ax.scatter(c_all[inside], r_all[inside], s=14, color=color, alpha=0.8, lw=0, **scatter_kws)
    if (~inside).any():
        ax.scatter(
            c_all[~inside],
            r_all[~inside],
            s=14,
            facecolors="none",
            edgecolors=color,
            alpha=0.7,
            label="excluded from fit",
        )
    c_fit = fit.fit_compute
    lo_fit, hi_fit = c_fit.min(), c_fit.max()
    end = max(extrapolate_to or 0.0, c_all.max())
    start = max(c_all[c_all > 0].min() if (c_all > 0).any() else lo_fit, 1e-12)
    grid = np.geomspace(start, end, 400) if logx else np.linspace(0.0, end, 400)
    within = (grid >= lo_fit) & (grid <= hi_fit)
    ax.plot(grid[within], fit.predict(grid[within]), color=color, lw=2, label=label)
    before, after = grid <= lo_fit, grid >= hi_fit
    if end > hi_fit * (1 + 1e-9):
        after = grid >= hi_fit
    else:
        after = np.zeros_like(grid, dtype=bool)
    if before.any():
        ax.plot(grid[before], fit.predict(grid[before]), color=color, lw=1, ls=":", alpha=0.8)
    if after.any():
        ax.plot(
            grid[after], fit.predict(grid[after]), color=color, lw=2, ls="--", label="extrapolation"
        )
    if band is not None:
        bc, blo, bhi = band
        ax.fill_between(bc, blo, bhi, color=color, alpha=0.18, lw=0, label="interval")
    if fit.min_compute is not None and fit.min_compute > 0:
        ax.axvspan(
            start if logx else 0.0,
            fit.min_compute,
            color="0.85",
            alpha=0.5,
            lw=0,
            label="excluded window",
        )
    if show_asymptote:
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
    ax.set_xlabel(compute_label)
    ax.set_ylabel(reward_label)
    ax.set_title(
        f"A={fit.A:.3f}  B={fit.B:.2f}  C_mid={fit.C_mid:,.0f}  R0={fit.R0:.3f}", fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig
