"""Partial pooling of the misspecification scale across families of runs.

Forecast errors on finished runs (:mod:`rlcurves.calibrate`) are modelled per family ``f`` as
errors of variance ``V = base + tau_f^2 g(d)``: ``base`` the variance the run's own data explain
(fit and noise), ``d`` the distance past the fit window in log compute and ``tau_f`` the family's
misspecification scale in reward units. The errors are normal or Student t (``nu`` degrees of
freedom) with that *variance* (a t's squared scale is ``V (nu - 2) / nu``), so ``tau`` is the
scale of a variance whatever the tails. Every run weighs 1, spread over its records.

Families share a prior, ``log tau_f ~ N(mu, s^2)``; ``mu`` and ``s`` are integrated out on a grid
(flat in ``mu``, a half-normal prior on ``s``: with a handful of families the maximum-likelihood
``s`` often sits at 0, which would give every family, and every new one, the same tau). A run of a
known family gets its family's posterior (``tau_f``: the root of the posterior mean of
``tau_f^2``); a run of a family never seen gets the posterior predictive of a new family's tau
(``sqrt(E tau^2)``), which carries the across-family spread; a sweep's own backtests update that
predictive like a new family's data (:meth:`PooledScale.posterior_tau`). With one family there is
no spread to fit: ``s`` is 0 and a new family gets that family's scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import RLCurvesError

#: The grid of log tau the family likelihoods are evaluated on (tau from 1e-4 to 1 reward unit).
LOG_TAU_GRID = np.linspace(math.log(1e-4), math.log(1.0), 185)
# The across-family log-sd searched (a factor of 1.02 to 20 between families' tau, one sd).
_S_GRID = np.geomspace(0.02, 3.0, 40)

#: Degrees of freedom of the errors' t distribution the calibration chooses among (``V`` is its
#: variance whatever ``nu``; ``inf`` is the normal).
NUS = (5.0, math.inf)

#: The forms of ``g(d)`` the calibration chooses among (by marginal likelihood).
GROWTH_FORMS = {
    "sqrt(d)": np.sqrt,
    "d": lambda d: d,
    "d^2": lambda d: d**2,
}


def growth(form: str, d: np.ndarray) -> np.ndarray:
    """``g(d)`` of the named form, 0 for ``d <= 0`` (inside the fit window)."""
    if form not in GROWTH_FORMS:
        raise RLCurvesError(f"unknown growth form {form!r}; choose one of {list(GROWTH_FORMS)}")
    return GROWTH_FORMS[form](np.maximum(np.asarray(d, dtype=float), 0.0))


def run_weights(runs: np.ndarray) -> np.ndarray:
    """Every run weighs 1, spread over its records."""
    _, inv, counts = np.unique(np.asarray(runs), return_inverse=True, return_counts=True)
    return 1.0 / counts[inv]


def log_density(err: np.ndarray, v: np.ndarray, nu: float) -> np.ndarray:
    """Log density of ``err`` under a Student t with ``nu`` degrees of freedom and variance
    ``v`` (its squared scale is ``v (nu - 2) / nu``); ``nu = inf``: the normal."""
    if math.isinf(nu):
        return -0.5 * np.log(2 * math.pi * v) - 0.5 * err**2 / v
    scale2 = v * (nu - 2.0) / nu
    const = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi)
    return const - 0.5 * np.log(scale2) - (nu + 1) / 2 * np.log1p(err**2 / (nu * scale2))


def _record_loglik(records: pd.DataFrame, form: str, nu: float) -> np.ndarray:
    """Each record's run-weighted log-likelihood at every tau of the grid, ``(n, grid)``."""
    err = records["error"].to_numpy(float)
    base = np.maximum(records["base_var"].to_numpy(float), 1e-16)
    g = growth(form, records["distance"].to_numpy(float))
    w = run_weights(records["run"].to_numpy())
    v = base[:, None] + np.exp(2 * LOG_TAU_GRID)[None, :] * g[:, None]
    return w[:, None] * log_density(err[:, None], v, nu)


