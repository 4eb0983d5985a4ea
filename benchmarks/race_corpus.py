"""Replay every sweep of the corpus: winners kept, compute, and the oracle's saving captured.

Issue 43's replay protocol on every sweep the corpus registry lists (``rlcurves/data/corpus.json``;
the list, frozen before anything was tuned on it, is ``benchmarks/race_corpus_sweeps.json`` and a
test holds the registry to it): each sweep's runs are truncated at the sweep's common budget (the
smallest final compute of its runs), every run's evaluations arrive in compute order and at
every rung (each 5% of the budget) every method sees what has arrived and says whom to stop; a
stopped run's compute ends at its last evaluation. A run's final value is the mean of its
evaluations in the last 10% of the budget; a method keeps the winner when the best final among
the runs it kept is within 0.01 of the best run's. Compute used is the mean over sweeps of the
compute the runs used over running them all to the budget.

Leave-one-family-out, nested: a sweep of family F is raced with forecasts calibrated on the
OTHER families of F's kind of metric only (validation or training reward), the calibration
rebuilt from their records (every choice the calibration makes, made in the fold); the Race
setting "chosen on the other families" is chosen, among a grid, on the sweeps of the other
families only (the least compute that kept every one of their winners; the default if none did)
and scored on F's.

Methods: :class:`rlcurves.Race` (defaults; and the setting chosen in the fold), Ray Tune's
``ASHAScheduler`` and ``MedianStoppingRule``, Optuna's ``MedianPruner`` and
``SuccessiveHalvingPruner`` (replayed one trial after another, in random orders), and the oracle
of the issue: it stops at 25% of the budget every run that ends more than 0.02 behind the winner.
Reported per method: winner kept (sweeps, with a Wilson 95% interval counted in sweeps), mean
compute, the share of the oracle's saving captured ((1 - compute) / (1 - the oracle's compute)),
and of the runs that end more than 0.05 behind their sweep's winner, how many were stopped by
40% of the budget (a Wilson interval counted in runs).

Run: python -m benchmarks.race_corpus [--quick] [--orders N] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from benchmarks._common import race_default, wilson
from benchmarks.race_replay import (
    OTHER_LABELS,
    Outcome,
    Sweep,
    other_methods,
    per_sweep,
    replay_race,
    score,
)

RESULTS = Path(__file__).parent / "results"
SWEEP_LIST = Path(__file__).parent / "race_corpus_sweeps.json"
ORACLE_BEHIND = 0.02  # the oracle stops every run ending more than this behind the winner...
ORACLE_AT = 0.25  # ...at this fraction of the budget
FAR_BEHIND = 0.05  # "dead" runs: ending more than this behind the winner...
EARLY = 0.40  # ...should be stopped by this fraction of the budget
# Race settings searched in each fold: (alpha, require_identified, confirm, min_points)
GRID = tuple(
    (a, guard, confirm, points)
    for points in (8, 4)
    for guard in (0.4, False)
    for confirm in (None, 1)
    for a in (0.05, 0.1, 0.2, 0.3)
)


def race_defaults() -> tuple:
    """Race's defaults as a grid key (confirm None: the rule's hold; min_points the rule's)."""
    from rlcurves.decide import DEFAULT_RULE

    return (race_default("alpha"), race_default("require_identified"), None,
            DEFAULT_RULE.min_points)  # fmt: skip


DEFAULT = race_defaults()


def setting_label(key: tuple) -> str:
    alpha, guard, confirm, points = key
    g = {True: "guard on", False: "guard off"}.get(guard, f"guard before {guard:.0%}")
    return (f"alpha {alpha:g}, {g}, " + ("the rule's hold" if confirm is None else
            f"confirm {confirm}") + f", {points} evaluations")  # fmt: skip


# ---- the sweeps ----------------------------------------------------------------------------------


def registry_sweeps() -> list[dict]:
    """Every sweep of the corpus registry: family, sweep, knob, runs (in the registry's order)."""
    from rlcurves.datasets import _registry

    return [
        {"family": fam, "sweep": name, "knob": sw["knob"], "runs": list(sw["runs"])}
        for fam, spec in _registry().items()
        for name, sw in spec["sweeps"].items()
    ]


