"""SigmoidFit: the result of a sigmoid fit, with parameters, errors, prediction and a report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .errors import RLCurvesError
from .model import PARAM_NAMES, inverse_sigmoid, log_compute, loglog_values
from .model import sigmoid as sigmoid_curve
from .solver import Bounds

if TYPE_CHECKING:
    from matplotlib.axes import Axes

EQUATION = "R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)"


@dataclass(eq=False, repr=False)
class SigmoidFit:
    """A fitted ScaleRL curve ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``.

    Attributes
    ----------
    A, B, C_mid, R0 : float
        Ceiling, efficiency exponent, midpoint compute and starting value.
    params, stderr : dict
        Estimates and standard errors by name; a fixed parameter has stderr NaN, a parameter the
        data do not identify has stderr ``inf`` (or very large) and ``message`` says so.
    cov : pandas.DataFrame
        Covariance of the free parameters (natural units), labelled by name (``covar`` is the
        same as a plain array, ordered as ``free_params``).
    rss : float
        (Weighted) residual sum of squares over the fitted window.
    n, dof : int
        Points in the fit window and degrees of freedom (n minus free parameters).
    converged : bool
        False when the optimum is not trustworthy; ``message`` says why.
    message : str
        What the solver concluded, in words.
    method : str
        The procedure that produced the fit ("exact", "paper-grid" or "lmfit").
    compute, reward, sigma, window : numpy.ndarray
        All the data passed (sigma may be None) and the boolean mask of points inside the fit
        window, kept so that bootstrap, posterior and plots see exactly what the fit saw.
    units : dict
        What the axes are, for labels: ``{"compute": unit, "reward": column}`` (from the data's
        ``attrs`` as :func:`rlcurves.read_log` writes them; empty for bare arrays).
    peak : str
        "" unless the end of the window sags below the fitted curve or the run turned down; then
        what it peaked at and where (also in ``message``; see :func:`rlcurves.fit.detect_peak`).

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> fit.free_params
    ['A', 'B', 'C_mid', 'R0']
    >>> print(fit.compute_to_reach(0.55, level=0.9))
    reaching 0.55 takes C = 5,129 [4,929, 5,448] (90%).
    >>> print(fit.summary().splitlines()[0])
    [[Sigmoid fit]]
    """

    params: dict[str, float]
    stderr: dict[str, float]
    covar: np.ndarray
    rss: float
    n: int
    dof: int
    converged: bool
    message: str
    method: str
    compute: np.ndarray
    reward: np.ndarray
    sigma: np.ndarray | None
    window: np.ndarray
    r0_fixed: float | None = None
    bounds: Bounds = field(default_factory=Bounds)
    absolute_sigma: bool = False
    min_compute: float | None = None
    max_compute: float | None = None
    label: str | None = None
    units: dict = field(default_factory=dict)
    peak: str = ""

    # ---- parameters -------------------------------------------------------------------------
    @property
    def A(self) -> float:
        return self.params["A"]

    @property
    def B(self) -> float:
        return self.params["B"]

    @property
    def C_mid(self) -> float:
        return self.params["C_mid"]

    @property
    def R0(self) -> float:
        return self.params["R0"]

    @property
    def cov(self) -> pd.DataFrame:
        names = self.free_params
        return pd.DataFrame(self.covar, index=names, columns=names)

    @property
    def free_params(self) -> list[str]:
        """Names of the parameters that were fitted (R0 is absent when fixed)."""
        return [p for p in PARAM_NAMES if not (p == "R0" and self.r0_fixed is not None)]

    @property
    def fit_compute(self) -> np.ndarray:
        """Compute values inside the fit window."""
        return self.compute[self.window]

    @property
    def fit_reward(self) -> np.ndarray:
        """Rewards inside the fit window."""
        return self.reward[self.window]

    @property
    def fit_sigma(self) -> np.ndarray | None:
        return None if self.sigma is None else self.sigma[self.window]

    @property
    def residuals(self) -> np.ndarray:
        """Observed minus fitted reward inside the window (unweighted)."""
        return self.fit_reward - self.predict(self.fit_compute)

    @property
    def noise_sd(self) -> float:
        """Estimated residual standard deviation, ``sqrt(rss / dof)`` (weighted units if sigma)."""
        return math.sqrt(self.rss / self.dof) if self.dof > 0 else math.nan

    @property
    def aic(self) -> float:
        """Akaike information criterion of the Gaussian likelihood (noise variance profiled out)."""
        return gaussian_aic(self.rss, self.n, len(self.free_params) + 1)

    @property
    def bic(self) -> float:
        """Bayesian information criterion, as :attr:`aic` with ``k log n``."""
        return gaussian_bic(self.rss, self.n, len(self.free_params) + 1)

    # ---- using the curve --------------------------------------------------------------------
    def predict(self, compute: ArrayLike) -> np.ndarray | float:
        """The fitted curve at ``compute`` (a float for a scalar input)."""
        out = sigmoid_curve(compute, self.A, self.B, self.C_mid, self.R0)
        return float(out) if np.ndim(compute) == 0 else out

    def compute_to_reach(
        self,
        reward: ArrayLike,
        *,
        level: float | None = None,
        n_samples: int = 1000,
        method: str = "bootstrap",
        seed: int | None = 0,
    ):
        """Compute at which the fitted curve reaches ``reward`` (the inverse of :meth:`predict`).

        Parameters
        ----------
        reward : float or array_like
            Target reward(s).
        level : float, optional
            With a level (e.g. 0.9), also an interval from parameter draws: returns a
            :class:`rlcurves.target.ComputeTarget` (for a scalar target; a DataFrame of them for
            several), whose ``upper`` is ``inf`` when the target is inside the ceiling's
            plausible range and whose ``message`` says so in words.
        n_samples, method, seed
            The draws behind the interval: ``method`` "bootstrap" (default) or "normal".

        Returns
        -------
        float, numpy.ndarray, ComputeTarget or pandas.DataFrame
            Without ``level``: ``inf`` for a reward at or beyond the ceiling A (never reached), 0
            for one at or before R0.

        Raises
        ------
        RLCurvesError
            A target that is not a finite number (NaN, text, an empty list).
        """
        try:
            targets = np.asarray(reward, dtype=float)
        except (TypeError, ValueError):
            targets = np.array(np.nan)
        if targets.size == 0 or not np.all(np.isfinite(targets)):  # nan was a quiet nan
            raise RLCurvesError(
                f"reward= must be finite target reward(s), e.g. 0.6, got {reward!r}",
                reward=reward,
            )
        if level is None:
            out = inverse_sigmoid(reward, self.A, self.B, self.C_mid, self.R0)
            return float(out) if np.ndim(reward) == 0 else out
        from ._samples import parameter_samples
        from .target import compute_to_target

        draws = parameter_samples(self, n_samples, method=method, seed=seed)
        if np.ndim(reward) == 0:
            return compute_to_target(self, reward, level=level, samples=draws, method=method)
        rows = [
            compute_to_target(self, r, level=level, samples=draws, method=method).to_dict()
            for r in np.ravel(reward)
        ]
        return pd.DataFrame(rows)

    def loglog(self, compute: ArrayLike | None = None, reward: ArrayLike | None = None):
        """The paper's log-log transform: ``log F(R)`` against ``log C`` (a line of slope B).

        Parameters
        ----------
        compute, reward : array_like, optional
            Points to transform; default: the fitted window's data.

        Returns
        -------
        pandas.DataFrame
            Columns ``compute``, ``reward``, ``log_compute``, ``log_F``; points where F is
            undefined (reward at or beyond A, or not past R0) have NaN.
        """
        if compute is None and reward is None:
            compute, reward = self.fit_compute, self.fit_reward
        c = np.asarray(compute, dtype=float)
        r = np.asarray(reward, dtype=float)
        lc, lf = loglog_values(c, r, self.A, self.B, self.C_mid, self.R0)
        return pd.DataFrame({"compute": c, "reward": r, "log_compute": lc, "log_F": lf})

    # ---- reporting --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-Python summary (JSON-serializable): parameters, errors, fit statistics."""
        out: dict[str, Any] = {
            "model": EQUATION,
            "method": self.method,
            "params": {k: float(v) for k, v in self.params.items()},
            "stderr": {k: _json_float(v) for k, v in self.stderr.items()},
            "fixed": [] if self.r0_fixed is None else ["R0"],
            "rss": float(self.rss),
            "n": int(self.n),
            "dof": int(self.dof),
            "converged": bool(self.converged),
            "message": self.message,
            "window": {"min_compute": self.min_compute, "max_compute": self.max_compute},
        }
        if self.label is not None:
            out["label"] = self.label
        return out

    def summary(self) -> str:
        """A readable report of the fit, in the manner of lmfit's ``fit_report``."""
        lo = "0" if self.min_compute is None else f"{self.min_compute:g}"
        hi = "inf" if self.max_compute is None else f"{self.max_compute:g}"
        lines = [f"[[Sigmoid fit{'' if self.label is None else ': ' + self.label}]]"]
        lines.append(f"    model           = {EQUATION}")
        lines.append(f"    method          = {self.method}")
        lines.append(
            f"    data points     = {self.n} of {self.compute.size} (window {lo} <= C <= {hi})"
        )
        lines.append(f"    free parameters = {len(self.free_params)}")
        lines.append(f"    dof             = {self.dof}")
        lines.append(f"    RSS             = {self.rss:.6g}")
        lines.append(f"    residual sd     = {self.noise_sd:.4g}")
        lines.append(f"    converged       = {self.converged}")
        lines.append("[[Parameters]]")
        for name in PARAM_NAMES:
            value, err = self.params[name], self.stderr[name]
            if name == "R0" and self.r0_fixed is not None:
                lines.append(f"    {name:<6} = {value:.6g} (fixed)")
            elif math.isfinite(err):
                rel = f" ({abs(err / value):.2%})" if value != 0 else ""
                lines.append(f"    {name:<6} = {value:.6g} +/- {err:.3g}{rel}")
            else:
                lines.append(f"    {name:<6} = {value:.6g} +/- {err} (not determined)")
        corr = self.correlations()
        pairs = [
            (a, b, corr.loc[a, b])
            for i, a in enumerate(corr.index)
            for b in corr.index[i + 1 :]
            if np.isfinite(corr.loc[a, b]) and abs(corr.loc[a, b]) > 0.5
        ]
        if pairs:
            lines.append("[[Correlations]] (|r| > 0.5)")
            for a, b, r in sorted(pairs, key=lambda t: -abs(t[2])):
                lines.append(f"    C({a}, {b}) = {r:+.3f}")
        lines.append("[[Notes]]")
        lines.append(f"    {self.message}")
        return "\n".join(lines)

    def correlations(self) -> pd.DataFrame:
        """Correlation matrix of the free parameters."""
        sd = np.sqrt(np.diag(self.cov.to_numpy()))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = self.cov.to_numpy() / np.outer(sd, sd)
        return pd.DataFrame(corr, index=self.cov.index, columns=self.cov.columns)

    def plot(self, ax: Axes | None = None, **kwargs: Any):
        """Plot the data and the fitted curve (see :func:`rlcurves.plot.plot_fit`)."""
        from .plot import plot_fit

        return plot_fit(self, ax=ax, **kwargs)

    def _repr_html_(self) -> str:
        from ._html import fit_html

        return fit_html(self)

    def __repr__(self) -> str:
        p = self.params
        state = "" if self.converged else ", NOT converged"
        return (
            f"SigmoidFit(A={p['A']:.4g}, B={p['B']:.4g}, C_mid={p['C_mid']:.4g}, "
            f"R0={p['R0']:.4g}, n={self.n}, rss={self.rss:.4g}{state})"
        )

    def __str__(self) -> str:
        return self.summary()

    # ---- uncertainty (rlcurves.bootstrap / profile / bayes) ----
    def bootstrap(
        self,
        n: int = 1000,
        *,
        kind: str = "residual",
        seed: int | None = None,
        progress: bool = True,
        **kwargs: Any,
    ):
        """Refit on ``n`` resamples; see :func:`rlcurves.bootstrap.bootstrap`."""
        from .bootstrap import bootstrap

        return bootstrap(self, n, kind=kind, seed=seed, progress=progress, **kwargs)

    def profile(self, parameters=("A", "B", "C_mid"), *, level: float = 0.9, **kwargs: Any):
        """Profile-likelihood intervals; see :func:`rlcurves.profile.profile`."""
        from .profile import profile

        return profile(self, parameters, level=level, **kwargs)

    def posterior(self, *, seed: int | None = None, progress: bool = True, **kwargs: Any):
        """emcee posterior of the parameters; see :func:`rlcurves.bayes.posterior`."""
        from .bayes import posterior

        return posterior(self, seed=seed, progress=progress, **kwargs)


