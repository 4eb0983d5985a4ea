"""Forecast intervals calibrated on finished runs: by family, by tail, near the forecast's distance.

This module learns what the corpus teaches a forecast, in one place. For each finished run and
each fit fraction the run's first part is fitted and its **level** at its end (the mean of its
evaluations over the last 10% of compute) forecast by the model average of
:mod:`rlcurves.ensemble`, under each of its candidate settings (:data:`rlcurves.ensemble.
CONFIGS`); the signed error and the predictive variance's parts are recorded. From these records a
:class:`Calibration` fits, in this order:

1. **The model average's setting, the misspecification's growth** ``g(d)`` (``d`` the
   distance past the fit window in log compute) **and the tails of the likelihood** (``t_nu``
   errors of variance ``V``): the triple with the highest marginal likelihood of the errors under
   the model of step 2 (:func:`choose`).
2. **The misspecification scale per family, partially pooled** (:mod:`rlcurves.pooling`):
   ``V = fit_var + noise_var + tau_f^2 g(d)`` with ``log tau_f ~ N(mu, s^2)`` across families
   (``V`` is the errors' variance, whatever their tails). A run of a known family gets its
   family's tau (:meth:`Calibration.for_family`); a run of any other family, the default, gets
   the across-family prior's.
3. **Conformal multipliers per tail** (:mod:`rlcurves.conformal`) of the signed scores ``error /
   sqrt(V)``, each standardized the way a forecast of the same kind would be (a new family's
   scores with the scale fitted without their family, a known family's without their run), every
   run weighing 1, local in ``d``. ``n`` runs support one-sided tails down to ``1 / (n + 1)``.

:func:`calibrate` does this on a user's finished runs; :func:`default_calibration` is the shipped
one, made the same way from the families of the bundled corpus (:func:`load_corpus`, through the
registry: a family added there is in the next ``python -m benchmarks.calibration
--write-calibration``) of one kind of metric, a validation pass rate (the default) or a training
reward, each stored as a small versioned artifact (``rlcurves/data/calibration_corpus.json`` and
``calibration_corpus_training.json``) that :func:`rlcurves.forecast` reads. The benchmark
refits all of it inside every leave-one-family-out fold with this same code. How it was built
and measured: the design notes (``docs/design/calibrate.md``) and
``python -m benchmarks.calibration``.
"""

from __future__ import annotations

import json
import math
import threading
import warnings
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from tqdm.auto import tqdm

from ._data import check_seed
from .conformal import (
    TailMap,
    cross_family_pvalues,
    local_weights,
    min_tail,
    quantile_function,
    tail_quantile,
)
from .ensemble import CONFIGS, EnsembleConfig
from .errors import RLCurvesError
from .pooling import GROWTH_FORMS, NUS, PooledScale, fit_pooled, growth, run_loglik
from .shapes import headroom_gain, shape_records

if TYPE_CHECKING:
    from .result import SigmoidFit

FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
N_BOOT = 200
# Draws of a forecast's predictive distribution: probabilities near 0.05 resolved to ~0.004
N_DRAWS = 4000
#: Fewest runs in a state (taken off or not) for the prior predictive to use only that state's
#: records: a 90% interval needs 19 behind each tail.
MIN_PRIOR_RUNS = 19
#: A flat run this much further into its budget than any flat run of the corpus was (the
#: prior's "reach") has no runs like it behind its prior: its gain still to come is bounded by a
#: sigmoid's rise from where it is (:meth:`Calibration.prior_predictive`). Fixed, not tuned.
BEYOND_THE_PRIOR = 1.2
#: Prior probability that a run of a sweep misbehaves (its window backtests miss by more than
#: its sweep's tau allows: a decline, a collapse), so that its tau is its own, not the sweep's
#: (:meth:`Calibration.tau_by_run`). Fixed, not tuned on any replay: about one run in twenty,
#: what the corpus's sweeps show (runs whose window backtests alone ask for 2 to 7 times their
#: sweep-mates' tau at 30% or 50% of their budget: 5 of the 106 runs with backtests by then,
#: ``python -m benchmarks.race_run_tau``; read off every family, not refitted in the folds).
ATYPICAL_SHARE = 0.05
#: Version of the shipped calibration's file format (records of one setting + what was learned).
ARTIFACT_VERSION = 2
CORPUS_NAME = "the bundled corpus"
#: The shipped calibrations, one per kind of metric (:data:`METRIC_KINDS`): a validation pass
#: rate and a training reward behave differently enough (misspecification scales 0.01-0.03
#: against 0.1-0.2 reward units, late take-offs) that a run is calibrated on runs of its kind.
_SHIPPED = {
    "validation": "calibration_corpus.json",
    "training reward": "calibration_corpus_training.json",
}
#: The kinds of metric a corpus family records (``metric_kind`` in
#: :func:`rlcurves.datasets.list_corpus`).
METRIC_KINDS = tuple(_SHIPPED)
_RECORD_COLUMNS = (
    "run",
    "family",
    "fraction",
    "tail",
    "shrink",
    "error",
    "error_one",
    "fit_var",
    "noise_var",
    "noise_var_one",
    "distance",
    "noise_sd",
    "n_fit",
    "w_power_law",
    "forecast",
    "observed",
)
#: What a run belongs to when its frame says nothing (``frame.attrs["family"]``).
DEFAULT_FAMILY = "runs"


