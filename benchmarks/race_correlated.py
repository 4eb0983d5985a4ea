"""Race with the error its runs share taken out (``Race(error_correlation=rho)``), on the corpus.

The forecast errors of runs in one sweep are correlated (``benchmarks.error_correlation``: an
intraclass correlation of about 0.4 for the training reward, 0.15 for validation pass rates), so
Race's comparisons, which take the runs' errors as independent, overstate the uncertainty of
their differences. This replays every sweep of the corpus (``benchmarks.race_corpus``'s protocol:
cut at the sweep's common budget, a report every 5% of it, forecasts calibrated without the
sweep's family, Race's other settings its defaults) with ``error_correlation`` set to

- 0: Race's default (the runs independent);
- the pooled intraclass correlation (0.2-0.5 of the budget) of the sweeps of the same kind of
  metric in the OTHER families (leave-one-family-out, clipped at 0: nothing of the sweep's own
  family is used);
- fixed values (0.2, 0.4), for the sensitivity.

and reports, per setting, the winners kept (Wilson interval over sweeps), the worst regret, the
compute used (overall and per kind of metric), the share of the oracle's saving captured and the
runs ending more than 0.05 behind stopped by 40% of the budget, as race_corpus does. The refits
do not depend on ``error_correlation`` and are shared between the settings.

``--simulated N``: the price when the errors are NOT correlated: N simulated near-tie sweeps of
independent runs (``benchmarks.race_alpha``'s, misspecified curves run through the real
forecasting pipeline), each raced with ``error_correlation`` 0 and the settings' fixed values;
the winners lost.

``--drawn N``: N sweeps per family drawn from the real GSM8K and MATH validation runs
(``benchmarks.race_sweeps``' sweeps of 3-8 runs, which were not run as one sweep: their errors
share less), raced with each error_correlation; the winners kept.

Run: python -m benchmarks.race_correlated [--simulated 100] [--drawn 100] [--out PATH]
(about 4 minutes, and about 15 more with --drawn 100)
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
FIXED = (0.2, 0.4)
POOLED = (0.2, 0.3, 0.4, 0.5)


def fold_correlations(sweeps) -> dict[str, float]:
    """Each family's error correlation: the pooled intraclass correlation (0.2-0.5 of the
    budget) of the other families' sweeps of its kind of metric, clipped at 0."""
    from benchmarks.error_correlation import MIN_RUNS, icc, standardized

    out = {}
    for kind in dict.fromkeys(s.kind for s in sweeps):
        r, _ = standardized(kind, sweeps)
        at = r[r["fraction"].isin(POOLED) & r["sweep"].notna() & np.isfinite(r["z"])]
        for fam in dict.fromkeys(s.family for s in sweeps if s.kind == kind):
            other = at[at["family"] != fam]
            groups = other["sweep"] + "@" + other["fraction"].astype(str)
            rho = icc(other["z"].to_numpy(float), groups, MIN_RUNS)
            out[fam] = float(max(rho, 0.0)) if np.isfinite(rho) else 0.0
    return out


def corpus(settings: dict[str, object]) -> dict:
    from benchmarks.race_corpus import (
        DEFAULT,
        by_kind,
        fold_calibrations,
        load_sweeps,
        oracle,
        summarize,
    )
    from benchmarks.race_replay import replay_race

    sweeps = load_sweeps()
    cals = fold_calibrations(list(dict.fromkeys(s.family for s in sweeps)))
    rhos = fold_correlations(sweeps)
    oracle_compute = float(np.mean([oracle(s).compute_fraction for s in sweeps]))
    grid = {k: [] for k in settings}
    alpha, guard, confirm, points = DEFAULT
    for s in tqdm(sweeps, desc="sweeps"):
        cache: dict = {}
        for label, rho in settings.items():
            r = rhos[s.family] if rho == "fold" else float(rho)
            kws = {"calibration": cals[s.family], "alpha": alpha, "require_identified": guard,
                   "confirm": confirm, "min_points": points, "error_correlation": r}  # fmt: skip
            grid[label].append(replay_race(s, kws, cache, None)[0])
    rows = {}
    for label, outs in grid.items():
        row = summarize(outs, sweeps, oracle_compute)
        row["compute_by_kind"] = by_kind(outs, sweeps)
        rows[label] = row
    oracle_row = summarize([oracle(s) for s in sweeps], sweeps, oracle_compute)
    oracle_row["compute_by_kind"] = by_kind([oracle(s) for s in sweeps], sweeps)
    rows["oracle (stops at 25% every run ending > 0.02 behind)"] = oracle_row
    return {"rows": rows, "fold_correlations": rhos}


