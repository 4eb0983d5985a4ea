"""The ScaleRL curve family: evaluate, invert, differentiate and linearize the sigmoid.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

Internally the curve is written in log compute, x = log C, as
``R = R0 + (A - R0) * s`` with ``s = expit(B * (x - m))`` and ``m = log C_mid``, which is equally
well conditioned for GPU-hours (1e2-1e5) and FLOPs (1e18-1e25). ``C = 0`` is legal and gives
``s = 0`` (the curve's limit, R0). The same curve is drc's four-parameter log-logistic LL.4.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

PARAM_NAMES = ("A", "B", "C_mid", "R0")


def log_compute(compute: ArrayLike) -> np.ndarray:
    """``log(compute)`` with ``-inf`` (and no warning) where compute is 0."""
    c = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log(c)


def fraction_of_gain(x: np.ndarray, B, m) -> np.ndarray:
    """``s = 1 / (1 + exp(B (m - x)))``: fraction of the gain ``A - R0`` reached at ``x = log C``.

    Broadcasts over leading batch dimensions; ``x = -inf`` (C = 0) gives exactly 0. Written with
    in-place operations because it is the innermost loop of every fit, bootstrap and grid.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.multiply(B, np.subtract(m, x))
        if not isinstance(t, np.ndarray):  # a scalar
            return 1.0 / (1.0 + np.exp(t))
        np.exp(t, out=t)
        t += 1.0
        return np.reciprocal(t, out=t)


def sigmoid(compute: ArrayLike, A: float, B: float, C_mid: float, R0: float) -> np.ndarray:
    """Evaluate ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``.

    Parameters
    ----------
    compute : array_like
        Compute values (C >= 0; C = 0 gives R0).
    A, B, C_mid, R0 : float
        Asymptote, exponent (> 0), midpoint compute (> 0) and value at C = 0.

    Returns
    -------
    numpy.ndarray
        The curve at ``compute``.

    Examples
    --------
    >>> rlcurves.sigmoid([0, 2542, 1e9], A=0.61, B=1.92, C_mid=2542, R0=0.3).round(3)
    array([0.3  , 0.455, 0.61 ])
    """
    s = fraction_of_gain(log_compute(compute), B, np.log(C_mid))
    return R0 + (A - R0) * s


def inverse_sigmoid(reward: ArrayLike, A: float, B: float, C_mid: float, R0: float) -> np.ndarray:
    """Compute at which the curve reaches ``reward``.

    Returns 0 for a reward at or before R0 (the start) and ``inf`` for a reward the curve never
    reaches (at or beyond the ceiling A, or on the wrong side of R0 for the curve's direction).

    Examples
    --------
    >>> c = rlcurves.inverse_sigmoid([0.455, 0.6], A=0.61, B=1.92, C_mid=2542, R0=0.3)
    >>> c.round(0)
    array([ 2542., 14945.])
    """
    r = np.asarray(reward, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = (r - R0) / (A - R0)
        odds = frac / (1.0 - frac)
        c = C_mid * odds ** (1.0 / B)
    c = np.where(frac <= 0, 0.0, c)
    c = np.where(frac >= 1, np.inf, c)
    return np.where(np.isnan(r), np.nan, c)


def loglog_values(
    compute: ArrayLike, reward: ArrayLike, A: float, B: float, C_mid: float, R0: float
) -> tuple[np.ndarray, np.ndarray]:
    """The paper's linearization ``(log C, log F(R))``, ``F(R) = C_mid^B / ((A-R0)/(R-R0) - 1)``.

    On the fitted curve ``F(R) = C^B``, so ``log F`` against ``log C`` is a line of slope B through
    the origin. Points where F is undefined (reward at or beyond A, or not past R0) give NaN.
    """
    c = np.asarray(compute, dtype=float)
    r = np.asarray(reward, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = (r - R0) / (A - R0)
        log_f = B * np.log(C_mid) + np.log(frac) - np.log1p(-frac)
        log_c = np.log(c)
    ok = (frac > 0) & (frac < 1) & (c > 0)
    return np.where(ok, log_c, np.nan), np.where(ok, log_f, np.nan)


def jacobian_internal(x: np.ndarray, A, R0, B, m) -> np.ndarray:
    """Jacobian of the curve with respect to the internal parameters ``(A, R0, log B, m)``.

    Shape ``x.shape + (4,)``; broadcasts over batch dimensions of the parameters.
    """
    s = fraction_of_gain(x, B, m)
    ds = s * (1.0 - s)
    dx = np.where(np.isneginf(x), 0.0, x - m)
    d_logb = (A - R0) * ds * dx * B
    d_m = -(A - R0) * ds * B
    return np.stack(np.broadcast_arrays(s, 1.0 - s, d_logb, d_m), axis=-1)


def power_law(compute: ArrayLike, A: float, D: float, B: float) -> np.ndarray:
    """The pre-training form ``R = A - D / C^B`` (the sigmoid's limit for ``C >> C_mid``).

    Examples
    --------
    >>> rlcurves.power_law([1, 100, 10_000], A=0.6, D=0.3, B=0.5).round(3)
    array([0.3  , 0.57 , 0.597])
    """
    c = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore"):
        return A - D * c ** (-B)
