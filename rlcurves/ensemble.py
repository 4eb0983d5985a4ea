"""Model combination: the sigmoid and the power law, weighted by their skill on the run's own past.

:func:`combine` is the point forecast of :func:`rlcurves.forecast` and the model part of its
predictive variance. The sigmoid fit and the power law ``R = A - D / C^B`` (fitted on the tail of
the window, compute from ``tail`` times the window's end on) are weighted inversely to their mean
squared errors when each is refitted on the first 35%, 50% and 70% of the window and forecasts
the window's last 10%, the weights shrunk toward equal by ``shrink`` (three backtests are little
evidence). Inside the fit window the sigmoid alone is used.

The model's uncertainty is one variance, ``fit_var``: the spread of the combined forecast over
resamples of the run's own data, each resample perturbed by AR(1) noise in compute with the
run's residual sd and autocorrelation (:mod:`rlcurves._ar1`) and every step redone on it: both
families refitted, their backtests rerun and the weights recomputed. It holds the sigmoid's and
the power law's fit uncertainty and the weights' own; nothing is added for the families'
disagreement (the calibration's misspecification term is what measures how wrong both can be).
The perturbation keeps the data's own shape, so a resample's backtests see what the real ones
see (a resample drawn from the fitted sigmoid would favour the sigmoid in its own backtests).

The forecast quantity is a run's level at ``C``: the mean of its evaluations over the last 10% of
compute up to ``C`` (:func:`level_mask`). ``tail`` and ``shrink`` are chosen on finished runs by
:mod:`rlcurves.calibrate` (an :class:`EnsembleConfig`, refitted inside every leave-one-family-out
fold of the benchmark). Why, with the measurements: the design notes (``docs/design/ensemble.md``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._ar1 import ar1_series, mean_variance, spacing_units
from .errors import RLCurvesError

if TYPE_CHECKING:
    from .powerlaw import PowerLawFit
    from .result import SigmoidFit

# Fraction of compute at the end a run's level averages over.
LEVEL_WINDOW = 0.1
# The power law is fitted on compute >= tail * (end of the window) (the default tail) ...
TAIL = 0.25
# ... when that leaves at least this many points (else on all positive compute).
TAIL_MIN_POINTS = 6
# Self-backtests: refit on the first fraction of the window's compute, forecast its last 10%.
BACKTEST_CUTS = (0.35, 0.5, 0.7)
#: The settings the calibration chooses among (:func:`rlcurves.calibrate.choose_config`): where
#: the power law's tail starts and how far its weight is shrunk toward equal. Fixed before any
#: data were scored; which one is used is learned.
TAILS = (0.25, 0.5)
SHRINKS = (0.25, 0.5, 0.75)
# Resamples of the model part of the variance.
N_RESAMPLES = 200
# At most this many grid points per forecast point when averaging a curve over the level window.
_MAX_WINDOW_POINTS = 64


@dataclass(frozen=True)
class EnsembleConfig:
    """The model average's settings: the power law's ``tail`` (it is fitted on compute from
    ``tail`` times the window's end) and ``shrink``, the share of equal weights in the weights
    (``w = shrink / 2 + (1 - shrink) w_backtests``)."""

    tail: float = TAIL
    shrink: float = 0.5

    def __post_init__(self) -> None:
        if not (0 < self.tail < 1 and 0 <= self.shrink <= 1):
            raise RLCurvesError(
                f"tail must be in (0, 1) and shrink in [0, 1], got {self.tail}, {self.shrink}"
            )

    @property
    def label(self) -> str:
        return f"tail {self.tail:g}, shrink {self.shrink:g}"


#: Every setting :func:`rlcurves.calibrate.calibrate` scores.
CONFIGS = tuple(EnsembleConfig(t, s) for t in TAILS for s in SHRINKS)


@dataclass(eq=False)
class Ensemble:
    """The two families' forecasts of a run's level at ``at`` and how they combine.

    Attributes
    ----------
    at : numpy.ndarray
        Compute values forecast.
    k : numpy.ndarray
        Evaluations averaged in the level at each point.
    mean : numpy.ndarray
        The combined forecast of the level.
    point : numpy.ndarray
        The combined curve at ``at`` (the center for one evaluation).
    sigmoid, power_law : numpy.ndarray
        Each family's forecast of the level (``power_law`` is NaN where it could not be fitted).
    weights : dict
        ``{"sigmoid": w_s, "power_law": w_p}`` beyond the window (inside it the sigmoid alone),
        shrunk toward equal by ``config.shrink``.
    w_power_law : numpy.ndarray
        The power law's weight at each point (0 inside the fit window).
    distance : numpy.ndarray
        Log compute of the level window's center past the end of the fit window (0 inside).
    fit_var : numpy.ndarray
        Variance of the combined forecast over the resamples (both families refitted, weights
        recomputed on each).
    noise_var, noise_var_one : numpy.ndarray
        The noise of the level (a mean of ``k`` AR(1) evaluations) and of one evaluation.
    noise_sd, rho : float
        The residual sd and the lag-one autocorrelation (at the median spacing).
    backtests : dict
        Per family, the signed backtest errors by cut.
    power_law_fit : PowerLawFit or None
        The tail power law.
    config : EnsembleConfig
        The settings used.
    """

    at: np.ndarray
    k: np.ndarray
    mean: np.ndarray
    point: np.ndarray
    sigmoid: np.ndarray
    power_law: np.ndarray
    weights: dict[str, float]
    w_power_law: np.ndarray
    distance: np.ndarray
    fit_var: np.ndarray
    noise_var: np.ndarray
    noise_var_one: np.ndarray
    noise_sd: float
    rho: float
    backtests: dict[str, dict[float, float]] = field(default_factory=dict)
    power_law_fit: PowerLawFit | None = field(default=None, repr=False)
    config: EnsembleConfig = field(default_factory=EnsembleConfig)

    @property
    def disagreement(self) -> np.ndarray:
        """Power law minus sigmoid forecast of the level (NaN without a power law)."""
        return self.power_law - self.sigmoid

    @property
    def driver(self) -> str:
        """The family with the larger weight beyond the window."""
        return "power law" if self.weights["power_law"] > 0.5 else "sigmoid"

    def summary_line(self, at_index: int = -1) -> str:
        """Which family drives the forecast and how far the two disagree, in words."""
        ws, wp = self.weights["sigmoid"], self.weights["power_law"]
        i = at_index
        if not np.isfinite(self.power_law[i]):
            return "sigmoid alone (the power law could not be fitted to the window's tail)"
        return (
            f"{self.driver} drives the forecast (weights from self-backtests: sigmoid {ws:.2f}, "
            f"power law {wp:.2f}); at C = {self.at[i]:.4g} the sigmoid says {self.sigmoid[i]:.3f}, "
            f"the power law {self.power_law[i]:.3f} (they differ by {self.disagreement[i]:+.3f})"
        )


def level_mask(compute: ArrayLike, end: float, window: float = LEVEL_WINDOW) -> np.ndarray:
    """The evaluations a run's level at ``end`` averages: compute in ``((1 - window) end, end]``.

    The one definition of a run's level: the calibration's target (:func:`rlcurves.calibrate.
    level_target`), a finished run's level in decisions (:func:`rlcurves.decide.final_level`) and
    the benchmarks all select the evaluations with it.
    """
    c = np.asarray(compute, dtype=float)
    return (c > (1.0 - window) * end) & (c <= end + 1e-12 * abs(end))


def level_grid(at: float, spacing: float) -> np.ndarray:
    """The compute points a run's level at ``at`` averages: ``k`` evaluations ``spacing`` apart
    ending at ``at``, ``k = max(1, round(0.1 at / spacing))`` (capped at 64 grid points)."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return np.array([at])
    k = max(1, round(LEVEL_WINDOW * at / spacing))
    if k > _MAX_WINDOW_POINTS:  # the same oldest point, without the k points in between
        grid = np.linspace(at - spacing * float(k - 1), at, _MAX_WINDOW_POINTS)
    else:
        grid = at - spacing * np.arange(k)
    return grid[grid > 0] if np.any(grid > 0) else np.array([at])


def level_weights(at: float, spacing: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The level at ``at`` with a continuous window, for a band drawn on a grid: the evaluations
    of :func:`level_grid` with the oldest one weighted by the fraction of it the window covers
    (``k = 0.1 at / spacing`` evaluations, not rounded), so that the level, its centre and its
    noise change smoothly with ``at`` instead of stepping where the rounded count changes. Equal
    to :func:`level_grid`'s mean where ``0.1 at / spacing`` is a whole number. Returns the grid,
    its weights and the (fractional) number of evaluations."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return np.array([at]), np.ones(1), 1.0
    k = max(1.0, LEVEL_WINDOW * at / spacing)
    whole = math.floor(k)
    if k > _MAX_WINDOW_POINTS:  # steps of 1/k or less: the rounded window as it is
        grid = level_grid(at, spacing)
        return grid, np.ones(grid.size), float(round(k))
    frac = k - whole
    n = whole + (1 if frac > 1e-12 else 0)
    grid = at - spacing * np.arange(n)
    weights = np.ones(n)
    if n > whole:
        weights[-1] = frac
    keep = grid > 0
    if not keep.any():
        return np.array([at]), np.ones(1), 1.0
    return grid[keep], weights[keep], float(weights[keep].sum())


def n_level(at: float, spacing: float) -> int:
    """Number of evaluations in the level at ``at`` (see :func:`level_grid`)."""
    if not (spacing > 0 and math.isfinite(spacing)):
        return 1
    return max(1, round(LEVEL_WINDOW * at / spacing))


def ar1_mean_variance(k: int, rho: float) -> float:
    """Variance of the mean of ``k`` AR(1) values of unit variance and lag-1 correlation rho
    (:func:`rlcurves._ar1.mean_variance`)."""
    return mean_variance(k, rho)


def _mean_variance(k: float, rho: float) -> float:
    """:func:`ar1_mean_variance` at a fractional ``k``: linear between the whole numbers."""
    lo = math.floor(k)
    if k - lo < 1e-12:
        return mean_variance(int(lo), rho)
    frac = k - lo
    return (1 - frac) * mean_variance(lo, rho) + frac * mean_variance(lo + 1, rho)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _tail_window(compute: np.ndarray, end: float, tail: float) -> np.ndarray:
    """The points a tail power law ending at ``end`` is fitted on."""
    inside = (compute > 0) & (compute <= end)
    tail_part = inside & (compute >= tail * end)
    return tail_part if tail_part.sum() >= TAIL_MIN_POINTS else inside


def fit_tail_power_law(
    compute: np.ndarray, reward: np.ndarray, end: float, tail: float = TAIL
) -> PowerLawFit:
    """The power law fitted on the window's tail (compute >= tail * end), see the module doc."""
    from .powerlaw import fit_power_law

    lo = tail * end
    if np.sum((compute >= lo) & (compute <= end) & (compute > 0)) < TAIL_MIN_POINTS:
        lo = None
    return _quiet(fit_power_law, compute, reward, min_compute=lo, max_compute=end)


def _refit_sigmoid(fit: SigmoidFit, max_compute: float) -> SigmoidFit:
    """``fit``'s settings on its own window, cut at ``max_compute``."""
    from .fit import fit_sigmoid

    return _quiet(
        fit_sigmoid,
        fit.fit_compute,
        fit.fit_reward,
        r0=fit.r0_fixed,
        min_compute=fit.min_compute,
        max_compute=max_compute,
        bounds={"A": tuple(fit.bounds.A), "R0": tuple(fit.bounds.R0)},
    )


def backtest_errors(fit: SigmoidFit, tail: float = TAIL) -> dict[str, dict[float, float]]:
    """Signed errors (observed minus forecast) of each family's forecast of the window's last 10%
    from the first 35%, 50% and 70% of its compute (NaN where a family could not be fitted)."""
    c, r = fit.fit_compute, fit.fit_reward
    end = float(np.max(c))
    out: dict[str, dict[float, float]] = {"sigmoid": {}, "power_law": {}}
    for cut_fraction in BACKTEST_CUTS:
        cut = cut_fraction * end
        held = _held(c, cut, end)
        for name in out:
            err = math.nan
            if held.any():
                try:
                    model = (
                        _refit_sigmoid(fit, cut)
                        if name == "sigmoid"
                        else fit_tail_power_law(c, r, cut, tail)
                    )
                    pred = np.asarray(model.predict(c[held]), dtype=float)
                    err = float(np.mean(r[held]) - np.mean(pred))
                except RLCurvesError:
                    pass
            out[name][cut_fraction] = err if math.isfinite(err) else math.nan
    return out


def _held(c: np.ndarray, cut: float, end: float) -> np.ndarray:
    """The window's last 10% after ``cut``: what a backtest from ``cut`` forecasts."""
    return (c > max(cut, (1 - LEVEL_WINDOW) * end)) & (c <= end)


def backtest_weights(errors: dict[str, dict[float, float]], shrink: float = 0.0) -> dict:
    """Inverse-MSE weights over the cuts both families forecast (sigmoid alone when none),
    shrunk toward equal: ``w = shrink / 2 + (1 - shrink) w_inverse_mse``."""
    es = np.array([errors["sigmoid"][k] for k in BACKTEST_CUTS])[None, :]
    ep = np.array([errors["power_law"][k] for k in BACKTEST_CUTS])[None, :]
    wp = float(_weights(es, ep, shrink)[0])
    return {"sigmoid": 1.0 - wp, "power_law": wp}


def _weights(es: np.ndarray, ep: np.ndarray, shrink: float) -> np.ndarray:
    """The power law's shrunk inverse-MSE weight for every row of backtest errors (k, cuts);
    0 for a row with no cut both families forecast."""
    ok = np.isfinite(es) & np.isfinite(ep)
    n = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mse_s = np.maximum(np.where(ok, es, 0.0) ** 2 @ np.ones(es.shape[1]) / n, 1e-14)
        mse_p = np.maximum(np.where(ok, ep, 0.0) ** 2 @ np.ones(ep.shape[1]) / n, 1e-14)
        raw = (1.0 / mse_p) / (1.0 / mse_s + 1.0 / mse_p)
    return np.where(n > 0, 0.5 * shrink + (1.0 - shrink) * np.nan_to_num(raw), 0.0)


@dataclass(eq=False)
class _Members:
    """Everything the combinations share: each family's forecasts and backtests on the data and
    on every resample (one entry per tail for the power law)."""

    at: np.ndarray
    end: float
    k: np.ndarray
    grids: list[np.ndarray]
    window_weights: list[np.ndarray | None]
    spacing: float
    continuous: bool
    distance: np.ndarray
    sigmoid: np.ndarray
    sigmoid_point: np.ndarray
    sigmoid_draws: np.ndarray
    sigmoid_bt: np.ndarray
    sigmoid_bt_draws: np.ndarray
    power_law: dict[float, dict[str, Any]]
    noise_sd: float
    rho: float


def _level_of(predict, grids: list[np.ndarray], weights: list | None = None) -> np.ndarray:
    """Mean of ``predict(compute)`` over each level grid (weighted where ``weights`` gives an
    array): shape (n_rows, n_at) for a batched ``predict`` returning (n_rows, len(compute))."""
    weights = [None] * len(grids) if weights is None else weights
    cols = []
    for g, wg in zip(grids, weights, strict=True):
        with np.errstate(all="ignore"):
            v = np.atleast_2d(predict(g))
            cols.append(np.mean(v, axis=1) if wg is None else np.average(v, axis=1, weights=wg))
    return np.stack(cols, axis=1)


def members(
    fit: SigmoidFit,
    at: ArrayLike,
    *,
    tails: tuple[float, ...] = (TAIL,),
    n_resamples: int = N_RESAMPLES,
    seed: int | None = 0,
    continuous: bool = False,
) -> _Members:
    """Both families' forecasts of the level at ``at``, their backtests, and the same on
    ``n_resamples`` perturbed copies of the window (see the module docstring). The power law is
    done once per entry of ``tails``; :func:`assemble` combines for one setting. ``continuous``:
    the level windows of :func:`level_weights` (a band without steps), see :func:`combine`."""
    from .bootstrap import ar1_params
    from .calibrate import residual_sd
    from .model import log_compute
    from .model import sigmoid as sigmoid_curve
    from .powerlaw import _a_bounds, fit_power_law_batch
    from .solver import warm_refit

    at = np.atleast_1d(np.asarray(at, dtype=float))
    order = np.argsort(fit.fit_compute, kind="stable")
    c, r = fit.fit_compute[order], fit.fit_reward[order]
    end = float(np.max(c))
    uniq = np.unique(c)
    spacing = float(np.median(np.diff(uniq))) if uniq.size > 1 else math.nan
    if continuous:
        grids, wins, k = [], [], []
        for a in at:
            g, wg, kk = level_weights(float(a), spacing)
            grids.append(g), wins.append(wg), k.append(kk)
        k = np.array(k)
    else:
        grids = [level_grid(float(a), spacing) for a in at]
        wins = [None] * at.size
        k = np.array([float(n_level(float(a), spacing)) for a in at])
    centers = _level_of(lambda g: np.asarray(g, dtype=float), grids, wins)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.where(centers > end, np.log(np.maximum(centers, end) / end), 0.0)
    sig = _level_of(lambda g: np.asarray(fit.predict(g), dtype=float), grids, wins)[0]
    sig_point = np.asarray(fit.predict(at), dtype=float)

    # the resamples: the data plus AR(1) noise in compute with the residuals' sd and rho
    w = np.ones(c.size) if fit.sigma is None else 1.0 / fit.fit_sigma[order]
    p = fit.params
    fitted = sigmoid_curve(c, p["A"], p["B"], p["C_mid"], p["R0"])
    sd, rho = ar1_params(w * (r - fitted), len(fit.free_params), compute=c)
    rng = np.random.default_rng(seed)
    noise = ar1_series(rng, n_resamples, c.size, sd, rho, gaps=spacing_units(c, c.size))
    Y = r[None, :] + noise / w[None, :]
    x = log_compute(c)

    def refit(mask, params) -> np.ndarray:
        start = (params["A"], params["R0"], math.log(params["B"]), math.log(params["C_mid"]))
        sol = _quiet(warm_refit, x[mask], Y[:, mask], w[mask], fit.r0_fixed, fit.bounds, start)
        return np.stack([sol.A, np.exp(sol.log_B), np.exp(sol.m), sol.R0], axis=1)

    def sig_batch(theta):
        return lambda g: sigmoid_curve(
            np.asarray(g, dtype=float)[None, :], *(theta[:, i : i + 1] for i in range(4))
        )

    theta = refit(np.ones(c.size, dtype=bool), dict(p))
    sig_draws = _level_of(sig_batch(theta), grids, wins)

    # backtests on the data and on every resample
    n_cuts = len(BACKTEST_CUTS)
    sig_bt = np.full(n_cuts, np.nan)
    sig_bt_draws = np.full((n_resamples, n_cuts), np.nan)
    for j, cut_fraction in enumerate(BACKTEST_CUTS):
        cut = cut_fraction * end
        held = _held(c, cut, end)
        if not held.any():
            continue
        try:
            cut_fit = _refit_sigmoid(fit, cut)
        except RLCurvesError:
            continue
        pc = cut_fit.params
        sig_bt[j] = float(np.mean(r[held]) - np.mean(np.asarray(cut_fit.predict(c[held]))))
        th = refit(c <= cut, dict(pc))
        pred = sig_batch(th)(c[held])
        sig_bt_draws[:, j] = Y[:, held].mean(axis=1) - pred.mean(axis=1)

    a_bounds = _a_bounds("auto", r)
    power_law: dict[float, dict[str, Any]] = {}
    for tail in tails:
        entry: dict[str, Any] = {"fit": None}
        try:
            pl = fit_tail_power_law(c, r, end, tail)
        except RLCurvesError:
            pl = None
        entry["fit"] = pl
        if pl is not None:
            with np.errstate(all="ignore"):
                entry["level"] = _level_of(lambda g, pl=pl: pl.predict(g), grids, wins)[0]
                entry["point"] = np.asarray(pl.predict(at), dtype=float)
            mask = _tail_window(c, end, tail)
            A, D, B = fit_power_law_batch(c[mask], Y[:, mask], a_bounds)
            entry["draws"] = _level_of(_pl_batch(A, D, B), grids, wins)
        bt = np.full(n_cuts, np.nan)
        bt_draws = np.full((n_resamples, n_cuts), np.nan)
        for j, cut_fraction in enumerate(BACKTEST_CUTS):
            cut = cut_fraction * end
            held = _held(c, cut, end)
            if not held.any():
                continue
            try:
                cut_pl = fit_tail_power_law(c, r, cut, tail)
            except RLCurvesError:
                continue
            with np.errstate(all="ignore"):
                bt[j] = float(np.mean(r[held]) - np.mean(cut_pl.predict(c[held])))
            mask = _tail_window(c, cut, tail)
            A, D, B = fit_power_law_batch(c[mask], Y[:, mask], a_bounds)
            pred = _pl_batch(A, D, B)(c[held])
            bt_draws[:, j] = Y[:, held].mean(axis=1) - pred.mean(axis=1)
        entry["bt"] = np.where(np.isfinite(bt), bt, np.nan)
        entry["bt_draws"] = np.where(np.isfinite(bt_draws), bt_draws, np.nan)
        power_law[tail] = entry
    return _Members(
        at=at,
        end=end,
        k=k,
        grids=grids,
        window_weights=wins,
        spacing=spacing,
        continuous=continuous,
        distance=distance,
        sigmoid=sig,
        sigmoid_point=sig_point,
        sigmoid_draws=sig_draws,
        sigmoid_bt=sig_bt,
        sigmoid_bt_draws=sig_bt_draws,
        power_law=power_law,
        noise_sd=residual_sd(fit),
        rho=rho,
    )


def _pl_batch(A, D, B):
    """``predict(compute) -> (k, len(compute))`` of k power laws."""

    def predict(g):
        g = np.asarray(g, dtype=float)[None, :]
        with np.errstate(all="ignore"):
            return A[:, None] - D[:, None] * g ** (-B[:, None])

    return predict


def _finite(v: np.ndarray) -> np.ndarray:
    return np.isfinite(v) & (np.abs(v) < 1e6)


def assemble(m: _Members, config: EnsembleConfig | None = None) -> Ensemble:
    """The combined forecast under ``config`` from :func:`members` (its tail among theirs)."""
    config = EnsembleConfig() if config is None else config
    if config.tail not in m.power_law:
        raise RLCurvesError(f"the members were computed for tails {list(m.power_law)}")
    pl = m.power_law[config.tail]
    beyond = m.at > m.end
    names = ("sigmoid", "power_law")
    backtests = {
        "sigmoid": dict(zip(BACKTEST_CUTS, map(float, m.sigmoid_bt), strict=True)),
        "power_law": dict(zip(BACKTEST_CUTS, map(float, pl["bt"]), strict=True)),
    }
    if pl["fit"] is None:
        wp0 = 0.0
        plv = pt = np.full(m.at.size, np.nan)
    else:
        wp0 = float(_weights(m.sigmoid_bt[None, :], pl["bt"][None, :], config.shrink)[0])
        plv, pt = pl["level"], pl["point"]
    ok = beyond & _finite(plv) & _finite(pt)
    wp = np.where(ok, wp0, 0.0)
    phase = np.ones(m.at.size)
    if m.continuous and m.spacing > 0:  # the power law phased in over the first level window
        phase = np.clip((m.at - m.end) / np.maximum(m.k * m.spacing, 1e-300), 0.0, 1.0)
    wp = wp * phase
    mean = (1 - wp) * m.sigmoid + wp * np.where(ok, plv, 0.0)
    point = (1 - wp) * m.sigmoid_point + wp * np.where(ok, pt, 0.0)
    draws = m.sigmoid_draws
    if pl["fit"] is not None:
        wb = _weights(m.sigmoid_bt_draws, pl["bt_draws"], config.shrink)[:, None]
        okb = beyond[None, :] & _finite(pl["draws"])
        wb = np.where(okb, wb, 0.0) * phase[None, :]
        draws = (1 - wb) * draws + wb * np.where(okb, pl["draws"], 0.0)
    good = np.all(np.isfinite(draws), axis=1)
    fit_var = np.var(draws[good], axis=0, ddof=1) if good.sum() > 1 else np.zeros(m.at.size)
    noise_var = m.noise_sd**2 * np.array([_mean_variance(float(kk), m.rho) for kk in m.k])
    return Ensemble(
        at=m.at,
        k=np.maximum(np.round(m.k), 1).astype(int),
        mean=mean,
        point=point,
        sigmoid=m.sigmoid,
        power_law=np.where(_finite(plv), plv, np.nan),
        weights=dict(zip(names, (1.0 - wp0, wp0), strict=True)),
        w_power_law=wp,
        distance=m.distance,
        fit_var=fit_var,
        noise_var=noise_var,
        noise_var_one=np.full(m.at.size, m.noise_sd**2),
        noise_sd=m.noise_sd,
        rho=float(m.rho),
        backtests=backtests,
        power_law_fit=pl["fit"],
        config=config,
    )


def combine(
    fit: SigmoidFit,
    at: ArrayLike,
    *,
    config: EnsembleConfig | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = 0,
    continuous: bool = False,
) -> Ensemble:
    """The combined forecast of the run's level at ``at`` (see the module docstring).

    Parameters
    ----------
    fit : SigmoidFit
        The sigmoid fit. Only its window's data are used.
    at : array_like
        Compute values.
    config : EnsembleConfig, optional
        The power law's tail and the weights' shrinkage (default: the calibration's choice is
        passed by :func:`rlcurves.forecast`; here :class:`EnsembleConfig`'s defaults).
    n_resamples : int
        Perturbed copies of the window behind ``fit_var``.
    seed : int, optional
        Seed of the perturbations.
    continuous : bool
        For a band drawn over many ``at``, without steps: the level's window taken as
        continuous (:func:`level_weights`), so nothing steps where the number of evaluations
        averaged changes, and the power law weighted by the share of that window past the fit
        window, so the combination does not step in at the window's end.
    """
    config = EnsembleConfig() if config is None else config
    return assemble(
        members(
            fit,
            at,
            tails=(config.tail,),
            n_resamples=n_resamples,
            seed=seed,
            continuous=continuous,
        ),
        config,
    )


def info_dict(ens: Ensemble, scalar: bool) -> dict[str, Any]:
    """The fields :class:`~rlcurves.forecast.Forecast` exposes in ``info`` about the families."""

    def out(a):
        a = np.asarray(a, dtype=float)
        return float(a[0]) if scalar else a

    return {
        "weights": dict(ens.weights),
        "driver": ens.driver,
        "families": {"sigmoid": out(ens.sigmoid), "power_law": out(ens.power_law)},
        "disagreement": out(ens.disagreement),
        "n_level": out(ens.k),
        "distance": out(ens.distance),
        "backtests": ens.backtests,
        "ensemble": ens.config.label,
    }


__all__ = [
    "BACKTEST_CUTS",
    "CONFIGS",
    "LEVEL_WINDOW",
    "Ensemble",
    "EnsembleConfig",
    "assemble",
    "backtest_errors",
    "backtest_weights",
    "combine",
    "fit_tail_power_law",
    "level_grid",
    "level_mask",
    "level_weights",
    "members",
]
