"""What finished runs say about the rest of a run: the gain still to come, declines, late take-offs.

A run whose own data leave its curve open (a few evaluations, or a run that has not taken off
yet) cannot be forecast from its fit: nothing in four points says where the ceiling is. The corpus
can: for every finished run and each fraction ``f`` of its budget, the **level it had reached**
(the mean of its evaluations over the last 10% of compute up to ``f`` times its budget,
:func:`rlcurves.ensemble.level_mask`) and the **level it ended at**. Their difference, as a share
of the headroom left (``h = (final - reached) / (1 - reached)`` for a metric in [0, 1]), is the
gain still to come: negative when the run declined. These records are what
:class:`rlcurves.calibrate.Calibration` makes its prior predictive from, with the same run-level,
per-tail, distance-local conformal machinery as every other forecast (:mod:`rlcurves.conformal`;
the "distance" here is ``ln(1 / f)``): a run at fraction ``f`` that has reached level ``L`` ends
at ``L + (1 - L) h``, ``h`` distributed as the corpus's runs' near ``f``. Its lower side is the
run's own level less the declines the corpus shows at the calibrated tail.

Each run's record also holds the ``B`` of the sigmoid fitted to the whole run
(:func:`run_efficiency`): what bounds the gain of a run flat for longer than any corpus run was.

Also here: :func:`late_takeoffs`, how often a run that was flat at a fraction of its budget took
off afterwards (per family): the late-bloomer risk a sweep's stop decisions trade against.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .ensemble import level_mask

#: The fractions of a finished run's budget at which its reached level is recorded.
SHAPE_FRACTIONS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: A run "has taken off" once its level has risen above its first evaluations' by more than this
#: many standard errors of their difference (noise from successive differences): fixed, not tuned.
TAKEOFF_SE = 3.0
SHAPE_COLUMNS = (
    "run", "family", "fraction", "n_eval", "reached", "final", "start", "taken_off", "B"
)  # fmt: skip


def reached_level(compute: np.ndarray, reward: np.ndarray, end: float) -> float:
    """The level a run had reached at ``end``: the mean of its evaluations in the last 10% of
    compute up to ``end`` (the last evaluation when none falls there)."""
    c, r = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    upto = c <= end * (1 + 1e-12)
    mask = level_mask(c[upto], end)
    return float(np.mean(r[upto][mask])) if mask.any() else float(r[upto][-1])


def took_off(reward_so_far: np.ndarray) -> bool:
    """Whether a run has taken off: the best mean of three successive evaluations so far (the
    latest three among them: a run that rose and fell back has taken off too) above the mean of
    its first three by more than :data:`TAKEOFF_SE` standard errors of such a difference (the
    evaluation noise from successive differences of what it has so far). Means of three on
    both sides: a level from a single evaluation, compared at a mean's standard error, read 22
    of 40 flat simulated runs as taken off (tests/test_shapes.py)."""
    r = np.asarray(reward_so_far, dtype=float)
    if r.size < 2:
        return False
    m = min(3, r.size)
    start = float(np.mean(r[:m]))
    best = float(np.max(np.convolve(r, np.ones(m) / m, mode="valid")))
    sd = float(np.std(np.diff(r), ddof=1) / math.sqrt(2)) if r.size >= 3 else abs(r[1] - r[0])
    return best - start > TAKEOFF_SE * max(sd * math.sqrt(2.0 / m), 1e-9)


def shape_records(runs: dict[str, pd.DataFrame], family: str | dict | None = None) -> pd.DataFrame:
    """For every finished run and each fraction of :data:`SHAPE_FRACTIONS` with at least one
    evaluation: the level reached there, the level the run ended at, its first evaluations'
    level, whether it had taken off (:func:`took_off`) and the efficiency ``B`` of the sigmoid
    fitted to the whole run (:func:`run_efficiency`). ``runs`` maps names to frames with
    ``compute`` and ``reward``; a frame's ``attrs["family"]`` names its family (or ``family``:
    one name or run -> name)."""
    rows = []
    for name, frame in runs.items():
        c = frame["compute"].to_numpy(float)
        r = frame["reward"].to_numpy(float)
        order = np.argsort(c, kind="stable")
        c, r = c[order], r[order]
        budget = float(c.max())
        if isinstance(family, dict):
            fam = family.get(name, "runs")
        else:
            fam = family or frame.attrs.get("family", "runs")
        final = reached_level(c, r, budget)
        b = run_efficiency(c, r)
        for f in SHAPE_FRACTIONS:
            end = f * budget
            n = int(np.sum(c <= end * (1 + 1e-12)))
            if n < 1:
                continue
            reached = reached_level(c, r, end)
            rows.append(
                {"run": str(name), "family": str(fam), "fraction": f, "n_eval": n,
                 "reached": reached, "final": final, "start": float(np.mean(r[: min(3, n)])),
                 "taken_off": took_off(r[:n]), "B": b}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=list(SHAPE_COLUMNS))


def run_efficiency(compute: np.ndarray, reward: np.ndarray) -> float:
    """``B`` of the sigmoid fitted to a whole finished run (NaN when the fit fails or did not
    converge): how steeply a curve of its kind rises in log compute, which bounds what a run
    that has not risen yet can gain over a multiple of compute
    (:meth:`rlcurves.calibrate.Calibration.prior_predictive`)."""
    import warnings

    from .errors import RLCurvesError
    from .fit import fit_sigmoid

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_sigmoid(np.asarray(compute, dtype=float), np.asarray(reward, dtype=float))
    except (RLCurvesError, FloatingPointError, np.linalg.LinAlgError):
        return math.nan
    b = float(fit.B)
    return b if math.isfinite(b) and b > 0 and fit.converged else math.nan


def headroom_gain(reached: np.ndarray, final: np.ndarray, top: float = 1.0) -> np.ndarray:
    """The gain still to come as a share of the headroom left, ``(final - reached) / (top -
    reached)`` (negative: a decline)."""
    reached = np.asarray(reached, dtype=float)
    return (np.asarray(final, dtype=float) - reached) / np.maximum(top - reached, 1e-6)


def late_takeoffs(records: pd.DataFrame, fractions=(0.1, 0.25, 0.5), gain: float = 0.1) -> list:
    """How often a run that had not taken off at a fraction of its budget ended more than
    ``gain`` above the level it had then, per family and pooled: rows ``family, fraction,
    flat`` (runs not taken off), ``bloomed`` (of them, the late bloomers), ``rate``."""
    out = []
    for f in fractions:
        at = records[np.isclose(records["fraction"], f)]
        for fam, g in [*at.groupby("family", sort=True), ("pooled", at)]:
            flat = g[~g["taken_off"].astype(bool)]
            bloomed = int(np.sum(flat["final"] - flat["reached"] > gain))
            out.append({"family": fam, "fraction": f, "runs": len(g), "flat": len(flat),
                        "bloomed": bloomed,
                        "rate": bloomed / len(flat) if len(flat) else math.nan})  # fmt: skip
    return out


__all__ = [
    "SHAPE_FRACTIONS",
    "headroom_gain",
    "late_takeoffs",
    "reached_level",
    "run_efficiency",
    "shape_records",
    "took_off",
]
