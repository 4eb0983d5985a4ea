"""Run-level, per-tail, distance-local conformal quantiles of standardized forecast errors.

The calibration (:mod:`rlcurves.calibrate`) scores each finished run at several fit fractions:
signed scores ``z = error / sqrt(V)``. Here they become the multipliers of an interval and the
distribution of a forecast's draws.

- **Runs are the units.** A run's scores at its several fractions are correlated, so every run
  weighs 1, spread over its scores, and ``n`` runs give the pooled CDF ``F(s) = sum_runs
  F_run(s) / (n + 1)`` (CDF pooling, Dunn, Wasserman and Ramdas, arXiv 1809.07441).
- **Each tail on its own.** The upper multiplier at one-sided tail ``p`` is the smallest score
  with ``F(s) >= 1 - p``; the lower one the same for ``-z``. It is the conformal step itself, not
  interpolated between scores. It exists only when ``p >= 1 / (n + 1)``: a tail needs at least
  ``1 / p - 1`` runs behind it (:func:`min_tail`).
- **Local in distance.** A forecast ``d`` past its window (log compute) is scored against the
  records near ``d``: each run's weight is spread over its records by a Gaussian kernel in ``d``
  of bandwidth :data:`BANDWIDTH` (each run still weighs 1, so ``n`` is unchanged). Forecasts from
  a quarter of the budget miss differently from forecasts from three quarters, and one multiplier
  for all would cover the first too little and the second too much.

What this guarantees: for a new run exchangeable with the calibration runs (a run drawn from the
same mix of families, its scale assigned the way the calibration runs' were), scored at a record
drawn the way the calibration's are weighted, the probability that its error falls beyond one
side's multiplier is at most ``p`` (the hierarchical exchangeability of Lee, Barber and Willett,
arXiv 2306.06342; with the kernel it is approximate: the weights then depend on the forecast's
distance, and the guarantee holds near it rather than on average). It is not a guarantee for a
run unlike the corpus (another task, another metric): the benchmark measures that by leaving
whole families out.
"""

from __future__ import annotations

import numpy as np

from .errors import RLCurvesError

#: Bandwidth of the kernel in distance past the window (log compute): the scores of a forecast
#: from 25% of the budget (d ~ 1.3) are mostly those from 20% and 30%; fixed before any score
#: was computed, not tuned.
BANDWIDTH = 0.25


def min_tail(n_runs: int) -> float:
    """The smallest one-sided tail ``n_runs`` runs support: ``1 / (n_runs + 1)``."""
    return 1.0 / (n_runs + 1.0)


def local_weights(
    runs: np.ndarray, distance: np.ndarray, at: float | None, bandwidth: float = BANDWIDTH
) -> np.ndarray:
    """Weight of every record: each run weighs 1, spread over its records by a Gaussian kernel
    in distance centred at ``at`` (evenly when ``at`` is None)."""
    _, inv = np.unique(np.asarray(runs), return_inverse=True)
    if at is None:
        logk = np.zeros(inv.size)
    else:
        logk = -0.5 * ((np.asarray(distance, dtype=float) - float(at)) / bandwidth) ** 2
    top = np.full(inv.max() + 1 if inv.size else 0, -np.inf)
    np.maximum.at(top, inv, logk)
    k = np.exp(logk - top[inv])  # each run's nearest record has kernel 1: no underflow
    total = np.bincount(inv, weights=k)
    return k / total[inv]


def tail_quantile(scores: np.ndarray, weights: np.ndarray, n_runs: int, p: float) -> float:
    """The smallest score ``s`` with ``sum(weights[scores <= s]) / (n_runs + 1) >= 1 - p``
    (``inf`` when ``p < 1 / (n_runs + 1)``: the tail is not supported)."""
    if not 0 < p < 1:
        raise RLCurvesError(f"a tail probability must be in (0, 1), got {p}")
    order = np.argsort(scores, kind="stable")
    s = np.asarray(scores, dtype=float)[order]
    cdf = np.cumsum(np.asarray(weights, dtype=float)[order]) / (n_runs + 1.0)
    i = int(np.searchsorted(cdf, (1.0 - p) - 1e-12, side="left"))
    return float(s[i]) if i < s.size else float("inf")


