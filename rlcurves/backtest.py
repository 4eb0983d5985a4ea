"""Backtest: refit a finished run on growing prefixes and see how the forecast of its end converges.

For each fraction f of the run's budget the sigmoid is fitted on the points with compute up to
``f * C_final`` (the paper's protocol fits on half the target budget) and the curve's value at
``C_final`` forecast with an interval (:func:`rlcurves.forecast.forecast`). The forecast is scored
against the fit of the whole run at ``C_final`` (a smoothed "truth": the last single evaluation is
noisy) and the interval's coverage recorded; the prediction interval, which includes the noise of
one evaluation, is scored against the last observed point. The ceiling A is tracked the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from ._data import check_resamples, resolve_xy
from ._format import format_compute, units_of
from ._samples import parameter_samples, tails
from .errors import RLCurvesError
from .result import SigmoidFit

if TYPE_CHECKING:
    from .calibrate import Calibration

COLUMNS = [
    "fraction",
    "fit_to",
    "n_points",
    "A",
    "A_lower",
    "A_upper",
    "forecast",
    "forecast_lower",
    "forecast_upper",
    "prediction_lower",
    "prediction_upper",
    "final_fit",
    "observed",
    "error",
    "covered",
    "covered_observed",
    "A_covered",
    "refused",
    "note",
]


@dataclass(eq=False, repr=False)
class Backtest:
    """Result of :func:`backtest`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per fraction: ``fraction, fit_to, n_points, A, A_lower, A_upper, forecast,
        forecast_lower, forecast_upper, prediction_lower, prediction_upper, final_fit,
        observed, error, covered, covered_observed, A_covered, refused, note``. ``forecast`` is the
        prefix fit's value at the final compute; ``final_fit`` the whole run's fit there;
        ``error = forecast - final_fit``; ``covered`` whether the forecast interval holds
        ``final_fit``, ``covered_observed`` whether the prediction interval holds the last
        observed point, ``A_covered`` whether the A interval holds the whole run's A. A forecast
        whose interval is unbounded (too few points to estimate the noise: the metric's whole
        range) is ``refused``: it covers nothing (``covered`` and ``covered_observed`` False), so
        it counts as a miss in :attr:`coverage`. A fraction with too few points to fit has NaN
        and a ``note``.
    full : SigmoidFit
        The fit of the whole run.
    fits : dict
        Fraction -> SigmoidFit of the prefix.
    final_compute : float
    level : float

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> bt = rlcurves.backtest(
    ...     "compute", "reward", data=df, fractions=(0.25, 0.5), n_samples=200, progress=False
    ... )
    >>> sorted(bt.coverage)
    ['A', 'forecast', 'observed']
    >>> bt.coverage["forecast"]
    1.0
    """

    table: pd.DataFrame
    full: SigmoidFit
    fits: dict[float, SigmoidFit]
    final_compute: float
    level: float
    method: str

    @property
    def coverage(self) -> dict[str, float]:
        """Fractions of the fitted prefixes whose intervals covered: forecast, observed, A (a
        refused, unbounded forecast counts as a miss)."""
        t = self.table.dropna(subset=["forecast"])
        return {
            "forecast": float(t["covered"].mean()),
            "observed": float(t["covered_observed"].mean()),
            "A": float(t["A_covered"].mean()),
        }

    def summary(self) -> str:
        """The table in words."""
        lines = [
            f"[[Backtest]] forecast of the value at C = {format_compute(self.final_compute)} "
            "from prefixes "
            f"({self.level:.0%} {self.method} intervals); whole-run fit there "
            f"{self.full.predict(self.final_compute):.3f}, A {self.full.A:.3f}"
        ]
        lines.append(f"    {'fit to':>9}     {'forecast [interval]':<26}error    A [interval]")
        for _, r in self.table.iterrows():
            if not np.isfinite(r["forecast"]):
                lines.append(f"    {format_compute(r['fit_to']):>9}     {r['note']}")
                continue
            if r["refused"]:
                interval, mark = "refused (unbounded)", "  (refused: counted as a miss)"
            else:
                interval = f"[{r['forecast_lower']:.3f}, {r['forecast_upper']:.3f}]"
                mark = "" if r["covered"] else "  (missed)"
            lines.append(
                f"    {format_compute(r['fit_to']):>9}     {r['forecast']:.3f} {interval:<20}"
                f"{r['error']:+.3f}   {r['A']:.3f} [{r['A_lower']:.3f}, {r['A_upper']:.3f}]{mark}"
            )
        cov = self.coverage
        refused = int(self.table["refused"].fillna(False).sum())
        lines.append(
            f"    coverage: forecast {cov['forecast']:.0%}, last observation "
            f"{cov['observed']:.0%}, A {cov['A']:.0%}"
            + (f" ({refused} refused forecast(s) counted as misses)" if refused else "")
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"Backtest(fractions={list(self.table['fraction'])}, level={self.level})"

    def plot(self, ax=None, **kwargs: Any):
        """See :func:`rlcurves.plot.plot_backtest`."""
        from .plot import plot_backtest

        return plot_backtest(self, ax=ax, **kwargs)


def checked_fractions(fractions: float | Sequence[float]) -> list[float]:
    """``fractions=`` as a list of floats in (0, 1) (one number is one prefix), or an
    RLCurvesError in the keyword's words."""
    values = [fractions] if isinstance(fractions, (int, float, np.number)) else fractions
    try:
        out = [float(f) for f in values]
    except (TypeError, ValueError):
        out = []
    if not out or any(not 0 < f < 1 for f in out):
        raise RLCurvesError(
            f"fractions= must be numbers in (0, 1), e.g. (0.25, 0.5); got {fractions!r}"
        )
    return out


