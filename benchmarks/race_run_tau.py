"""Misspecification per run in a race (issue 43, item 3): one run that misbehaves, and the sweep.

Race refits the forecasts' misspecification scale tau on backtests of the sweep's own runs within
their windows (``misspecification="sweep"``). One run whose backtests miss far (a decline, a
collapse) then sets it for every run. ``misspecification="run"`` lets any run be atypical (prior
probability :data:`rlcurves.calibrate.ATYPICAL_SHARE`) with a tau of its own
(:meth:`rlcurves.calibrate.Calibration.tau_by_run`). This benchmark measures both on every sweep
of the corpus, each calibrated leave-one-family-out as in ``benchmarks.race_corpus``:

1. **The scales.** Each sweep cut at 30% and 50% of its budget, one report: the sweep's tau, the
   tau each run's window backtests ask for alone (a family of their own under the calibration's
   prior), the typical runs' tau and the largest run's tau with ``"run"``, which runs are
   atypical (probability > 0.5), and the median 90% interval width of the other runs either way.
2. **The replay.** Race's defaults on every sweep (issue 43's protocol, ``benchmarks.race_corpus``,
   forecast seed set 0) with each setting, the refits shared: winners kept, compute used, the
   runs ending more than 0.05 behind stopped by 40% of the budget.

Run: python -m benchmarks.race_run_tau [--only NAME] (about 10 minutes on 2 cores; the results go
to benchmarks/results/race_run_tau.json and the tables are printed.)
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

RESULTS = Path(__file__).parent / "results"
CUTS = (0.3, 0.5)
MODES = ("sweep", "run")


def scales(sweep, calibration, fraction: float) -> dict:
    """One report of ``sweep`` cut at ``fraction`` of its budget under each setting: the taus
    and the median interval width of the runs that are not atypical."""
    from rlcurves import Race
    from rlcurves.race import _columns, _concat

    out: dict = {"fraction": fraction}
    odd: list[str] = []
    for mode in ("run", "sweep"):  # "run" first: its atypical runs are left out of both widths
        race = Race(sweep.budget, calibration=calibration, misspecification=mode)
        for k, df in sweep.runs.items():
            part = df[df["compute"] <= fraction * sweep.budget]
            if len(part):
                race.update(k, part["compute"].to_numpy(), part["reward"].to_numpy())
        rep = race.report()
        if mode == "run":
            odd = sorted(k for k, p in rep.atypical.items() if p > 0.5)
            taus = {
                k: float(np.ravel(f.info["tau"])[0])
                for k, f in rep.forecasts.items()
                if f.predictive is not None and "tau" in f.info
            }
            out["atypical"] = {k: round(float(p), 3) for k, p in rep.atypical.items()}
            out["odd"] = odd
            out["run_taus"] = taus
            windowed = [e for e in race._entries.values() if e.window is not None]
            out["alone"] = {
                e.name: race._calibration().tau_with(_concat([_columns(e)])) for e in windowed
            }
        others = rep.table[~rep.table["run"].isin(odd)]
        width = (others["upper"] - others["lower"]).dropna()
        out[mode] = {
            "tau": rep.tau,
            "median_width_others": float(width.median()) if len(width) else None,
        }
    return out


def replay(sweeps, cals) -> dict:
    """Race's defaults under each setting on every sweep, the refits shared."""
    from benchmarks.race_corpus import DEFAULT, far_behind, oracle, summarize
    from benchmarks.race_replay import replay_race

    oracle_compute = float(np.mean([oracle(s).compute_fraction for s in sweeps]))
    out = {m: [] for m in MODES}
    for s in tqdm(sweeps, desc="replay"):
        cache: dict = {}
        index = {k: i for i, k in enumerate(s.runs)}
        for mode in MODES:
            kws = {
                "calibration": cals[s.family],
                "alpha": DEFAULT[0],
                "require_identified": DEFAULT[1],
                "confirm": DEFAULT[2],
                "min_points": DEFAULT[3],
                "misspecification": mode,
            }
            out[mode].append(replay_race(s, kws, cache, index)[0])
    rows = {m: summarize(o, sweeps, oracle_compute) for m, o in out.items()}
    for m in MODES:
        rows[m]["far_behind"] = {s.name: far_behind(s) for s in sweeps}
    return rows


def moved(cut: dict) -> bool:
    """Whether the per-run tau moved the typical runs' tau by more than 10% either way."""
    one, own = cut["sweep"]["tau"], cut["run"]["tau"]
    return abs(own - one) > 0.1 * one


