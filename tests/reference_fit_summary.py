"""The numpy covariance and peak check of a fit as they were before they were compiled: the
references tests/test_kernels.py holds :func:`rlcurves.result.covariance` and
:func:`rlcurves.fit.detect_peak` to (kept verbatim, not used at run time)."""

from __future__ import annotations

import math

import numpy as np

from rlcurves.model import PARAM_NAMES, jacobian_internal, log_compute
from rlcurves.model import sigmoid as sigmoid_curve
from rlcurves.result import _sqrt_or_flag

_PEAK_SE = 3.0


def covariance(
    compute: np.ndarray,
    reward: np.ndarray,
    weights: np.ndarray,
    A: float,
    B: float,
    C_mid: float,
    R0: float,
    *,
    r0_fixed: bool,
    scale_by_residuals: bool,
) -> tuple[np.ndarray, dict[str, float], float]:
    """Asymptotic covariance ``s^2 (J^T J)^-1`` at the optimum, in natural units.

    Returns the covariance (order A, B, C_mid[, R0]), standard errors by name (NaN for a
    fixed R0, ``inf`` where
    ``J^T J`` is singular: a parameter the data do not determine) and the weighted RSS.
    """
    x = log_compute(compute)
    m = math.log(C_mid)
    fitted = sigmoid_curve(compute, A, B, C_mid, R0)
    rss = float(np.sum((weights * (reward - fitted)) ** 2))
    J = jacobian_internal(x, A, R0, B, m)  # columns: A, R0, log B, m
    # natural units: d/dB = d/dlogB / B, d/dC_mid = d/dm / C_mid; order A, B, C_mid, R0
    J = np.stack([J[:, 0], J[:, 2] / B, J[:, 3] / C_mid, J[:, 1]], axis=1) * weights[:, None]
    names = list(PARAM_NAMES)
    if r0_fixed:
        J, names = J[:, :3], names[:3]
    n, p = J.shape
    dof = n - p
    JtJ = J.T @ J
    d = np.sqrt(np.diag(JtJ))
    cov = np.full((p, p), np.inf)
    if np.all(d > 0) and np.all(np.isfinite(d)):
        scaled = JtJ / np.outer(d, d)
        eig = np.linalg.eigvalsh(scaled)
        if eig[0] > 1e-13 * eig[-1]:
            cov = np.linalg.inv(scaled) / np.outer(d, d)
    if scale_by_residuals:
        cov = cov * (rss / dof if dof > 0 else np.nan)
    stderr = {name: _sqrt_or_flag(v) for name, v in zip(names, np.diag(cov), strict=False)}
    if r0_fixed:
        stderr["R0"] = math.nan
    return cov, stderr, rss


def detect_peak(compute: np.ndarray, reward: np.ndarray, params: dict[str, float]) -> str:
    """Say in words whether the end of the window sags below the fit or the run turned down.

    Returns "" when it does not (or with fewer than 15 points in the window).
    """
    order = np.argsort(compute, kind="stable")
    c, r = np.asarray(compute, float)[order], np.asarray(reward, float)[order]
    if c.size < 15:
        return ""
    res = r - sigmoid_curve(c, params["A"], params["B"], params["C_mid"], params["R0"])
    sd = float(np.std(res, ddof=4))
    if not sd > 0:
        return ""
    rho = float(np.clip(np.corrcoef(res[:-1], res[1:])[0, 1], 0.0, 0.9))
    m = max(5, c.size // 5)
    se = sd / math.sqrt(m) * math.sqrt((1 + rho) / (1 - rho))
    tail_gap = float(np.mean(res[-m:]))
    k = max(3, c.size // 10)
    smooth = np.convolve(r, np.ones(k) / k, mode="valid")
    i_peak = int(np.argmax(smooth))
    drop = float(smooth[i_peak] - smooth[-1])
    below = tail_gap < -_PEAK_SE * se
    turned = i_peak < smooth.size - m and drop > _PEAK_SE * se
    if not (below or turned):
        return ""
    c_peak = float(c[i_peak + k // 2])
    latest = float(np.mean(r[-m:]))
    side = "below" if tail_gap < 0 else "above"
    return (
        f"this run peaked at {smooth[i_peak]:.3g} near {c_peak:,.0f}; the fitted ceiling "
        f"{params['A']:.3g} is not supported by the latest evaluations (the last {m} average "
        f"{latest:.3g}, {abs(tail_gap):.2g} {side} the fitted curve)"
    )