def backtest(
    compute: ArrayLike | str,
    reward: ArrayLike | str,
    *,
    data: pd.DataFrame | None = None,
    fractions: Sequence[float] = (0.25, 0.5, 0.75),
    min_compute: float | None = None,
    r0: float | None = None,
    level: float = 0.9,
    method: str = "bootstrap",
    n_samples: int = 1000,
    seed: int | None = 0,
    label: str | None = None,
    progress: bool = True,
    calibration: Calibration | str | None = None,
) -> Backtest:
    """Refit a finished run on growing prefixes and score the forecasts of its final value.

    Parameters
    ----------
    compute, reward, data
        The finished run, as in :func:`rlcurves.fit_sigmoid`.
    fractions : float or sequence of float
        Fractions of the final compute to fit up to, each in (0, 1).
    min_compute : float, optional
        Start of every fit window (the paper drops the first ~1.5k GPU-hours).
    r0 : float, optional
        Fix R0 in every fit.
    level : float
        Interval level.
    method : {"bootstrap", "profile", "mcmc"}
        Forecast interval method (:func:`rlcurves.forecast.forecast`); the A interval always
        comes from bootstrap draws.
    n_samples : int
        Bootstrap resamples per prefix.
    seed : int, optional
        Random seed.
    label : str, optional
        Name carried by the fits.
    progress : bool
        Show a progress bar over the prefixes (each one is a fit plus its bootstrap).
    calibration : Calibration or str, optional
        For the default bootstrap forecast: scores from :func:`rlcurves.calibrate.calibrate` on
        your own finished runs, or the shipped calibration of a kind of metric by name:
        ``"validation"`` (the default) or ``"training reward"`` (see :func:`rlcurves.forecast`).

    Returns
    -------
    Backtest

    Raises
    ------
    RLCurvesError
        ``fractions`` outside (0, 1), or no prefix with enough points to fit.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> bt = rlcurves.backtest("compute", "reward", data=df, fractions=(0.5,), progress=False)
    >>> list(bt.table["fraction"])
    [0.5]
    """
    from .fit import fit_sigmoid
    from .forecast import forecast

    q_lo, q_hi = tails(level)
    fractions = checked_fractions(fractions)
    check_resamples("n_samples", n_samples)
    c, r, _ = resolve_xy(compute, reward, data)
    final = float(c.max())
    last = int(np.argmax(c))
    kw = dict(r0=r0, min_compute=min_compute, label=label)
    full = _quiet(fit_sigmoid, c, r, **kw)
    full.units = units_of(data, compute, reward)  # axis labels of the plot
    truth_value, truth_A = float(full.predict(final)), full.A
    rows, fits = [], {}
    for f in tqdm(sorted(fractions), desc="backtest", disable=not progress, leave=False):
        fit_to = f * final
        row: dict[str, Any] = {"fraction": f, "fit_to": fit_to, "final_fit": truth_value}
        row["observed"] = float(r[last])
        try:
            fit = _quiet(fit_sigmoid, c, r, max_compute=fit_to, **kw)
        except RLCurvesError as exc:
            row["note"] = f"not fitted: {exc}"
            rows.append(row)
            continue
        fits[f] = fit
        fc = forecast(
            fit,
            final,
            level=level,
            method=method,
            seed=seed,
            progress=False,
            **_n(method, n_samples),
            **({} if calibration is None else {"calibration": calibration}),
        )
        draws = parameter_samples(fit, n_samples, seed=seed)
        a_lo, a_hi = np.quantile(draws["A"], [q_lo, q_hi])
        row.update(
            n_points=fit.n,
            A=fit.A,
            A_lower=a_lo,
            A_upper=a_hi,
            forecast=float(fc.mean),
            forecast_lower=float(fc.lower),
            forecast_upper=float(fc.upper),
            prediction_lower=float(fc.prediction_lower),
            prediction_upper=float(fc.prediction_upper),
            error=float(fc.mean) - truth_value,
            # an unbounded interval (the metric's whole range) is a refusal, never a cover
            covered=not fc.unbounded and bool(fc.lower <= truth_value <= fc.upper),
            covered_observed=not fc.unbounded
            and bool(fc.prediction_lower <= r[last] <= fc.prediction_upper),
            A_covered=bool(a_lo <= truth_A <= a_hi),
            refused=bool(fc.unbounded),
            # a converged fit can still leave a parameter unidentified or on a bound, and a
            # forecast can be unbounded or follow a run that peaked: say so
            note="; ".join(
                n
                for n in (
                    "" if fit.message.startswith("converged:") else fit.message,
                    fc.note.replace(fit.peak, "").strip("; ") if fit.peak else fc.note,
                )
                if n
            ),
        )
        rows.append(row)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["n_points"] = table["n_points"].astype("Int64")
    for col in ("covered", "covered_observed", "A_covered", "refused"):
        table[col] = table[col].astype("boolean")
    table["note"] = table["note"].fillna("")
    if not fits:
        raise RLCurvesError(
            f"no prefix could be fitted (fractions {fractions} of C = {final:g}); use larger "
            "fractions or a smaller min_compute",
            notes=list(table["note"]),
        )
    return Backtest(table, full, fits, final, level, method)


def _n(method: str, n_samples: int) -> dict:
    return {"n": n_samples} if method == "bootstrap" else {}


def _quiet(fn, *args, **kwargs):
    # A prefix of a run identifies C_mid poorly by construction; the table shows the intervals.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


__all__ = ["Backtest", "backtest"]
