"""Decisions from forecasts: the probabilities and the stop rule behind every stop advice.

Every probability here is computed from a forecast's :class:`~rlcurves.predictive.Predictive`,
the same draws its printed interval comes from, so a report never prints ``p(above) <= 0.05``
beside an interval that contains the baseline. :class:`~rlcurves.monitor.Monitor`, the CLI's
``watch`` and ``race``, the transformers callback, :class:`~rlcurves.race.Race` and the Ray Tune
and Optuna adapters all decide here.

- Probabilities: :func:`prob_above`, :func:`prob_best`, :func:`prob_greater`, :func:`prob_reach`;
  :func:`final_level` turns a finished run into a baseline; :func:`peak_test` says whether a run
  has peaked.
- One run: :func:`decide` turns a refit into a :class:`Decision` (one of :data:`ADVICE`, with its
  reason) under a :class:`StopRule` (:data:`DEFAULT_RULE`: thresholds measured on replayed real
  runs, ``rlcurves/data/stop_rule.json``); :class:`Hysteresis` holds a stop advice until it has
  held on ``rule.hold`` consecutive refits.
- A sweep: :func:`stop_set`, :func:`prob_regret_above`, :func:`sweep_baseline`
  (:func:`sweep_baselines`: every run's at once).

A sweep keeps one :class:`Hysteresis` per trial::

    rule = DEFAULT_RULE  # or StopRule(...) / rule.replace(hold=3)
    held = {trial: Hysteresis.for_rule(rule) for trial in trials}
    # after each refit of a trial:
    d = held[trial].update(decide(fc, fraction=f, n_points=n, baseline=best, rule=rule))
    if d.stop: ...  # d.advice, d.reason, d.p_above

The rules in order, and why each is what it is: the design notes (``docs/design/decide.md``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._ar1 import ar1_series, clip_rho, lag1, spacing_units
from ._format import format_compute
from .ensemble import level_mask
from .errors import RLCurvesError
from .forecast import Forecast
from .predictive import Predictive

if TYPE_CHECKING:
    from .result import SigmoidFit

# A level to beat: a number (known exactly), draws of it, or a forecast's predictive distribution
# (a finished run's level is known only to its noise: its draws carry that).
Level = float | ArrayLike | Predictive | Forecast

TOO_EARLY = "too early to tell"
CONTINUE = "continue"
ON_TRACK = "on track"
UNLIKELY_BASELINE = "unlikely to beat the baseline"
UNLIKELY_TARGET = "unlikely to reach the target"
PEAKED = "peaked"
#: Every advice a decision can give; the last three advise stopping.
ADVICE = (TOO_EARLY, CONTINUE, ON_TRACK, UNLIKELY_BASELINE, UNLIKELY_TARGET, PEAKED)
STOP_ADVICE = (UNLIKELY_BASELINE, UNLIKELY_TARGET, PEAKED)


# ---- probabilities ----------------------------------------------------------------------------
def _draws(x: Level, i: int = 0) -> np.ndarray:
    """1-D draws of ``x`` at its ``i``-th forecast point."""
    if isinstance(x, Forecast):
        if x.predictive is None:
            raise RLCurvesError(
                "the forecast has no predictive distribution (its interval is unbounded): fit "
                "more evaluations before deciding"
            )
        x = x.predictive
    if isinstance(x, Predictive):
        return x.column(i)
    try:
        d = np.atleast_1d(np.asarray(x, dtype=float)).ravel()
    except (TypeError, ValueError):
        d = np.array([np.nan])
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise RLCurvesError(f"a level to compare with must be finite numbers, got {x!r}")
    return d


def prob_greater(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y) for independent X, Y given by draws, over all pairs (ties count half)."""
    x = np.asarray(x, dtype=float).ravel()
    ys = np.sort(np.asarray(y, dtype=float).ravel())
    below = np.searchsorted(ys, x, side="left")
    not_above = np.searchsorted(ys, x, side="right")
    return float(np.mean((below + not_above) / 2.0) / ys.size)


def _check_sign(sign: int) -> None:
    if sign not in (1, -1):
        raise RLCurvesError(f"sign must be 1 or -1, got {sign!r}")


def prob_above(run: Level, baseline: Level, *, sign: int = 1, i: int = 0) -> float:
    """P(the run's quantity ends above ``baseline``), the two independent.

    Parameters
    ----------
    run : Forecast, Predictive or draws
        The run's forecast at the budget.
    baseline : float, draws, Predictive or Forecast
        The level to beat; its own uncertainty counts when it is given as draws (a finished run:
        :func:`final_level`).
    sign : {1, -1}
        -1 when lower is better (a loss): the probability of ending below.
    i : int
        Which forecast point of ``run`` (and of ``baseline``) to use.
    """
    _check_sign(sign)
    return prob_greater(sign * _draws(run, i), sign * _draws(baseline, i))


def prob_reach(run: Level, target: float, *, sign: int = 1, i: int = 0) -> float:
    """P(the run's quantity is at or past ``target``), a target known exactly."""
    _check_sign(sign)
    if not math.isfinite(float(target)):
        raise RLCurvesError(f"target must be a finite reward, got {target!r}")
    return float(np.mean(sign * _draws(run, i) >= sign * float(target)))


def prob_best(runs: Mapping[str, Level], *, sign: int = 1, i: int = 0, seed: int = 0) -> dict:
    """P(each run is the best of ``runs``), the runs independent: a dict name -> probability.

    Draws of runs of different draw counts are resampled to a common count with ``seed``.
    """
    _check_sign(sign)
    if not runs:
        return {}
    names, m = _draw_matrix(runs, sign, seed, i)
    best = m.max(axis=1, keepdims=True)
    ties = (m == best).astype(float)
    share = ties / ties.sum(axis=1, keepdims=True)
    return dict(zip(names, share.mean(axis=0).tolist(), strict=True))


# Deterministic normal quantiles: a level known to its noise needs no seed.
_N_LEVEL_DRAWS = 2000


def final_level(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    tail: float = 0.1,
    at: float | None = None,
) -> Predictive:
    """The level a finished run ended at, known only to its noise.

    The mean of its evaluations in the last ``tail`` of its compute (compute above ``(1 - tail)``
    times the end, :func:`rlcurves.ensemble.level_mask`, the definition the calibration scores;
    up to ``at`` when given: the level at a budget the run went past), with the standard error
    of that mean: the evaluation noise from successive differences (which a slow trend in the
    tail barely moves) and, with 20 or more evaluations in the stretch, their lag-1
    autocorrelation (in compute, :mod:`rlcurves._ar1`).

    Parameters
    ----------
    compute, reward : array_like
        The finished run's evaluations.
    tail : float
        Fraction of the run's compute (of ``at``) the level is the mean over, in (0, 1].
    at : float, optional
        The compute the level is taken at (default: the run's end).

    Returns
    -------
    Predictive
        Normal draws (deterministic quantiles) of the level at ``at``; ``info`` holds the mean,
        its standard error and the evaluations averaged.
    """
    c = np.asarray(compute, dtype=float).ravel()
    r = np.asarray(reward, dtype=float).ravel()
    if c.shape != r.shape or c.size == 0 or not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))):
        raise RLCurvesError(
            "final_level needs finite compute and reward of the same nonzero length, got "
            f"{c.size} and {r.size} values"
        )
    if not 0 < tail <= 1:
        raise RLCurvesError(f"tail must be a fraction of the compute in (0, 1], got {tail}")
    order = np.argsort(c, kind="stable")
    c, r = c[order], r[order]
    end = float(c.max()) if at is None else float(at)
    inside = c <= end * (1 + 1e-12)
    c, r = c[inside], r[inside]
    if c.size == 0:
        raise RLCurvesError(f"the run has no evaluation at or before at={at}")
    use = level_mask(c, end, tail)
    m = int(use.sum())
    level = float(np.mean(r[use]))
    # the noise of one evaluation, from the last max(m, 10) evaluations' successive differences
    stretch = r[-max(m, 10) :]
    sd = float(np.std(np.diff(stretch), ddof=1) / math.sqrt(2)) if stretch.size >= 3 else 0.0
    rho = 0.0
    if stretch.size >= 20:
        cs = c[-stretch.size :]
        x = (cs - cs.mean()) / max(float(np.std(cs)), 1e-300)
        res = stretch - np.polyval(np.polyfit(x, stretch, 1), x)
        rho = clip_rho(lag1(res, cs))
    se = sd / math.sqrt(m) * math.sqrt((1 + rho) / (1 - rho))
    z = _normal_quantiles(_N_LEVEL_DRAWS)
    return Predictive(
        np.array([end]),
        (level + se * z)[:, None],
        "final level (mean of the last evaluations)",
        {"mean": level, "se": se, "n_eval": m, "noise_sd": sd, "rho": rho, "tail": tail},
    )


