"""Forecast intervals calibrated on finished runs (split-conformal at the level of runs).

A bootstrap of one run's residuals cannot see what happens past its fit window: slow drift, a
plateau below the fitted ceiling, a sag. That information has to come from other runs. For each
finished run and each fit fraction ``f`` we fit the first ``f`` of its compute, forecast the mean
of its last ``n_eval`` evaluations, and score

    score = |forecast - observed| / scale,
    scale^2 = sd_fit^2 + noise_sd^2 / n_eval + noise_sd^2 * d,

where ``sd_fit`` is the sd of the run's own AR(1) parametric bootstrap curves at the target,
``noise_sd`` its residual sd (the evaluation noise of one point), and ``d`` the distance of the
target past the fit window in natural-log compute (``max(0, ln(C / C_fit_max))``; the same unit for
every run). The last term is the misspecification: a departure from the sigmoid that wanders like a
random walk in log compute, in units of the run's own noise, has a variance that grows linearly with
the distance (a term growing as ``d^2`` over-covered forecasts from a quarter of a run and
under-covered those from three quarters on the corpus; see ``benchmarks/calibration.py``).
The ``ceil((n + 1) * level)``-th smallest of the ``n`` scores, ``q``, makes ``forecast +- q *
scale`` cover at least ``level`` of the time for runs exchangeable with the calibration runs.
Scores of one run at several fractions are correlated; the quantile is taken over all scores
(so ``n`` counts scores) and :class:`Calibration` reports the number of runs too.

The library ships the scores of the corpus in ``rlcurves/data/curves/`` (13 exports, 12 distinct
verl runs of Qwen2.5-0.5B on GSM8K; see :func:`load_corpus`), recomputed by
``python -m benchmarks.calibration --write-calibration``. ``calibrate(runs)`` recomputes them from
a user's own finished runs; pass the result to :func:`rlcurves.forecast` (``calibration=``).
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
from tqdm.auto import tqdm

from .errors import RLCurvesError

if TYPE_CHECKING:
    from .result import SigmoidFit

FRACTIONS = (0.25, 0.5, 0.75)
N_EVAL = 5
N_BOOT = 200
CORPUS_NAME = "deepgrpo_gsm8k (12 verl runs, Qwen2.5-0.5B on GSM8K; rlcurves/data/curves)"
_SHIPPED = "calibration_corpus.json"
# family -> (files, step column, metric column, description)
FAMILIES = {
    "gsm8k": (
        ("deepgrpo_gsm8k_sweeps.csv", "deepgrpo_gsm8k_wallclock.csv"),
        "step",
        "12 verl runs of Qwen2.5-0.5B-Instruct on GSM8K (github.com/befocuss/Deep-GRPO)",
    ),
    "math": (
        ("cs336_grpo_math_qwen25math15b.csv",),
        "x",
        "17 GRPO runs of Qwen2.5-Math-1.5B on MATH (a CS336 assignment-5 solution)",
    ),
}


def load_corpus(family: str | None = None) -> dict[str, pd.DataFrame]:
    """The bundled real-run corpus: one frame per distinct run (columns ``compute``, ``reward``).

    Two families of finished RL runs, each file with its source in its header:

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
    family : {"gsm8k", "math"}, optional
        One family; default both (29 runs).
    """
    if family is not None and family not in FAMILIES:
        raise RLCurvesError(f"unknown family {family!r}; choose one of {list(FAMILIES)} or None")
    runs: dict[str, pd.DataFrame] = {}
    for fam, (files, step, _) in FAMILIES.items():
        if family is not None and fam != family:
            continue
        for filename in files:
            with resources.files("rlcurves.data").joinpath("curves", filename).open("r") as fh:
                df = pd.read_csv(fh, comment="#")
            for name, g in df.groupby("run", sort=True):
                if name in runs:
                    continue
                g = g.sort_values(step)
                frame = pd.DataFrame(
                    {
                        "compute": g[step].to_numpy(float),
                        "reward": g["metric"].to_numpy(float),
                    }
                )
                frame.attrs.update(source=f"rlcurves/data/curves/{filename}", name=name, family=fam)
                runs[str(name)] = frame
    return runs


@dataclass(eq=False)
class Calibration:
    """Conformal scores of forecasts on finished runs, and the interval scale they imply.

    Attributes
    ----------
    scores : numpy.ndarray
        ``|forecast - observed| / scale`` for every (run, fraction).
    runs : numpy.ndarray
        The run of every score.
    corpus : str
        What the runs were.
    n_eval : int
        Evaluations averaged at each run's end (the observed target).
    fractions : tuple of float
        Fit fractions scored.
    """

    scores: np.ndarray
    runs: np.ndarray
    corpus: str
    n_eval: int = N_EVAL
    fractions: tuple[float, ...] = FRACTIONS
    details: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of scores."""
        return int(self.scores.size)

    @property
    def n_runs(self) -> int:
        """Number of distinct runs."""
        return int(np.unique(self.runs).size)

    def quantile(self, level: float) -> float:
        """The conformal multiplier at ``level``: the ``ceil((n+1) level)``-th smallest score.

        ``inf`` when there are too few scores for that level (the interval is then unbounded).
        """
        if not 0 < level < 1:
            raise RLCurvesError(f"level must be in (0, 1), got {level}; e.g. 0.9 for 90%")
        k = math.ceil((self.n + 1) * level)
        if k > self.n:
            return math.inf
        return float(np.sort(self.scores)[k - 1])

    def without(self, run) -> Calibration:
        """The calibration with one run's scores left out (leave-one-run-out)."""
        keep = self.runs != run
        return Calibration(
            self.scores[keep], self.runs[keep], self.corpus, self.n_eval, self.fractions
        )

    @property
    def name(self) -> str:
        return f"{self.corpus}: {self.n} scores from {self.n_runs} runs"

    def to_dict(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "n_eval": self.n_eval,
            "fractions": list(self.fractions),
            "scores": [float(s) for s in self.scores],
            "runs": [str(r) for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(
            np.asarray(d["scores"], dtype=float),
            np.asarray(d["runs"]),
            str(d["corpus"]),
            int(d["n_eval"]),
            tuple(d["fractions"]),
        )

    def __repr__(self) -> str:
        q = {lv: self.quantile(lv) for lv in (0.5, 0.8, 0.9, 0.95)}
        qs = ", ".join(f"{lv:.0%}: {v:.3g}" for lv, v in q.items())
        return f"Calibration({self.name}; multipliers {qs})"


def default_calibration() -> Calibration:
    """The shipped calibration on the bundled corpus (:func:`load_corpus`)."""
    with resources.files("rlcurves.data").joinpath(_SHIPPED).open("r") as fh:
        return Calibration.from_dict(json.load(fh))


def forecast_scale(
    fit: SigmoidFit, at: np.ndarray, curves: np.ndarray, n_eval: int = N_EVAL
) -> np.ndarray:
    """The scale of the calibrated interval at ``at`` (see the module docstring).

    ``curves`` are bootstrap curves at ``at``, shape ``(n_samples, len(at))``.
    """
    at = np.atleast_1d(np.asarray(at, dtype=float))
    noise = residual_sd(fit)
    sd_fit = np.nanstd(curves, axis=0)
    c_max = float(np.max(fit.fit_compute))
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(at > c_max, np.log(np.maximum(at, c_max) / c_max), 0.0)
    return np.sqrt(sd_fit**2 + noise**2 / n_eval + noise**2 * _growth(d))


def _growth(d: np.ndarray) -> np.ndarray:
    """Variance of the misspecification term, in units of the residual variance, at distance d."""
    return d


def residual_sd(fit: SigmoidFit) -> float:
    """Unweighted residual sd over the fit window, dof-corrected."""
    res = fit.fit_reward - np.asarray(fit.predict(fit.fit_compute), dtype=float)
    return float(np.sqrt(np.sum(res**2) / max(fit.dof, 1)))


def score_run(
    compute: np.ndarray,
    reward: np.ndarray,
    fraction: float,
    *,
    n_eval: int = N_EVAL,
    n_boot: int = N_BOOT,
    seed: int = 0,
    fit_kwargs: dict | None = None,
) -> dict[str, float]:
    """Fit the first ``fraction`` of one finished run and score its forecast of the run's end.

    Returns a dict with ``score``, ``forecast``, ``observed``, ``scale``, ``sd_fit``, ``noise_sd``,
    ``distance`` (log compute past the fit window), or raises RLCurvesError when the prefix
    cannot be fitted.
    """
    from .bootstrap import bootstrap
    from .fit import fit_sigmoid

    c = np.asarray(compute, dtype=float)
    r = np.asarray(reward, dtype=float)
    order = np.argsort(c, kind="stable")
    c, r = c[order], r[order]
    if c.size < n_eval + 8:
        raise RLCurvesError(f"a run needs at least {n_eval + 8} evaluations to be scored")
    fit_to = fraction * float(c.max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(c, r, max_compute=fit_to, **(fit_kwargs or {}))
        boot = bootstrap(fit, n_boot, kind="ar1", seed=seed, progress=False)
    tail_c, tail_r = c[-n_eval:], r[-n_eval:]
    curves = boot.curves(tail_c)
    mean_curve = curves.mean(axis=1)
    pred = float(np.mean(fit.predict(tail_c)))
    observed = float(np.mean(tail_r))
    scale = float(np.mean(forecast_scale(fit, tail_c, curves, n_eval)))
    return {
        "fraction": fraction,
        "score": abs(pred - observed) / scale,
        "forecast": pred,
        "observed": observed,
        "scale": scale,
        "sd_fit": float(np.std(mean_curve)),
        "noise_sd": residual_sd(fit),
        "distance": float(np.log(tail_c.mean() / fit.fit_compute.max())),
    }


def calibrate(
    runs: dict[str, pd.DataFrame] | pd.DataFrame,
    *,
    run: str = "run",
    compute: str = "compute",
    reward: str = "reward",
    fractions: tuple[float, ...] = FRACTIONS,
    n_eval: int = N_EVAL,
    n_boot: int = N_BOOT,
    seed: int = 0,
    name: str = "user runs",
    progress: bool = True,
    **fit_kwargs: Any,
) -> Calibration:
    """Calibrate forecast intervals on finished runs (split-conformal, see the module docstring).

    Parameters
    ----------
    runs : dict of DataFrame, or DataFrame
        Finished runs: a dict of frames, or one long frame with a ``run`` column.
    run, compute, reward : str
        Column names.
    fractions : tuple of float
        Fit fractions of each run's final compute to score, each in (0, 1).
    n_eval : int
        Evaluations averaged at each run's end (the observed target).
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
        Pass it to ``rlcurves.forecast(fit, at, calibration=...)``.
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
                    n_eval=n_eval,
                    n_boot=n_boot,
                    seed=seed + i,
                    fit_kwargs=fit_kwargs,
                )
            except RLCurvesError:
                continue
            rows.append({"run": label, **row})
    if not rows:
        raise RLCurvesError("no run could be scored: runs need more evaluations")
    details = pd.DataFrame(rows)
    return Calibration(
        details["score"].to_numpy(float),
        details["run"].to_numpy(),
        name,
        n_eval,
        tuple(fractions),
        details,
    )


__all__ = ["Calibration", "calibrate", "default_calibration", "forecast_scale", "load_corpus"]
