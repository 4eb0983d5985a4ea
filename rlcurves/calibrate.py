"""Forecast intervals calibrated on finished runs.

For each finished run and each fit fraction, the run's first part is fitted and its **level** at
its end (the mean of its evaluations over the last 10% of compute) forecast; the errors against
the predictive variance ``V = fit_var + mix_var + noise_var + tau^2 d`` give the
misspecification scale ``tau`` (reward units; ``d`` the distance past the fit window in log
compute) and the scores ``|error| / sqrt(V)`` whose run-weighted conformal quantile scales the
interval. Runs are the exchangeable units: ``n`` runs support levels up to ``n / (n + 1)``.

:func:`calibrate` does this on a user's finished runs (pass the result to
:func:`rlcurves.forecast` as ``calibration=``); :func:`default_calibration` is the shipped one,
from the bundled corpus (:func:`load_corpus`: 12 GSM8K runs, 17 MATH runs);
:func:`window_records` and :meth:`Calibration.tau_with` let running runs refit tau on their own
windows (as :class:`rlcurves.Race` does). How it was built and measured: the design notes
(``docs/design/calibrate.md``) and ``python -m benchmarks.calibration``.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from .errors import RLCurvesError

if TYPE_CHECKING:
    from .result import SigmoidFit

FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
N_BOOT = 200
# Student-t degrees of freedom of the likelihood tau is fitted by (real errors have heavy tails)
NU = 5
# Draws of a forecast's predictive distribution: probabilities near 0.05 resolved to ~0.004
N_DRAWS = 4000
CORPUS_NAME = "bundled corpus (12 GSM8K verl runs, 17 MATH GRPO runs)"
_SHIPPED = "calibration_corpus.json"
_RECORD_COLUMNS = (
    "run",
    "fraction",
    "error",
    "error_one",
    "fit_var",
    "mix_var",
    "noise_var",
    "noise_var_one",
    "distance",
    "noise_sd",
    "n_fit",
    "w_power_law",
    "forecast",
    "observed",
)
#: The corpus families the shipped calibration is made from (rlcurves.datasets.list_corpus()
#: lists every family of the corpus; :func:`load_corpus` reads any of them).
CALIBRATION_FAMILIES = ("gsm8k", "math")


def load_corpus(family: str | None = None) -> dict[str, pd.DataFrame]:
    """Corpus runs as one frame per distinct run (columns ``compute``, ``reward``).

    By default the two families the shipped calibration is made from, each file with its
    source in its header:

    - ``"gsm8k"``: two W&B exports of verl runs (Qwen2.5-0.5B-Instruct RL on GSM8K, validation
      mean@1 every 5 steps, 365-898 evaluations) from github.com/befocuss/Deep-GRPO at commit
      8e7df46e: nine settings of one sweep and four budget variants, one of which repeats a sweep
      run and is kept once (12 runs).
    - ``"math"``: GRPO runs of Qwen2.5-Math-1.5B on MATH (validation accuracy on 1,024 problems,
      one sample each, every 5 steps; 21-41 evaluations) from a Stanford CS336 assignment-5
      solution: a learning-rate sweep, clip and epoch variants, normalization ablations, a
      400-step run, a run started from SFT and one that peaks and sags (17 runs).

    Compute is the training step (constant batch). Each frame's ``attrs`` names its ``source``
    file, ``name`` and ``family``.

    Parameters
    ----------
    family : str, optional
        One family of the corpus (``rlcurves.datasets.list_corpus()["family"]``: the two above
        and the families added since); default the two above (29 runs).
    """
    from .datasets import list_corpus
    from .datasets import load_corpus as load_long

    listed = list_corpus()
    known = list(dict.fromkeys(listed["family"]))
    if family is not None and family not in known:
        raise RLCurvesError(
            f"unknown family {family!r}; choose one of {known}, or None for the two the shipped "
            f"calibration is made from {list(CALIBRATION_FAMILIES)}"
        )
    families = CALIBRATION_FAMILIES if family is None else (family,)
    table = pd.concat([load_long(f) for f in families], ignore_index=True)
    files = listed.set_index(["family", "run"])["file"]
    runs: dict[str, pd.DataFrame] = {}
    for (fam, name), g in table.groupby(["family", "run"], sort=False):
        frame = pd.DataFrame(
            {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
        frame.attrs.update(
            source=f"rlcurves/data/curves/{files[(fam, name)]}", name=name, family=fam
        )
        runs[str(name)] = frame
    return runs


#: Log-sd of the vague log-normal prior on a sweep's tau (:meth:`Calibration.tau_with`), centred
#: on the calibration's tau: one sd is a factor of e^3 = 20, so over the range tau spans between
#: the two real families (0.009 GSM8K, 0.025 MATH: a factor of 2.7) it weighs 0.06 nats and the
#: backtests decide. What it stops is the estimate running to zero when a few runs' window
#: backtests all fall inside their base variance: without it the sweep tau of race_sweeps' GSM8K
#: sweeps (calibrated on MATH) sat at the optimizer's bound, 1e-6 (no misspecification at all),
#: in 8% of 2000 reports (an experiment; tests/test_race.py shows it on the real gsm8k_budget
#: sweep); with it the smallest was 0.0025. Priors of log-sd 1 and 2 pulled tau
#: toward the other family's (GSM8K sweeps used 73% of their compute with 1; with 2 one MATH
#: winner was lost at alpha 0.3); with 3 the drawn sweeps' compute moved by at most 1.5 points.
TAU_PRIOR_LOG_SD = 3.0


def misspecification_growth(d: np.ndarray) -> np.ndarray:
    """``g(d)``: the misspecification variance per ``tau^2`` at distance ``d`` (log compute)."""
    return np.maximum(np.asarray(d, dtype=float), 0.0)


def _pooled_cdf(scores: np.ndarray, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Sorted scores and the pooled run-level CDF at each: every run weighs 1 / (n_runs + 1),
    spread over its scores."""
    _, inv = np.unique(runs, return_inverse=True)
    n = int(inv.max()) + 1 if inv.size else 0
    w = 1.0 / (np.bincount(inv)[inv] * (n + 1.0))
    order = np.argsort(scores, kind="stable")
    return scores[order], np.cumsum(w[order]), n


