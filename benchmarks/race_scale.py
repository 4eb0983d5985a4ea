"""Race at sweep scale: the first ``report()`` and a report after one new evaluation, today's code
against the new, side by side in one run.

Simulated sweeps of 10, 100 and 1,000 runs race to a budget of 100, each run evaluated every 2%
of the budget and 25 evaluations in (half the budget). The curves (:func:`simulated_sweep`) are
the kinds a sweep holds, not only clean sigmoids: 70% ScaleRL sigmoids of random ceiling,
steepness and midpoint, 10% that peak and decline, 10% late take-offs (flat, then a sigmoid from
30-45% of the budget on) and 10% flat at their start level; noise sd 0.01-0.02.

For each size, each code (``today``: :mod:`benchmarks.race_reference`, ``rlcurves/race.py`` as
issue 41 left it, run with the solver as it was then, :func:`solver_for`: no memory of
repeated fits; ``new``: :class:`rlcurves.Race` with the
library's solver): a race fed every run's 25 evaluations, then the seconds of its first
``report()`` (every run fitted and forecast, then the decisions), and of its decisions alone
(``Race._decide``: the sweep's tau, every run's draws at it, the per-run and the sweep-level
rules, the table); then one run gets one evaluation more, at the next rung of the budget (55%),
so that the report refits it (a run is refit when its compute crosses a rung: an evaluation that
crosses none gives the cached report at once, with either code), and the seconds of that report.
Today's reports are compared with the new code's run with today's sweep-level decisions
(:func:`paired_class`, on the new code's refits: the shipped Race computes that risk exactly and
freezes a stopped run's draws, issue 43's item 4, and lets a run have its own misspecification
scale, item 3), field by field (:func:`same_reports`,
"identical") and by their decisions, with the largest relative and absolute differences of
their numbers (:func:`decisions`): each code refits on its own, with its own solver, so the
numbers differ in the last digits (tests/test_race_scale.py compares the two Races' reports
exactly on shared refits); and the shipped report's decisions with the paired one's
("exact_risk": who each stops, its risk: the exact risk and the per-run tau together). The
numba kernels are compiled (and a small race run) before the clock.

Today's code refits every run itself only where that takes a few minutes (``--today-up-to``,
default 100 runs). At 1,000 runs its first report would take about 10 minutes on 2 cores, most
of it the same refits as the new code's (the per-run forecasting is the same code in both), so
there it takes the new code's refits of the first report (:func:`timed_class`) and only its
decisions are timed; the report after one new evaluation refits that run itself.

``--profile N``: cProfile of each code's first report on N runs x 25 evaluations, by part (the
tables "where a first report's time goes").

Run: python -m benchmarks.race_scale [--sizes 10 100 1000] [--today-up-to 100] [--profile 300]
(about 25 minutes on 2 shared cores with the defaults; the results go to
benchmarks/results/race_scale.json and the tables are printed.)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import contextmanager
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


# what a refit sets on an entry (both codes): a donor's refits are handed to today's code
REFIT_FIELDS = ("fit", "forecast", "extra", "seed", "window", "identified", "why")


@contextmanager
def solver_for(code: str):
    """The solvers each code runs with inside the block: for ``today`` as they were before, the
    memory of repeated fits off (:data:`rlcurves.solver.SOLVED_KEEP` 0), the bounded fits
    polished by scipy's ``least_squares`` (:data:`rlcurves.solver.POLISH` ``"scipy"``) and the
    power law's fits in numpy and scipy (:data:`rlcurves.powerlaw.COMPILED` False); for ``new``
    the library's (the compiled polish, :mod:`rlcurves._trf`, which stops where scipy's does; the
    compiled power-law grid and search, :mod:`rlcurves._powerlaw_kernels`); the memory emptied on
    the way in and out (and a calibration's, below), so neither code finds the other's fits;
    and for ``today`` no memory of a calibration's draws and multipliers
    (:data:`rlcurves.calibrate.MEMO_KEEP` 0)."""
    import importlib

    from rlcurves import powerlaw, solver

    calibrate = importlib.import_module("rlcurves.calibrate")  # the package's name is a function
    keep, polish, compiled = solver.SOLVED_KEEP, solver.POLISH, powerlaw.COMPILED
    memo = calibrate.MEMO_KEEP

    def forget():
        solver._solved.clear()
        for cal in calibrate._DEFAULT.values():
            cal.__dict__.pop("_memo_cache", None)

    forget()
    try:
        if code == "today":
            solver.SOLVED_KEEP, solver.POLISH, powerlaw.COMPILED = 0, "scipy", False
            calibrate.MEMO_KEEP = 0
        yield
    finally:
        solver.SOLVED_KEEP, solver.POLISH, powerlaw.COMPILED = keep, polish, compiled
        calibrate.MEMO_KEEP = memo
        forget()


def race_classes() -> dict:
    """The two codes: ``today`` (the reference) and ``new`` (the library's Race)."""
    from benchmarks.race_reference import Race as TodayRace
    from rlcurves import Race

    return {"today": TodayRace, "new": Race}


def paired_class(cls):
    """``cls`` (the library's Race) deciding as today's code does: the sweep-level risk from one
    random pairing of the runs' draws (``rlcurves.decide.stop_set(method="paired")``), a stopped
    run's draws not frozen (issue 43, item 4), and one misspecification scale for every run of
    the sweep (``misspecification="sweep"`` unless another is asked for; the shipped default
    lets a run have its own, item 3), and today's identification guard: before 40% of the
    budget unless another is asked for (the shipped default has none), a run kept counting as a
    rival only once its fit is identified. Its reports are today's exactly on the same refits."""

    class Paired(cls):
        _risk_method = "paired"
        _freeze_stopped = False
        _rivals_identified_only = True

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("misspecification", "sweep")
            kwargs.setdefault("require_identified", 0.4)
            super().__init__(*args, **kwargs)

    return Paired


def timed_class(cls, donors: dict | None = None):
    """``cls`` timing the report's decisions (``_decide``: the sweep's tau, every run's draws,
    the rules, the table) apart from its refits; with ``donors`` (entry -> (key, refit fields),
    another race's refits) an entry whose key matches takes the donor's refit instead of
    refitting (the same code would compute the same fields)."""

    class Timed(cls):
        decide_s = 0.0

        def _decide(self):
            t0 = time.perf_counter()
            out = super()._decide()
            self.decide_s = time.perf_counter() - t0
            return out

        def _refit(self, e, i):
            key = tuple((n, self._rung(r), r.failed, r.ended) for n, r in e.runs.items())
            hit = None if donors is None else donors.get(e.name)
            if key == e.key or hit is None or hit[0] != key:
                return super()._refit(e, i)
            e.key, e.fresh = key, True
            for f, v in zip(REFIT_FIELDS, hit[1], strict=True):
                setattr(e, f, v)

    return Timed


def refits(race) -> dict:
    """Every entry's refit: entry -> (key, fields), to hand to another race."""
    return {
        name: (e.key, tuple(getattr(e, f) for f in REFIT_FIELDS))
        for name, e in race._entries.items()
    }


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
    """Compile the kernels and run every code path once, before the clock (and import what a
    report imports on first use: scipy.stats, for a forecast of a run that has not taken off)."""
    import scipy.stats  # noqa: F401

    runs = simulated_sweep(3, seed=99)
    for code, cls in race_classes().items():
        with solver_for(code):
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


def decisions(a, b) -> dict:
    """Whether two reports decide alike (who to stop, who leads, each entry's status and advice),
    and how far apart their numbers are (largest relative and absolute differences over the
    table's numbers, the risk, the alpha spent and the tau): the codes refit each on their own,
    and a fit solved twice is not always the same to the last bit (scipy's bounded polish
    rounds by where its arrays lie), so their numbers may differ in the last digits and a
    probability counted over draws by a draw now and then."""
    cols = ["run", "status", "advice"]
    same = (
        a.stop == b.stop
        and a.stopped_now == b.stopped_now
        and a.leader == b.leader
        and a.table[cols].equals(b.table[cols])
    )
    nums = ["compute", "mean", "lower", "upper", "p_best"]
    x = np.r_[a.table[nums].to_numpy(float).ravel(), a.risk, a.spent, a.tau or 0.0]
    y = np.r_[b.table[nums].to_numpy(float).ravel(), b.risk, b.spent, b.tau or 0.0]
    ok = np.isfinite(x) & np.isfinite(y)
    gap = np.abs(x[ok] - y[ok])
    rel = gap / np.maximum(np.abs(y[ok]), 1e-12)
    return {
        "same_decisions": bool(same),
        "max_relative_difference": float(rel.max(initial=0.0)),
        "max_absolute_difference": float(gap.max(initial=0.0)),
    }


def measure(n_runs: int, today_refits: bool, seed: int = 0) -> dict:
    """Seconds of the first report and of the report after one new evaluation, per code, and of
    their decisions (``_decide``) apart. Today's code refits every run itself when
    ``today_refits``; otherwise (1,000 runs) it takes the new code's refits of the first
    report (the same per-run code: :func:`timed_class`), so that only its first report's
    decisions are timed, and it refits the run with the new evaluation itself."""
    runs = simulated_sweep(n_runs, seed=seed)
    classes = race_classes()
    out: dict = {"runs": n_runs, "evaluations": N_EVALS, "today_refits": today_refits}
    classes["new_paired"] = paired_class(classes["new"])
    reports, donors = {}, None
    for code in ("new", "new_paired", "today"):
        given = donors if code == "new_paired" or not today_refits else None
        race = fed(timed_class(classes[code], given), runs)
        before = load()
        with solver_for("today" if code == "today" else "new"):
            first, rep1 = timed(race.report)
            first_decide = race.decide_s
            if code == "new":
                donors = refits(race)
            one_more(race, runs)
            again, rep2 = timed(race.report)
        out[code] = {
            "first_report_s": first,
            "first_decide_s": first_decide,
            "after_one_evaluation_s": again,
            "after_one_decide_s": race.decide_s,
            "load_before": before,
            "load_after": load(),
            "stopped_first": len(rep1.stopped_now),
        }
        reports[code] = (rep1, rep2)
        print(
            f"  {n_runs} runs, {code}: first report {first:.2f} s (decisions {first_decide:.2f} "
            f"s), after one new evaluation {again:.3f} s (decisions {race.decide_s:.3f} s); "
            f"load {before[0]:.1f}",
            flush=True,
        )
    # today's reports against the new code's with today's sweep-level risk (paired_class): the
    # same decisions; the shipped code's exact risk against that pairing: how far it moves them
    diffs = same_reports(reports["today"][0], reports["new_paired"][0]) + same_reports(
        reports["today"][1], reports["new_paired"][1]
    )
    out["identical"] = not diffs
    out["differences"] = diffs[:10]
    exact = [decisions(reports["new_paired"][i], reports["new"][i]) for i in (0, 1)]
    out["exact_risk"] = {
        "same_decisions": all(d["same_decisions"] for d in exact),
        "stopped_first": {c: reports[c][0].stopped_now for c in ("new", "new_paired")},
        "risk_first": {c: reports[c][0].risk for c in ("new", "new_paired")},
    }
    both = [decisions(reports["today"][i], reports["new_paired"][i]) for i in (0, 1)]
    out["same_decisions"] = all(d["same_decisions"] for d in both)
    out["max_relative_difference"] = max(d["max_relative_difference"] for d in both)
    out["max_absolute_difference"] = max(d["max_absolute_difference"] for d in both)
    t, n = out["today"], out["new"]
    if today_refits:
        out["first_report_speedup"] = t["first_report_s"] / n["first_report_s"]
    out["first_decide_speedup"] = t["first_decide_s"] / n["first_decide_s"]
    out["after_one_speedup"] = t["after_one_evaluation_s"] / n["after_one_evaluation_s"]
    n["after_one_over_first"] = n["after_one_evaluation_s"] / n["first_report_s"]
    return out


PARTS = {
    "sweep backtests in the runs' windows (calibrate.window_records)": "window_records",
    "forecasts at the budget (rlcurves.forecast)": "forecast",
    "the sweep-level rule (Race._decide)": "_decide",
}


def profile(n_runs: int, seed: int = 0, code: str = "today") -> dict:
    """cProfile of one code's first report on ``n_runs`` runs: seconds by part."""
    import cProfile
    import pstats

    race = fed(race_classes()[code], simulated_sweep(n_runs, seed=seed))
    prof = cProfile.Profile()
    before = load()
    t0 = time.perf_counter()
    with solver_for(code):
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
        "of which the backtest refits of both models (ensemble.members)": cum.get("members", 0.0),
        "of which the polish of fits that take the bounded solver (today scipy's "
        "least_squares, new the compiled _trf.bounded_polish)": cum.get("least_squares", 0.0)
        + cum.get("bounded_polish", 0.0),
        "of which the bootstraps (bootstrap.bootstrap)": cum.get("bootstrap", 0.0),
        "of which the baselines of the per-run rule (decide.sweep_baseline)": cum.get(
            "sweep_baseline", 0.0
        ),
        "of which the evaluations as frames (_Entry.points)": cum.get("points", 0.0),
    }
    return {
        "code": code,
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
    return f"{x:.3f} s" if x < 1 else f"{x:.1f} s"


def table(res: dict) -> str:
    """The side-by-side table: seconds per report, today's code and the new, and their ratio."""
    lines = [
        "| runs | first report: today | new | speedup | its decisions: today | new | "
        "new, deciding as today's | after one new evaluation: today | new | speedup | "
        "new: after one / first |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["sizes"]:
        t, n = r["today"], r["new"]
        paired = _s(r["new_paired"]["first_decide_s"]) if "new_paired" in r else "-"
        if r["today_refits"]:
            first, speedup = _s(t["first_report_s"]), f"{r['first_report_speedup']:.2f}x"
        else:
            first, speedup = "not run (refits: the new code's)", "-"
        lines.append(
            f"| {r['runs']:,} | {first} | {_s(n['first_report_s'])} | {speedup} | "
            f"{_s(t['first_decide_s'])} | {_s(n['first_decide_s'])} | {paired} | "
            f"{_s(t['after_one_evaluation_s'])} | {_s(n['after_one_evaluation_s'])} | "
            f"{r['after_one_speedup']:.0f}x | 1/{1 / n['after_one_over_first']:.0f} |"
        )
    return "\n".join(lines)


def profile_table(prof: dict) -> str:
    """Where a code's first report's time goes (cProfile, cumulative seconds by part)."""
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
    parser.add_argument(
        "--today-up-to",
        type=int,
        default=100,
        help="today's code refits every run itself up to this many runs (above: the new's refits)",
    )
    parser.add_argument("--profile", type=int, default=0, help="profile both codes on N runs")
    parser.add_argument("--out", default=str(RESULTS / "race_scale.json"))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    warm()
    res: dict = {"machine": machine(), "budget": BUDGET, "sizes": []}
    for n in args.sizes:
        res["sizes"].append(measure(n, today_refits=n <= args.today_up_to))
    if args.profile:
        res["profile"] = profile(args.profile, code="today")
        res["profile_new"] = profile(args.profile, code="new")
    res["seconds"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(res, indent=2, default=float))
    print(table(res))
    for key in ("profile", "profile_new"):
        if key in res:
            print(profile_table(res[key]))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