def quantile_function(
    z: np.ndarray, weights: np.ndarray, n_runs: int, u: np.ndarray, smooth: bool = False
) -> np.ndarray:
    """The signed standardized error at probabilities ``u`` in (0, 1): above 1/2 the upper
    tail's step function, below it the lower tail's (each side its own conformal quantiles), at
    the extreme score beyond what ``n_runs`` support (the draws there are the largest error seen;
    a probability that needs them is flagged by :func:`min_tail`, never extrapolated).

    ``smooth``: linear between successive scores instead of the step (for a band drawn over
    many distances, whose weights move the step from one score to the next; below the conformal
    step by at most the gap of two successive scores: not for numbers you report)."""
    u = np.asarray(u, dtype=float)
    z = np.asarray(z, dtype=float)
    w = np.asarray(weights, dtype=float)
    out = np.empty(u.shape)
    upper = u >= 0.5
    for side, sel in ((1.0, upper), (-1.0, ~upper)):
        if not sel.any():
            continue
        v = side * z
        order = np.argsort(v, kind="stable")
        sv = v[order]
        cdf = np.cumsum(w[order]) / (n_runs + 1.0)
        target = u[sel] if side > 0 else 1.0 - u[sel]
        i = np.searchsorted(cdf, target - 1e-12, side="left")
        step = sv[np.minimum(i, sv.size - 1)]
        if smooth and sv.size > 1:
            lo_i = np.clip(i - 1, 0, sv.size - 1)
            hi_i = np.minimum(i, sv.size - 1)
            c0, c1 = cdf[lo_i], cdf[hi_i]
            frac = np.where(c1 > c0, (target - c0) / np.where(c1 > c0, c1 - c0, 1.0), 1.0)
            frac = np.where(i > 0, np.clip(frac, 0.0, 1.0), 1.0)
            step = sv[lo_i] + frac * (sv[hi_i] - sv[lo_i])
        out[sel] = side * step
    return out


def cross_family_pvalues(
    z: np.ndarray,
    runs: np.ndarray,
    families: np.ndarray,
    distance: np.ndarray,
    bandwidth: float = BANDWIDTH,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every record's conformal p-value in each tail against the records of the *other*
    families (run-weighted, local in distance as the multipliers are): ``(p_upper, p_lower,
    weight)``, ``weight`` spreading each run's 1 over its records. A record misses the
    interval of one-sided tail ``p`` computed without its family about when its p-value is
    ``<= p``; when families differ, these p-values are not uniform, and their distribution
    (:class:`TailMap`) says which nominal tail gives a new family the miss rate ``p``."""
    z = np.asarray(z, dtype=float)
    d = np.asarray(distance, dtype=float)
    _, run_code = np.unique(np.asarray(runs), return_inverse=True)
    fams = np.asarray(families)
    p_up, p_lo = np.empty(z.size), np.empty(z.size)
    for fam in np.unique(fams):
        mine, other = np.flatnonzero(fams == fam), np.flatnonzero(fams != fam)
        codes, inv = np.unique(run_code[other], return_inverse=True)
        n = codes.size
        logk = -0.5 * ((d[other][None, :] - d[mine][:, None]) / bandwidth) ** 2  # (m, k)
        onehot = np.zeros((other.size, n))
        onehot[np.arange(other.size), inv] = 1.0
        top = np.max(np.where(onehot.T[None, :, :] > 0, logk[:, None, :], -np.inf), axis=2)
        k = np.exp(logk - top[:, inv])
        w = k / (k @ onehot)[:, inv]  # each run weighs 1 for every record of the family
        zo, zm = z[other][None, :], z[mine][:, None]
        p_up[mine] = (1.0 + np.sum(w * (zo >= zm), axis=1)) / (n + 1.0)
        p_lo[mine] = (1.0 + np.sum(w * (zo <= zm), axis=1)) / (n + 1.0)
    _, inv_all, counts = np.unique(run_code, return_inverse=True, return_counts=True)
    return p_up, p_lo, 1.0 / counts[inv_all]  # each run's 1 spread evenly over its records


class TailMap:
    """The nominal one-sided tail that gives a new family a miss rate ``p``: the weighted
    ``p``-quantile of the cross-family p-values (:func:`cross_family_pvalues`), as a step
    function (identity when built from nothing). Like the multipliers it is local in distance:
    called ``at`` a distance, each run's weight is spread over its records by the kernel.
    Probabilities it maps below what the runs support come back as 0."""

    def __init__(
        self,
        pvalues: np.ndarray | None = None,
        runs: np.ndarray | None = None,
        distance: np.ndarray | None = None,
        bandwidth: float = BANDWIDTH,
    ):
        self.pvalues = None if pvalues is None else np.asarray(pvalues, dtype=float)
        self.runs, self.distance, self.bandwidth = runs, distance, bandwidth

    def __call__(self, p: np.ndarray | float, at: float | None = None) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        if self.pvalues is None:
            return p
        w = local_weights(self.runs, self.distance, at, self.bandwidth)
        order = np.argsort(self.pvalues, kind="stable")
        pv, cum = self.pvalues[order], np.cumsum(w[order]) / w.sum()
        last = np.r_[pv[1:] != pv[:-1], True]  # ties: the share at a value counts all of them
        pv, cum = pv[last], cum[last]
        # the largest p-value whose share of records at or below it stays <= p
        k = np.searchsorted(cum, p + 1e-12, side="right")
        return np.where(k > 0, pv[np.maximum(k - 1, 0)], 0.0)


__all__ = [
    "BANDWIDTH",
    "TailMap",
    "cross_family_pvalues",
    "local_weights",
    "min_tail",
    "quantile_function",
    "tail_quantile",
]