def _run_weights(records: pd.DataFrame, total: float | None = None) -> np.ndarray:
    """Weight of each record: every run weighs 1 (or all runs together ``total``), spread over
    its records."""
    _, inv = np.unique(records["run"].to_numpy(), return_inverse=True)
    w = 1.0 / np.bincount(inv)[inv]
    return w if total is None else w * total / (inv.max() + 1)


def fit_tau(
    records: pd.DataFrame,
    nu: float = NU,
    growth=None,
    weight: np.ndarray | None = None,
    prior: tuple[float, float] | None = None,
) -> float:
    """Maximum-likelihood ``tau`` (reward units) of ``error ~ t_nu(0, V)`` over ``records``,
    each run weighted equally unless ``weight`` (one per record) is given (``growth``: another
    ``g(d)`` to try; default :func:`misspecification_growth`). ``prior=(center, log_sd)``: the
    posterior mode under a log-normal prior on tau instead (see :data:`TAU_PRIOR_LOG_SD`)."""
    from scipy.optimize import minimize_scalar

    err = records["error"].to_numpy(float)
    base = (records["fit_var"] + records["mix_var"] + records["noise_var"]).to_numpy(float)
    base = np.maximum(base, 1e-16)
    g = (growth or misspecification_growth)(records["distance"].to_numpy(float))
    weight = _run_weights(records) if weight is None else np.asarray(weight, dtype=float)
    if prior is not None and not (prior[0] > 0 and prior[1] > 0):
        raise RLCurvesError(f"prior must be (center > 0, log_sd > 0), got {prior!r}")
    log_center = 0.0 if prior is None else math.log(prior[0])

    def nll(log_tau: float) -> float:
        v = base + math.exp(2 * log_tau) * g
        terms = 0.5 * np.log(v) + (nu + 1) / 2 * np.log1p(err**2 / (nu * v))
        penalty = 0.0 if prior is None else 0.5 * ((log_tau - log_center) / prior[1]) ** 2
        return float(np.sum(weight * terms)) + penalty

    best = minimize_scalar(nll, bounds=(math.log(1e-6), math.log(2.0)), method="bounded")
    return float(math.exp(best.x))


