"""The paper's fitting procedure, reproduced: a grid over A and C_mid, curve_fit for B.

Khatri et al. (2025) fit A on {0.450, 0.455, ..., 0.800} and C_mid on 100 linearly spaced values
over [100, 40000] GPU-hours, fit B with scipy's curve_fit for every pair and keep the pair with the
least squared error. R0 is the starting model's pass rate there; when it is not given (``r0=None``)
it is fitted jointly with B by the same curve_fit call. The answer is quantized to the grid and
takes about a second; use it to compare with published numbers, not for new work.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import OptimizeWarning, curve_fit

from .errors import RLCurvesError
from .model import sigmoid

PAPER_A_GRID = np.round(np.arange(0.450, 0.8001, 0.005), 3)
PAPER_C_MID_GRID = np.linspace(100.0, 40000.0, 100)


def fit_paper_grid(
    compute: np.ndarray,
    reward: np.ndarray,
    r0: float | None,
    sigma: np.ndarray | None,
    window: np.ndarray,
    *,
    A_grid: ArrayLike | None = None,
    C_mid_grid: ArrayLike | None = None,
    B0: float = 1.0,
) -> tuple[dict[str, float], bool, str]:
    """Grid over (A, C_mid) with curve_fit for B (and R0 when not fixed) at every node.

    Returns the parameters, whether any grid node converged, and a note for the fit message.
    """
    a_grid = PAPER_A_GRID if A_grid is None else np.asarray(A_grid, dtype=float)
    c_grid = PAPER_C_MID_GRID if C_mid_grid is None else np.asarray(C_mid_grid, dtype=float)
    if a_grid.size == 0 or c_grid.size == 0 or (c_grid <= 0).any():
        raise RLCurvesError("A_grid and C_mid_grid must be non-empty, C_mid_grid > 0")
    s = None if sigma is None else sigma[window]
    best = (math.inf, None)
    for A in a_grid:
        for C_mid in c_grid:
            if r0 is None:
                f = lambda c, B, R0, A=A, C_mid=C_mid: sigmoid(c, A, abs(B), C_mid, R0)  # noqa: E731
                p0 = [B0, float(reward[np.argmin(compute)])]
            else:
                f = lambda c, B, A=A, C_mid=C_mid: sigmoid(c, A, abs(B), C_mid, r0)  # noqa: E731
                p0 = [B0]
            try:
                with np.errstate(all="ignore"), _quiet():
                    p, _ = curve_fit(f, compute, reward, p0=p0, sigma=s, maxfev=2000)
            except (RuntimeError, ValueError):
                continue
            resid = (reward - f(compute, *p)) / (1.0 if s is None else s)
            sse = float(resid @ resid)
            if sse < best[0]:
                best = (sse, (A, abs(p[0]), C_mid, r0 if r0 is not None else p[1]))
    if best[1] is None:
        nan = math.nan
        return dict(A=nan, B=nan, C_mid=nan, R0=nan), False, "no grid node converged"
    A, B, C_mid, R0 = (float(v) for v in best[1])
    note = (
        f"paper grid: {a_grid.size} x {c_grid.size} nodes; A and C_mid quantized to the grid "
        f"(spacings {np.ptp(a_grid) / max(a_grid.size - 1, 1):.3g} and "
        f"{np.ptp(c_grid) / max(c_grid.size - 1, 1):.3g})"
    )
    on_edge = A in (a_grid.min(), a_grid.max()) or C_mid in (c_grid.min(), c_grid.max())
    if on_edge:
        note += "; the best node is on the grid's edge: the optimum may lie outside the grid"
    return dict(A=A, B=B, C_mid=C_mid, R0=R0), True, note


class _quiet:
    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", OptimizeWarning)

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
