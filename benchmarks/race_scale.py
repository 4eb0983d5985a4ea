"""Race at sweep scale: the first ``report()`` and a report after one new evaluation, today's code
against the new, side by side in one run.

Simulated sweeps of 10, 100 and 1,000 runs race to a budget of 100, each run evaluated every 2%
of the budget and 25 evaluations in (half the budget). The curves (:func:`simulated_sweep`) are
the kinds a sweep holds, not only clean sigmoids: 70% ScaleRL sigmoids of random ceiling,
steepness and midpoint, 10% that peak and decline, 10% late take-offs (flat, then a sigmoid from
30-45% of the budget on) and 10% flat at their start level; noise sd 0.01-0.02.

For each size, each code (``today``: :mod:`benchmarks.race_reference`, ``rlcurves/race.py`` at
the commit before the change; ``new``: :class:`rlcurves.Race`): a race fed every run's 25
evaluations, then the seconds of its first ``report()`` (every run fitted and forecast); then one
run gets one evaluation more, at the next rung of the budget (55%), so that the report refits it
(a run is refit when its compute crosses a rung: an evaluation that crosses none gives the cached
report at once, with either code), and the seconds of that report. Both codes' reports are
compared field by field (:func:`same_reports`): the new one must decide exactly as today's. The
numba kernels are compiled (and a small race run) before the clock.

``today`` runs only where it takes a few minutes (``--today-up-to``, default 100 runs): at
1,000 runs its first report would take about 10 minutes on 2 cores (1,000 refits, and the
sweep-level rule draws a matrix of every run's draws once per run: quadratic in the runs).

``--profile N``: cProfile of today's first report on N runs x 25 evaluations, by part (the
table "where a first report's time goes").

Run: python -m benchmarks.race_scale [--sizes 10 100 1000] [--today-up-to 100] [--profile 300]
(about 25 minutes on 2 shared cores with the defaults; the results go to
benchmarks/results/race_scale.json and the tables are printed.)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).parent / "results"
BUDGET = 100.0
N_EVALS = 25
SPACING = 0.02  # of the budget: 25 evaluations reach half of it
NEXT = 0.55  # the new evaluation: at the next rung (the 11th of 20), so its run is refit


def simulated_sweep(n_runs: int, *, seed: int = 0, n_evals: int = N_EVALS) -> dict:
    """``n_runs`` simulated runs: name -> (compute, reward) of their first ``n_evals``
    evaluations (every 2% of the budget; see the module docstring for the curves)."""
    from rlcurves import sigmoid

    rng = np.random.default_rng(seed)
    compute = BUDGET * SPACING * np.arange(1, n_evals + 1)
    runs = {}
    for i in range(n_runs):
        r0 = rng.uniform(0.02, 0.15)
        kind = rng.choice(["sigmoid", "decline", "late", "flat"], p=[0.7, 0.1, 0.1, 0.1])
        A, B, mid = rng.uniform(0.35, 0.85), rng.uniform(1.3, 3.0), rng.uniform(0.1, 0.5)
        if kind == "flat":
            curve = np.full(compute.size, r0)
        elif kind == "late":
            start = rng.uniform(0.3, 0.45) * BUDGET
            shifted = np.maximum(compute - start, 0.0)
            curve = np.where(
                shifted > 0, sigmoid(np.maximum(shifted, 1e-9), A, B, mid * BUDGET, r0), r0
            )
        else:
            curve = sigmoid(compute, A, B, mid * BUDGET, r0)
            if kind == "decline":
                peak = rng.uniform(0.25, 0.4) * BUDGET
                curve = curve - rng.uniform(0.2, 0.6) * np.maximum(compute - peak, 0) / BUDGET
        noise = rng.normal(0, rng.uniform(0.01, 0.02), compute.size)
        runs[f"run{i:04d}"] = (compute, np.clip(curve + noise, 0.0, 1.0))
    return runs


def race_classes() -> dict:
    """The two codes: ``today`` (the reference) and ``new`` (the library's Race)."""
    from benchmarks.race_reference import Race as TodayRace
    from rlcurves import Race

    return {"today": TodayRace, "new": Race}


def fed(race_class, runs: dict, **race_kws):
    """A race holding every run's evaluations."""
    race = race_class(BUDGET, **race_kws)
    for name, (compute, reward) in runs.items():
        race.update(name, compute, reward)
    return race


def one_more(race, runs: dict) -> None:
    """One evaluation more for the first run, at the next rung: the run's curve continued."""
    name, (compute, reward) = next(iter(runs.items()))
    slope = (reward[-1] - reward[-5]) / (compute[-1] - compute[-5])
    race.update(name, NEXT * BUDGET, float(np.clip(reward[-1] + slope * 5, 0, 1)))


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def warm() -> None:
    """Compile the kernels and run every code path once, before the clock."""
    runs = simulated_sweep(3, seed=99)
    for cls in race_classes().values():
        race = fed(cls, runs)
        race.report()
        one_more(race, runs)
        race.report()


def same_reports(a, b) -> list[str]:
    """What differs between two race reports (empty: the same decisions and numbers, exactly).

    The table (every column, every row, in order), who to stop, the leader, the risk and the
    alpha spent, the sweep's tau, the compute saved and each entry's forecast as used (its mean,
    interval, tau and scale, and its predictive draws) and its fit's parameters."""
    diffs = []
    try:
        pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
    except AssertionError as exc:
        diffs.append(f"table: {exc}")
    for attr in (
        "stop",
        "stopped_now",
        "leader",
        "risk",
        "spent",
        "tau",
        "tau_calibration",
        "tau_backtests",
        "compute_saved",
        "fraction_saved",
        "stop_compute",
        "budget",
        "level",
        "alpha",
        "tolerance",
        "higher_is_better",
    ):
        if getattr(a, attr) != getattr(b, attr):
            diffs.append(f"{attr}: {getattr(a, attr)!r} != {getattr(b, attr)!r}")
    if list(a.points) != list(b.points) or any(
        not a.points[k].equals(b.points[k]) for k in a.points
    ):
        diffs.append("points")
    if list(a.fits) != list(b.fits) or any(a.fits[k].params != b.fits[k].params for k in a.fits):
        diffs.append("fits")
    if list(a.forecasts) != list(b.forecasts):
        diffs.append(f"forecasts: {list(a.forecasts)} != {list(b.forecasts)}")
    for k in set(a.forecasts) & set(b.forecasts):
        fa, fb = a.forecasts[k], b.forecasts[k]
        for f in ("mean", "lower", "upper", "unbounded", "note"):
            if not np.array_equal(getattr(fa, f), getattr(fb, f)):
                diffs.append(f"forecast {k}: {f}")
        for f in ("tau", "scale"):
            if not np.array_equal(fa.info.get(f, np.nan), fb.info.get(f, np.nan), equal_nan=True):
                diffs.append(f"forecast {k}: info[{f!r}]")
        pa, pb = fa.predictive, fb.predictive
        if (pa is None) != (pb is None) or (
            pa is not None and not np.array_equal(pa.draws, pb.draws)
        ):
            diffs.append(f"forecast {k}: draws")
    return diffs


def measure(n_runs: int, codes: list[str], seed: int = 0) -> dict:
    """Seconds of the first report and of the report after one new evaluation, per code."""
    runs = simulated_sweep(n_runs, seed=seed)
    classes = race_classes()
    out: dict = {"runs": n_runs, "evaluations": N_EVALS}
    reports = {}
    for code in codes:
        race = fed(classes[code], runs)
        before = load()
        first, rep1 = timed(race.report)
        one_more(race, runs)
        again, rep2 = timed(race.report)
        out[code] = {
            "first_report_s": first,
            "after_one_evaluation_s": again,
            "load_before": before,
            "load_after": load(),
            "refit_after_one": int(
                sum(
                    r != s
                    for r, s in zip(rep1.table["n_points"], rep2.table["n_points"], strict=True)
                )
            ),
            "stopped_first": len(rep1.stopped_now),
        }
        reports[code] = (rep1, rep2)
        print(
            f"  {n_runs} runs, {code}: first report {first:.2f} s, after one new evaluation "
            f"{again:.3f} s (load {before[0]:.1f})",
            flush=True,
        )
    if len(reports) == 2:
        diffs = same_reports(reports["today"][0], reports["new"][0]) + same_reports(
            reports["today"][1], reports["new"][1]
        )
        out["identical"] = not diffs
        out["differences"] = diffs[:10]
        t, n = out["today"], out["new"]
        out["first_report_speedup"] = t["first_report_s"] / n["first_report_s"]
        out["after_one_speedup"] = t["after_one_evaluation_s"] / n["after_one_evaluation_s"]
    if "new" in out:
        n = out["new"]
        n["after_one_over_first"] = n["after_one_evaluation_s"] / n["first_report_s"]
    return out


PARTS = {
    "sweep backtests in the runs' windows (calibrate.window_records)": "window_records",
    "forecasts at the budget (rlcurves.forecast)": "forecast",
    "the sweep-level rule (Race._decide)": "_decide",
}


def profile(n_runs: int, seed: int = 0) -> dict:
    """cProfile of today's first report on ``n_runs`` runs: seconds by part."""
    import cProfile
    import pstats

    race = fed(race_classes()["today"], simulated_sweep(n_runs, seed=seed))
    prof = cProfile.Profile()
    before = load()
    t0 = time.perf_counter()
    prof.enable()
    race.report()
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats
    cum: dict[str, float] = {}
    for (_, _, func), (_, _, _, ct, _) in stats.items():
        cum[func] = max(cum.get(func, 0.0), ct)
    parts = {label: cum.get(func, 0.0) for label, func in PARTS.items()}
    inside = {
        "of which the sigmoid refits of the backtests (ensemble.backtest_errors)": cum.get(
            "backtest_errors", 0.0
        ),
        "of which fits that take the bounded solver (scipy least_squares)": cum.get(
            "least_squares", 0.0
        ),
        "of which the bootstraps (bootstrap.bootstrap)": cum.get("bootstrap", 0.0),
        "of which the baselines of the per-run rule (decide.sweep_baseline)": cum.get(
            "sweep_baseline", 0.0
        ),
        "of which the evaluations as frames (_Entry.points)": cum.get("points", 0.0),
    }
    return {
        "runs": n_runs,
        "evaluations": N_EVALS,
        "total_s": total,
        "profiled_s": sum(v for v in parts.values()),
        "parts_s": parts,
        "inside_s": inside,
        "load_before": before,
        "load_after": load(),
    }


def _s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.1f}"