def gaussian_aic(rss: float, n: int, k: int) -> float:
    """AIC of a least-squares fit with Gaussian noise, variance profiled out (``k`` counts it)."""
    return n * math.log(max(rss, 1e-300) / n) + 2 * k


def gaussian_bic(rss: float, n: int, k: int) -> float:
    """BIC of a least-squares fit with Gaussian noise, variance profiled out (``k`` counts it)."""
    return n * math.log(max(rss, 1e-300) / n) + k * math.log(n)


def _sqrt_or_flag(v: float) -> float:
    # NaN (no degrees of freedom) stays NaN; a negative or infinite variance means "not determined".
    if math.isnan(v):
        return math.nan
    return math.sqrt(v) if 0 <= v < math.inf else math.inf


def _json_float(v: float) -> float | str:
    return float(v) if math.isfinite(v) else str(v)


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
    from . import _kernels as K

    x = log_compute(compute)
    names = list(PARAM_NAMES[:3] if r0_fixed else PARAM_NAMES)
    p = len(names)
    cov = np.empty((p, p))
    # the Jacobian, J^T J and its inverse in one compiled loop (in numpy they were most of a fit)
    rss = K.covariance_natural(
        x,
        np.ascontiguousarray(reward, dtype=float),
        np.ascontiguousarray(weights, dtype=float),
        float(A),
        float(R0),
        float(B),
        math.log(C_mid),
        bool(r0_fixed),
        cov,
    )
    if scale_by_residuals:
        cov = cov * residual_variance(rss, x.size - p)
    return cov, standard_errors(cov), rss


def residual_variance(rss: float, dof: int) -> float:
    """``s^2 = RSS / dof``, the scale of an unweighted covariance (NaN without dof)."""
    return rss / dof if dof > 0 else math.nan


def standard_errors(cov: np.ndarray) -> dict[str, float]:
    """Standard errors by name from a covariance in the order A, B, C_mid[, R0] (NaN for a
    fixed R0, i.e. a 3 x 3 covariance; ``inf`` where a variance is negative or infinite)."""
    stderr = {name: _sqrt_or_flag(cov[i, i]) for i, name in enumerate(PARAM_NAMES[: len(cov)])}
    stderr.setdefault("R0", math.nan)
    return stderr