def _tail_support(pred: Predictive | None) -> float:
    """The smallest one-sided probability ``pred``'s calibration supports (0: any, e.g. draws
    not calibrated on runs): a stop threshold below it is raised to it."""
    if pred is None:
        return 0.0
    return float(pred.info.get("min_tail", 0.0))


def _normal_quantiles(n: int) -> np.ndarray:
    from scipy.stats import norm

    return norm.ppf((np.arange(n) + 0.5) / n)


# ---- has the run peaked? ----------------------------------------------------------------------
@dataclass(frozen=True)
class PeakTest:
    """Whether a run has peaked: the fall from its best running median, tested.

    Attributes
    ----------
    peaked : bool
        A real fall: ``p_value <= alpha``, ``drop >= min_drop``, at least ``patience``
        evaluations since the peak, and the sigmoid with a decline preferred to the sigmoid.
    drop : float
        The best running median of ``window`` evaluations minus the latest one (in the direction
        of improvement; negative while the latest is the best). Medians: one outlying evaluation
        is not a fall.
    p_value : float
        The share of simulated runs that follow the fitted (monotone) sigmoid with the run's own
        residual sd and lag-1 autocorrelation and fall at least ``drop`` from their own best
        running median: the maximum is picked in every simulated run as in the real one, so the
        selection is paid for. NaN when there is no fall that would matter (``drop <
        min_drop`` or fewer than ``patience`` evaluations since the peak): not tested.
    peak_compute : float or None
        Compute at the centre of the best running median.
    evals_since_peak : int
        Evaluations after that centre.
    window : int
        Evaluations per running median: ``max(smooth, n // 10)``.
    decline, decline_from : float or None
        The sigmoid-with-a-decline model, fitted only when there is a fall that would matter: the
        fall below the sigmoid it fits from ``decline_from`` to the last evaluation.
    delta_bic : float or None
        BIC of the sigmoid minus BIC of the sigmoid with a decline (two more parameters), with
        the likelihood ratio deflated by the residuals' autocorrelation; > 0 prefers the decline.
    reason : str
        The verdict in a sentence.
    """

    peaked: bool
    drop: float
    p_value: float
    peak_compute: float | None
    evals_since_peak: int
    window: int
    decline: float | None = None
    decline_from: float | None = None
    delta_bic: float | None = None
    reason: str = ""

    def holds(self, rule: StopRule) -> bool:
        """Whether the fall counts as a peak under ``rule``'s thresholds (``peak_drop``,
        ``peak_alpha``, ``peak_patience``): a test run with lower thresholds can be judged by
        stricter ones."""
        return bool(
            self.delta_bic is not None
            and self.delta_bic > 0
            and self.p_value <= rule.peak_alpha
            and self.drop >= rule.peak_drop
            and self.decline >= rule.peak_drop
            and self.evals_since_peak >= rule.peak_patience
        )


# Simulated runs per peak test: the p-value's resolution is 1 / (N_PEAK_SIM + 1).
N_PEAK_SIM = 400