def scale_table(res: dict, moved_only: bool = False) -> str:
    """The scales at each cut (with ``moved_only``, the cuts where the typical runs' tau moved
    by more than 10%)."""
    lines = [
        "| sweep | cut | sweep's tau | runs' own taus (alone) | with `\"run\"`: typical tau | "
        "largest run tau | atypical runs | median width of the others: sweep / run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, cuts in res["scales"].items():
        for c in cuts:
            if moved_only and not moved(c):
                continue
            alone = sorted(c["alone"].values())
            a = f"{alone[0]:.3f}-{alone[-1]:.3f}" if alone else "-"
            big = max(c["run_taus"].values(), default=float("nan"))
            ws, wr = c["sweep"]["median_width_others"], c["run"]["median_width_others"]
            w = "-" if ws is None or wr is None else f"{ws:.3f} / {wr:.3f}"
            lines.append(
                f"| {name} | {c['fraction']:.0%} | {c['sweep']['tau']:.3f} | {a} | "
                f"{c['run']['tau']:.3f} | {big:.3f} | {len(c['odd'])} | {w} |"
            )
    return "\n".join(lines)


def width_ratios(res: dict) -> dict:
    """Over every cut: the typical runs' median interval width with ``"run"`` over that with
    ``"sweep"`` (smallest, median, largest) and how many cuts moved the typical tau by more
    than 10%."""
    ratios = [
        c["run"]["median_width_others"] / c["sweep"]["median_width_others"]
        for cuts in res["scales"].values()
        for c in cuts
        if c["run"]["median_width_others"] and c["sweep"]["median_width_others"]
    ]
    cuts = [c for v in res["scales"].values() for c in v]
    return {
        "cuts": len(cuts),
        "moved": sum(moved(c) for c in cuts),
        "smallest": float(np.min(ratios)),
        "median": float(np.median(ratios)),
        "largest": float(np.max(ratios)),
    }


def odd_runs(res: dict, factor: float = 2.0) -> tuple[list[str], int]:
    """The runs whose window backtests alone ask for at least ``factor`` times the median of
    their sweep-mates' at some cut (``family/run``), and how many runs had backtests at all:
    the share behind :data:`rlcurves.calibrate.ATYPICAL_SHARE`."""
    odd, seen = set(), set()
    for name, cuts in res["scales"].items():
        family = name.split("/")[0]
        for c in cuts:
            for run, tau in c["alone"].items():
                seen.add(f"{family}/{run}")
                others = [v for k, v in c["alone"].items() if k != run]
                if others and tau >= factor * float(np.median(others)):
                    odd.add(f"{family}/{run}")
    return sorted(odd), len(seen)


def replay_table(res: dict) -> str:
    lines = [
        "| misspecification | winner kept (95% Wilson) | compute used | runs > 0.05 behind "
        "stopped by 40% |",
        "|---|---|---|---|",
    ]
    for m in MODES:
        r = res["replay"][m]
        lo, hi = r["kept_wilson"]
        lines.append(
            f'| `"{m}"` | {r["kept_winner"]:.0f} of {r["sweeps"]} ({lo:.2f}-{hi:.2f}) | '
            f"{r['compute_used']:.1%} | {r['far_behind_stopped_by_40']:.0f} of "
            f"{r['far_behind_runs']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only the sweeps whose name contains this")
    parser.add_argument("--out", default=str(RESULTS / "race_run_tau.json"), help="JSON results")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from benchmarks._common import machine
    from benchmarks.race_corpus import fold_calibrations, load_sweeps
    from rlcurves.calibrate import ATYPICAL_SHARE

    t0 = time.perf_counter()
    sweeps = load_sweeps()
    if args.only:
        sweeps = [s for s in sweeps if args.only in s.name]
    cals = fold_calibrations(list(dict.fromkeys(s.family for s in sweeps)))
    res: dict = {"machine": machine(), "atypical_share": ATYPICAL_SHARE, "scales": {}}
    for s in tqdm(sweeps, desc="scales"):
        res["scales"][s.name] = [scales(s, cals[s.family], f) for f in CUTS]
    print(scale_table(res), flush=True)
    print("\nwhere the typical runs' tau moved by more than 10%:")
    print(scale_table(res, moved_only=True), flush=True)
    print(f"the typical runs' median width, run / sweep: {width_ratios(res)}", flush=True)
    odd, seen = odd_runs(res)
    print(f"runs asking alone for 2x their sweep-mates' tau: {len(odd)} of {seen}: {odd}")
    res["replay"] = replay(sweeps, cals)
    print("\n" + replay_table(res))
    for m in MODES:
        print(f"\n{m}, per sweep:")
        for name, v in res["replay"][m]["per_sweep"].items():
            print(f"  {name}: regret {v['regret']:.3f}, compute {v['compute_used']:.0%}, stopped "
                  f"{ {k: round(x, 2) for k, x in (v['stopped_at'] or {}).items()} }")  # fmt: skip
    res["seconds"] = time.perf_counter() - t0
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2, default=float))
    print(f"\nwritten {args.out} ({res['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