@dataclass(eq=False)
class Calibration:
    """Forecast errors on finished runs, and the interval they imply (see the module docstring).

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (run, fraction): ``run, fraction, error`` (observed level minus forecast),
        ``error_one`` (the last evaluation minus the combined curve), the variance parts
        ``fit_var, mix_var, noise_var, noise_var_one``, ``distance`` (log compute past the
        window), ``noise_sd`` (residual sd), ``n_fit`` (evaluations fitted), ``w_power_law``,
        ``forecast``, ``observed``.
    corpus : str
        What the runs were.
    fractions : tuple of float
        Fit fractions scored.
    tau : float
        The misspecification scale in reward units (fitted on ``records``).
    scores, scores_one : numpy.ndarray
        ``|error| / sqrt(V)`` of the level and of one evaluation.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> from rlcurves.calibrate import default_calibration
    >>> cal = default_calibration()  # the bundled 29 runs
    >>> cal.n, round(cal.max_level, 3)
    (29, 0.967)
    >>> mine = cal.without(cal.runs[0])  # e.g. leave one run out
    >>> fc = rlcurves.forecast(fit, 16_000, calibration=mine, progress=False)
    """

    records: pd.DataFrame
    corpus: str
    fractions: tuple[float, ...] = FRACTIONS
    tau: float = field(init=False)
    scores: np.ndarray = field(init=False, repr=False)
    scores_one: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        missing = set(_RECORD_COLUMNS) - set(self.records.columns)
        if missing:
            raise RLCurvesError(f"calibration records lack columns {sorted(missing)}")
        if self.records.empty:
            raise RLCurvesError("a calibration needs at least one scored run")
        self.records = self.records.reset_index(drop=True)
        self.tau = fit_tau(self.records)
        r = self.records
        self.scores = np.abs(r["error"].to_numpy(float)) / np.sqrt(self.variance(r))
        self.scores_one = np.abs(r["error_one"].to_numpy(float)) / np.sqrt(
            self.variance(r, one=True)
        )
        self._cdf = _pooled_cdf(self.scores, self.runs)
        self._cdf_one = _pooled_cdf(self.scores_one, self.runs)

    # ---- sizes and names -------------------------------------------------------------------
    @property
    def runs(self) -> np.ndarray:
        """The run of every record."""
        return self.records["run"].to_numpy()

    @property
    def n(self) -> int:
        """Number of distinct runs (the exchangeable units)."""
        return int(np.unique(self.runs).size)

    n_runs = n

    @property
    def n_scores(self) -> int:
        """Number of scored forecasts (several per run)."""
        return len(self.records)

    @property
    def max_level(self) -> float:
        """The highest level the calibration supports: ``n / (n + 1)``."""
        return self.n / (self.n + 1.0)

    @property
    def name(self) -> str:
        return f"{self.corpus}: {self.n} runs ({self.n_scores} forecasts)"

    # ---- the interval --------------------------------------------------------------------------
    def variance(self, parts, one: bool = False) -> np.ndarray:
        """The predictive variance ``V`` from its parts (a records frame or an Ensemble)."""
        if isinstance(parts, pd.DataFrame):
            noise = parts["noise_var_one"] if one else parts["noise_var"]
            base = parts["fit_var"] + parts["mix_var"] + noise
            d = parts["distance"]
        else:
            noise = parts.noise_var_one if one else parts.noise_var
            base = parts.fit_var + parts.mix_var + noise
            d = parts.distance
        v = np.asarray(base, dtype=float) + self.tau**2 * misspecification_growth(d)
        return np.maximum(v, 1e-16)

    def quantile(self, level: float, one: bool = False) -> float:
        """The multiplier at ``level``: the run-pooled conformal quantile of the scores,
        interpolated linearly between scores; ``inf`` above :attr:`max_level`."""
        if not 0 < level < 1:
            raise RLCurvesError(f"level must be in (0, 1), got {level}; e.g. 0.9 for 90%")
        s, cdf, _ = self._cdf_one if one else self._cdf
        if level > cdf[-1] * (1 + 1e-12):
            return math.inf
        return float(np.interp(level, np.r_[0.0, cdf], np.r_[0.0, s]))

    def multipliers(self, u: np.ndarray, one: bool = False) -> np.ndarray:
        """The quantile function of ``|score|`` at probabilities ``u`` in [0, 1): interpolated
        pooled CDF up to :attr:`max_level`, a normal tail matched at the largest score above it
        (the tail only shapes the draws; an interval that needs it is unbounded)."""
        from scipy.stats import norm

        s, cdf, _ = self._cdf_one if one else self._cdf
        u = np.asarray(u, dtype=float)
        top = float(cdf[-1])
        inside = np.interp(np.minimum(u, top), np.r_[0.0, cdf], np.r_[0.0, s])
        z_top = float(norm.ppf((1 + top) / 2))
        tail = s[-1] * norm.ppf((1 + np.clip(u, top, 1 - 1e-12)) / 2) / z_top
        return np.where(u <= top, inside, tail)

    def z_values(self, n: int = N_DRAWS, one: bool = False) -> np.ndarray:
        """``n`` stratified values of the symmetric standardized error ``Z``, ascending (at
        probabilities ``(i + 0.5) / n``): ``forecast + sqrt(V) Z`` is the predictive
        distribution."""
        u = (np.arange(n) + 0.5) / n
        return np.sign(u - 0.5) * self.multipliers(np.abs(2 * u - 1), one=one)

    # ---- subsets -------------------------------------------------------------------------------
    def tau_with(self, records: pd.DataFrame, prior_runs: float = 1.0) -> float:
        """``tau`` refitted on ``records`` of other runs (e.g. the backtests of a sweep's runs
        within their own windows, :func:`window_records`), this calibration counting as
        ``prior_runs`` runs among them: each of their runs weighs 1, the calibration's runs
        ``prior_runs`` in all; the posterior mode under a vague log-normal prior centred on
        :attr:`tau` (:data:`TAU_PRIOR_LOG_SD`), which keeps it off zero. With no records it is
        :attr:`tau`."""
        if records is None or not len(records):
            return self.tau
        if not prior_runs > 0:
            raise RLCurvesError(f"prior_runs must be > 0, got {prior_runs}")
        both = pd.concat([self.records, records[list(_RECORD_COLUMNS)]], ignore_index=True)
        weight = np.r_[_run_weights(self.records, prior_runs), _run_weights(records)]
        return fit_tau(both, weight=weight, prior=(self.tau, TAU_PRIOR_LOG_SD))

    def without(self, run) -> Calibration:
        """The calibration with one run (or a list of runs) left out; tau is refitted."""
        drop = [run] if isinstance(run, str) or not hasattr(run, "__iter__") else list(run)
        keep = ~self.records["run"].isin(drop)
        return Calibration(self.records[keep], self.corpus, self.fractions)

    def subset(self, runs) -> Calibration:
        """The calibration on ``runs`` only; tau is refitted."""
        keep = self.records["run"].isin(list(runs))
        return Calibration(self.records[keep], self.corpus, self.fractions)

    # ---- the range it saw ----------------------------------------------------------------------
    def notes_for(self, noise_sd: float, n_fit: int) -> list[str]:
        """Warnings when a fit's residual sd or evaluation count lies outside what the
        calibration runs had, with what to do about it."""
        notes = []
        lo, hi = np.quantile(self.records["noise_sd"], [0.0, 1.0])
        if noise_sd < 0.5 * lo or noise_sd > 2 * hi:
            notes.append(
                f"the run's residual sd {noise_sd:.3g} lies outside the calibration runs' "
                f"({lo:.3g}-{hi:.3g}); the misspecification term is in reward units and does not "
                "scale with it, but check the interval with rlcurves.calibrate on finished runs "
                "like this one"
            )
        n_min = int(self.records["n_fit"].min())
        if n_fit < n_min:
            notes.append(
                f"fitted on {n_fit} evaluations, fewer than any calibration forecast ({n_min}); "
                "the interval is extrapolated from longer fits: evaluate more often, or wait "
                "for more evaluations"
            )
        return notes

    # ---- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        r = self.records
        recs = {c: [str(v) for v in r[c]] if c == "run" else r[c].astype(float).tolist()
                for c in _RECORD_COLUMNS}  # fmt: skip
        return {"corpus": self.corpus, "fractions": list(self.fractions), "records": recs}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        records = pd.DataFrame(d["records"])
        records["n_fit"] = records["n_fit"].astype(int)
        return cls(records, str(d["corpus"]), tuple(d["fractions"]))

    def __repr__(self) -> str:
        q = {lv: self.quantile(lv) for lv in (0.5, 0.8, 0.9, 0.95)}
        qs = ", ".join(f"{lv:.0%}: {v:.3g}" for lv, v in q.items())
        return f"Calibration({self.name}; tau {self.tau:.3g}; multipliers {qs})"