def _sum_by(labels: np.ndarray, ll: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``ll`` summed by label: ``(labels (k,), sums (k, grid))``."""
    keys, inv = np.unique(labels, return_inverse=True)
    onehot = np.zeros((keys.size, inv.size))
    onehot[inv, np.arange(inv.size)] = 1.0
    return keys, onehot @ ll


def run_loglik(
    records: pd.DataFrame, form: str, nu: float = math.inf, by: str = "run"
) -> tuple[np.ndarray, np.ndarray]:
    """The run-weighted log-likelihood of each run's errors (:func:`log_density`) at every tau
    of :data:`LOG_TAU_GRID`: ``(runs (n,), loglik (n, grid))``; with ``by`` another column of
    the records, summed by its values instead (each run still weighs 1 over its records)."""
    return _sum_by(records[by].to_numpy(), _record_loglik(records, form, nu))


def _log_prior(mu: np.ndarray, s: np.ndarray) -> np.ndarray:
    """log N(LOG_TAU_GRID; mu, s^2) times the grid step (a density on the grid), shape
    ``mu.shape + (grid,)``."""
    step = LOG_TAU_GRID[1] - LOG_TAU_GRID[0]
    z = (LOG_TAU_GRID - mu[..., None]) / s[..., None]
    return -0.5 * z * z - np.log(s[..., None] * math.sqrt(2 * math.pi)) + math.log(step)


_PRIOR: list = []


def _prior_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hyperparameter grid (mu, s) flattened and the prior's density on the tau grid at
    each, shape ``(n_mu * n_s, grid)``: computed once."""
    if not _PRIOR:
        M, S = np.meshgrid(LOG_TAU_GRID[::3], _S_GRID, indexing="ij")
        M, S = M.ravel(), S.ravel()
        _PRIOR.append((M, S, np.exp(_log_prior(M, S))))
    return _PRIOR[0]


def _logsumexp(a: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))


#: Prior on the across-family log-sd ``s``: half-normal of this scale (one sd: families' tau a
#: factor e apart), flat in ``mu`` over the grid. Fixed, not tuned: it only keeps ``s`` off the
#: boundary at 0 that a handful of families often put its maximum-likelihood estimate on.
S_PRIOR_SCALE = 1.0


