"""Replay finished real runs through ``Monitor`` as if they were running: does the stop advice
kill a winner, and how much compute does it save?

The setting of issue 27. Two families of real runs: GSM8K (12 verl runs of Qwen2.5-0.5B,
:func:`rlcurves.calibrate.load_corpus`) and MATH (17 GRPO runs of Qwen2.5-Math-1.5B,
``cs336_grpo_math_qwen25math15b.csv``). For every ordered pair of runs (run, baseline) within a
family: the baseline is the other run's final level (the mean of its evaluations over the last
10% of its steps, known only to its noise: :func:`rlcurves.decide.final_level`), the budget is
the run's own end, and the run is fed to a :class:`~rlcurves.monitor.Monitor` at 24 checkpoints
from 10% to 100% of its budget (one refit each). Each refit's advice comes from
:func:`rlcurves.decide.decide` and :class:`rlcurves.decide.Hysteresis`, exactly as in
``Monitor``. A run is a *clear winner* when its own final level ends above the baseline's by
more than 0.01, a *clear loser* when below by more than 0.01.

Reported: clear winners ever told to stop (any stop advice, wherever given; and by kind, with
a 95% Wilson interval), clear losers stopped before their budget and the median fraction of the
budget at which they are, and the compute saved (the fraction of the budget left when stopped,
summed over pairs). The forecast of a run at a checkpoint does not depend on the baseline, so
each run is refit 24 times and every pair reuses those refits.

Each run's forecasts are calibrated without it (``--calibration run``: the shipped calibration
less the run) and, in a second replay, without its whole family (``family``); the shipped
calibration was made on these same runs.

``--fit-thresholds`` sets the stop rule's schedule (the "too early" fraction and the p(above)
threshold from each fraction on) from the measured false stops, fraction by fraction (the
``by_fraction`` table it prints): over schedules of up to three steps whose threshold does not
fall with the fraction, the one that stops the most clear losers before their budget (then saves
the most compute on them, then is the simplest) while telling at most ``--alpha`` (default 0:
none) of the clear winners to stop. It is chosen leave-one-family-out (on GSM8K, scored on
MATH, and the reverse; the held-out family is also scored on its leave-one-family-out
forecasts: out of family twice over) and then on both families together, on the first
calibration's replay; ``--write`` stores the latter in ``rlcurves/data/stop_rule.json``
(:data:`rlcurves.decide.DEFAULT_RULE`) with the held-out figures beside it. The replay's own
table scores the rule Monitor ships (the fitted one only once ``--write`` made it so), and the
fit's choice is reported beside it. README's tables are
:func:`readme_table` and :func:`fit_table` of the results file (``tests/test_readme.py`` checks).

Run: python -m benchmarks.monitor_replay [--quick] [--fit-thresholds [--write]] [--simulate N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.signal import lfilter
from scipy.stats import binomtest
from tqdm.auto import tqdm

from rlcurves import sigmoid
from rlcurves.calibrate import default_calibration, load_corpus
from rlcurves.decide import (
    CONTINUE,
    DEFAULT_RULE,
    PEAKED,
    UNLIKELY_BASELINE,
    Decision,
    Hysteresis,
    PeakTest,
    StopRule,
    _tail_support,
    decide,
    final_level,
    first_stop,
    prob_above,
)
from rlcurves.forecast import Forecast
from rlcurves.monitor import Monitor, advises, identification_guard, identified

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
RULE_FILE = ROOT / "rlcurves" / "data" / "stop_rule.json"
CHECKPOINTS = np.linspace(0.1, 1.0, 24)
PEAK_DROPS = (0.01, 0.015, 0.02, 0.03)  # the smallest falls called a peak, measured below
TAIL = 0.1  # a run's final level: the mean over its last 10% of steps
CLEAR = 0.01  # a clear winner (loser) ends above (below) the baseline by more than this
N_SAMPLES = 500
COMMAND = "python -m benchmarks.monitor_replay --fit-thresholds --write"


# ---- the runs ---------------------------------------------------------------------------------
def families() -> dict[str, dict[str, pd.DataFrame]]:
    """The two families of real runs, by name (both ship in ``rlcurves/data/curves``)."""
    return {f: load_corpus(family=f) for f in ("gsm8k", "math")}


# ---- one run, refit at every checkpoint --------------------------------------------------------
@dataclass
class Refit:
    """What one refit of a run gives every pair that run is in (the baseline enters later)."""

    fraction: float
    n_points: int
    forecast: Forecast | None
    ok: tuple[bool, str]
    fitted_now: float | None
    progress: float | None
    peak: PeakTest | None
    seconds: float


def may_advise(mon: Monitor, rep) -> tuple[bool, str]:
    """Whether the report's fit may advise a stop, as Monitor judges it: identified, or past
    its identification guard (``require_identified``; none by default)."""
    return advises(identified(rep.fit), rep.fraction, identification_guard(mon.require_identified))


def replay_run(
    frame: pd.DataFrame,
    *,
    n_samples: int = N_SAMPLES,
    seed: int = 0,
    calibration=None,
    every: bool = False,
) -> list[Refit]:
    """Feed ``frame`` to a Monitor at each checkpoint (budget = the run's end; ``every``: at
    each evaluation from 10% of it on, as a watch does); keep each refit."""
    c = frame["compute"].to_numpy(float)
    r = frame["reward"].to_numpy(float)
    budget = float(c.max())
    checkpoints = c[c >= 0.1 * budget] / budget if every else CHECKPOINTS
    # the peak test run down to the smallest fall of PEAK_DROPS; decide() judges it by the rule
    rule = DEFAULT_RULE.replace(peak_drop=min(PEAK_DROPS))
    mon = Monitor(budget, n_samples=n_samples, seed=seed, calibration=calibration, rule=rule)
    out, fed = [], 0
    for f in checkpoints:
        upto = int(np.searchsorted(c, f * budget, side="right"))
        if upto == fed:  # no new evaluation since the last checkpoint: no refit
            continue
        t0 = time.perf_counter()
        rep = mon.update(c[fed:upto], r[fed:upto])
        dt = time.perf_counter() - t0
        fed = upto
        ok = (False, "no fit") if rep.fit is None else may_advise(mon, rep)
        now = None if rep.fit is None else float(rep.fit.predict(rep.compute))
        progress = None if rep.fit is None else rep.compute / rep.fit.C_mid
        out.append(Refit(rep.fraction, rep.n_points, rep.forecast, ok, now, progress, rep.peak, dt))
    return out


def decisions(refits: list[Refit], baseline, rule: StopRule, peak: bool = True) -> list[Decision]:
    """The raw decision of each refit against ``baseline`` (what Monitor computes; without the
    peak test when ``peak`` is False)."""
    out = []
    for x in refits:
        if x.forecast is None:
            out.append(Decision("too early to tell", "no fit"))
            continue
        out.append(
            decide(x.forecast, fraction=x.fraction, n_points=x.n_points, identified=x.ok,
                   baseline=baseline, fitted_now=x.fitted_now, progress=x.progress,
                   peak=x.peak if peak else None, rule=rule)
        )  # fmt: skip
    return out


# ---- every ordered pair ------------------------------------------------------------------------
def held_out_calibration(name: str, fam: str, fams: dict, how: str):
    """The forecast's calibration without the replayed run ("run"), without its family
    ("family": every run of the corpus's other families) or the shipped
    one ("shipped"): the shipped calibration was made on these same runs, so the first two keep
    the replay out of sample."""
    cal = default_calibration()
    key = f"{fam}/{name}"  # the shipped calibration keys the corpus's runs family/run
    if how == "shipped" or key not in set(np.asarray(cal.runs).tolist()):
        return None
    if how == "run":
        return cal.without(key)
    return cal.of_families([f for f in cal.families if f != fam])


def replay(
    fams: dict[str, dict[str, pd.DataFrame]],
    *,
    n_samples: int = N_SAMPLES,
    calibration: str = "run",
    every: bool = False,
) -> dict:
    """Refit every run at every checkpoint; the levels and pair list to score rules on."""
    runs, levels, pairs = {}, {}, []
    items = [(fam, name, df) for fam, rs in fams.items() for name, df in rs.items()]
    for i, (fam, name, df) in enumerate(tqdm(items, desc="runs", leave=False)):
        cal = held_out_calibration(name, fam, fams, calibration)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[(fam, name)] = replay_run(df, n_samples=n_samples, seed=i, calibration=cal,
                                           every=every)  # fmt: skip
        levels[(fam, name)] = final_level(df["compute"], df["reward"], tail=TAIL)
    for fam, rs in fams.items():
        for a, b in itertools.permutations(rs, 2):
            pairs.append((fam, a, b))
    return {"runs": runs, "levels": levels, "pairs": pairs, "frames": fams}


def matrices(rep: dict, rule: StopRule) -> dict:
    """Arrays over (pair, refit) to score many schedules fast: p(above), the rule's other
    conditions (evaluations, an identified fit, a bounded forecast), the plateau verdicts (which
    do not depend on the baseline), the fractions, and the smallest one-sided tail each
    forecast's calibration supports (decide() lifts a lower threshold to it)."""
    pairs = rep["pairs"]
    k = max(len(v) for v in rep["runs"].values())
    shape = (len(pairs), k)
    p = np.full(shape, np.nan)
    gate = np.zeros(shape, bool)
    plateau = np.zeros(shape, bool)
    frac = np.full(shape, np.inf)
    progress = np.zeros(shape)
    support = np.zeros(shape)
    diff = np.empty(len(pairs))
    # decide() without a baseline, the gates and the peak test: on a plateau or not (against a
    # baseline a fall is reported, not acted on)
    loose = rule.replace(schedule=((0.0, 0.0),), min_progress=0.0)
    per_run = {}
    for key, refits in rep["runs"].items():
        raw = decisions(refits, None, loose, peak=False)
        per_run[key] = (
            np.array([d.advice == PEAKED for d in raw]),
            np.array([x.forecast is not None and x.forecast.predictive is not None and x.ok[0]
                      and x.n_points >= rule.min_points for x in refits]),
        )  # fmt: skip
    for i, (fam, a, b) in enumerate(pairs):
        refits = rep["runs"][(fam, a)]
        base = rep["levels"][(fam, b)]
        n = len(refits)
        plateau[i, :n], gate[i, :n] = per_run[(fam, a)]
        frac[i, :n] = [x.fraction for x in refits]
        progress[i, :n] = [0.0 if x.progress is None else x.progress for x in refits]
        support[i, :n] = [
            _tail_support(None if x.forecast is None else x.forecast.predictive) for x in refits
        ]
        p[i, :n] = [
            np.nan if x.forecast is None or x.forecast.predictive is None
            else prob_above(x.forecast, base) for x in refits
        ]  # fmt: skip
        diff[i] = rep["levels"][(fam, a)].info["mean"] - base.info["mean"]
    fam = np.array([x[0] for x in pairs])
    return {"p": p, "gate": gate, "plateau": plateau, "frac": frac, "progress": progress,
            "support": support, "diff": diff, "family": fam}  # fmt: skip


def first_stops(m: dict, rule: StopRule) -> tuple[np.ndarray, np.ndarray]:
    """For every pair, the first refit told to stop under ``rule`` (-1: never) and whether it
    was a p(above) stop (else peaked): decide() and Hysteresis, vectorized over pairs."""
    frac = m["frac"]
    thr = np.full(frac.shape, -np.inf)
    for f, t in rule.schedule:
        thr = np.where(frac >= f - 1e-12, t, thr)
    # decide() lifts a threshold below the tail the forecast's calibration supports to that tail
    support = m.get("support", np.zeros(frac.shape))
    thr = np.where((thr > 0) & (thr < support), support, thr)
    ok = m["gate"] & (frac >= rule.min_fraction - 1e-12) & (m["progress"] >= rule.min_progress)
    p = np.nan_to_num(m["p"], nan=1.0)
    by_p = ok & (p <= thr)
    raw = by_p | (ok & m["plateau"] & (p < rule.p_on_track))
    n = raw.shape[0]
    streak, since = np.zeros(n, int), np.zeros(n)
    first = np.full(n, -1)
    for j in range(raw.shape[1]):
        f = frac[:, j]
        since = np.where(raw[:, j] & (streak == 0), f, since)
        streak = np.where(raw[:, j], streak + 1, 0)
        hit = (streak >= rule.hold) & (f - since >= rule.hold_span - 1e-12) & (first < 0)
        first[hit] = j
    kind_p = np.zeros(n, bool)
    has = first >= 0
    kind_p[has] = by_p[np.flatnonzero(has), first[has]]
    return first, kind_p


def first_stops_exact(rep: dict, rule: StopRule) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_stops` through decide() and Hysteresis themselves (what Monitor runs)."""
    first, kind_p = [], []
    for fam, a, b in rep["pairs"]:
        ds = decisions(rep["runs"][(fam, a)], rep["levels"][(fam, b)], rule)
        h = Hysteresis.for_rule(rule)
        j = next((j for j, d in enumerate(ds) if h.update(d).stop), None)
        first.append(-1 if j is None else j)
        kind_p.append(j is not None and ds[j].advice == UNLIKELY_BASELINE)
    return np.array(first), np.array(kind_p)


def score(m: dict, rule: StopRule, mask: np.ndarray | None = None, stops=None) -> dict:
    """The replay's figures for one rule over the pairs in ``mask``."""
    mask = np.ones(m["diff"].size, bool) if mask is None else mask
    first, kind_p = first_stops(m, rule) if stops is None else stops
    first, kind_p = first[mask], kind_p[mask]
    diff = m["diff"][mask]
    frac = m["frac"][mask]
    stopped = first >= 0
    at = np.where(stopped, frac[np.arange(first.size), np.maximum(first, 0)], 1.0)
    win, lose = diff > CLEAR, diff < -CLEAR
    # a winner told to stop counts wherever it was told; a loser counts as stopped only before
    # its budget (a stop at the end saves nothing)
    saves = stopped & (at < 1 - 1e-9)
    return {
        "pairs": int(mask.sum()),
        "winners": int(win.sum()),
        "winners_stopped": int((win & stopped).sum()),
        "winners_stopped_ci": wilson(int((win & stopped).sum()), int(win.sum())),
        "winners_stopped_unlikely": int((win & stopped & kind_p).sum()),
        "winners_stopped_peaked": int((win & stopped & ~kind_p).sum()),
        "losers": int(lose.sum()),
        "losers_stopped": int((lose & saves).sum()),
        "losers_median_fraction": float(np.median(at[lose & saves])) if (lose & saves).any()
        else math.nan,
        "stopped": int(stopped.sum()),
        "saved": float(np.sum(1 - at)),
        "saved_losers": float(np.sum(1 - at[lose])),
    }  # fmt: skip


def wilson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a rate ``k / n`` (scipy's)."""
    if n == 0:
        return (math.nan, math.nan)
    ci = binomtest(k, n).proportion_ci(confidence_level=conf, method="wilson")
    return (float(ci.low), float(ci.high))


def schedules(grid_f, grid_t, n_steps: int = 3):
    """Schedules of up to ``n_steps`` (fraction, threshold) steps, thresholds not falling."""
    for k in range(1, n_steps + 1):
        for fs in itertools.combinations(grid_f, k):
            for ts in itertools.combinations_with_replacement(grid_t, k):
                yield tuple(zip(fs, ts, strict=True))


# Where a schedule may step (fractions of the budget) and the thresholds it may use: never above
# 0.05, so that a stop advice always means at most a 5% chance of ending above the baseline
# (larger ones stopped more losers on the corpus without more false stops, because the
# calibrated intervals are conservative there: a reason to tighten the intervals, not to tell a
# user with a 20% chance to stop).
GRID_F = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
GRID_T = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05)


_STOPS: dict = {}


def _cached_stops(m: dict, rule: StopRule):
    """:func:`first_stops`, kept per (replay, rule): the search scores each schedule on several
    subsets of the same pairs."""
    key = (id(m), rule)
    if key not in _STOPS:
        _STOPS[key] = first_stops(m, rule)
    return _STOPS[key]


def best_schedule(ms: list[dict], mask: np.ndarray, alpha: float, rule: StopRule) -> StopRule:
    """The rule whose schedule stops the most clear losers in ``mask`` over the replays ``ms``
    (then saves the most compute on them, then is the simplest) while telling at most ``alpha``
    of the clear winners to stop in every one of them."""
    best, key = None, None
    for sched in schedules(GRID_F, GRID_T):
        cand = rule.replace(schedule=sched)
        ss = [score(m, cand, mask, _cached_stops(m, cand)) for m in ms]
        if any(s["winners_stopped"] > alpha * s["winners"] for s in ss):
            continue
        k = (sum(s["losers_stopped"] for s in ss), round(sum(s["saved_losers"] for s in ss), 6),
             -len(sched))  # fmt: skip
        if key is None or k > key:
            best, key = cand, k
    return best


def fmt(s: dict) -> str:
    lo, hi = s.get("winners_stopped_ci", (math.nan, math.nan))
    w = f"{s['winners_stopped']}/{s['winners']} (95% Wilson {lo:.1%}-{hi:.1%})"
    lo = f"{s['losers_stopped']}/{s['losers']}"
    return (
        f"clear winners told to stop {w} ("
        f"{s['winners_stopped_unlikely']} as unlikely, {s['winners_stopped_peaked']} as peaked), "
        f"clear losers stopped {lo} ({_pct(s['losers_stopped'], s['losers'])}) at a median "
        f"{s['losers_median_fraction']:.0%} of the budget; compute saved "
        f"{s['saved'] / s['pairs']:.1%} of all pairs' budgets"
    )


def _pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "-"


def fit_thresholds(ms: dict[str, dict], masks: dict, alpha: float, rule: StopRule) -> dict:
    """Leave-one-family-out schedules and their held-out figures, then the schedule on all; each
    chosen on every replay of ``ms`` (one per calibration) at once and scored on each."""
    out = {}
    families_ = [f for f in masks if f != "all"]
    for held in families_ if len(families_) > 1 else []:
        train = masks["all"] & ~masks[held]
        fitted = best_schedule(list(ms.values()), train, alpha, rule)
        rec = {"schedule": fitted.schedule, "in_sample": {}, "held_out": {}}
        print(f"fit without {held}: {fitted.schedule}")
        for how, m in ms.items():
            rec["in_sample"][how] = score(m, fitted, train)
            rec["held_out"][how] = score(m, fitted, masks[held])
            print(f"  {CALIBRATIONS[how]} forecasts, in sample: {fmt(rec['in_sample'][how])}\n"
                  f"  {CALIBRATIONS[how]} forecasts, {held} held out: "
                  f"{fmt(rec['held_out'][how])}")  # fmt: skip
        out[f"{held} held out"] = rec
    fitted = best_schedule(list(ms.values()), masks["all"], alpha, rule)
    out["all"] = {
        "schedule": fitted.schedule,
        "in_sample": {how: score(m, fitted, masks["all"]) for how, m in ms.items()},
    }
    print(f"fit on all: {fitted.schedule}")
    for how, sc in out["all"]["in_sample"].items():
        print(f"  {CALIBRATIONS[how]} forecasts, in sample: {fmt(sc)}")
    return out


def by_fraction(m: dict, bins=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)) -> list[dict]:
    """The measured false stops fraction by fraction: for each stretch of the budget and each
    threshold of :data:`GRID_T`, the clear winners (and losers) with ``p(above) <= threshold``
    at some refit there whose fit may advise (evaluations, identified) -- before hysteresis."""
    win, lose = m["diff"] > CLEAR, m["diff"] < -CLEAR
    rows = []
    for lo, hi in itertools.pairwise(bins):
        inside = m["gate"] & (m["frac"] >= lo) & (m["frac"] < hi)
        p = np.where(inside, np.nan_to_num(m["p"], nan=1.0), 1.0)
        row = {"from": lo, "to": min(hi, 1.0), "winners": int((win & inside.any(1)).sum()),
               "losers": int((lose & inside.any(1)).sum())}  # fmt: skip
        for t in GRID_T:
            hit = (p <= t).any(axis=1)
            row[f"winners p<={t:g}"] = int((win & hit).sum())
            row[f"losers p<={t:g}"] = int((lose & hit).sum())
        rows.append(row)
    return rows


def print_by_fraction(rows: list[dict]) -> None:
    print("clear winners (losers) with p(above) <= threshold at a refit in each stretch of the "
          "budget, before hysteresis:")  # fmt: skip
    print("  budget      " + "".join(f"{'<= ' + format(t, 'g'):>14s}" for t in GRID_T))
    for r in rows:
        cells = "".join(
            f"{r[f'winners p<={t:g}']:>4d}/{r['winners']:<3d}({r[f'losers p<={t:g}']:>3d})  "
            for t in GRID_T
        )
        print(f"  {r['from']:.0%}-{r['to']:.0%}".ljust(14) + cells)


CALIBRATIONS = {"run": "leave-one-run-out", "family": "leave-one-family-out",
                "shipped": "shipped (in sample)"}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 resamples per forecast")
    ap.add_argument("--fit-thresholds", action="store_true", help="set the schedule (see above)")
    ap.add_argument("--alpha", type=float, default=0.0,
                    help="most clear winners told to stop when fitting (a share; 0)")  # fmt: skip
    ap.add_argument("--write", action="store_true", help=f"write {RULE_FILE.name}")
    ap.add_argument("--simulate", type=int, default=0, metavar="N",
                    help="also N simulated runs, scored for several min_progress")  # fmt: skip
    ap.add_argument("--calibration", nargs="+", choices=tuple(CALIBRATIONS),
                    default=["run", "family"],
                    help="the forecasts' calibration, one replay each: without the replayed run "
                    "(run), without its family (family), or the shipped one; the thresholds are "
                    "fitted on the first (default: run family)")  # fmt: skip
    ap.add_argument("--every-evaluation", action="store_true",
                    help="refit at every evaluation from 10%% on (as watch does), not at 24 "
                    "checkpoints: do the two agree (the hysteresis's span)?")  # fmt: skip
    ap.add_argument("--families", nargs="+", choices=("gsm8k", "math"),
                    help="only these families (default both)")  # fmt: skip
    ap.add_argument("--no-replay", action="store_true",
                    help="only the simulated runs of --simulate (the shipped rule)")  # fmt: skip
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.no_replay:
        return simulated_only(args.simulate or 100, time.perf_counter())
    fams = {f: v for f, v in families().items() if not args.families or f in args.families}
    reps, ms = {}, {}
    for how in args.calibration:
        print(f"replaying with the forecasts calibrated {CALIBRATIONS[how]}")
        reps[how] = replay(fams, n_samples=100 if args.quick else N_SAMPLES, calibration=how,
                           every=args.every_evaluation)  # fmt: skip
        ms[how] = matrices(reps[how], DEFAULT_RULE)
    first = args.calibration[0]
    m, rep = ms[first], reps[first]
    masks = {f: m["family"] == f for f in fams}
    masks["all"] = np.ones(m["diff"].size, bool)
    out = {"calibration": list(args.calibration), "shipped_rule": DEFAULT_RULE.to_dict()}
    # the measured false stops, fraction by fraction, that the schedule is chosen from
    out["by_fraction"] = {how: by_fraction(x) for how, x in ms.items()}
    for how in ms:
        print(f"forecasts calibrated {CALIBRATIONS[how]}: ", end="")
        print_by_fraction(out["by_fraction"][how])
    rule = DEFAULT_RULE
    if args.fit_thresholds:
        out["fit"] = fit_thresholds(ms, masks, args.alpha, DEFAULT_RULE)
        if args.write:  # the replay scores the rule Monitor ships: the fitted one once written
            rule = DEFAULT_RULE.replace(schedule=out["fit"]["all"]["schedule"], source=COMMAND)
            RULE_FILE.write_text(json.dumps({
                "command": COMMAND,
                "alpha": args.alpha,
                "calibrations": [CALIBRATIONS[h] for h in ms],
                "schedule": out["fit"]["all"]["schedule"],
                "held_out": {k: v["held_out"] for k, v in out["fit"].items() if k != "all"},
                "in_sample": out["fit"]["all"]["in_sample"],
            }, indent=1, default=float) + "\n")  # fmt: skip
            print(f"wrote {RULE_FILE}")
    out["rule"] = rule.to_dict()
    out["rule_words"] = rule.describe()
    out["replay"] = {}
    print(f"the rule: {rule.describe()}")
    for how, x in ms.items():
        # the rule through decide() and Hysteresis themselves; the vectorized copy the threshold
        # search uses must agree with it
        exact = first_stops_exact(reps[how], rule)
        fast = first_stops(x, rule)
        assert np.array_equal(exact[0], fast[0]) and np.array_equal(exact[1], fast[1])
        out["replay"][how] = {}
        print(f"forecasts calibrated {CALIBRATIONS[how]}:")
        for f in masks:
            sc = score(x, rule, x["family"] == f if f != "all" else None, exact)
            out["replay"][how][f] = sc
            print(f"  {f:6s} {sc['pairs']} pairs: {fmt(sc)}")
    secs = np.array([x.seconds for v in rep["runs"].values() for x in v[1:]])
    out["refit_seconds"] = {"median": float(np.median(secs)), "p90": float(np.quantile(secs, 0.9))}
    t = out["refit_seconds"]
    print(f"Monitor.update (refit, forecast, peak test): median {t['median']:.2f} s, 90th "
          f"percentile {t['p90']:.2f} s")  # fmt: skip
    out["peaks"] = peaks(rep, rule)
    path = _results_path(args)
    path.write_text(json.dumps(out, indent=2, default=float))  # again below with the simulation
    if args.simulate:
        sims = simulate(args.simulate)
        out["simulated"] = {}
        for mp in (0.0, 1.0, 1.5, 2.0, 3.0):
            s = score_simulated(sims, rule.replace(min_progress=mp))
            out["simulated"][str(mp)] = s
            print(f"simulated, min_progress {mp:g}: clear winners told to stop "
                  f"{s['winners_stopped']}/{s['winners']}, clear losers stopped "
                  f"{s['losers_stopped']}/{s['losers']}")  # fmt: skip
    out["seconds"] = time.perf_counter() - t0
    if not args.every_evaluation and not args.families:
        print(readme_table(out), fit_table(out), by_fraction_table(out), sep="\n\n")
    path.write_text(json.dumps(out, indent=2, default=float))
    print(f"wrote {path} ({out['seconds']:.0f} s)")
    return out


def _results_path(args) -> Path:
    RESULTS.mkdir(exist_ok=True)
    name = (
        "monitor_replay"
        + ("_every" if args.every_evaluation else "")
        + ("_" + "_".join(args.families) if args.families else "")
        + ("_quick" if args.quick else "")
    )
    return RESULTS / f"{name}.json"


def simulated_only(n_runs: int, t0: float) -> dict:
    """``--no-replay``: the shipped rule on ``n_runs`` simulated runs (what
    ``tests/test_decide.py`` pins), for several min_progress; ``results/monitor_simulated.json``."""
    sims = simulate(n_runs)
    out = {"rule": DEFAULT_RULE.to_dict(), "n_runs": n_runs, "simulated": {}}
    for mp in (0.0, 1.0, 1.5, 2.0, 3.0):
        s = score_simulated(sims, DEFAULT_RULE.replace(min_progress=mp))
        out["simulated"][str(mp)] = s
        print(f"simulated, min_progress {mp:g}: clear winners told to stop "
              f"{s['winners_stopped']}/{s['winners']}, clear losers stopped "
              f"{s['losers_stopped']}/{s['losers']}")  # fmt: skip
    out["seconds"] = time.perf_counter() - t0
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "monitor_simulated.json"
    path.write_text(json.dumps(out, indent=2, default=float))
    print(f"wrote {path} ({out['seconds']:.0f} s)")
    return out


FAMILY_WORDS = {"gsm8k": "GSM8K (12 verl runs)", "math": "MATH (17 GRPO runs)", "all": "both"}


def readme_table(out: dict) -> str:
    """README's table: the rule on every replay (calibration x family), from the results."""
    rows = [
        "| forecasts calibrated | family | pairs | clear winners told to stop (95% Wilson) "
        "| clear losers stopped | median fraction of the budget at the stop "
        "| compute saved (all pairs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for how, by_family in out["replay"].items():
        for f, s in by_family.items():
            lo, hi = s["winners_stopped_ci"]
            rows.append(
                f"| {CALIBRATIONS[how]} | {FAMILY_WORDS[f]} | {s['pairs']} | "
                f"{s['winners_stopped']} of {s['winners']} ({lo:.0%}-{hi:.0%}) | "
                f"{s['losers_stopped']} of {s['losers']} "
                f"({_pct(s['losers_stopped'], s['losers'])}) | "
                f"{_frac(s['losers_median_fraction'])} | {s['saved'] / s['pairs']:.1%} |"
            )
    return "\n".join(rows)


def fit_table(out: dict) -> str:
    """README's table of the schedules chosen without a family and scored on it (and the one
    chosen on both), on every replay."""
    rows = [
        "| chosen on | schedule: stop when p(above) <= | scored on | forecasts calibrated "
        "| clear winners told to stop | clear losers stopped | median fraction |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, v in out.get("fit", {}).items():
        sched = ", ".join(f"{t:g} from {f:.0%}" for f, t in v["schedule"])
        if key == "all":
            on, where, scores = "both", "both (in sample)", v["in_sample"]
        else:
            held = key.split()[0]
            on = next(FAMILY_WORDS[f] for f in FAMILY_WORDS if f not in ("all", held))
            where, scores = f"{FAMILY_WORDS[held]}, held out", v["held_out"]
        for how, s in scores.items():
            rows.append(
                f"| {on} | {sched} | {where} | {CALIBRATIONS[how]} | "
                f"{s['winners_stopped']} of {s['winners']} | "
                f"{s['losers_stopped']} of {s['losers']} | "
                f"{_frac(s['losers_median_fraction'])} |"
            )
    return "\n".join(rows)


def by_fraction_table(out: dict, thresholds=(0.005, 0.01, 0.02, 0.05)) -> str:
    """README's table of the measured false stops, fraction by fraction: per tenth of the budget,
    the clear winners (and losers) with p(above) <= each threshold at a refit there, before
    hysteresis; each cell gives every replay in turn ("leave-one-run-out / leave-one-family-out"
    by default)."""
    tables = out["by_fraction"]
    hows = list(tables)
    rows = [
        "| budget | clear winners refit there | "
        + " | ".join(f"winners (losers) with p(above) <= {t:g}" for t in thresholds)
        + " |",
        "|---|---|" + "---|" * len(thresholds),
    ]
    for i, r in enumerate(tables[hows[0]]):
        cells = []
        for t in thresholds:
            w = " / ".join(str(tables[h][i][f"winners p<={t:g}"]) for h in hows)
            lo = " / ".join(str(tables[h][i][f"losers p<={t:g}"]) for h in hows)
            cells.append(f"{w} ({lo})")
        rows.append(
            f"| {r['from']:.0%}-{r['to']:.0%} | {r['winners']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(rows)


def _frac(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:.0%}"


def peaks(rep: dict, rule: StopRule) -> dict:
    """The runs the peak test calls peaked (a fall, not a plateau; after the rule's other
    conditions and hysteresis) for each smallest fall of :data:`PEAK_DROPS`: where, their level
    then (the mean of the last tenth of the compute so far), the peak it fell from (that level
    plus the fall of the running median), their final level, and whether they recovered (ended
    above the level then by more than 0.01) and regained the peak (ended within 0.01 of it)."""
    out = {}
    for drop in PEAK_DROPS:
        r = rule.replace(peak_drop=drop)
        calls = []
        for (fam, name), refits in rep["runs"].items():
            fell = [
                Decision(PEAKED if x.ok[0] and x.n_points >= r.min_points
                         and x.fraction >= r.min_fraction and x.peak is not None
                         and x.peak.holds(r) else CONTINUE, "", fraction=x.fraction)
                for x in refits
            ]  # fmt: skip
            j = first_stop(fell, r)
            if j is None:
                continue
            df = rep["frames"][fam][name]
            c, y = df["compute"].to_numpy(float), df["reward"].to_numpy(float)
            at = refits[j].fraction * c.max()
            then = final_level(c, y, at=at).info["mean"]
            end = rep["levels"][(fam, name)].info["mean"]
            top = then + refits[j].peak.drop
            calls.append({"run": f"{fam}/{name}", "fraction": refits[j].fraction, "final": end,
                          "level_then": then, "peak_level": top,
                          "recovered": end > then + CLEAR,
                          "regained_peak": end >= top - CLEAR})  # fmt: skip
        out[str(drop)] = calls
        said = "; ".join(
            f"{x['run']} at {x['fraction']:.0%} (peak ~{x['peak_level']:.3f}, then "
            f"{x['level_then']:.3f}, final {x['final']:.3f}"
            f"{', RECOVERED' if x['recovered'] else ''}"
            f"{', REGAINED ITS PEAK' if x['regained_peak'] else ''})" for x in calls
        ) or "none"  # fmt: skip
        print(f"  peaked with a fall >= {drop:g}: {said}")
    return out


# ---- simulated runs ----------------------------------------------------------------------------
def simulated_run(rng: np.random.Generator, n: int = 40):
    """A simulated run (NOT real training) of ``n`` evaluations to its budget (1.0): a sigmoid
    with A in [0.5, 0.85], R0 in [0.03, 0.3], C_mid in [0.1, 0.5] of the budget (runs still near
    their midpoint well into the budget, which the real families rarely are), B in [1, 3];
    evaluation noise sd 0.015 and AR(1) drift (sd 0.006, rho 0.9). Returns compute, rewards and
    the true curve."""
    A, R0 = rng.uniform(0.5, 0.85), rng.uniform(0.03, 0.3)
    C_mid, B = rng.uniform(0.1, 0.5), rng.uniform(1, 3)
    c = np.linspace(0, 1, n + 1)[1:]
    mu = sigmoid(c, A=A, B=B, C_mid=C_mid, R0=R0)
    drift = lfilter([1], [1, -0.9], rng.normal(0, 0.006 * math.sqrt(1 - 0.81), n))
    return c, mu + drift + rng.normal(0, 0.015, n), mu


def simulate(n_runs: int = 100, *, seed: int = 2027, looks: int = 16, n_samples: int = 100):
    """Simulated runs watched at ``looks`` checkpoints from 10% to 100%, each against two
    baselines known to their noise (sd 0.005): its true final level minus 0.012-0.04 (the run
    wins) and plus 0.03-0.1 (it loses). Returns one record per run."""
    rng = np.random.default_rng(seed)
    out = []
    for i in tqdm(range(n_runs), desc="simulated runs", leave=False):
        c, r, mu = simulated_run(rng)
        true_end = mu[c >= 0.9].mean()
        noise = 0.005 * np.random.default_rng(i).standard_normal(2000)
        bases = (true_end - rng.uniform(0.012, 0.04), true_end + rng.uniform(0.03, 0.1))
        mon = Monitor(1.0, n_samples=n_samples, seed=i)
        refits, fed = [], 0
        for f in np.linspace(0.1, 1.0, looks):
            k = int(np.searchsorted(c, f, side="right"))
            rep = mon.update(c[fed:k], r[fed:k])
            fed = k
            fit = rep.fit
            refits.append(Refit(
                rep.fraction, rep.n_points, rep.forecast,
                (False, "no fit") if fit is None else may_advise(mon, rep),
                None if fit is None else float(fit.predict(rep.compute)),
                None if fit is None else rep.compute / fit.C_mid, rep.peak, 0.0,
            ))  # fmt: skip
        out.append({"refits": refits, "observed": final_level(c, r).info["mean"],
                    "winner_base": bases[0] + noise, "loser_base": bases[1] + noise})  # fmt: skip
    return out


def score_simulated(sims: list[dict], rule: StopRule) -> dict:
    """Clear winners (observed final level above the baseline by more than 0.01) told to stop
    and clear losers stopped, through decide() and Hysteresis."""
    s = {"winners": 0, "winners_stopped": 0, "losers": 0, "losers_stopped": 0}
    for x in sims:
        for kind, base in (("winners", x["winner_base"]), ("losers", x["loser_base"])):
            gap = x["observed"] - float(np.mean(base))
            if (gap > CLEAR) if kind == "winners" else (gap < -CLEAR):
                s[kind] += 1
                s[f"{kind}_stopped"] += (
                    first_stop(decisions(x["refits"], base, rule), rule) is not None
                )
    return s


if __name__ == "__main__":
    main()