def simulated(n: int) -> dict:
    """Winners lost on ``n`` simulated near-tie sweeps whose runs' errors are independent
    (:func:`benchmarks.race_alpha.near_tie_sweep`, Race at its defaults, 10 rungs), per
    error_correlation (0 and the fixed values), with Wilson intervals."""
    from benchmarks._common import wilson
    from benchmarks.race_alpha import near_tie_sweep, raced

    values = (0.0, *FIXED)
    lost = {r: 0 for r in values}
    compute: dict[float, list[float]] = {r: [] for r in values}
    for seed in tqdm(range(n), desc="simulated sweeps"):
        sweep, finals, _ = near_tie_sweep(seed)
        cache: dict = {}
        for r in values:
            was_lost, used = raced(sweep, finals, {"error_correlation": r}, cache)
            lost[r] += int(was_lost)
            compute[r].append(used)
    return {
        "sweeps": n,
        "lost": {f"{r:g}": lost[r] for r in values},
        "lost_wilson": {f"{r:g}": wilson(lost[r], n) for r in values},
        "compute_used": {f"{r:g}": float(np.mean(compute[r])) for r in values},
    }


def table(rows: dict[str, dict]) -> str:
    from benchmarks.race_corpus import table_by_kind

    return table_by_kind(rows, "error_correlation")


def drawn(n: int) -> dict:
    """Winners kept on ``n`` sweeps per family drawn from the real GSM8K and MATH runs
    (``benchmarks.race_sweeps``' sweeps of 3-8 runs, calibrated on the other families), per
    error_correlation (0 and the fixed values), Race's other settings its defaults."""
    from benchmarks._common import wilson
    from benchmarks.race_sweeps import TOLERANCE, family_runs, family_sweeps, fill_cache, replay
    from rlcurves.calibrate import default_calibration

    values = (0.0, *FIXED)
    shipped = default_calibration()
    out: dict = {}
    for fam, (budget, runs) in family_runs().items():
        calibration = shipped.of_families([f for f in shipped.families if f != fam])
        cache: dict = {}
        index = {k: i for i, k in enumerate(runs)}
        fill_cache(budget, runs, calibration, cache, index)
        sweeps = family_sweeps(fam, runs, n)
        out[fam] = {}
        for r in values:
            kws = {"calibration": calibration, "error_correlation": r}
            rows = [replay(budget, runs, m, kws, cache, index)
                    for m in tqdm(sweeps, desc=f"{fam}, rho {r:g}", leave=False)]  # fmt: skip
            kept = sum(x[0] <= TOLERANCE + 1e-12 for x in rows)
            out[fam][f"{r:g}"] = {
                "sweeps": len(rows),
                "kept": int(kept),
                "kept_wilson": wilson(kept, len(rows)),
                "worst_regret": float(max(x[0] for x in rows)),
                "compute_used": float(np.mean([x[1] for x in rows])),
            }
    return out


def drawn_table(res: dict) -> str:
    """The drawn sweeps' rows: winners kept (Wilson 95%), worst regret and compute, per family
    and error_correlation."""
    lines = [
        "| family | error_correlation | winners kept (95% Wilson) | worst regret | compute used |",
        "|---|---|---|---|---|",
    ]
    for fam, rows in res.items():
        for r, x in rows.items():
            lo, hi = x["kept_wilson"]
            lines.append(
                f"| {fam} | {r} | {x['kept']} of {x['sweeps']} ({lo:.2f}-{hi:.2f}) | "
                f"{x['worst_regret']:.3f} | {x['compute_used']:.1%} |"
            )
    return "\n".join(lines)


def simulated_table(sim: dict) -> str:
    """The simulated sweeps' rows: winners lost (Wilson 95%) and compute, per error_correlation."""
    lines = [
        "| error_correlation | winners lost (95% Wilson) | compute used |",
        "|---|---|---|",
    ]
    for r, lost in sim["lost"].items():
        lo, hi = sim["lost_wilson"][r]
        lines.append(
            f"| {r} | {lost} of {sim['sweeps']} ({lo:.2f}-{hi:.2f}) | "
            f"{sim['compute_used'][r]:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    from benchmarks._common import machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulated", type=int, default=0, metavar="N",
                        help="also N simulated near-tie sweeps of independent runs")  # fmt: skip
    parser.add_argument("--drawn", type=int, default=0, metavar="N",
                        help="also N sweeps per family drawn from real runs")  # fmt: skip
    parser.add_argument("--out", default=str(RESULTS / "race_correlated.json"), help="JSON")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    settings: dict[str, object] = {"0 (default)": 0.0, "the other families' (fold)": "fold"}
    settings.update({f"{r:g}": r for r in FIXED})
    res = {"machine": machine(), **corpus(settings)}
    print(table(res["rows"]))
    print("fold correlations:", {k: round(v, 3) for k, v in res["fold_correlations"].items()})
    if args.drawn:
        res["drawn"] = drawn(args.drawn)
        print(drawn_table(res["drawn"]))
    if args.simulated:
        res["simulated"] = simulated(args.simulated)
        print(simulated_table(res["simulated"]))
    res["seconds"] = time.perf_counter() - t0
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2, default=float))
    print(f"written {args.out}")
    return res


if __name__ == "__main__":
    main()