def load_sweeps() -> list[Sweep]:
    """The frozen list's sweeps as :class:`benchmarks.race_replay.Sweep` (name ``family/sweep``),
    each run truncated at the sweep's common budget."""
    from rlcurves.datasets import list_corpus, load_corpus

    listed = json.loads(SWEEP_LIST.read_text())["sweeps"]
    kinds = list_corpus().drop_duplicates("family").set_index("family")["metric_kind"]
    corpus = load_corpus()
    out = []
    for s in listed:
        fam = corpus[corpus["family"] == s["family"]]
        runs = {}
        for r in s["runs"]:
            g = fam[fam["run"] == r].sort_values("x", kind="stable")
            if g.empty:
                raise ValueError(f"{s['family']}/{s['sweep']}: run {r!r} is not in the corpus")
            runs[r] = pd.DataFrame(
                {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
            )
        budget = min(float(df["compute"].max()) for df in runs.values())
        cut = {k: df[df["compute"] <= budget].reset_index(drop=True) for k, df in runs.items()}
        name = f"{s['family']}/{s['sweep']}"
        kind = str(kinds[s["family"]])
        out.append(Sweep(name, s["family"], budget, cut, "step", tuple(s["runs"]), kind=kind))
    return out


def fold_calibrations(families: list[str]) -> dict[str, object]:
    """Each family's calibration rebuilt from the shipped records and shapes of the OTHER families
    of its kind of metric (every choice the calibration makes, made in the fold)."""
    from rlcurves.calibrate import Calibration, default_calibration
    from rlcurves.datasets import list_corpus

    kinds = list_corpus().drop_duplicates("family").set_index("family")["metric_kind"]
    out = {}
    for fam in families:
        shipped = default_calibration(str(kinds[fam]))
        others = [f for f in shipped.families if f != fam]
        out[fam] = Calibration(
            shipped.records[shipped.records["family"].isin(others)].reset_index(drop=True),
            f"runs of {', '.join(others)}",
            shapes=shipped.shapes[shipped.shapes["family"].isin(others)].reset_index(drop=True),
        )
    return out


def known_family_calibrations(sweeps: list[Sweep]) -> dict[str, object]:
    """Each sweep's calibration rebuilt from the shipped records and shapes of its kind of
    metric without the sweep's own runs, for its family (known: its own tau, partially pooled;
    a new family when the sweep holds all of its family's runs): what a user racing a new sweep
    of a setup they ran before has."""
    from rlcurves.calibrate import Calibration, default_calibration

    out = {}
    for s in sweeps:
        shipped = default_calibration(s.kind)
        mine = {f"{s.family}/{r}" for r in s.sources}
        rec = shipped.records[~shipped.records["run"].isin(mine)].reset_index(drop=True)
        shp = shipped.shapes[~shipped.shapes["run"].isin(mine)].reset_index(drop=True)
        cal = Calibration(rec, f"corpus runs outside {s.name}", shapes=shp)
        # a family whose runs are all in this sweep (countdown_qwen) is a new family to it
        out[s.name] = cal.for_family(s.family if s.family in cal.families else None)
    return out


# ---- the methods ---------------------------------------------------------------------------------


def oracle(sweep: Sweep) -> Outcome:
    """Stops at 25% of the budget every run that ends more than 0.02 behind the winner."""
    finals = sweep.finals()
    best = max(finals.values())
    used = {}
    for k, df in sweep.runs.items():
        if finals[k] < best - ORACLE_BEHIND:
            seen = df["compute"][df["compute"] <= ORACLE_AT * sweep.budget + 1e-9]
            used[k] = float(seen.iloc[-1]) if len(seen) else 0.0
        else:
            used[k] = sweep.budget
    return score(sweep, "oracle", used, 0.0)


def far_behind(sweep: Sweep) -> list[str]:
    """The runs that end more than 0.05 behind the sweep's winner."""
    finals = sweep.finals()
    best = max(finals.values())
    return [k for k, v in finals.items() if v < best - FAR_BEHIND]


# ---- the summary ---------------------------------------------------------------------------------


def summarize(outcomes: list[Outcome], sweeps: list[Sweep], oracle_compute: float) -> dict:
    """One method's row: winners kept (a mean over orders where it has several), compute, the
    oracle's saving captured, and the far-behind runs stopped early."""
    by = {s.name: s for s in sweeps}
    per: dict[str, list[Outcome]] = {}
    for o in outcomes:
        per.setdefault(o.sweep, []).append(o)
    kept = float(sum(np.mean([o.kept_winner for o in v]) for v in per.values()))
    compute = float(np.mean([np.mean([o.compute_fraction for o in v]) for v in per.values()]))
    n_far, early = 0, 0.0
    for name, v in per.items():
        for run in far_behind(by[name]):
            n_far += 1
            early += float(np.mean([o.stopped_at.get(run, 1.0) <= EARLY + 1e-9 for o in v]))
    n = len(per)
    return {
        "sweeps": n,
        "kept_winner": kept,
        "kept_wilson": wilson(kept, n),
        "worst_regret": float(max(o.regret for o in outcomes)),
        "compute_used": compute,
        "oracle_saving_captured": (1 - compute) / (1 - oracle_compute),
        "far_behind_runs": n_far,
        "far_behind_stopped_by_40": early,
        "far_behind_wilson": wilson(early, n_far),
        "per_sweep": per_sweep(per),
    }


def choose_in_folds(grid: dict[tuple, list[Outcome]], sweeps: list[Sweep]) -> tuple[list, dict]:
    """For each family: the setting that used the least compute while keeping every winner of the
    OTHER families' sweeps (the default if none did); its outcomes on this family's sweeps."""
    family = {s.name: s.family for s in sweeps}
    out, picks = [], {}
    for fam in dict.fromkeys(family.values()):
        other = {k for k, f in family.items() if f != fam}

        def on(key, names):
            return [o for o in grid[key] if o.sweep in names]

        ok = [k for k in grid if all(o.kept_winner for o in on(k, other))]
        pick = min(ok, key=lambda k: np.mean([o.compute_fraction for o in on(k, other)]),
                   default=DEFAULT)  # fmt: skip
        picks[fam] = setting_label(pick)
        out += on(pick, {k for k, f in family.items() if f == fam})
    return out, picks


def _brief(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "per_sweep"}


def table(rows: dict[str, dict]) -> str:
    lines = [
        "| method | winner kept (95% Wilson) | worst regret | compute used | oracle's saving "
        "captured | runs > 0.05 behind stopped by 40% |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        k = r["kept_winner"]
        ks = f"{k:.0f}" if float(k).is_integer() else f"{k:.1f}"
        lo, hi = r["kept_wilson"]
        e = r["far_behind_stopped_by_40"]
        es = f"{e:.0f}" if float(e).is_integer() else f"{e:.1f}"
        flo, fhi = r["far_behind_wilson"]
        lines.append(
            f"| {name} | {ks} of {r['sweeps']} ({lo:.2f}-{hi:.2f}) | {r['worst_regret']:.3f} | "
            f"{r['compute_used']:.0%} | {r['oracle_saving_captured']:.0%} | {es} of "
            f"{r['far_behind_runs']} ({flo:.2f}-{fhi:.2f}) |"
        )
    return "\n".join(lines)


def by_kind(outcomes: list[Outcome], sweeps: list[Sweep]) -> dict[str, float]:
    """Mean compute per kind of metric of ``outcomes`` (one per sweep, in ``sweeps``' order)."""
    kinds: dict[str, list[float]] = {}
    for s, o in zip(sweeps, outcomes, strict=True):
        kinds.setdefault(s.kind, []).append(o.compute_fraction)
    return {k: float(np.mean(v)) for k, v in kinds.items()}


def table_by_kind(rows: dict[str, dict], first: str) -> str:
    """:func:`table` with the compute split by kind of metric (rows with ``compute_by_kind``);
    ``first`` heads the first column."""
    lines = [
        f"| {first} | winners kept (95% Wilson) | worst regret | compute used "
        "(validation, training reward) | oracle's saving captured | runs > 0.05 behind stopped "
        "by 40% |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lo, hi = r["kept_wilson"]
        ck = r["compute_by_kind"]
        lines.append(
            f"| {name} | {r['kept_winner']:.0f} of {r['sweeps']} ({lo:.2f}-{hi:.2f}) | "
            f"{r['worst_regret']:.3f} | {r['compute_used']:.1%} ({ck['validation']:.1%}, "
            f"{ck['training reward']:.1%}) | {r['oracle_saving_captured']:.0%} | "
            f"{r['far_behind_stopped_by_40']:.0f} of {r['far_behind_runs']} |"
        )
    return "\n".join(lines)


def kind_table(res: dict) -> str:
    """Winners kept and compute per kind of metric, from the results written: Race's defaults,
    the setting chosen in the folds, and the oracle."""
    kinds = {name: v["kind"] for name, v in res["sweeps"].items()}
    lines = [
        "| kind of metric | sweeps | Race (defaults): kept, compute | chosen in the folds | "
        "oracle's compute |",
        "|---|---|---|---|---|",
    ]
    rows = res["table"]
    oracle = next(v for k, v in rows.items() if k.startswith("oracle"))
    for kind in dict.fromkeys(kinds.values()):
        cells = []
        for row in (
            rows["Race (defaults)"],
            rows.get("Race, setting chosen on the other families"),
        ):
            if row is None:
                cells.append("-")
                continue
            mine = [v for n, v in row["per_sweep"].items() if kinds[n] == kind]
            kept = sum(v["kept_winner"] for v in mine)
            cells.append(
                f"{kept:.0f} of {len(mine)}, {np.mean([v['compute_used'] for v in mine]):.0%}"
            )
        oc = np.mean(
            [v["compute_used"] for n, v in oracle["per_sweep"].items() if kinds[n] == kind]
        )
        n = sum(k == kind for k in kinds.values())
        lines.append(f"| {kind} | {n} | {cells[0]} | {cells[1]} | {oc:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Race's defaults only, 3 orders")
    parser.add_argument("--orders", type=int, default=10, help="orders of the Optuna replays")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="Race replays with this many forecast seeds (fresh per replicate)",
    )
    parser.add_argument("--only", help="only the sweeps whose name contains this")
    parser.add_argument(
        "--known-family",
        action="store_true",
        help="Race's defaults only, each sweep calibrated on every corpus run of its kind outside "
        "the sweep, its own family's other runs included and known (what a user with earlier "
        "runs of the same setup has); results in race_corpus_known_family.json",
    )
    parser.add_argument("--out", default=str(RESULTS / "race_corpus.json"), help="JSON results")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    sweeps = load_sweeps()
    if args.only:
        sweeps = [s for s in sweeps if args.only in s.name]
    settings = (DEFAULT,) if args.quick or args.known_family else GRID
    n_orders = 3 if args.quick else args.orders
    if args.known_family:
        if args.out == str(RESULTS / "race_corpus.json"):
            args.out = str(RESULTS / "race_corpus_known_family.json")
        cals = known_family_calibrations(sweeps)
    else:
        fams = fold_calibrations(list(dict.fromkeys(s.family for s in sweeps)))
        cals = {s.name: fams[s.family] for s in sweeps}
    oracles = [oracle(s) for s in sweeps]
    oracle_compute = float(np.mean([o.compute_fraction for o in oracles]))
    rows: dict[str, dict] = {}
    replicates = []
    t_race = time.perf_counter()
    for rep in range(args.seeds):
        grid: dict[tuple, list[Outcome]] = {k: [] for k in settings}
        for s in tqdm(sweeps, desc=f"Race (seed set {rep})"):
            caches: dict[int, dict] = {}  # the refits depend on min_points (the window backtests)
            index = {k: i + 1000 * rep for i, k in enumerate(s.runs)}
            for key in settings:
                kws = {
                    "calibration": cals[s.name],
                    "alpha": key[0],
                    "require_identified": key[1],
                    "confirm": key[2],
                    "min_points": key[3],
                }
                cache = caches.setdefault(key[3], {})
                grid[key].append(replay_race(s, kws, cache, index)[0])
        chosen, picks = choose_in_folds(grid, sweeps) if len(settings) > 1 else ([], {})
        replicates.append({
            "defaults": summarize(grid[DEFAULT], sweeps, oracle_compute),
            "chosen": summarize(chosen, sweeps, oracle_compute) if chosen else None,
            "picks": picks,
            "frontier": {setting_label(k): _brief(summarize(o, sweeps, oracle_compute))
                         for k, o in grid.items()},
        })  # fmt: skip
    race_seconds = time.perf_counter() - t_race
    rows["Race (defaults)"] = replicates[0]["defaults"]
    if replicates[0]["chosen"]:
        rows["Race, setting chosen on the other families"] = replicates[0]["chosen"]
    others = other_methods(sweeps, n_orders)
    labels = OTHER_LABELS
    rows.update({labels[k]: summarize(v, sweeps, oracle_compute) for k, v in others.items()})
    rows["oracle (stops at 25% every run ending > 0.02 behind)"] = summarize(
        oracles, sweeps, oracle_compute
    )
    print(table(rows))
    if args.seeds > 1:
        print("\nRace across forecast seed sets (defaults | chosen in the folds):")
        for i, r in enumerate(replicates):
            d, c = r["defaults"], r["chosen"]
            line = (
                f"  set {i}: kept {d['kept_winner']:.0f}/{d['sweeps']}, compute "
                f"{d['compute_used']:.0%}, far behind early "
                f"{d['far_behind_stopped_by_40']:.0f}/{d['far_behind_runs']}"
            )
            if c:
                line += (
                    f" | kept {c['kept_winner']:.0f}, compute {c['compute_used']:.0%}, far "
                    f"behind early {c['far_behind_stopped_by_40']:.0f}, picks {r['picks']}"
                )
            print(line)
    print("\n" + kind_table({"sweeps": {s.name: {"kind": s.kind} for s in sweeps}, "table": rows}))
    print("\nRace (defaults) per sweep:")
    for name, v in rows["Race (defaults)"]["per_sweep"].items():
        print(f"  {name}: regret {v['regret']:.3f}, compute {v['compute_used']:.0%}, stopped "
              f"{ {k: round(x, 2) for k, x in (v['stopped_at'] or {}).items()} }")  # fmt: skip
    from benchmarks._common import machine

    payload = {
        "machine": machine(),
        "sweeps": {
            s.name: {
                "family": s.family,
                "kind": s.kind,
                "budget": s.budget,
                "runs": list(s.runs),
                "finals": s.finals(),
                "far_behind": far_behind(s),
            }
            for s in sweeps
        },
        "table": rows,
        "replicates": replicates,
        "orders": n_orders,
        "race_seconds": race_seconds,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(payload, indent=2, default=float))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