def peak_test(
    fit: SigmoidFit,
    *,
    sign: int = 1,
    smooth: int = 5,
    alpha: float = 0.05,
    min_drop: float = 0.02,
    patience: int = 4,
    n_sim: int = N_PEAK_SIM,
    seed: int | None = 0,
) -> PeakTest:
    """Has the run in ``fit``'s window peaked? See :class:`PeakTest` for the test.

    Parameters
    ----------
    fit : SigmoidFit
        The sigmoid fitted to the run so far (its window's evaluations are tested).
    sign : {1, -1}
        -1 when lower is better.
    smooth : int
        Smallest running-mean window (the window is ``max(smooth, n // 10)`` evaluations).
    alpha : float
        Largest p-value that counts as a fall.
    min_drop : float
        Smallest fall that matters, in reward units.
    patience : int
        Evaluations since the peak before a fall counts.
    n_sim : int
        Simulated runs for the p-value.
    seed : int, optional
        Seed of the simulation.
    """
    _check_sign(sign)
    c = np.asarray(fit.fit_compute, dtype=float)
    order = np.argsort(c, kind="stable")
    c = c[order]
    y = sign * np.asarray(fit.fit_reward, dtype=float)[order]
    n = y.size
    k = max(int(smooth), n // 10)
    if n < k + max(int(patience), 1) or fit.dof < 1:
        return PeakTest(False, 0.0, 1.0, None, 0, k, reason=f"{n} evaluations: too few to test")
    g = sign * np.asarray(fit.predict(c), dtype=float)
    meds = _running_medians(y[None, :], k)[0]
    i_best = int(np.argmax(meds))
    drop = float(meds[i_best] - meds[-1])
    centre = i_best + k // 2
    since = n - 1 - centre
    peak_c = float(c[centre])
    where = f"its running median of {k} peaked at C = {format_compute(peak_c)}"
    if not (drop >= min_drop and since >= patience):  # no fall that would matter: no test
        why = f"{where}, {since} evaluations ago; fallen {drop:+.3f} since"
        return PeakTest(False, drop, math.nan, peak_c, since, k, reason=why)
    # a fall that would matter: compare with the sigmoid with a decline, and take the noise from
    # the better model's residuals (a real sag inflates the sigmoid's residuals and their
    # autocorrelation, which would hide the sag in its own noise)
    fall, c_k, rss0, res1 = _decline_fit(c, y, fit, sign)
    rho1 = _lag1(res1, c)
    lr = n * math.log(max(rss0, 1e-300) / max(float(np.sum(res1**2)), 1e-300))
    dbic = lr * (1 - rho1) / (1 + rho1) - 2 * math.log(n)
    res, dof = (res1, max(fit.dof - 2, 1)) if dbic > 0 else (y - g, fit.dof)
    sd = float(np.sqrt(np.sum(res**2) / dof))
    rho = _lag1(res, c)
    # the null: the fitted (monotone) curve plus stationary AR(1) noise (in compute) with that
    # sd and rho
    rng = np.random.default_rng(seed)
    noise = ar1_series(rng, n_sim, n, sd, rho, gaps=spacing_units(c, n))
    sims = _running_medians(g[None, :] + noise, k)
    sim_drop = sims.max(axis=1) - sims[:, -1]
    p = float((1 + np.sum(sim_drop >= drop)) / (n_sim + 1))
    peaked = p <= alpha and dbic > 0 and fall >= min_drop
    verdict = "a decline is preferred to the sigmoid" if dbic > 0 else "the sigmoid explains it"
    return PeakTest(
        peaked, drop, p, peak_c, since, k, fall, c_k, dbic,
        reason=(
            f"{where}, {since} evaluations ago, and has fallen {drop:.3f} since: p = {p:.3f} "
            f"for a run following its fitted curve; {verdict} (a fall of {fall:.3f} from "
            f"C = {format_compute(c_k)}, delta BIC {dbic:+.1f})"
        ),
    )  # fmt: skip


def _lag1(res: np.ndarray, compute: np.ndarray | None = None) -> float:
    """Lag-1 autocorrelation of residuals at the median spacing in compute, clipped to
    ``[0, RHO_MAX]`` (0 when undefined; :mod:`rlcurves._ar1`)."""
    if res.size < 4:
        return 0.0
    return clip_rho(lag1(res, compute))


def _running_medians(y: np.ndarray, k: int) -> np.ndarray:
    """Running medians of ``k`` along the last axis (valid windows only): one outlying
    evaluation moves a median little, where it would move a mean by 1/k of its size."""
    return np.median(np.lib.stride_tricks.sliding_window_view(y, k, axis=-1), axis=-1)


def _decline_fit(
    c: np.ndarray, y: np.ndarray, fit: SigmoidFit, sign: int
) -> tuple[float, float, float, np.ndarray]:
    """Fit ``y = sigmoid - D * max(0, log(C / C_k))`` (D >= 0) over a grid of ``C_k``.

    The sigmoid is linear in (R0, A) given (B, log C_mid) and so is the decline given C_k: for
    each C_k a Nelder-Mead search over (B, log C_mid) with the linear parameters solved exactly
    (variable projection). Returns the fitted fall from C_k to the last evaluation, C_k, the
    sigmoid's RSS and the decline model's residuals.
    """
    from scipy.optimize import minimize

    n = y.size
    x = np.log(np.maximum(c, np.finfo(float).tiny))
    zero = c <= 0
    r0 = fit.r0_fixed
    y0 = y if r0 is None else y - sign * r0  # sign * R is linear in (sign * R0, sign * A)

    def solve(theta, h):
        frac = 1.0 / (1.0 + np.exp(np.clip(theta[0] * (theta[1] - x), -700, 700)))
        frac[zero] = 0.0
        cols = [frac] if r0 is not None else [1.0 - frac, frac]
        if h is not None:
            cols.append(-h)
        X = np.column_stack(cols)
        coef, *_ = np.linalg.lstsq(X, y0, rcond=None)
        if h is not None and coef[-1] < 0:  # a rise, not a decline: D = 0, the sigmoid
            return solve(theta, None)
        res = y0 - X @ coef
        return float(np.sum(res**2)), float(coef[-1]) if h is not None else 0.0, res

    def search(h):
        obj = lambda t: solve(t, h)[0] if t[0] > 0 else 1e300  # noqa: E731
        opt = minimize(obj, start, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-12})
        return solve(opt.x, h)

    start = np.array([fit.B, math.log(fit.C_mid)])
    # the sigmoid's RSS by the same projection (bounds on A and R0 would favour the decline)
    res0 = y - sign * np.asarray(fit.predict(c), dtype=float)
    rss0 = min(float(np.sum(res0**2)), search(None)[0])
    best = (rss0, 0.0, float(c[-1]), res0)
    lo = max(3, n // 3)
    for j in np.unique(np.linspace(lo, n - 3, min(12, n - 2 - lo)).astype(int)):
        h = np.maximum(0.0, x - x[j])
        val, d, res = search(h)
        if val < best[0]:
            best = (val, d * float(h[-1]), float(c[j]), res)
    _, fall, c_k, res1 = best
    return fall, c_k, rss0, res1


# ---- the stop rule ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StopRule:
    """When a run may be told to stop: measured thresholds, documented in the module docstring.

    Attributes
    ----------
    schedule : tuple of (fraction, threshold)
        From each fraction of the budget on (sorted), stop when p(above) (or p(reached)) is at
        most the threshold. Before the first fraction no stop advice is given (the "too early"
        fraction, :attr:`min_fraction`).
    hold : int
        Consecutive refits a stop advice must hold before it is given (:class:`Hysteresis`).
    hold_span : float
        ... and the fraction of the budget those refits must span: a watch that refits at every
        one of hundreds of evaluations then needs the persistence the replay's 24 checkpoints
        (3.9% of the budget apart) measured.
    min_points : int
        Evaluations before any advice, unless the evidence is plain (``evident``).
    evident : float or None
        A stop whose p(above) (or p(reached)) is at most this (and at most the schedule's
        threshold) is evident: it needs only ``evident_points`` evaluations instead of
        ``min_points``; it still holds like any stop. None (the default): the fixed floor. On
        the corpus's 28 sweeps (``benchmarks/race_corpus.py``'s protocol) ``evident=0`` changes
        Race's compute from 83.3% to 83.1% and no far-behind run is stopped earlier: the hold,
        not the floor, binds; evident stops given without the hold reach 81.8% but stop a late
        bloomer whose early forecast is wrong (``docs/design/decide.md``).
    evident_points : int
        Evaluations an evident stop needs.
    min_progress : float
        No stop advice before the compute spent is this many times the fitted midpoint C_mid (a
        run near its midpoint has not shown its ceiling). Off (0) by default: on simulated runs
        with C_mid up to half the budget the calibrated forecast tells 0 of 95 clear winners to
        stop without it and stops 92 of 100 clear losers (89 with 2, 46 with 3): ``python -m
        benchmarks.monitor_replay --no-replay --simulate 100``.
    p_on_track : float
        Say "on track" from this probability of beating the baseline or reaching the target.
    min_gain : float
        A run whose rest of the budget plausibly adds less than this has peaked (a plateau).
    peak_drop : float
        The smallest fall from the best running median that counts as a peak (with 0.01 one
        GSM8K run was called peaked at a quarter of its budget and ended above that peak; with
        0.02 two of the 29 real runs are called, MATH runs at 88% and 95% of their budgets, and
        neither regains its peak: ``python -m benchmarks.monitor_replay``, the peaks table).
    peak_alpha : float
        Largest p-value of :func:`peak_test` that counts as a fall.
    peak_patience : int
        Evaluations since the peak before a fall counts.
    smooth : int
        Smallest running-median window of the peak test.
    source : str
        Where the thresholds come from (the command that measured them).
    """

    # the measured schedule (rlcurves/data/stop_rule.json, which DEFAULT_RULE loads)
    schedule: tuple[tuple[float, float], ...] = ((0.1, 0.01), (0.3, 0.05))
    hold: int = 2
    hold_span: float = 0.035
    min_points: int = 8
    evident: float | None = None
    evident_points: int = 4
    min_progress: float = 0.0
    p_on_track: float = 0.8
    min_gain: float = 0.01
    peak_drop: float = 0.02
    peak_alpha: float = 0.05
    peak_patience: int = 4
    smooth: int = 5
    source: str = "defaults"

    def __post_init__(self) -> None:
        sched = tuple((float(f), float(t)) for f, t in self.schedule)
        if not sched or any(not (0 <= f <= 1 and 0 <= t < 1) for f, t in sched):
            raise RLCurvesError(
                f"schedule must be (fraction, threshold) pairs with fractions in [0, 1] and "
                f"thresholds in [0, 1), got {self.schedule!r}"
            )
        if list(sched) != sorted(sched):
            raise RLCurvesError(f"schedule must be sorted by fraction, got {self.schedule!r}")
        object.__setattr__(self, "schedule", sched)
        for name in ("hold", "min_points", "evident_points", "peak_patience", "smooth"):
            if int(getattr(self, name)) < 1:
                raise RLCurvesError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if not max(t for _, t in sched) < self.p_on_track <= 1:
            raise RLCurvesError(
                f"need every stop threshold < p_on_track <= 1, got thresholds "
                f"{[t for _, t in sched]} and p_on_track={self.p_on_track}"
            )
        if self.evident is not None and not 0 <= self.evident < 1:
            raise RLCurvesError(f"evident must be None or in [0, 1), got {self.evident}")
        if not self.min_progress >= 0:
            raise RLCurvesError(f"min_progress must be >= 0, got {self.min_progress}")
        if not 0 <= self.hold_span < 1:
            raise RLCurvesError(f"hold_span must be in [0, 1), got {self.hold_span}")
        if not 0 < self.peak_alpha < 1:
            raise RLCurvesError(f"peak_alpha must be in (0, 1), got {self.peak_alpha}")

    @property
    def min_fraction(self) -> float:
        """The "too early" fraction: no stop advice before it."""
        return self.schedule[0][0]

    def threshold(self, fraction: float) -> float:
        """The stop threshold on p(above) at ``fraction`` of the budget (-inf: none yet)."""
        out = -math.inf
        for f, t in self.schedule:
            if fraction >= f - 1e-12:
                out = t
        return out

    def replace(self, **changes: Any) -> StopRule:
        """A copy with ``changes`` (``p_unlikely=`` sets one threshold from the same fraction,
        ``min_fraction=`` moves the schedule's start)."""
        p = changes.pop("p_unlikely", None)
        f0 = changes.pop("min_fraction", None)
        sched = list(changes.pop("schedule", self.schedule))
        if f0 is not None:
            kept = [(f, t) for f, t in sched if f > f0]
            before = [t for f, t in sched if f <= f0]
            first = before[-1] if before else sched[0][1]
            sched = [(float(f0), first), *kept]
        if p is not None:
            sched = [(sched[0][0], float(p))]
        return replace(self, schedule=tuple(sched), **changes)

    def describe(self) -> str:
        """The rule in words (for a README, a log or a report)."""
        steps = ", ".join(f"{t:g} from {f:.0%}" for f, t in self.schedule)
        mid = f" and {self.min_progress:g} x the fitted C_mid" if self.min_progress else ""
        return (
            f"no stop advice before {self.min_points} evaluations and {self.min_fraction:.0%} of "
            f"the budget{mid}; stop when p(above) <= "
            f"{steps} of the budget, held on {self.hold} consecutive refits over "
            f"{self.hold_span:.1%} of the budget; peaked: gain < {self.min_gain:g} or a fall of "
            f">= {self.peak_drop:g} with p <= {self.peak_alpha:g} ({self.source})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule": [list(x) for x in self.schedule],
            "hold": self.hold,
            "hold_span": self.hold_span,
            "min_points": self.min_points,
            "evident": self.evident,
            "evident_points": self.evident_points,
            "min_progress": self.min_progress,
            "p_on_track": self.p_on_track,
            "min_gain": self.min_gain,
            "peak_drop": self.peak_drop,
            "peak_alpha": self.peak_alpha,
            "peak_patience": self.peak_patience,
            "smooth": self.smooth,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StopRule:
        keys = {f for f in cls.__dataclass_fields__}
        kws = {k: v for k, v in d.items() if k in keys}
        kws["schedule"] = tuple(tuple(x) for x in kws.get("schedule", cls.schedule))
        return cls(**kws)


_RULE_FILE = "stop_rule.json"


def load_rule() -> StopRule:
    """The shipped stop rule (``rlcurves/data/stop_rule.json``, written by ``python -m
    benchmarks.monitor_replay --fit-thresholds --write``: the schedule, measured; the other
    fields are :class:`StopRule`'s defaults)."""
    try:
        with resources.files("rlcurves.data").joinpath(_RULE_FILE).open("r") as fh:
            d = json.load(fh)
    except FileNotFoundError:  # pragma: no cover - the file ships with the package
        return StopRule()
    # the measured schedule; the rule's other fields are the defaults documented on StopRule
    return StopRule(schedule=tuple(map(tuple, d["schedule"])), source=d["command"])


#: The stop rule every consumer uses unless told otherwise (measured; see :func:`load_rule`).
DEFAULT_RULE = load_rule()


@dataclass(frozen=True)
class Decision:
    """One refit's advice.

    Attributes
    ----------
    advice : str
        One of :data:`ADVICE` (after :class:`Hysteresis`, a first stop reads "continue").
    reason : str
        The advice in a sentence, with the numbers behind it.
    p_above, p_target : float or None
        P(ends above the baseline), P(reaches the target) at the budget.
    fraction : float
        Compute spent over the budget at this refit.
    threshold : float
        The stop threshold at this fraction (``-inf`` before the "too early" fraction); a rule's
        threshold below the smallest one-sided tail the forecast's calibration supports
        (``1 / (n + 1)`` for ``n`` runs, ``forecast.predictive.info["min_tail"]``) is raised to
        it, and the reason says so.
    gain : float or None
        The most the rest of the budget plausibly adds (the interval's far end minus the fitted
        value now).
    peak : PeakTest or None
    pending : str or None
        A stop advice given on this refit that has not held on ``hold`` refits yet.
    evident : bool
        The stop is evident (p at most :attr:`StopRule.evident`), so it was allowed below the
        rule's ``min_points``.
    """

    advice: str
    reason: str
    fraction: float = math.nan
    p_above: float | None = None
    p_target: float | None = None
    threshold: float = -math.inf
    gain: float | None = None
    peak: PeakTest | None = field(default=None, repr=False)
    pending: str | None = None
    evident: bool = False

    @property
    def stop(self) -> bool:
        """The advice is to stop the run."""
        return self.advice in STOP_ADVICE


def decide(
    forecast: Forecast,
    *,
    fraction: float,
    n_points: int,
    identified: tuple[bool, str] | bool = True,
    baseline: Level | None = None,
    baseline_label: float | None = None,
    target: float | None = None,
    fitted_now: float | None = None,
    progress: float | None = None,
    peak: PeakTest | None = None,
    sign: int = 1,
    rule: StopRule | None = None,
    compare: ArrayLike | None = None,
) -> Decision:
    """The advice for one refit of one run (the rules are in the module docstring).

    Parameters
    ----------
    forecast : Forecast
        The run's forecast at the budget (a scalar ``at``); its predictive distribution gives
        every probability.
    fraction : float
        Compute spent over the budget.
    n_points : int
        Evaluations seen.
    identified : bool or (bool, str)
        Whether the fit determines the curve, and the notes that say why not.
    baseline : float, draws, Predictive or Forecast, optional
        The level to beat at the budget (:func:`final_level` for a finished run).
    baseline_label : float, optional
        The baseline's level as printed (default: the mean of its draws).
    target : float, optional
        A reward to reach (used when there is no baseline).
    fitted_now : float, optional
        The fitted curve at the latest evaluation (for the plateau rule).
    progress : float, optional
        Compute spent over the fit's C_mid (for :attr:`StopRule.min_progress`; None: not
        checked).
    peak : PeakTest, optional
        :func:`peak_test` of the run so far.
    sign : {1, -1}
        -1 when lower is better.
    rule : StopRule, optional
        Default :data:`DEFAULT_RULE`.
    compare : array_like, optional
        Draws of the run's level to compare with ``baseline`` (p(above)) instead of the
        forecast's own: :class:`rlcurves.Race` passes them with the error its runs share taken
        out (``Race(error_correlation=...)``); the interval printed stays the forecast's.

    Returns
    -------
    Decision
        Without hysteresis: pass it to :meth:`Hysteresis.update` for the advice to give.
    """
    _check_sign(sign)
    rule = DEFAULT_RULE if rule is None else rule
    ok, why = (identified, "") if isinstance(identified, bool) else identified
    thr = rule.threshold(fraction)
    pred = forecast.predictive
    supported = _tail_support(pred)
    lifted = ""
    if 0 < thr < supported:
        lifted = (
            f" (the rule's {thr:g} is a one-sided tail that needs {math.ceil(1 / thr - 1)} "
            f"calibration runs behind it; the forecast's calibration supports tails down to "
            f"{supported:.3g}, the nearest supported threshold, which is used)"
        )
        thr = supported
    p_above = p_target = gain = None
    if pred is not None:
        if baseline is not None:
            p_above = prob_above(pred if compare is None else compare, baseline, sign=sign)
        if target is not None:
            p_target = prob_reach(pred, target, sign=sign)
        if fitted_now is not None:
            q = (1 + forecast.level) / 2 if sign > 0 else (1 - forecast.level) / 2
            end = float(pred.quantile(q)[0])
            gain = sign * (end - fitted_now) if fraction < 1 else 0.0
    base = dict(fraction=fraction, p_above=p_above, p_target=p_target, threshold=thr, gain=gain,
                peak=peak)  # fmt: skip

    def out(advice: str, reason: str) -> Decision:
        return Decision(advice, reason, **base)

    p_stop = p_above if baseline is not None else p_target
    evident = (
        rule.evident is not None
        and p_stop is not None
        and p_stop <= min(rule.evident, thr)
        and n_points >= min(rule.evident_points, rule.min_points)
    )
    if n_points < rule.min_points and not evident:
        return out(TOO_EARLY, f"{n_points} of the {rule.min_points} evaluations needed "
                   "(min_points)")  # fmt: skip
    if fraction < rule.min_fraction:
        return out(TOO_EARLY, f"{fraction:.0%} of the budget spent, advice from "
                   f"{rule.min_fraction:.0%} on (min_fraction)")  # fmt: skip
    if not ok:
        return out(TOO_EARLY, f"the fit does not determine the ceiling yet ({why})")
    if progress is not None and progress < rule.min_progress:
        return out(TOO_EARLY, f"the run is at {progress:.2g} x its fitted midpoint C_mid; its "
                   f"ceiling shows from {rule.min_progress:g} x on (min_progress)")  # fmt: skip
    if pred is None:
        return out(TOO_EARLY, "the forecast's interval is unbounded (too few degrees of freedom)")
    pct = f"{forecast.level:.0%}"
    at = (f"{float(forecast.mean):.3f} [{float(forecast.lower):.3f}, "
          f"{float(forecast.upper):.3f}] ({pct}) at the budget")  # fmt: skip
    if getattr(forecast, "info", {}).get("capped"):
        at += " (flat longer than any run of its calibration: its gain bounded by a sigmoid's)"
    plain = ""
    if evident:
        plain = f"; evident (p <= {rule.evident:g})"
        if n_points < rule.min_points:
            plain += f": from {n_points} evaluations, fewer than min_points = {rule.min_points}"
    if p_above is not None and p_above <= thr:
        b = float(np.mean(_draws(baseline))) if baseline_label is None else baseline_label
        return replace(out(UNLIKELY_BASELINE, (
            f"forecast {at} vs the baseline's {b:.3f}: p(above) = {p_above:.3f} <= {thr:.3g} "
            f"(the stop threshold at {fraction:.0%} of the budget{lifted}){plain}; stop it and "
            "free the compute"
        )), evident=evident)  # fmt: skip
    if baseline is None and p_target is not None and p_target <= thr:
        return replace(out(UNLIKELY_TARGET, (
            f"forecast {at} vs the target {target:g}: p(reached) = {p_target:.3f} <= {thr:.3g} "
            f"(the stop threshold at {fraction:.0%} of the budget{lifted}){plain}"
        )), evident=evident)  # fmt: skip
    if n_points < rule.min_points:  # allowed this far only for an evident stop
        return out(TOO_EARLY, f"{n_points} of the {rule.min_points} evaluations needed "
                   "(min_points)")  # fmt: skip
    p = p_above if baseline is not None else p_target
    what = "the baseline" if baseline is not None else f"the target {target}"
    plateau = fell = None
    if gain is not None and fraction < 1 and gain < rule.min_gain:
        plateau = (f"the rest of the budget adds at most {gain:+.3f} ({pct}), less than min_gain "
                   f"= {rule.min_gain:g}: the run is on its plateau")  # fmt: skip
    if peak is not None and peak.holds(rule):
        fell = peak.reason
    if p is not None and p >= rule.p_on_track:
        # a run on track to win is not stopped for peaking: what it reached is the result
        also = "".join(f"; {x}" for x in (plateau, fell) if x)
        also += " (keep its best checkpoint)" if also else ""
        return out(ON_TRACK, f"forecast {at}: p(beats {what}) = {p:.2f} >= p_on_track{also}")
    if plateau is not None:
        return out(PEAKED, plateau)
    if fell is not None and p is None:
        return out(PEAKED, fell)
    also = "" if fell is None else f"; {fell} (the forecast, not the fall, decides against {what})"
    if p is not None:
        return out(CONTINUE, f"forecast {at}: p(beats {what}) = {p:.2f}, not decided yet{also}")
    if gain is not None:
        return out(CONTINUE, f"forecast {at}: the rest of the budget may add up to {gain:+.3f} "
                   f"({pct}), at least min_gain = {rule.min_gain:g}")  # fmt: skip
    return out(CONTINUE, f"forecast {at}; still improving")


class Hysteresis:
    """A stop advice must hold before it is given: on ``hold`` consecutive refits of one run that
    span at least ``span`` of the budget.

    Feed every :class:`Decision` of the run in order to :meth:`update`; a stop decision that has
    not held that long comes back as "continue" with the pending advice in ``pending`` and the
    reason. Any refit that does not advise stopping resets the count.
    """

    def __init__(self, hold: int = 2, span: float = 0.0) -> None:
        if int(hold) < 1:
            raise RLCurvesError(f"hold must be a positive integer, got {hold}")
        if not 0 <= span < 1:
            raise RLCurvesError(f"span must be a fraction of the budget in [0, 1), got {span}")
        self.hold = int(hold)
        self.span = float(span)
        self.streak = 0
        self.since = math.nan

    @classmethod
    def for_rule(cls, rule: StopRule | None = None) -> Hysteresis:
        """The hysteresis of ``rule`` (default :data:`DEFAULT_RULE`)."""
        rule = DEFAULT_RULE if rule is None else rule
        return cls(rule.hold, rule.hold_span)

    def update(self, decision: Decision) -> Decision:
        """The advice to give for this refit."""
        if not decision.stop:
            self.reset()
            return decision
        self.streak += 1
        if self.streak == 1:
            self.since = decision.fraction
        held = decision.fraction - self.since  # nan when fractions are not known: not counted
        # one refit spans no budget: with hold=1 the span cannot apply (a stop at once)
        if self.streak >= self.hold and (self.hold == 1 or not held < self.span - 1e-12):
            return decision
        return replace(
            decision,
            advice=CONTINUE,
            pending=decision.advice,
            reason=(
                f"not yet: '{decision.advice}' must hold on {self.hold} consecutive refits over "
                f"{self.span:.1%} of the budget ({self.streak} so far): {decision.reason}"
            ),
        )

    def reset(self) -> None:
        self.streak = 0
        self.since = math.nan


def first_stop(decisions: Sequence[Decision], rule: StopRule | None = None) -> int | None:
    """Index of the first refit at which ``decisions`` (raw, in order) give a stop advice after
    ``rule``'s :class:`Hysteresis`; None if never."""
    h = Hysteresis.for_rule(rule)
    for i, d in enumerate(decisions):
        if h.update(d).stop:
            return i
    return None


# ---- sweep-level decisions --------------------------------------------------------------------
# The decisions over the runs of one sweep (rlcurves.Race, issue 28): several runs may be stopped
# at once and over many looks, so the error is priced for the set of runs stopped, jointly, from
# the same predictive draws as every probability above. Each run must also pass the per-run rule
# (decide() against sweep_baseline(), then Hysteresis) before it may join the set.


def _draw_matrix(
    runs: Mapping[str, Level], sign: int, seed: int, i: int = 0
) -> tuple[list[str], np.ndarray]:
    """Independent draws of every run side by side, shape ``(n, len(runs))``, times ``sign``.

    Draws of different counts are resampled to the largest count with ``seed``, and each column
    is permuted so that a row pairs independent draws (a forecast's draws may be sorted
    quantiles). The matrix behind :func:`prob_best` and the sweep-level rule.

    The ``j``-th column is permuted by the ``j``-th permutation of ``default_rng(seed)``'s
    stream, which depends only on the seed and the draw count: when every run has as many draws,
    those permutations are reused across calls (:func:`_permutations`), the same matrix at a
    fraction of the cost for a sweep of hundreds of runs.
    """
    _check_sign(sign)
    names = list(runs)
    draws = [sign * _draws(runs[k], i) for k in names]
    n = max(d.size for d in draws)
    if all(d.size == n for d in draws):
        perms = _permutations(seed, n, len(draws))
        return names, np.column_stack([d[p] for d, p in zip(draws, perms, strict=False)])
    rng = np.random.default_rng(seed)
    cols = [d if d.size == n else rng.choice(d, n) for d in draws]
    return names, np.column_stack([rng.permutation(c) for c in cols])


# (seed, n) -> [generator, permutations drawn so far]: the stream of _draw_matrix's column
# permutations, extended on demand; a few streams are kept (a race uses one).
_PERMUTATIONS: dict[tuple[int, int], list] = {}
_PERMUTATIONS_KEPT = 4
_PERMUTATIONS_LOCK = threading.Lock()


def _permutations(seed: int, n: int, k: int) -> list[np.ndarray]:
    """The first ``k`` permutations of ``range(n)`` drawn one after another by
    ``np.random.default_rng(seed)`` (``rng.permutation(column)`` shuffles a column with the
    same draws as ``rng.permutation(n)``)."""
    with _PERMUTATIONS_LOCK:
        key = (int(seed), int(n))
        entry = _PERMUTATIONS.pop(key, None) or [np.random.default_rng(seed), []]
        _PERMUTATIONS[key] = entry  # most recently used last
        while len(_PERMUTATIONS) > _PERMUTATIONS_KEPT:
            del _PERMUTATIONS[next(iter(_PERMUTATIONS))]
        rng, perms = entry
        while len(perms) < k:
            perms.append(rng.permutation(n))
        return perms[:k]


def _check_tolerance(tolerance: float) -> None:
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise RLCurvesError(f"tolerance must be a reward difference >= 0, got {tolerance!r}")


def _risk(m: np.ndarray, stop: np.ndarray, tolerance: float) -> float:
    if not stop.any():
        return 0.0
    if stop.all():
        return 1.0
    return float(np.mean(m[:, stop].max(axis=1) - m[:, ~stop].max(axis=1) > tolerance))


#: How the sweep-level risk is computed: ``"exact"`` (each run's draws taken as its distribution,
#: every draw equally likely, the runs independent: no pairing) or ``"paired"`` (one random
#: pairing of the runs' draws, row by row, as :func:`prob_best` pairs them).
RISK_METHODS = ("exact", "paired")


def _check_method(method: str) -> None:
    if method not in RISK_METHODS:
        raise RLCurvesError(
            f"method must be one of {RISK_METHODS} ('exact': every draw of every run against "
            f"every other; 'paired': one random pairing), got {method!r}"
        )


def _sorted_draws(runs: Mapping[str, Level], sign: int) -> tuple[list[str], list[np.ndarray]]:
    _check_sign(sign)
    names = list(runs)
    return names, [np.sort(sign * _draws(runs[k])) for k in names]


class _ExactRisk:
    """``P(max of the stopped runs - max of the kept runs > tolerance)`` computed exactly, each
    run's draws its distribution (every draw equally likely), the runs independent:

        risk = sum over w of [F_S(w) - F_S(w-)] * G_K(w - tolerance),

    ``F_S(w) = prod_{i stopped} P(X_i <= w)`` the distribution of the best stopped run (it jumps
    only at the stopped runs' draws) and ``G_K(y) = prod_{j kept} P(X_j < y)``. ``G_K`` is zero
    at or below the largest smallest draw of the runs that are always kept, so only the draws
    above it (plus ``tolerance``) of the runs that are or may be stopped form the grid ``w``.
    Runs move from kept to stopped one at a time (:meth:`stop`); each product is kept as the
    product of its nonzero factors and a count of its zero factors, and the terms of the sum as
    suffix sums: run ``j`` changes only the terms from its smallest draw to its largest (plus
    ``tolerance``), so :meth:`risk_with` prices a candidate over that window alone, in one
    compiled pass (:func:`rlcurves._kernels.exact_risk_with`). The interface of
    :class:`_Maxima`."""

    def __init__(
        self, draws: list[np.ndarray], stopped: np.ndarray, movable: np.ndarray, tolerance: float
    ) -> None:
        from ._kernels import exact_risk_times

        self.draws = [np.ascontiguousarray(d, dtype=float) for d in draws]
        self.kept = ~np.asarray(stopped, dtype=bool)
        always = self.kept & ~np.asarray(movable, dtype=bool)
        floor = max((float(d[0]) for d, a in zip(draws, always, strict=True) if a),
                    default=-math.inf)  # fmt: skip
        inside, below = [], -math.inf
        for d, a in zip(draws, always, strict=True):
            if a:
                continue
            over = d - tolerance > floor  # where G_K can be positive
            inside.append(d[over])
            if not over.all():
                below = max(below, float(d[~over].max()))
        grid = np.unique(np.concatenate(inside)) if inside else np.empty(0)
        self.at = np.r_[below, grid]  # F_S at ``below`` counts every stopped draw off the grid
        self.y = grid - tolerance
        self.F, self.f_zero = np.ones(self.at.size), np.zeros(self.at.size, dtype=np.intp)
        self.G, self.g_zero = np.ones(self.y.size), np.zeros(self.y.size, dtype=np.intp)
        for j in range(len(draws)):
            d = self.draws[j]
            if self.kept[j]:  # P(X_j < y) joins G_K; it is 1 above the run's largest draw
                t = int(np.searchsorted(self.y, d[-1], side="right"))
                exact_risk_times(d, self.y, t, True, self.G, self.g_zero)
            else:  # P(X_j <= w) joins F_S; 1 from the run's largest draw on
                k = int(np.searchsorted(self.at, d[-1], side="left"))
                exact_risk_times(d, self.at, k, False, self.F, self.f_zero)
        f = np.where(self.f_zero == 0, self.F, 0.0)
        terms = np.diff(f) * np.where(self.g_zero == 0, self.G, 0.0)
        self.suffix = np.zeros(self.y.size + 1)
        self.suffix[:-1] = np.cumsum(terms[::-1])[::-1]
        self._f = np.empty(self.at.size)  # the factors of the run priced last, over its window
        self._g = np.empty(self.y.size)
        self._last: tuple | None = None

    def _window(self, j: int) -> tuple[int, int]:
        """The terms run ``j`` changes: ``[start, end)``."""
        d = self.draws[j]
        start = max(int(np.searchsorted(self.at, d[0], side="left")) - 1, 0)
        end = max(
            int(np.searchsorted(self.at, d[-1], side="left")),
            int(np.searchsorted(self.y, d[-1], side="right")),
        )
        return min(start, self.y.size), min(end, self.y.size)

    def risk(self) -> float:
        """The risk of the runs stopped now."""
        return float(np.clip(self.suffix[0], 0.0, 1.0))

    def risk_with(self, j: int, tolerance: float = 0.0) -> float:
        """The risk with kept run ``j`` stopped too (``tolerance`` is the one of the grid)."""
        from ._kernels import exact_risk_with

        start, end = self._window(j)
        # terms before ``start`` are zero: F_S with run j is zero below its smallest draw
        risk = exact_risk_with(
            self.draws[j], self.at, self.y, self.F, self.f_zero, self.G, self.g_zero,
            self.suffix, start, end, self._f, self._g,
        )  # fmt: skip
        self._last = (j, start, end)
        return float(np.clip(risk, 0.0, 1.0))

    def stop(self, j: int) -> None:
        """Move run ``j`` from the kept to the stopped."""
        from ._kernels import exact_risk_stop

        if self._last is None or self._last[0] != j:
            self.risk_with(j)
        _, start, end = self._last
        exact_risk_stop(
            self.F, self.f_zero, self.G, self.g_zero, self.suffix, start, end, self._f, self._g
        )
        self.kept[j] = False
        self._last = None


def prob_regret_above(
    runs: Mapping[str, Level],
    stopped: Collection[str],
    *,
    tolerance: float = 0.0,
    sign: int = 1,
    seed: int = 0,
    method: str = "exact",
) -> float:
    """P(the best of the ``stopped`` runs ends more than ``tolerance`` above the best of the rest).

    The probability that stopping ``stopped`` loses the sweep's winner by more than
    ``tolerance`` (the sweep's regret exceeds it), the runs independent, each given by its
    forecast at the budget. One event for the whole set, so stopping several runs at once is
    priced jointly (no union bound). ``method="exact"`` (default) takes each run's draws as its
    distribution and sums over every draw of every run (no pairing: the same number whatever
    the order of the draws or the seed); ``"paired"`` estimates it from one random pairing of
    the draws, row by row (the Monte Carlo error of ``n`` draws, about ``sqrt(p / n)``: 0.008 at
    a risk of 0.02 with 300 draws).

    Parameters
    ----------
    runs : mapping of name -> Forecast, Predictive or draws
        Every run that counts: the stopped ones and the ones kept.
    stopped : collection of str
        Names (keys of ``runs``) of the runs stopped or to stop.
    tolerance : float
        Regret that does not count as losing (>= 0, in reward units).
    sign : {1, -1}
        -1 when lower is better.
    seed : int
        Seed of the pairing (``method="paired"``; see :func:`prob_best`).
    method : {"exact", "paired"}
        How the probability is computed (above).

    Returns
    -------
    float
        1.0 when no run would be kept; 0.0 when none is stopped.
    """
    _check_tolerance(tolerance)
    _check_method(method)
    unknown = [s for s in stopped if s not in runs]
    if unknown:
        raise RLCurvesError(f"stopped names {unknown} are not among the runs {list(runs)}")
    if method == "paired":
        names, m = _draw_matrix(runs, sign, seed)
        return _risk(m, np.isin(names, list(stopped)), tolerance)
    names, draws = _sorted_draws(runs, sign)
    mask = np.isin(names, list(stopped))
    if not mask.any() or mask.all():
        return float(mask.all())
    return _ExactRisk(draws, mask, np.zeros(mask.size, dtype=bool), tolerance).risk()


def stop_set(
    runs: Mapping[str, Level],
    candidates: Sequence[str],
    *,
    alpha: float,
    tolerance: float = 0.0,
    stopped: Collection[str] = (),
    sign: int = 1,
    seed: int = 0,
    spent: float | None = None,
    method: str = "exact",
) -> tuple[list[str], float]:
    """The runs to stop: ``candidates`` in order, each added while the sweep's risk allows it.

    The risk is :func:`prob_regret_above` of the runs ``stopped`` already plus those chosen. It
    only grows as runs are added, so the greedy pass in the given order (least likely to win
    first) returns a set no further candidate can join. This is the family-wise rule of a sweep:
    it replaces a Holm or Bonferroni correction over per-run tests (the events "run i is the
    winner" are disjoint, and the joint draws price the set exactly).

    One look (``spent=None``): the set's risk stays <= ``alpha``. Over many looks pass
    ``spent``, the alpha spent by the earlier looks' stops: a look may add runs while the
    increase in risk they cause now (over the risk of the runs already stopped, also now) plus
    ``spent`` stays <= ``alpha``; the caller adds the increase of the runs it stops to
    ``spent``. With calibrated forecasts the risk of a fixed set is a martingale between looks,
    so the probability of losing the winner at the end is the expected sum of the increases:
    at most ``alpha`` however many looks there are, and however the risk of the runs stopped
    drifts afterwards (alpha spending, as in group-sequential trials). The one-look rule
    applied at every look controls only the risk at the last stop, which keeps rising after it
    on the paths where stopping ended because it had risen: on simulated sweeps with exact
    forecasts and 30 looks at alpha 0.1 it lost the winner in 12-14% of them, spending in 9-11%
    (``tests/test_decide_sweep.py::test_stop_set_spending_over_many_looks``).

    Parameters
    ----------
    runs : mapping of name -> Forecast, Predictive or draws
        Every run that counts (kept, stopped and candidates).
    candidates : sequence of str
        Runs that may be stopped now, in the order to try them.
    alpha : float
        The largest risk allowed, in [0, 1).
    tolerance, sign, seed, method
        As in :func:`prob_regret_above`.
    stopped : collection of str
        Runs already stopped (they count in the risk, and are not returned).
    spent : float, optional
        Alpha spent by earlier looks (see above); None: one look.

    Returns
    -------
    (list of str, float)
        The candidates to stop, in order, and the risk of all stopped runs with them (the
        increase over the risk of ``stopped`` alone is what this look spends).
    """
    if not 0 <= alpha < 1:
        raise RLCurvesError(f"alpha must be in [0, 1), e.g. 0.05; got {alpha!r}")
    if spent is not None and not 0 <= spent <= 1:
        raise RLCurvesError(f"spent must be a probability in [0, 1], got {spent!r}")
    _check_tolerance(tolerance)
    _check_method(method)
    unknown = [c for c in candidates if c not in runs]
    if unknown:
        raise RLCurvesError(f"candidate {unknown[0]!r} is not among the runs {list(runs)}")
    maxima: _Maxima | _ExactRisk | None = None  # built when a candidate is first priced
    if method == "paired":
        names, m = _draw_matrix(runs, sign, seed)
        mask = np.isin(names, list(stopped))
        risk = before = _risk(m, mask, tolerance)

        def pricer():
            return _Maxima(m, mask)
    else:
        names, draws = _sorted_draws(runs, sign)
        mask = np.isin(names, list(stopped))
        movable = np.isin(names, list(candidates)) & ~mask

        def pricer():
            return _ExactRisk(draws, mask, movable, tolerance)

        if not mask.any() or mask.all():
            risk = before = float(mask.all())
        else:
            maxima = pricer()
            risk = before = maxima.risk()
    limit = alpha if spent is None else alpha - spent + before
    column = {k: j for j, k in enumerate(names)}
    chosen = []
    for c in candidates:
        j = column[c]
        if mask.all() or (not mask[j] and mask.sum() + 1 == mask.size):
            continue  # some run must be kept, whatever the risk already spent
        if mask[j]:  # already stopped: the set, and its risk, stay as they are
            r = risk
        else:
            maxima = pricer() if maxima is None else maxima
            r = maxima.risk_with(j, tolerance)
        if r <= limit:
            if not mask[j]:
                mask = mask.copy()
                mask[j] = True
                maxima.stop(j)
            risk = r
            chosen.append(c)
    return chosen, risk


class _Maxima:
    """Row maxima of a draw matrix over its stopped and its kept columns, kept up to date as
    columns are stopped one at a time, so that :func:`stop_set` prices a candidate in one pass
    over the rows instead of one over the whole matrix: ``risk_with(j)`` is ``_risk(m, stopped
    | {j})`` exactly (maxima are exact, and so are the comparisons). Needs a kept column."""

    def __init__(self, m: np.ndarray, stopped: np.ndarray) -> None:
        self.m = m
        self.kept = ~np.asarray(stopped, dtype=bool)
        self.stopped_max = m[:, ~self.kept].max(axis=1) if (~self.kept).any() else None
        n = m.shape[0]
        self.first, self.second = np.empty(n), np.empty(n)
        self.arg1, self.arg2 = np.empty(n, dtype=np.intp), np.empty(n, dtype=np.intp)
        self._top_two(np.arange(n))

    def _top_two(self, rows: np.ndarray) -> None:
        """The largest and the second largest kept value of ``rows``, and their columns."""
        cols = np.flatnonzero(self.kept)
        sub = self.m[np.ix_(rows, cols)]
        at = np.arange(rows.size)
        a1 = sub.argmax(axis=1)
        self.first[rows], self.arg1[rows] = sub[at, a1], cols[a1]
        if cols.size > 1:
            sub[at, a1] = -np.inf
            a2 = sub.argmax(axis=1)
            self.second[rows], self.arg2[rows] = sub[at, a2], cols[a2]
        else:
            self.second[rows], self.arg2[rows] = -np.inf, -1

    def risk_with(self, j: int, tolerance: float) -> float:
        """``_risk`` of the stopped columns and ``j``."""
        col = self.m[:, j]
        top = col if self.stopped_max is None else np.maximum(self.stopped_max, col)
        rest = np.where(self.arg1 == j, self.second, self.first)
        return float(np.mean(top - rest > tolerance))

    def stop(self, j: int) -> None:
        """Move column ``j`` from the kept to the stopped."""
        col = self.m[:, j]
        self.stopped_max = col if self.stopped_max is None else np.maximum(self.stopped_max, col)
        self.kept[j] = False
        touched = np.flatnonzero((self.arg1 == j) | (self.arg2 == j))
        if touched.size:
            self._top_two(touched)


def sweep_baseline(
    runs: Mapping[str, Level],
    name: str,
    *,
    tolerance: float = 0.0,
    sign: int = 1,
    seed: int = 0,
) -> np.ndarray:
    """Draws of the level run ``name`` must end above for its stop to cost more than ``tolerance``:
    the best of the other ``runs`` (the runs kept), plus ``tolerance`` in the direction of
    improvement.

    Pass it to :func:`decide` as ``baseline=``: its ``p(above)`` is then the probability that
    stopping ``name`` alone loses the sweep's winner by more than ``tolerance``, with every
    other run's uncertainty counted (the draws of the maximum of independent forecasts).
    :func:`sweep_baselines` gives every run's at once.

    Raises
    ------
    RLCurvesError
        When ``name`` is not among ``runs`` or no other run is.
    """
    if name not in runs:
        raise RLCurvesError(f"{name!r} is not among the runs {list(runs)}")
    return sweep_baselines(runs, [name], tolerance=tolerance, sign=sign, seed=seed)[name]


def sweep_baselines(
    runs: Mapping[str, Level],
    names: Sequence[str],
    *,
    tolerance: float = 0.0,
    sign: int = 1,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """:func:`sweep_baseline` for many runs at once, from one draw matrix: name -> draws of the
    best of the other ``runs`` plus ``tolerance``.

    A name among ``runs`` gets the best of the others; a name not among them (a run that does not
    count as a rival, e.g. one whose fit is not identified) gets the best of all ``runs``, which
    is :func:`sweep_baseline` of ``runs`` with that run added last (its own draws never count in
    its baseline). Every baseline is the one :func:`sweep_baseline` returns for the same runs.

    Raises
    ------
    RLCurvesError
        When a name among ``runs`` has no other run to compare with, or ``runs`` is empty.
    """
    _check_tolerance(tolerance)
    if not names:
        return {}
    inside = [k for k in names if k in runs]
    if not runs or (inside and len(runs) < 2):
        raise RLCurvesError(f"no run besides {(inside or list(names))[0]!r} to compare with")
    keys, m = _draw_matrix(runs, sign, seed)
    rows = np.arange(m.shape[0])
    a1 = m.argmax(axis=1)
    first = m[rows, a1]
    out = {}
    if inside:
        rest = m.copy()
        rest[rows, a1] = -np.inf
        second = rest.max(axis=1)
        column = {k: j for j, k in enumerate(keys)}
        for k in inside:
            out[k] = sign * (np.where(a1 == column[k], second, first) + tolerance)
    for k in names:
        if k not in runs:
            out[k] = sign * (first + tolerance)
    return out


__all__ = [
    "ADVICE",
    "DEFAULT_RULE",
    "RISK_METHODS",
    "STOP_ADVICE",
    "Decision",
    "Hysteresis",
    "PeakTest",
    "StopRule",
    "decide",
    "final_level",
    "first_stop",
    "load_rule",
    "peak_test",
    "prob_above",
    "prob_best",
    "prob_greater",
    "prob_reach",
    "prob_regret_above",
    "stop_set",
    "sweep_baseline",
    "sweep_baselines",
]