def table(res: dict) -> str:
    """The side-by-side table: seconds per report, today's code and the new, and their ratio."""
    lines = [
        "| runs | first report: today | new | speedup | after one new evaluation: today | "
        "new | speedup | new: after one / first |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["sizes"]:
        t, n = r.get("today"), r["new"]
        first = f"{_s(t['first_report_s'])} s" if t else "not run"
        again = f"{_s(t['after_one_evaluation_s'])} s" if t else "not run"
        lines.append(
            f"| {r['runs']:,} | {first} | {_s(n['first_report_s'])} s | "
            f"{r['first_report_speedup']:.2f}x | {again} | {_s(n['after_one_evaluation_s'])} s | "
            f"{r['after_one_speedup']:.0f}x | 1/{1 / n['after_one_over_first']:.0f} |"
            if t
            else f"| {r['runs']:,} | {first} | {_s(n['first_report_s'])} s | - | {again} | "
            f"{_s(n['after_one_evaluation_s'])} s | - | 1/{1 / n['after_one_over_first']:.0f} |"
        )
    return "\n".join(lines)


def profile_table(prof: dict) -> str:
    """Where today's first report's time goes (cProfile, cumulative seconds by part)."""
    total = prof["total_s"]
    lines = ["| part | seconds | share |", "|---|---|---|"]
    for label, s in {**prof["parts_s"], **prof["inside_s"]}.items():
        lines.append(f"| {label} | {s:.1f} | {s / total:.0%} |")
    lines.append(f"| the whole first report (under cProfile) | {total:.1f} | 100% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from benchmarks._common import machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--today-up-to", type=int, default=100)
    parser.add_argument("--profile", type=int, default=0, help="profile today's code on N runs")
    parser.add_argument("--out", default=str(RESULTS / "race_scale.json"))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    warm()
    res: dict = {"machine": machine(), "budget": BUDGET, "sizes": []}
    for n in args.sizes:
        codes = ["today", "new"] if n <= args.today_up_to else ["new"]
        res["sizes"].append(measure(n, codes))
    if args.profile:
        res["profile"] = profile(args.profile)
    res["seconds"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(res, indent=2, default=float))
    print(table(res))
    if "profile" in res:
        print(profile_table(res["profile"]))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