_DEFAULT: list[Calibration] = []


def default_calibration() -> Calibration:
    """The shipped calibration on the bundled corpus (:func:`load_corpus`), loaded once."""
    if not _DEFAULT:
        with resources.files("rlcurves.data").joinpath(_SHIPPED).open("r") as fh:
            _DEFAULT.append(Calibration.from_dict(json.load(fh)))
    return _DEFAULT[0]


def residual_sd(fit: SigmoidFit) -> float:
    """Unweighted residual sd over the fit window, dof-corrected."""
    res = fit.fit_reward - np.asarray(fit.predict(fit.fit_compute), dtype=float)
    return float(np.sqrt(np.sum(res**2) / max(fit.dof, 1)))


def level_target(compute: np.ndarray, reward: np.ndarray) -> float:
    """A finished run's level: the mean of its evaluations over the last 10% of its compute."""
    from .ensemble import LEVEL_WINDOW

    c = np.asarray(compute, dtype=float)
    return float(np.mean(np.asarray(reward, dtype=float)[c > (1 - LEVEL_WINDOW) * c.max()]))


def score_run(
    compute: np.ndarray,
    reward: np.ndarray,
    fraction: float,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    fit_kwargs: dict | None = None,
) -> dict[str, float]:
    """Fit the first ``fraction`` of one finished run and record its forecast of the run's level.

    Returns a dict with the columns of :attr:`Calibration.records` but ``run``, or raises
    RLCurvesError when the prefix cannot be fitted.
    """
    from .bootstrap import bootstrap
    from .ensemble import combine
    from .fit import fit_sigmoid
    from .forecast import MIN_DOF

    c = np.asarray(compute, dtype=float)
    r = np.asarray(reward, dtype=float)
    order = np.argsort(c, kind="stable")
    c, r = c[order], r[order]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, r, max_compute=fraction * float(c.max()), **(fit_kwargs or {}))
        if fit.dof < MIN_DOF:
            raise RLCurvesError(f"a prefix with {fit.dof} residual degrees of freedom is unbounded")
        boot = bootstrap(fit, n_boot, kind="ar1", seed=seed, progress=False)
    end = float(c.max())
    ens = combine(fit, np.array([end]), boot.curves, rho=boot.rho)
    observed = level_target(c, r)
    return {
        "fraction": fraction,
        "error": observed - float(ens.mean[0]),
        "error_one": float(r[-1]) - float(ens.point[0]),
        "fit_var": float(ens.fit_var[0]),
        "mix_var": float(ens.mix_var[0]),
        "noise_var": float(ens.noise_var[0]),
        "noise_var_one": float(ens.noise_var_one[0]),
        "distance": float(ens.distance[0]),
        "noise_sd": float(ens.noise_sd),
        "n_fit": int(fit.n),
        "w_power_law": float(ens.w_power_law[0]),
        "forecast": float(ens.mean[0]),
        "observed": observed,
    }