def load_corpus(family: str | None = None) -> dict[str, pd.DataFrame]:
    """Corpus runs as one frame per distinct run (columns ``compute``, ``reward``).

    Reads the registry (:func:`rlcurves.datasets.list_corpus`): every family by default, keyed
    ``"family/run"`` (run names repeat across families); one family's runs keyed by their names.
    Compute is what the family logs (the training step for most). Each frame's ``attrs`` names
    its ``source`` file, ``name`` and ``family``.

    Parameters
    ----------
    family : str, optional
        One family of the corpus (``rlcurves.datasets.list_corpus()["family"]``); default all.
    """
    from .datasets import list_corpus
    from .datasets import load_corpus as load_long

    listed = list_corpus()
    known = list(dict.fromkeys(listed["family"]))
    if family is not None and family not in known:
        raise RLCurvesError(f"unknown family {family!r}; choose one of {known}, or None for all")
    families = known if family is None else [family]
    files = listed.set_index(["family", "run"])["file"]
    runs: dict[str, pd.DataFrame] = {}
    for fam in families:
        table = load_long(fam)
        for name, g in table.groupby("run", sort=False):
            frame = pd.DataFrame(
                {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
            )
            frame.attrs.update(
                source=f"rlcurves/data/curves/{files[(fam, name)]}", name=name, family=fam
            )
            runs[str(name) if family is not None else f"{fam}/{name}"] = frame
    return runs


def _base(records: pd.DataFrame, one: bool) -> np.ndarray:
    noise = records["noise_var_one" if one else "noise_var"]
    return np.maximum((records["fit_var"] + noise).to_numpy(float), 1e-16)


def _with_base(records: pd.DataFrame) -> pd.DataFrame:
    return records.assign(base_var=_base(records, one=False))


#: The level whose interval width chooses among settings (:func:`choose`).
SELECTION_LEVEL = 0.9


def new_family_tau(records: pd.DataFrame, form: str, nu: float) -> np.ndarray:
    """Per record, the tau a forecast of a run of a new family would have had if the record's
    family had been new: the pooled model fitted without that family (``records`` need
    ``base_var``; with one family, that family's own)."""
    fams = records["family"].to_numpy()
    tau = np.empty(len(records))
    if np.unique(fams).size == 1:
        tau[:] = fit_pooled(records, form, nu).tau_new
        return tau
    for fam in np.unique(fams):
        tau[fams == fam] = fit_pooled(records[fams != fam], form, nu).tau_new
    return tau


#: Factors on the pooled model's tau the calibration chooses among (:func:`choose`). Only 1:
#: the misspecification scale is the likelihood's, never tuned down. Choosing among 0-1 by the
#: narrowest inner leave-one-family-out intervals picked 0.1-0.5 on the validation runs, whose
#: intervals then scaled with the run's own noise and failed where that noise is smoothed away
#: (EMA 0.9: 38/60 simulated and 180/327 real forecasts covered, against 59/60 and 292/327 at 1).
TAU_FACTORS = (1.0,)


def _inner_log_width(records: pd.DataFrame, form: str, nu: float) -> dict[float, pd.Series]:
    """Per factor of :data:`TAU_FACTORS`, each run's mean log width of the calibrated 90%
    intervals of its forecasts when each family is forecast as a new one by the others (its
    scale fitted without it; the per-tail, distance-local multipliers of every record's score at
    each fraction): how narrow the setting's intervals are at the coverage the conformal step
    gives them. NaN when the runs do not support the level."""
    tau = new_family_tau(records, form, nu)
    g = growth(form, records["distance"].to_numpy(float))
    runs, d = records["run"].to_numpy(), records["distance"].to_numpy(float)
    n, p = int(np.unique(runs).size), (1 - SELECTION_LEVEL) / 2
    groups = [
        (sub.index.to_numpy(), local_weights(runs, d, float(np.median(sub["distance"]))))
        for _, sub in records.groupby("fraction")
    ]
    out = {}
    for factor in TAU_FACTORS:
        v = records["base_var"].to_numpy(float) + (factor * tau) ** 2 * g
        z = records["error"].to_numpy(float) / np.sqrt(v)
        logs = np.full(len(records), np.nan)
        for rows, w in groups:
            q = tail_quantile(-z, w, n, p) + tail_quantile(z, w, n, p)
            logs[rows] = np.log(q * np.sqrt(v[rows])) if math.isfinite(q) else np.nan
        out[factor] = pd.Series(logs).groupby(runs).mean()
    return out


def choose(records: pd.DataFrame) -> pd.DataFrame:
    """Every candidate (model-average setting, ``g(d)``, ``nu``, factor on tau) scored in
    ``records``, the chosen one first (:class:`Calibration` uses the first row).

    With three families or more the chosen one is the candidate whose calibrated intervals are
    narrowest when each family is forecast as a new one by the others (``log_width``, the
    run-averaged mean log width of the 90% intervals: every candidate covers about 90% after
    the conformal step, so narrower is better). With fewer families, the highest marginal
    likelihood of the partially pooled model (``marginal``, :func:`rlcurves.pooling.
    fit_pooled`)."""
    rows = []
    r = _with_base(records).reset_index(drop=True)
    inner = r["family"].nunique() >= 3
    for (tail, shrink), g in r.groupby(["tail", "shrink"], sort=True):
        g = g.reset_index(drop=True)
        for form in GROWTH_FORMS:
            for nu in NUS:
                pooled = fit_pooled(g, form, nu)
                widths = _inner_log_width(g, form, nu) if inner else {1.0: pd.Series(dtype=float)}
                for factor, by_run in widths.items():
                    rows.append(
                        {"tail": float(tail), "shrink": float(shrink), "growth": form, "nu": nu,
                         "tau_factor": factor, "marginal": pooled.marginal,
                         "tau_new": pooled.tau_new, "s": pooled.s,
                         "log_width": float(by_run.mean()) if len(by_run) else math.nan}
                    )  # fmt: skip
    table = pd.DataFrame(rows)
    if not (inner and table["log_width"].notna().any()):
        return table.sort_values("marginal", ascending=False, ignore_index=True)
    return table.sort_values(["log_width", "marginal"], ascending=[True, False],
                             ignore_index=True, na_position="last")  # fmt: skip


#: How many answers of its draws and multipliers a calibration remembers (0: none; benchmarks
#: time the code without the memory).
MEMO_KEEP = 128
_MEMO_LOCK = threading.Lock()


@dataclass(eq=False)
class Calibration:
    """Forecast errors on finished runs, and the predictive distribution they imply.

    Built from records (:func:`calibrate`, or the shipped :func:`default_calibration`); the
    setting of the model average and ``g(d)`` are chosen on the records unless given, the
    misspecification scales fitted with partial pooling across families and the conformal
    multipliers per tail (see the module docstring).

    What its intervals promise: for a new run from the calibration runs' mix of families (the
    default) or from the family of :meth:`for_family`, each side of a central interval at
    ``level`` misses the run's level with probability about ``(1 - level) / 2``, near the
    forecast's distance past its window. Levels whose tails need more runs than there are
    (``(1 - level) / 2 < 1 / (n + 1)``) are not supported: :meth:`supported_level` says which
    one is used instead, and forecasts say so.

    Attributes
    ----------
    records : pandas.DataFrame
        One row per (run, fraction) of the chosen setting: ``run, family, fraction, tail,
        shrink, error`` (observed level minus forecast), ``error_one`` (the last evaluation minus
        the combined curve), the variance parts ``fit_var, noise_var, noise_var_one``,
        ``distance`` (log compute past the window), ``noise_sd`` (residual sd), ``n_fit``
        (evaluations fitted), ``w_power_law``, ``forecast``, ``observed``.
    corpus : str
        What the runs were.
    fractions : tuple of float
        Fit fractions scored.
    config : EnsembleConfig
        The model average's setting (chosen on the records when not given).
    growth : str
        The form of ``g(d)`` (chosen likewise).
    nu : float
        Degrees of freedom of the errors' t distribution in the likelihood of tau (``V`` is its
        variance; ``inf``: normal), chosen likewise.
    tau_factor : float
        The factor on the pooled model's tau in ``V`` (:data:`TAU_FACTORS`), chosen likewise.
    family : str or None
        The family forecasts are for (None: a family not among the records'; with one family
        in the records, that one).
    selection : pandas.DataFrame
        Every candidate (setting, growth) and its marginal log-likelihood (empty when both were
        given).
    pooled : PooledScale
        The fitted random-effects model of tau.
    tau : float
        The misspecification scale forecasts use (reward units).
    scores, scores_one : numpy.ndarray
        Signed ``error / sqrt(V)`` of the level and of one evaluation, each standardized as a
        forecast of this kind would be.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid(
    ...     "compute", "reward", data=df, min_compute=1500, max_compute=8000
    ... )  # the first half
    >>> from rlcurves.calibrate import default_calibration
    >>> cal = default_calibration()  # the bundled corpus's validation runs
    >>> cal.n >= 50, cal.family is None
    (True, True)
    >>> math_runs = cal.for_family("math")  # a run of a family the corpus has
    >>> fc = rlcurves.forecast(fit, 16_000, calibration=math_runs, progress=False)
    """

    records: pd.DataFrame
    corpus: str
    fractions: tuple[float, ...] = FRACTIONS
    config: EnsembleConfig | None = None
    growth: str | None = None
    family: str | None = None
    nu: float | None = None
    tau_factor: float | None = None
    shapes: pd.DataFrame | None = field(default=None, repr=False)
    selection: pd.DataFrame = field(init=False, repr=False)
    pooled: PooledScale = field(init=False, repr=False)
    tau: float = field(init=False)
    scores: np.ndarray = field(init=False, repr=False)
    scores_one: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        missing = set(_RECORD_COLUMNS) - set(self.records.columns)
        if missing:
            raise RLCurvesError(f"calibration records lack columns {sorted(missing)}")
        if self.records.empty:
            raise RLCurvesError("a calibration needs at least one scored run")
        records = self.records.reset_index(drop=True)
        records["family"] = records["family"].astype(str)
        self.selection = pd.DataFrame()
        if None in (self.config, self.growth, self.nu, self.tau_factor):
            pick = records
            if self.config is not None:
                pick = records[self._of_config(records, self.config)]
            self.selection = choose(pick)
            sel = self.selection
            if self.growth is not None:
                sel = sel[sel["growth"] == self.growth]
            if self.nu is not None:
                sel = sel[np.isclose(sel["nu"], self.nu)]
            if self.tau_factor is not None:
                sel = sel[np.isclose(sel["tau_factor"], self.tau_factor)]
            best = sel.iloc[0]
            self.config = self.config or EnsembleConfig(float(best["tail"]), float(best["shrink"]))
            self.growth = self.growth or str(best["growth"])
            self.nu = float(best["nu"]) if self.nu is None else float(self.nu)
            if self.tau_factor is None:
                self.tau_factor = float(best["tau_factor"])
        if self.growth not in GROWTH_FORMS:
            raise RLCurvesError(f"growth must be one of {list(GROWTH_FORMS)}, got {self.growth!r}")
        keep = self._of_config(records, self.config)
        if not keep.any():
            raise RLCurvesError(f"the records hold no forecast with {self.config.label}")
        self.records = records[keep].reset_index(drop=True)
        families = self.families
        if self.family is not None and self.family not in families:
            raise RLCurvesError(f"unknown family {self.family!r}; the runs' are {families}")
        self.pooled = fit_pooled(_with_base(self.records), self.growth, self.nu)
        fam = self._mode()
        tau = self.pooled.tau_new if fam is None else self.pooled.family_tau[fam]
        self.tau = self.tau_factor * tau
        self.scores = self._standardized(one=False)
        self.scores_one = self._standardized(one=True)
        self._maps = {one: self._tail_maps(one) for one in (False, True)}

    def _tail_maps(self, one: bool) -> dict[str, TailMap]:
        """For a new family, with three families or more: per tail, the nominal tail that gave
        each family, forecast as a new one by the others, the miss rate wanted (families differ,
        so the run-level conformal quantile alone covers a new family's runs more or less than
        it promises); otherwise the identity."""
        if self._mode() is not None or len(self.families) < 3:
            return {"upper": TailMap(), "lower": TailMap()}
        r = self.records
        runs, d = r["run"].to_numpy(), r["distance"].to_numpy(float)
        p_up, p_lo, _ = cross_family_pvalues(
            self.scores_one if one else self.scores, runs, r["family"].to_numpy(), d
        )
        return {"upper": TailMap(p_up, runs, d), "lower": TailMap(p_lo, runs, d)}

    def effective_tail(
        self, p: ArrayLike, side: str, one: bool = False, distance: float | None = None
    ) -> np.ndarray:
        """The tail of the conformal quantile used for a one-sided miss probability ``p`` on
        ``side`` ("upper" or "lower") at ``distance`` (None: over all distances): ``p`` itself
        for a known family; for a new family what the cross-family check maps it to near that
        distance (:class:`rlcurves.conformal.TailMap`). A ``p`` the runs support
        (:attr:`min_tail`) never maps beyond the data (at least ``1 / (n + 1)``); below it the
        tail is not supported (0 or less than ``1 / (n + 1)``)."""
        p = np.asarray(p, dtype=float)
        eff = np.minimum(self._maps[one][side](p, distance), 0.5)
        if distance is None:
            return eff
        floor = min_tail(self.n)
        return np.where(p >= self.min_tail - 1e-12, np.maximum(eff, floor), eff)

    @staticmethod
    def _of_config(records: pd.DataFrame, config: EnsembleConfig) -> np.ndarray:
        tail, shrink = records["tail"].to_numpy(float), records["shrink"].to_numpy(float)
        return np.isclose(tail, config.tail) & np.isclose(shrink, config.shrink)

    def _mode(self) -> str | None:
        """The family forecasts are for (None: a new one)."""
        if self.family is not None:
            return self.family
        fams = self.families
        return fams[0] if len(fams) == 1 else None

    def _standardized(self, one: bool) -> np.ndarray:
        """Signed scores, each record standardized by the tau a forecast of this kind would have
        had without it: a new family's scale fitted without the record's family (with one family
        or for a known family: the family's scale without the record's run)."""
        r = self.records
        err = r["error_one" if one else "error"].to_numpy(float)
        base = _base(r, one)
        g = growth(self.growth, r["distance"].to_numpy(float))
        tau = np.empty(len(r))
        fams = r["family"].to_numpy()
        if self._mode() is None:
            tau = new_family_tau(_with_base(r), self.growth, self.nu)
        else:
            runs, ll = run_loglik(_with_base(r), self.growth, self.nu)
            index = {run: i for i, run in enumerate(runs)}
            for fam in np.unique(fams):
                fam_ll = self.pooled.family_loglik[fam]
                for run in np.unique(r.loc[fams == fam, "run"]):
                    rows = ((fams == fam) & (r["run"] == run)).to_numpy()
                    tau[rows] = self.pooled.posterior_tau(fam_ll - ll[index[run]])
        return err / np.sqrt(base + (self.tau_factor * tau) ** 2 * g)

    # ---- sizes and names -------------------------------------------------------------------
    @property
    def runs(self) -> np.ndarray:
        """The run of every record."""
        return self.records["run"].to_numpy()

    @property
    def families(self) -> list[str]:
        """The families of the runs, sorted."""
        return sorted(set(self.records["family"]))

    @property
    def n(self) -> int:
        """Number of distinct runs (the exchangeable units)."""
        return self._memo(("n",), lambda: int(np.unique(self.runs).size))

    def _memo(self, key: tuple, make):
        """``make()``, remembered by ``key`` for this calibration (its records do not change once
        made): a sweep's forecasts ask for the same draws and multipliers at the same distances,
        one run after another. The latest :data:`MEMO_KEEP` answers are kept."""
        if MEMO_KEEP <= 0:
            return make()
        cache = self.__dict__.setdefault("_memo_cache", {})
        value = cache.get(key)
        if value is None:
            value = make()
            with _MEMO_LOCK:  # a Ray Tune scheduler's threads may share a calibration
                while len(cache) >= MEMO_KEEP:
                    cache.pop(next(iter(cache)))
                cache[key] = value
        return value

    n_runs = n

    @property
    def n_scores(self) -> int:
        """Number of scored forecasts (several per run)."""
        return len(self.records)

    @cached_property
    def min_tail(self) -> float:
        """The smallest one-sided miss probability the runs support: at least ``1 / (n + 1)``
        (a tail needs ``1 / p - 1`` runs behind it), and for a new family the smallest ``p``
        whose :meth:`effective_tail` is still that far in, on both sides."""
        base = min_tail(self.n)
        grid = np.linspace(base, 0.5, 400)
        ok = np.ones(grid.size, dtype=bool)
        for side in ("upper", "lower"):
            ok &= self.effective_tail(grid, side) >= base - 1e-12
        return float(grid[np.argmax(ok)]) if ok.any() else 0.5

    @property
    def max_level(self) -> float:
        """The highest central level the runs support: ``1 - 2 min_tail``."""
        return 1.0 - 2.0 * self.min_tail

    def supported_level(self, level: float) -> float:
        """``level``, or the nearest one the runs support (:attr:`max_level`) above it."""
        _check_level(level)
        return min(level, self.max_level)

    @property
    def name(self) -> str:
        who = "a new family" if self._mode() is None else f"family {self._mode()}"
        return f"{self.corpus}: {self.n} runs ({self.n_scores} forecasts), for {who}"

    # ---- the predictive distribution -------------------------------------------------------
    def variance(self, parts, one: bool = False) -> np.ndarray:
        """The predictive variance ``V = fit_var + noise_var + tau^2 g(d)`` from its parts (a
        records frame or an :class:`~rlcurves.ensemble.Ensemble`)."""
        if isinstance(parts, pd.DataFrame):
            base, d = _base(parts, one), parts["distance"].to_numpy(float)
        else:
            noise = parts.noise_var_one if one else parts.noise_var
            base = np.asarray(parts.fit_var + noise, dtype=float)
            d = np.asarray(parts.distance, dtype=float)
        return np.maximum(base + self.tau**2 * self.growth_at(d), 1e-16)

    def growth_at(self, distance: ArrayLike) -> np.ndarray:
        """``g(d)`` at ``distance`` (log compute past the window)."""
        return growth(self.growth, np.asarray(distance, dtype=float))

    def _weights(self, distance: float | None) -> np.ndarray:
        return local_weights(self.runs, self.records["distance"].to_numpy(float), distance)

    def multipliers(
        self, level: float, distance: ArrayLike = 0.0, one: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """The conformal multipliers of the central interval at ``level`` at each distance:
        ``(lower, upper)``, the interval being ``[mean - lower sqrt(V), mean + upper sqrt(V)]``;
        ``inf`` on a side whose tail ``(1 - level) / 2`` the runs do not support."""
        _check_level(level)
        d = np.atleast_1d(np.asarray(distance, dtype=float))
        key = ("multipliers", float(level), d.tobytes(), bool(one))
        lo, hi = self._memo(key, lambda: self._multipliers(level, d, one))
        return lo.copy(), hi.copy()

    def _multipliers(self, level: float, d: np.ndarray, one: bool) -> tuple[np.ndarray, np.ndarray]:
        p = (1.0 - level) / 2.0
        z = self.scores_one if one else self.scores
        lo, hi = np.full(d.size, math.inf), np.full(d.size, math.inf)
        for i, di in enumerate(d):
            w = self._weights(float(di))
            p_lo = float(self.effective_tail(p, "lower", one, float(di)))
            p_hi = float(self.effective_tail(p, "upper", one, float(di)))
            if p_lo > 0:
                lo[i] = tail_quantile(-z, w, self.n, p_lo)
            if p_hi > 0:
                hi[i] = tail_quantile(z, w, self.n, p_hi)
        return lo, hi

    def quantile(self, level: float, one: bool = False, distance: float = 0.0) -> float:
        """The larger of the two multipliers at ``level`` (see :meth:`multipliers`)."""
        lo, hi = self.multipliers(level, distance, one)
        return float(max(lo[0], hi[0]))

    def z_values(
        self, n: int = N_DRAWS, distance: ArrayLike = 0.0, one: bool = False, smooth: bool = False
    ):
        """``n`` stratified values of the signed standardized error ``Z`` at each distance,
        ascending, shape ``(n, len(distance))`` (at probabilities ``(i + 0.5) / n``): ``forecast
        + sqrt(V) Z`` is the predictive distribution. Each tail is its own step function of the
        scores (:func:`rlcurves.conformal.quantile_function`), at the largest error seen beyond
        :attr:`min_tail`. ``smooth``: linear between successive scores (a band drawn over many
        distances, without steps; see :func:`rlcurves.conformal.quantile_function`)."""
        d = np.atleast_1d(np.asarray(distance, dtype=float))
        key = ("z_values", int(n), d.tobytes(), bool(one), bool(smooth))
        return self._memo(key, lambda: self._z_values(int(n), d, one, smooth)).copy()

    def _z_values(self, n: int, d: np.ndarray, one: bool, smooth: bool) -> np.ndarray:
        u = (np.arange(n) + 0.5) / n
        upper = u >= 0.5
        z = self.scores_one if one else self.scores
        cols = []
        for di in d:
            v = np.where(
                upper,
                1.0 - self.effective_tail(1.0 - u, "upper", one, float(di)),
                self.effective_tail(u, "lower", one, float(di)),
            )
            v = np.where(upper, np.maximum(v, 0.5), np.minimum(v, 0.5 - 1e-12))
            cols.append(quantile_function(z, self._weights(float(di)), self.n, v, smooth))
        return np.maximum.accumulate(np.stack(cols, axis=1), axis=0)

    # ---- the prior predictive of a run whose own data leave its curve open ------------------
    def _shape_scores(self, taken_off: bool | None = None) -> dict[str, Any]:
        """The shape records' scores (the gain still to come, as a share of the headroom left
        and in reward units), their distances ``ln(1 / fraction)`` and the cross-family tail
        maps of the headroom shares (identity for a known family or with fewer than three);
        only the records of runs in the same state (``taken_off``) when at least
        :data:`MIN_PRIOR_RUNS` runs were in it, else all. Computed once per state."""
        cache = self.__dict__.setdefault("_shape_cache", {})
        if taken_off not in cache:
            cache[taken_off] = self._make_shape_scores(taken_off)
        return cache[taken_off]

    def _make_shape_scores(self, taken_off: bool | None) -> dict[str, Any]:
        sh = self.shapes
        if self._mode() is not None:
            sh = sh[sh["family"] == self._mode()] if (sh["family"] == self._mode()).any() else sh
        if taken_off is not None:
            same = sh[sh["taken_off"].astype(bool) == taken_off]
            if same["run"].nunique() >= MIN_PRIOR_RUNS:
                sh = same
        sh = sh.reset_index(drop=True)
        h = headroom_gain(sh["reached"], sh["final"])
        runs, d = sh["run"].to_numpy(), np.log(1.0 / sh["fraction"].to_numpy(float))
        maps = {"upper": TailMap(), "lower": TailMap()}
        if self._mode() is None and sh["family"].nunique() >= 3:
            p_up, p_lo, _ = cross_family_pvalues(h, runs, sh["family"].to_numpy(), d)
            maps = {"upper": TailMap(p_up, runs, d), "lower": TailMap(p_lo, runs, d)}
        gain = (sh["final"] - sh["reached"]).to_numpy(float)
        every = self.shapes.drop_duplicates("run")  # every run's fitted B, in any state
        b = every["B"].to_numpy(float) if "B" in every.columns else np.array([])
        return {"h": h, "gain": gain, "runs": runs, "d": d, "maps": maps,
                "B": np.sort(b[np.isfinite(b)]),
                "n": int(np.unique(runs).size),
                "reach": float(sh["fraction"].max()) if len(sh) else math.nan}  # fmt: skip

    @property
    def has_prior(self) -> bool:
        """Whether the calibration carries the corpus's shape records (the prior predictive)."""
        return self.shapes is not None and len(self.shapes) > 0

    def prior_predictive(
        self,
        compute: ArrayLike,
        reward: ArrayLike,
        at: ArrayLike,
        *,
        top: float = 1.0,
        n: int = N_DRAWS,
        taken_off: bool | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Draws of a run's level at ``at`` from what it has reached so far and what the
        corpus's runs gained from the same fraction of their budget on (see
        :mod:`rlcurves.shapes`): ``reached + (top - reached) h``, ``h`` the gain still to come
        as a share of the headroom left (``top`` infinite: the gain in reward units), its
        quantiles the run-level, per-tail, fraction-local conformal ones of the corpus's, each
        tail mapped as a new family's (:meth:`effective_tail`). ``taken_off`` (default: from
        the run's own evaluations, :func:`rlcurves.shapes.took_off`) keeps the records of runs
        in the same state: a flat run is forecast from the runs that were flat. A flat run
        further into its budget than :data:`BEYOND_THE_PRIOR` times any of those runs was flat
        (no validation run of the corpus was flat past 30% of its budget) has no runs like it
        behind the prior: its draws are bounded by what a sigmoid can gain from the rise the
        run can have made by now (``_flat_cap``; with B as the corpus's runs' fits, a run flat
        at 0.03 for half its budget: 0.09 [0.00, 0.30] instead of 0.36 [0.00, 0.87]). Shape
        ``(n, len(at))``, each column ascending, and a dict of what was used (``shape_reach``:
        the largest fraction of their budget those runs' records are at; ``capped``: the columns
        so bounded)."""
        from .shapes import reached_level, took_off

        if not self.has_prior:
            raise RLCurvesError(
                "this calibration has no shape records (made before they existed): recompute "
                "it with rlcurves.calibrate"
            )
        c = np.asarray(compute, dtype=float)
        r = np.asarray(reward, dtype=float)
        order = np.argsort(c, kind="stable")
        c, r = c[order], r[order]
        now = float(c.max())
        reached = reached_level(c, r, now)
        if taken_off is None:
            taken_off = took_off(r)
        at = np.atleast_1d(np.asarray(at, dtype=float))
        frac = np.clip(now / np.maximum(at, 1e-300), 1e-6, 1.0)
        sc = self._shape_scores(bool(taken_off))
        bounded = math.isfinite(top)
        scores = sc["h"] if bounded else sc["gain"]
        u = (np.arange(n) + 0.5) / n
        upper = u >= 0.5
        cols = []
        for f in frac:
            di = math.log(1.0 / f)
            v = np.where(
                upper,
                1.0 - np.minimum(sc["maps"]["upper"](1.0 - u, di), 0.5),
                np.minimum(sc["maps"]["lower"](u, di), 0.5),
            )
            v = np.where(upper, np.maximum(v, 0.5), np.minimum(v, 0.5 - 1e-12))
            w = local_weights(sc["runs"], sc["d"], di)
            cols.append(quantile_function(scores, w, sc["n"], v))
        q = np.maximum.accumulate(np.stack(cols, axis=1), axis=0)
        scale = (top - reached) if bounded else 1.0
        sd = float(np.std(np.diff(r), ddof=1) / math.sqrt(2)) if r.size >= 3 else 0.0
        cap, capped = self._flat_cap(sc, c, r, reached, sd, frac, u, bool(taken_off))
        # at or before the last evaluation: the level now, known to its noise (a mean of the
        # evaluations in its window, the noise from successive differences)
        from .ensemble import level_mask
        from .forecast import _normal_draws

        se = sd / math.sqrt(max(int(level_mask(c, now).sum()), 1))
        now_draws = reached + se * _normal_draws(n)[:, None]
        draws = np.where(frac[None, :] >= 1.0, now_draws, np.minimum(reached + scale * q, cap))
        info = {"reached": reached, "fraction": frac, "n_eval": int(c.size),
                "taken_off": bool(taken_off), "shape_runs": sc["n"],
                "shape_reach": sc["reach"], "capped": capped,
                "min_tail": min_tail(sc["n"])}  # fmt: skip
        return draws, info

    @staticmethod
    def _flat_cap(sc, c, r, reached, sd, frac, u, taken_off) -> tuple[np.ndarray, np.ndarray]:
        """The most a flat run further into its budget than the prior's flat runs were can
        gain (``inf`` elsewhere), per draw and column: a sigmoid's rise ``(A - R0) / (1 +
        (C_mid / C)^B)`` grows from ``now`` to ``at`` by at most ``(at / now)^B`` whatever A
        and C_mid, so the level at ``at`` is at most the run's start plus the most it can have
        risen by now (its rise so far plus :data:`rlcurves.shapes.TAKEOFF_SE` standard errors)
        times ``(at / now)^B``, ``B`` the corpus runs' fitted ones at the draw's quantile (the
        steepest curves with the largest gains: the hopeful pairing). ``capped``: the columns
        bounded so."""
        from .ensemble import level_mask
        from .shapes import TAKEOFF_SE

        beyond = (frac > BEYOND_THE_PRIOR * sc["reach"]) & (frac < 1.0)
        if taken_off or not sc["B"].size or not beyond.any():
            return np.full((u.size, frac.size), np.inf), np.zeros(frac.size, bool)
        m = min(3, r.size)
        start = float(np.mean(r[:m]))
        window = max(int(level_mask(c, float(c.max())).sum()), 1)
        rise = max(reached - start, 0.0) + TAKEOFF_SE * sd * math.sqrt(1.0 / m + 1.0 / window)
        b = sc["B"]
        k = np.clip(np.ceil(u * (b.size + 1)).astype(int) - 1, 0, b.size - 1)  # conformal step
        ratio = np.where(beyond, 1.0 / frac, np.inf)
        with np.errstate(over="ignore"):
            cap = start + rise * ratio[None, :] ** b[k][:, None]
        return cap, beyond

    # ---- families and subsets ----------------------------------------------------------------
    def for_family(self, family: str | None) -> Calibration:
        """The calibration for runs of ``family`` (one of :attr:`families`: its own tau,
        partially pooled, and scores standardized as a known family's); None: a new family."""
        if family is not None and family not in self.families:
            raise RLCurvesError(f"unknown family {family!r}; the runs' are {self.families}")
        return self._like(self.records, family=family)

    def _like(self, records: pd.DataFrame, family: Any = "same") -> Calibration:
        family = self.family if family == "same" else family
        if family is not None and family not in set(records["family"]):
            family = None
        shapes = None
        if self.shapes is not None:
            shapes = self.shapes[self.shapes["run"].isin(set(records["run"]))]
        return Calibration(
            records, self.corpus, self.fractions, self.config, self.growth, family, self.nu,
            self.tau_factor, shapes,
        )  # fmt: skip

    def without(self, run) -> Calibration:
        """The calibration with one run (or a list of runs) left out; the setting and growth are
        kept, the scales and scores refitted."""
        drop = [run] if isinstance(run, str) or not hasattr(run, "__iter__") else list(run)
        return self._like(self.records[~self.records["run"].isin(drop)])

    def subset(self, runs) -> Calibration:
        """The calibration on ``runs`` only (setting and growth kept)."""
        return self._like(self.records[self.records["run"].isin(list(runs))])

    def of_families(self, families) -> Calibration:
        """The calibration on the runs of ``families`` only (a name or a list; setting and
        growth kept)."""
        names = [families] if isinstance(families, str) else list(families)
        unknown = sorted(set(names) - set(self.families))
        if unknown:
            raise RLCurvesError(f"unknown families {unknown}; the runs' are {self.families}")
        return self._like(self.records[self.records["family"].isin(names)])

    def tau_with(self, records: pd.DataFrame | None, prior_runs: float = 1.0) -> float:
        """tau of a group of runs from their own backtests (e.g. a sweep's runs within their
        windows, :func:`window_records`): the group is a family whose posterior under the
        across-family prior (:attr:`pooled`) is taken, its log density weighted by
        ``prior_runs`` (1: as fitted; more pulls harder toward the prior). With no records it
        is :attr:`tau`."""
        if records is None or not len(records):
            return self.tau
        if not (math.isfinite(prior_runs) and prior_runs > 0):
            raise RLCurvesError(f"prior_runs must be > 0, got {prior_runs}")
        _, ll = run_loglik(_with_base(records), self.growth, self.nu)
        return self.tau_factor * self.pooled.posterior_tau(ll.sum(axis=0), prior_weight=prior_runs)

    def tau_by_run(
        self,
        records: pd.DataFrame | None,
        prior_runs: float = 1.0,
        atypical: float = ATYPICAL_SHARE,
        by: str = "run",
    ) -> tuple[float, dict[str, float], dict[str, float]]:
        """:meth:`tau_with` when any run of the group may misbehave: the group's tau, each
        run's (keyed by the records' column ``by``) and each run's probability of being
        atypical.

        Each run shares the group's tau with probability ``1 - atypical``, or has its own, drawn
        from a new family's predictive (:meth:`rlcurves.pooling.PooledScale.posterior_tau_by_run`):
        a run whose backtests missed far widens its own forecast, not every run's. With
        ``atypical=0`` every run gets :meth:`tau_with`. With no records: :attr:`tau`, no runs.
        """
        if records is None or not len(records):
            return self.tau, {}, {}
        if not (math.isfinite(prior_runs) and prior_runs > 0):
            raise RLCurvesError(f"prior_runs must be > 0, got {prior_runs}")
        if by not in records:
            raise RLCurvesError(f"records have no column {by!r} to tell the runs apart")
        recs = _with_base(records).assign(**{by: records[by].astype(str)})
        keys, ll = run_loglik(recs, self.growth, self.nu, by=by)
        group, taus, p = self.pooled.posterior_tau_by_run(ll, prior_runs, atypical)
        f = self.tau_factor
        names = [str(k) for k in keys]
        return (
            f * group,
            dict(zip(names, (f * taus).tolist(), strict=True)),
            dict(zip(names, p.tolist(), strict=True)),
        )

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
        """The artifact: its version, the records of the chosen setting, what was chosen and
        learned (the learned numbers are recomputed from the records on loading; they are
        stored to be read)."""
        r = self.records
        recs = {
            c: [str(v) for v in r[c]] if c in ("run", "family") else
            [float(f"{v:.10g}") for v in r[c].astype(float)]
            for c in _RECORD_COLUMNS
        }  # fmt: skip
        return {
            "version": ARTIFACT_VERSION,
            "corpus": self.corpus,
            "fractions": list(self.fractions),
            "config": {"tail": self.config.tail, "shrink": self.config.shrink},
            "growth": self.growth,
            "nu": str(self.nu),
            "tau_factor": self.tau_factor,
            "learned": {
                "mu": self.pooled.mu,
                "s": self.pooled.s,
                "tau_new_family": self.pooled.tau_new,
                "tau_by_family": self.pooled.family_tau,
                "selection": self.selection.to_dict(orient="records"),
            },
            "records": recs,
            "shapes": None if self.shapes is None else {
                c: [v if isinstance(v, str) else (bool(v) if c == "taken_off" else float(v))
                    for v in self.shapes[c]]
                for c in self.shapes.columns
            },
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        """The calibration an artifact of :meth:`to_dict` holds (e.g. ``json.load`` of a file).

        Raises
        ------
        RLCurvesError
            ``d`` is not such an artifact (not a dict, an entry missing or malformed), or one of
            another version.
        """
        redo = (
            "recompute it with python -m benchmarks.calibration --write-calibration (or "
            "rlcurves.calibrate on your runs, saving cal.to_dict())"
        )
        if not isinstance(d, dict):
            raise RLCurvesError(
                f"a calibration artifact is the dict of Calibration.to_dict (json.load of its "
                f"file), got {type(d).__name__}; {redo}"
            )
        try:
            version = int(d.get("version", 1))
        except (TypeError, ValueError):
            version = None
        if version != ARTIFACT_VERSION:
            raise RLCurvesError(
                f"calibration file version {d.get('version', 1)}, this rlcurves reads "
                f"{ARTIFACT_VERSION}: {redo}"
            )
        try:
            records = pd.DataFrame(d["records"])
            records["n_fit"] = records["n_fit"].astype(int)
            config = EnsembleConfig(**d["config"])
            shapes = None if d.get("shapes") is None else pd.DataFrame(d["shapes"])
            cal = cls(records, str(d["corpus"]), tuple(d["fractions"]), config, str(d["growth"]),
                      nu=float(d["nu"]), tau_factor=float(d["tau_factor"]),
                      shapes=shapes)  # fmt: skip
            cal.selection = pd.DataFrame(d.get("learned", {}).get("selection", []))
        except RLCurvesError:
            raise
        except KeyError as exc:
            raise RLCurvesError(
                f"the calibration artifact lacks the entry {exc} (a file cut short or edited?); "
                f"{redo}"
            ) from None
        except (AttributeError, TypeError, ValueError) as exc:
            raise RLCurvesError(f"the calibration artifact is malformed ({exc}); {redo}") from None
        return cal

    def __repr__(self) -> str:
        lo, hi = self.multipliers(self.supported_level(0.9), distance=0.7)
        return (
            f"Calibration({self.name}; {self.config.label}, g(d) = {self.growth}, t_{self.nu:g} "
            f"errors; tau "
            f"{self.tau:.3g}; 90% multipliers at d = 0.7: -{lo[0]:.3g} / +{hi[0]:.3g})"
        )


def _checked_fractions(fractions: Any) -> tuple[float, ...]:
    """``fractions=`` as a tuple of floats in (0, 1), at least one, or an RLCurvesError."""
    values = (fractions,) if isinstance(fractions, (int, float, np.number)) else fractions
    try:
        out = tuple(float(f) for f in values)
    except (TypeError, ValueError):
        out = ()
    if not out or any(not 0 < f < 1 for f in out):
        raise RLCurvesError(
            f"fractions= must be fractions of each run's compute in (0, 1), e.g. (0.25, 0.5); "
            f"got {fractions!r}"
        )
    return out


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise RLCurvesError(f"level= must be in (0, 1), e.g. 0.9 for 90%; got {level}")


_DEFAULT: dict[str, Calibration] = {}


def default_calibration(metric_kind: str = "validation") -> Calibration:
    """The shipped calibration on the bundled corpus's runs of one kind of metric, loaded once.

    Parameters
    ----------
    metric_kind : {"validation", "training reward"}
        What the forecast run logs: a held-out pass rate or accuracy (the default, the metric of
        the ScaleRL study), or the reward on the prompts being trained on. Each is calibrated on
        the corpus families of its kind only (:func:`rlcurves.datasets.list_corpus`'s
        ``metric_kind``): a training reward's forecasts are several times wider.
    """
    if metric_kind not in _SHIPPED:
        raise RLCurvesError(
            f"metric_kind={metric_kind!r} is not a kind the corpus calibrates; use one of "
            f"{list(_SHIPPED)}"
        )
    if metric_kind not in _DEFAULT:
        with resources.files("rlcurves.data").joinpath(_SHIPPED[metric_kind]).open("r") as fh:
            _DEFAULT[metric_kind] = Calibration.from_dict(json.load(fh))
    return _DEFAULT[metric_kind]


def resolve_calibration(calibration: Calibration | str | None) -> Calibration:
    """``calibration`` as a :class:`Calibration`: None, the shipped one of validation runs; a kind
    of metric's name (``"validation"`` or ``"training reward"``), that kind's shipped one
    (:func:`default_calibration`); a :class:`Calibration`, itself."""
    if calibration is None:
        return default_calibration()
    if isinstance(calibration, str):
        if calibration not in _SHIPPED:
            raise RLCurvesError(
                f"calibration={calibration!r} names no kind of metric the corpus calibrates; use "
                f"one of {list(_SHIPPED)}, or a Calibration from rlcurves.calibrate(your_runs)"
            )
        return default_calibration(calibration)
    if not isinstance(calibration, Calibration):
        raise RLCurvesError(
            f"calibration must be a Calibration, a kind of metric ({list(_SHIPPED)}) or None, "
            f"got {type(calibration).__name__}"
        )
    return calibration


#: Words in a metric's name that say it is measured on the prompts being trained on, and words
#: that say it is measured on held-out ones (which win).
TRAINING_WORDS = ("train", "reward", "critic/score", "rollout")
EVALUATION_WORDS = ("val", "eval", "test")


def looks_like_training_reward(name: str | None) -> bool:
    """Whether a metric's name reads as a training reward: it holds a word of
    :data:`TRAINING_WORDS` (``train/reward_mean``, TRL's ``rewards/<function>/mean``, verl's
    ``critic/score/mean``) and none of :data:`EVALUATION_WORDS` (verl's
    ``val-core/GSM8K/reward/mean@1`` is a validation metric). A hint for a note, never a switch:
    the calibration used is always the one asked for."""
    n = (name or "").lower()
    return any(w in n for w in TRAINING_WORDS) and not any(w in n for w in EVALUATION_WORDS)


def training_reward_note(
    what: str,
    forecasts: str = "this interval is",
    fix: str = "pass calibration='training reward'",
) -> str:
    """The note for a metric that reads as a training reward (``what``: e.g. "the reward column
    'train/reward'") forecast on the default, validation calibration: ``forecasts`` names what is
    calibrated, ``fix`` what to pass, in the interface's words."""
    return (
        f"{what} reads as a training reward, and {forecasts} calibrated on validation pass rates "
        f"(the default), whose forecasts miss by several times less: for a training reward {fix}"
    )


def residual_sd(fit: SigmoidFit) -> float:
    """Unweighted residual sd over the fit window, dof-corrected."""
    res = fit.fit_reward - np.asarray(fit.predict(fit.fit_compute), dtype=float)
    return float(np.sqrt(np.sum(res**2) / max(fit.dof, 1)))


def level_target(compute: np.ndarray, reward: np.ndarray) -> float:
    """A finished run's level: the mean of its evaluations over the last 10% of its compute
    (:func:`rlcurves.ensemble.level_mask`)."""
    from .ensemble import level_mask

    c = np.asarray(compute, dtype=float)
    return float(np.mean(np.asarray(reward, dtype=float)[level_mask(c, float(c.max()))]))


def score_run(
    compute: np.ndarray,
    reward: np.ndarray,
    fraction: float,
    *,
    configs: tuple[EnsembleConfig, ...] = CONFIGS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    fit_kwargs: dict | None = None,
) -> list[dict[str, float]]:
    """Fit the first ``fraction`` of one finished run and record its forecast of the run's level
    under each setting of ``configs``.

    Returns one dict per setting with the columns of :attr:`Calibration.records` but ``run`` and
    ``family``, or raises RLCurvesError when the prefix cannot be fitted.
    """
    from .ensemble import assemble, members
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
        end = float(c.max())
        tails = tuple(dict.fromkeys(cfg.tail for cfg in configs))
        m = members(fit, np.array([end]), tails=tails, n_resamples=n_boot, seed=seed)
    observed = level_target(c, r)
    rows = []
    for cfg in configs:
        ens = assemble(m, cfg)
        rows.append(
            {
                "fraction": fraction,
                "tail": cfg.tail,
                "shrink": cfg.shrink,
                "error": observed - float(ens.mean[0]),
                "error_one": float(r[-1]) - float(ens.point[0]),
                "fit_var": float(ens.fit_var[0]),
                "noise_var": float(ens.noise_var[0]),
                "noise_var_one": float(ens.noise_var_one[0]),
                "distance": float(ens.distance[0]),
                "noise_sd": float(ens.noise_sd),
                "n_fit": int(fit.n),
                "w_power_law": float(ens.w_power_law[0]),
                "forecast": float(ens.mean[0]),
                "observed": observed,
            }
        )
    return rows


#: Where a running run's window is cut for its own backtests (:func:`window_records`).
WINDOW_SPLITS = (0.5, 0.7)


def window_records(
    compute: ArrayLike,
    reward: ArrayLike,
    run: str,
    *,
    splits: tuple[float, ...] = WINDOW_SPLITS,
    config: EnsembleConfig | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    fit_kwargs: dict | None = None,
    family: str = "sweep",
) -> pd.DataFrame:
    """Backtests of a run that is still running, within its own window: fit the first
    ``split`` of the compute seen so far and score the forecast of its level now, as
    :func:`score_run` scores a finished run (under ``config``, default the shipped
    calibration's). Records with the columns of :attr:`Calibration.records` (none when the
    window is too short to fit a split)."""
    config = default_calibration().config if config is None else config
    rows = []
    for f in splits:
        try:
            scored = score_run(
                compute, reward, f, configs=(config,), n_boot=n_boot, seed=seed,
                fit_kwargs=fit_kwargs,
            )  # fmt: skip
        except RLCurvesError:
            continue
        rows += [{"run": str(run), "family": family, **row} for row in scored]
    return pd.DataFrame(rows, columns=list(_RECORD_COLUMNS))


def run_seed(seed: int, run: str) -> int:
    """The seed of one run's resamples: ``seed`` and the run's name (so a run's records do not
    depend on which other runs are scored with it)."""
    return int(seed) * 1_000_003 + zlib.crc32(str(run).encode()) % 1_000_003


def score_runs(
    runs: dict[str, pd.DataFrame],
    *,
    compute: str = "compute",
    reward: str = "reward",
    family: str | dict[str, str] | None = None,
    fractions: tuple[float, ...] = FRACTIONS,
    configs: tuple[EnsembleConfig, ...] = CONFIGS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    progress: bool = True,
    **fit_kwargs: Any,
) -> pd.DataFrame:
    """The records of :func:`calibrate` (every run, fraction and setting), before anything is
    fitted to them: what the benchmark refits inside each fold."""
    rows = []
    why: dict[str, str] = {}  # why a run's prefix could not be scored (the first reason)
    items = list(runs.items())
    for label, frame in tqdm(items, desc="calibrate", disable=not progress):
        for col in (compute, reward):
            if col not in frame.columns:
                raise RLCurvesError(f"run {label!r} has no column {col!r}")
            values = pd.to_numeric(frame[col], errors="coerce").to_numpy(float)
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:  # the run would be left out of the calibration without a word
                raise RLCurvesError(
                    f"run {label!r} has {bad.size} missing, non-numeric or infinite {col!r} "
                    f"value(s) (rows {bad[:5].tolist()}{' ...' if bad.size > 5 else ''}); drop "
                    "those rows first (frame.dropna(subset=[...])), or read the run with "
                    "rlcurves.read_log, which cleans and reports them",
                    run=str(label),
                    column=col,
                )
        if isinstance(family, dict):
            fam = family.get(label, DEFAULT_FAMILY)
        else:
            fam = family or frame.attrs.get("family", DEFAULT_FAMILY)
        for f in fractions:
            try:
                scored = score_run(
                    frame[compute].to_numpy(float), frame[reward].to_numpy(float), f,
                    configs=configs, n_boot=n_boot, seed=run_seed(seed, label),
                    fit_kwargs=fit_kwargs,
                )  # fmt: skip
            except RLCurvesError as exc:
                why.setdefault(str(label), f"at fraction {f:g}: {exc}")
                continue
            rows += [{"run": str(label), "family": str(fam), **row} for row in scored]
    if not rows:
        first = next(iter(why.items()), None)
        raise RLCurvesError(
            "no run could be scored: runs need more evaluations"
            + (f" (run {first[0]!r} {first[1]})" if first else "")
        )
    return pd.DataFrame(rows, columns=list(_RECORD_COLUMNS))


def calibrate(
    runs: dict[str, pd.DataFrame] | pd.DataFrame,
    *,
    run: str = "run",
    compute: str = "compute",
    reward: str = "reward",
    family: str | dict[str, str] | None = None,
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
    family : str or dict, optional
        Which family each run belongs to: one name for all, or run -> family; default each
        frame's ``attrs["family"]`` (the corpus's frames carry theirs), else one family. With
        several families the scale is partially pooled across them and forecasts are for a new
        family unless :meth:`Calibration.for_family` says which.
    fractions : tuple of float
        Fit fractions of each run's final compute to score, each in (0, 1).
    n_boot : int
        Resamples per scored fit (the model part of the variance).
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
        runs; a 90% interval needs at least 19 of them (each 5% tail needs ``1 / 0.05 - 1``);
        with fewer the forecast uses the highest level they support and says so.

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
    (12, 0.846)
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
    fractions = _checked_fractions(fractions)
    check_seed(seed, allow_none=False)
    if not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        # fewer leaves the model part of every record's variance 0: a calibration too narrow
        raise RLCurvesError(f"n_boot= must be an integer >= 2 resamples, got {n_boot!r}")
    records = score_runs(
        runs, compute=compute, reward=reward, family=family, fractions=fractions,
        n_boot=n_boot, seed=seed, progress=progress, **fit_kwargs,
    )  # fmt: skip
    frames = {}
    for k, v in runs.items():
        frames[k] = pd.DataFrame({"compute": v[compute].to_numpy(), "reward": v[reward].to_numpy()})
        frames[k].attrs.update(v.attrs)
    shapes = shape_records(frames, family)
    return Calibration(records, name, tuple(fractions), shapes=shapes)


__all__ = [
    "Calibration",
    "calibrate",
    "choose",
    "default_calibration",
    "level_target",
    "load_corpus",
    "looks_like_training_reward",
    "resolve_calibration",
    "score_runs",
    "training_reward_note",
    "window_records",
]