@dataclass(eq=False)
class PooledScale:
    """The fitted random-effects model of tau (see the module docstring).

    Attributes
    ----------
    form : str
        The ``g(d)`` used.
    mu, s : float
        Posterior means of the prior's ``mu`` and ``s`` (``s`` 0 with one family).
    family_tau : dict
        Each family's posterior tau (root of the posterior mean of tau^2).
    family_loglik : dict
        Each family's log-likelihood at every tau of the grid (run-weighted).
    marginal : float
        The log marginal likelihood (the hyperparameters integrated out): what chooses among
        forms and settings when there are too few families to forecast each from the others.
    nu : float
        Degrees of freedom of the errors' t distribution (``inf``: normal).
    new_log_density : numpy.ndarray
        The posterior predictive log density of a new family's log tau on the grid.
    """

    form: str
    mu: float
    s: float
    family_tau: dict[str, float]
    family_loglik: dict[str, np.ndarray] = field(repr=False)
    marginal: float
    nu: float = math.inf
    new_log_density: np.ndarray | None = field(default=None, repr=False)

    @property
    def tau_new(self) -> float:
        """The scale for a run of a family not among the fitted ones: ``sqrt(E tau^2)`` under
        the posterior predictive of a new family's tau (the across-family spread included)."""
        if self.new_log_density is None:
            return float(math.exp(self.mu))
        return self._root_mean_square(self.new_log_density)

    def posterior_tau(self, loglik: np.ndarray, prior_weight: float = 1.0) -> float:
        """tau of a new family with log-likelihood ``loglik`` on the grid (e.g. a sweep's own
        backtests) under the predictive of a new family's tau (its log density times
        ``prior_weight``: 1 as fitted, more a tighter prior)."""
        if self.new_log_density is None:
            return self._root_mean_square(loglik)
        return self._root_mean_square(loglik + self.new_log_density * prior_weight)

    def posterior_tau_by_run(
        self, loglik: np.ndarray, prior_weight: float, atypical: float
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """tau of a group of runs (a sweep) in which any run may misbehave: the group's tau, each
        run's, and each run's probability of being atypical.

        ``loglik`` holds one row per run (its log-likelihood on the grid). Each run either shares
        the group's tau (probability ``1 - atypical``) or has a tau of its own drawn from the
        predictive of a new family's tau (``atypical``): the group's tau is the posterior under
        that mixture, so one run whose backtests missed far does not set it, and that run's own
        tau is its posterior as a family of its own. A run's tau is ``sqrt(E tau^2)`` over both
        (its probability of being atypical weighing them, the group's tau integrated out).
        ``atypical=0`` gives :meth:`posterior_tau` of the rows' sum for every run.
        """
        ll = np.atleast_2d(np.asarray(loglik, dtype=float))
        if not 0 <= atypical < 1:
            raise RLCurvesError(f"atypical must be in [0, 1), got {atypical!r}")
        if self.new_log_density is None:
            log_new = np.full(LOG_TAU_GRID.size, -math.log(LOG_TAU_GRID.size))
        else:
            log_new = self.new_log_density - _logsumexp(self.new_log_density)
        tau2 = np.exp(2 * LOG_TAU_GRID)
        # each run as a family of its own: its marginal likelihood and its posterior E tau^2
        own = ll + log_new
        log_m = _logsumexp(own, axis=1)
        own_tau2 = np.exp(own - log_m[:, None]) @ tau2
        # the group's tau: every run either typical (its loglik at the group's tau) or not
        with np.errstate(divide="ignore"):
            typical = math.log1p(-atypical) + ll
            other = (math.log(atypical) if atypical > 0 else -math.inf) + log_m[:, None]
        each = np.logaddexp(typical, other)
        prior = (log_new if self.new_log_density is not None else 0.0) * prior_weight
        log_post = each.sum(axis=0) + prior
        post = np.exp(log_post - np.max(log_post))
        post /= post.sum()
        # a run's probability of being atypical at each group tau, then over the posterior
        resp = np.exp(other - each)
        p_atypical = resp @ post
        run_tau2 = ((1 - resp) * tau2[None, :]) @ post + p_atypical * own_tau2
        group = float(math.sqrt(np.sum(post * tau2)))
        return group, np.sqrt(run_tau2), p_atypical

    @staticmethod
    def _root_mean_square(log_post: np.ndarray) -> float:
        p = np.exp(log_post - np.max(log_post))
        p /= p.sum()
        return float(math.sqrt(np.sum(p * np.exp(2 * LOG_TAU_GRID))))


def fit_pooled(records: pd.DataFrame, form: str = "d", nu: float = math.inf) -> PooledScale:
    """Fit the random-effects model to ``records`` (columns ``run, family, error, base_var,
    distance``; errors ``t_nu`` with variance ``V``): the posterior of ``(mu, s)`` on a grid
    (flat in ``mu``, half-normal in ``s``, :data:`S_PRIOR_SCALE`), each family's posterior tau
    and a new family's predictive, the hyperparameters integrated out."""
    if records.empty:
        raise RLCurvesError("no records to fit the misspecification scale on")
    keys, L = _sum_by(records["family"].astype(str).to_numpy(), _record_loglik(records, form, nu))
    fam_ll = {str(k): row for k, row in zip(keys, L, strict=True)}
    step = LOG_TAU_GRID[1] - LOG_TAU_GRID[0]
    if len(fam_ll) == 1:  # no spread to fit: a flat prior on log tau over the grid
        ll = L[0]
        tau = PooledScale._root_mean_square(ll)
        marginal = float(_logsumexp(ll) + math.log(step / (LOG_TAU_GRID[-1] - LOG_TAU_GRID[0])))
        return PooledScale(
            form, math.log(tau), 0.0, {next(iter(fam_ll)): tau}, fam_ll, marginal, nu
        )
    M, S, prior = _prior_table()  # prior: (hyper, grid) densities N(log tau; mu, s) x step
    top = L.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_m = top + np.log(np.exp(L - top) @ prior.T)  # (K, hyper): log p(data_f | mu, s)
    log_hyper = -0.5 * (S / S_PRIOR_SCALE) ** 2  # half-normal on s, flat in mu
    log_joint = log_m.sum(axis=0) + log_hyper
    norm = _logsumexp(log_joint)
    w = np.exp(log_joint - norm)  # posterior of (mu, s)
    marginal = float(norm - _logsumexp(log_hyper))  # the hyperparameters integrated out
    new = np.log(np.maximum(w @ prior, 1e-300))  # predictive of a new family's log tau
    family_tau = {}
    for f, ll in fam_ll.items():
        i = list(fam_ll).index(f)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_c = np.log(w) - log_m[i]  # p(mu, s | data) / p(data_f | mu, s)
        log_c = np.where(np.isfinite(log_c), log_c, -np.inf)
        c = np.exp(log_c - np.max(log_c))
        family_tau[f] = PooledScale._root_mean_square(ll + np.log(np.maximum(c @ prior, 1e-300)))
    return PooledScale(form, float(w @ M), float(w @ S), family_tau, fam_ll, marginal, nu, new)


__all__ = ["GROWTH_FORMS", "LOG_TAU_GRID", "PooledScale", "fit_pooled", "growth", "run_loglik"]
