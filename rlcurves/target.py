"""Compute to reach a target reward, with an interval that may honestly be "never".

The point estimate inverts the fitted curve; the interval inverts the curve of every parameter draw
(bootstrap by default) and takes quantiles. A draw whose ceiling A lies at or below the target
never reaches it and counts as infinite compute, so the upper end of the interval becomes
``inf`` as soon as more than the upper tail of draws say "never": the target then sits inside the
ceiling's plausible range, and the result says so in words.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._format import format_compute
from ._samples import SampleMethod, parameter_samples, tails
from .errors import RLCurvesError
from .model import inverse_sigmoid

if TYPE_CHECKING:
    from .result import SigmoidFit


@dataclass(frozen=True)
class ComputeTarget:
    """Compute needed to reach ``reward``, with an interval.

    Attributes
    ----------
    reward : float
        The target.
    compute, lower, upper : float
        Point estimate and equal-tailed interval at ``level``; ``inf`` means "never reached"
        (the target is at or above the ceiling); 0 means "already at the start".
    p_reachable : float
        Fraction of parameter draws whose ceiling exceeds the target.
    A, A_lower, A_upper : float
        The ceiling and its interval, the reason for an infinite answer.
    level : float
        Interval level.
    method : str
        Where the draws came from ("bootstrap" or "normal").
    message : str
        The answer in words.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> target = fit.compute_to_reach(0.55, level=0.9)
    >>> print(target)
    reaching 0.55 takes C = 5,129 [4,929, 5,448] (90%).
    """

    reward: float
    compute: float
    lower: float
    upper: float
    p_reachable: float
    A: float
    A_lower: float
    A_upper: float
    level: float
    method: str
    message: str

    def __float__(self) -> float:
        return float(self.compute)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        return asdict(self)


def quantile_with_inf(values: np.ndarray, q: float) -> float:
    """Linear-interpolated quantile that returns ``inf`` when it touches an infinite value.

    ``np.quantile`` gives NaN when it interpolates between a finite value and inf.
    """
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return math.nan
    pos = q * (x.size - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(x[hi]) or math.isinf(x[lo]):
        return math.inf if (math.isinf(x[hi]) and x[hi] > 0) else float(x[lo])
    return float(x[lo] + (x[hi] - x[lo]) * (pos - lo))


def compute_to_target(
    fit: SigmoidFit,
    reward: float,
    *,
    level: float = 0.9,
    n_samples: int = 1000,
    method: SampleMethod = "bootstrap",
    seed: int | None = 0,
    samples: pd.DataFrame | None = None,
) -> ComputeTarget:
    """Compute at which the curve reaches ``reward``, with an interval.

    Parameters
    ----------
    fit : SigmoidFit
        The fitted run.
    reward : float
        The target (a scalar).
    level : float
        Interval level (0.9: the 5% and 95% quantiles of the draws).
    n_samples, method, seed
        Parameter draws (see :func:`rlcurves._samples.parameter_samples`).
    samples : pandas.DataFrame, optional
        Precomputed draws with columns ``A, B, C_mid, R0`` (e.g. ``fit.bootstrap().samples``);
        ``method`` then only names their source in the message.

    Returns
    -------
    ComputeTarget
    """
    if np.ndim(reward) != 0:
        raise RLCurvesError("compute_to_target takes one target reward; loop for several")
    target = float(reward)
    if not math.isfinite(target):
        raise RLCurvesError(f"the target reward must be a finite number, got {reward}")
    q_lo, q_hi = tails(level)
    if samples is None:
        samples = parameter_samples(fit, n_samples, method=method, seed=seed)
    source = method
    s = samples
    draws = inverse_sigmoid(
        target, s["A"].to_numpy(), s["B"].to_numpy(), s["C_mid"].to_numpy(), s["R0"].to_numpy()
    )
    point = float(inverse_sigmoid(target, fit.A, fit.B, fit.C_mid, fit.R0))
    lower, upper = quantile_with_inf(draws, q_lo), quantile_with_inf(draws, q_hi)
    rising = fit.A >= fit.R0
    reach = (s["A"] > target) if rising else (s["A"] < target)
    p_reach = float(np.mean(reach & np.isfinite(draws)))
    a_lo, a_hi = (float(v) for v in np.quantile(s["A"], [q_lo, q_hi]))
    ceiling = f"A = {fit.A:.3f} [{a_lo:.3f}, {a_hi:.3f}]"
    pct = f"{level:.0%}"
    if math.isinf(point):
        message = (
            f"{target:g} is beyond the fitted ceiling {ceiling}: never reached at any compute "
            f"(only {p_reach:.0%} of {source} draws reach it)."
        )
    elif point == 0:
        message = (
            f"{target:g} is at or before the start value R0 = {fit.R0:.3f}: no compute needed."
        )
    elif math.isinf(upper):
        message = (
            f"reaching {target:g} takes C = {_fmt(point)} [{_fmt(lower)}, never] ({pct}): the "
            f"target is within the ceiling's plausible range ({ceiling}); "
            f"{1 - p_reach:.0%} of {source} draws never reach it."
        )
    else:
        message = (
            f"reaching {target:g} takes C = {_fmt(point)} [{_fmt(lower)}, {_fmt(upper)}] ({pct})."
        )
    return ComputeTarget(
        reward=target,
        compute=point,
        lower=lower,
        upper=upper,
        p_reachable=p_reach,
        A=fit.A,
        A_lower=a_lo,
        A_upper=a_hi,
        level=level,
        method=source,
        message=message,
    )


def _fmt(c: float) -> str:
    if math.isinf(c):
        return "never"
    return format_compute(c)
