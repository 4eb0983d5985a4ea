"""Draws of a fit's parameters, the common currency of intervals in forecast helpers and compare.

Every interval and probability in :mod:`rlcurves.compare`, :mod:`rlcurves.backtest` and
:mod:`rlcurves.target` is a quantile or a frequency over draws of ``(A, B, C_mid, R0)``. The draws
come from the bootstrap (:func:`rlcurves.bootstrap.bootstrap`, the default) or, cheaply, from the
asymptotic normal approximation in ``(A, log B, log C_mid, R0)`` (log scale keeps B and C_mid
positive). Keeping one source makes the table's intervals, the crossover interval and ``p_ahead``
agree with each other.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from .errors import RLCurvesError
from .model import PARAM_NAMES

if TYPE_CHECKING:
    from .result import SigmoidFit

SampleMethod = Literal["bootstrap", "normal"]
SAMPLE_METHODS = ("bootstrap", "normal")


# Spread factor of the parameter draws, one per parameter on the scale it is sampled on (A and R0
# linear, B and C_mid in log), the same for every interval level so that a probability computed
# from the draws never depends on the level asked for. Measured, not borrowed from the forecast's
# factor: the raw AR(1) bootstrap's parameter intervals on simulated runs (binomial mean@16 noise
# plus AR(1) drift, the paper's parameter sets) and the false-verdict rates of compare on
# identical-recipe pairs are in benchmarks/compare_calibration.py, which prints the factor that
# makes each parameter's 90% interval cover 90% (``--calibrate``).
# fitted by `python -m benchmarks.compare_calibration --calibrate` (200 runs, seed 1)
PARAMETER_INFLATION: dict[str, float] = {"A": 1.6, "B": 1.51, "C_mid": 1.32, "R0": 1.12}
PARAMETER_KIND = "ar1"


def parameter_samples(
    fit: SigmoidFit,
    n: int = 1000,
    *,
    method: SampleMethod = "bootstrap",
    seed: int | None = 0,
    kind: str = PARAMETER_KIND,
    inflation: dict[str, float] | float | None = None,
) -> pd.DataFrame:
    """``n`` draws of the fit's parameters, a DataFrame with columns ``A, B, C_mid, R0``.

    Parameters
    ----------
    fit : SigmoidFit
        The fit.
    n : int
        Number of draws.
    method : {"bootstrap", "normal"}
        "bootstrap": refits on resamples of the raw ``kind`` (default "ar1"), their deviations
        from the estimate scaled by :data:`PARAMETER_INFLATION` on the sampled scale and kept in
        the fit's bounds. "normal": the asymptotic normal approximation in
        ``(A, log B, log C_mid, R0)`` (fast; poor when a parameter is weakly identified), not
        inflated.
    seed : int, optional
        Random seed (draws are reproducible with a seed).
    kind : str
        Bootstrap scheme, see :func:`rlcurves.bootstrap.bootstrap`. ``"calibrated"`` is an alias
        of ``"ar1"`` there, so it gives the same draws. The draws take no interval level: they
        are the same whatever interval is asked of them, so probabilities from them do not
        depend on a level.
    inflation : dict or float, optional
        Override of :data:`PARAMETER_INFLATION` (1.0: the raw draws).
    """
    if method == "bootstrap":
        from .bootstrap import bootstrap

        result = bootstrap(fit, n, kind=kind, seed=seed, progress=False)
        draws = result.samples[list(PARAM_NAMES)].reset_index(drop=True)
        factors = PARAMETER_INFLATION if inflation is None else inflation
        return inflate(draws, fit.params, factors, bounds=fit.bounds)
    if method == "normal":
        return normal_samples(fit, n, seed=seed)
    raise RLCurvesError(f"unknown sampling method {method!r}; choose one of {list(SAMPLE_METHODS)}")


def inflate(
    draws: pd.DataFrame, estimate: dict, factor: float | dict[str, float], bounds=None
) -> pd.DataFrame:
    """Scale every draw's deviation from ``estimate`` by ``factor`` (log scale for B, C_mid).

    ``factor`` is one number or one per parameter. A and R0 are then clipped to the fit's box
    ``bounds`` (a pass rate stays in [0, 1]); B and C_mid stay positive through the log scale.
    """
    factors = factor if isinstance(factor, dict) else dict.fromkeys(PARAM_NAMES, float(factor))
    if all(factors.get(p, 1.0) == 1.0 for p in PARAM_NAMES):
        return draws
    out = draws.copy()
    for p in PARAM_NAMES:
        k = float(factors.get(p, 1.0))
        if p in ("B", "C_mid"):
            center = np.log(estimate[p])
            out[p] = np.exp(center + k * (np.log(draws[p]) - center))
        else:
            out[p] = estimate[p] + k * (draws[p] - estimate[p])
    if bounds is not None:
        out["A"] = out["A"].clip(*bounds.A)
        out["R0"] = out["R0"].clip(*bounds.R0)
    return out


def normal_samples(fit: SigmoidFit, n: int, *, seed: int | None = 0) -> pd.DataFrame:
    """Draws from the asymptotic normal of ``(A, log B, log C_mid[, R0])``."""
    names = fit.free_params
    cov = np.asarray(fit.covar, dtype=float)
    if not np.all(np.isfinite(cov)):
        raise RLCurvesError(
            "the fit's covariance is not finite (a parameter is not determined by the data), so "
            "the normal approximation cannot be drawn from; use method='bootstrap'.",
            message=fit.message,
        )
    scale = np.array([{"B": 1 / fit.B, "C_mid": 1 / fit.C_mid}.get(p, 1.0) for p in names])
    cov_log = cov * np.outer(scale, scale)
    mean = np.array(
        [np.log(fit.params[p]) if p in ("B", "C_mid") else fit.params[p] for p in names]
    )
    lo, hi = fit.bounds.A
    if hi - lo <= 1e-6 * (1 + abs(hi)):
        # A held fixed through its bounds (the shared-A refit): the covariance still treats A as
        # free, so draw the others from their normal conditional on A at its value.
        rest = [j for j, p in enumerate(names) if p != "A"]
        a = names.index("A")
        var_a = cov_log[a, a]
        gain = cov_log[np.ix_(rest, [a])] / var_a if var_a > 0 else np.zeros((len(rest), 1))
        cond = cov_log[np.ix_(rest, rest)] - gain @ cov_log[np.ix_([a], rest)]
        cov_log = np.zeros_like(cov_log)
        cov_log[np.ix_(rest, rest)] = cond
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(mean, cov_log, size=n, method="eigh")
    out = {}
    for j, p in enumerate(names):
        out[p] = np.exp(draws[:, j]) if p in ("B", "C_mid") else draws[:, j]
    if "R0" not in out:
        out["R0"] = np.full(n, fit.R0)
    return pd.DataFrame({p: out[p] for p in PARAM_NAMES})


def tails(level: float) -> tuple[float, float]:
    """Lower and upper quantile probabilities of an equal-tailed interval at ``level``."""
    if not isinstance(level, numbers.Real) or not 0 < level < 1:  # text: not a TypeError
        shown = level if isinstance(level, numbers.Real) else repr(level)
        raise RLCurvesError(f"level= must be in (0, 1), e.g. 0.9 for 90%; got {shown}")
    return (1 - level) / 2, (1 + level) / 2