#: Where a running run's window is cut for its own backtests (:func:`window_records`).
WINDOW_SPLITS = (0.5, 0.7)


def window_records(
    compute: ArrayLike,
    reward: ArrayLike,
    run: str,
    *,
    splits: tuple[float, ...] = WINDOW_SPLITS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    fit_kwargs: dict | None = None,
) -> pd.DataFrame:
    """Backtests of a run that is still running, within its own window: fit the first
    ``split`` of the compute seen so far and score the forecast of its level now, as
    :func:`score_run` scores a finished run. Records with the columns of
    :attr:`Calibration.records` (none when the window is too short to fit a split)."""
    rows = []
    for f in splits:
        try:
            row = score_run(compute, reward, f, n_boot=n_boot, seed=seed, fit_kwargs=fit_kwargs)
        except RLCurvesError:
            continue
        rows.append({"run": str(run), **row})
    return pd.DataFrame(rows, columns=list(_RECORD_COLUMNS))


def calibrate(
    runs: dict[str, pd.DataFrame] | pd.DataFrame,
    *,
    run: str = "run",
    compute: str = "compute",
    reward: str = "reward",
    fractions: tuple[float, ...] = FRACTIONS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    name: str = "user runs",
    progress: bool = True,
    **fit_kwargs: Any,
) -> Calibration:
    """Calibrate forecast intervals on finished runs (see the module docstring).

    Parameters
    ----------
    runs : dict of DataFrame, or DataFrame
        Finished runs: a dict of frames, or one long frame with a ``run`` column.
    run, compute, reward : str
        Column names.
    fractions : tuple of float
        Fit fractions of each run's final compute to score, each in (0, 1).
    n_boot : int
        AR(1) bootstrap resamples per scored fit.
    seed : int
        Random seed.
    name : str
        What the runs are (shown by every forecast that uses the calibration).
    progress : bool
        Show a progress bar.
    **fit_kwargs
        Passed to :func:`rlcurves.fit_sigmoid` (``r0``, ``min_compute``, ``bounds``...).

    Returns
    -------
    Calibration
        Pass it to ``rlcurves.forecast(fit, at, calibration=...)``. Its ``n`` is the number of
        runs; the 90% interval needs at least 9 of them (a level above ``n / (n + 1)`` is
        unbounded).

    Raises
    ------
    RLCurvesError
        Fewer than two runs, ``fractions`` outside (0, 1), a frame without the named columns,
        or runs too short to score.

    Examples
    --------
    >>> from rlcurves.calibrate import load_corpus
    >>> runs = load_corpus("gsm8k")  # finished runs: name -> frame with compute, reward
    >>> cal = rlcurves.calibrate(runs, fractions=(0.5,), n_boot=50, progress=False)
    >>> cal.n, round(cal.max_level, 3)
    (12, 0.923)
    """
    if isinstance(runs, pd.DataFrame):
        missing = {run, compute, reward} - set(runs.columns)
        if missing:
            raise RLCurvesError(
                f"runs frame lacks columns {sorted(missing)}; pass run=, compute=, reward= to "
                f"name them (it has {list(runs.columns)})"
            )
        runs = {str(k): g for k, g in runs.groupby(run, sort=True)}
    if not isinstance(runs, dict) or len(runs) < 2:
        raise RLCurvesError("calibrate needs at least 2 finished runs (a dict of frames)")
    if any(not 0 < f < 1 for f in fractions):
        raise RLCurvesError(f"fractions must be in (0, 1), got {fractions}")
    rows = []
    items = list(runs.items())
    for i, (label, frame) in enumerate(tqdm(items, desc="calibrate", disable=not progress)):
        for col in (compute, reward):
            if col not in frame.columns:
                raise RLCurvesError(f"run {label!r} has no column {col!r}")
        for f in fractions:
            try:
                row = score_run(
                    frame[compute].to_numpy(float),
                    frame[reward].to_numpy(float),
                    f,
                    n_boot=n_boot,
                    seed=seed + i,
                    fit_kwargs=fit_kwargs,
                )
            except RLCurvesError:
                continue
            rows.append({"run": str(label), **row})
    if not rows:
        raise RLCurvesError("no run could be scored: runs need more evaluations")
    records = pd.DataFrame(rows, columns=list(_RECORD_COLUMNS))
    return Calibration(records, name, tuple(fractions))


__all__ = [
    "Calibration",
    "calibrate",
    "default_calibration",
    "level_target",
    "load_corpus",
    "misspecification_growth",
    "window_records",
]
