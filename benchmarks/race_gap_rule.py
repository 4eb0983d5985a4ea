"""How much of the oracle's saving the levels seen so far can buy: a gap rule on every corpus sweep.

Issue 43's oracle stops at 25% of the budget every run that ends more than 0.02 behind its
sweep's winner (58.7% of the compute); Race's defaults use 83% and keep every winner. Is Race
timid, or does the oracle know what nobody can know at 25%? This races every sweep of the corpus
(``benchmarks.race_corpus``'s sweeps and scoring: cut at the common budget, a look every 5% of
it, a run's final the mean of its evaluations over the last 10% of the budget, the winner kept
when the best run kept ends within 0.01 of the best run) with the simplest rule that reads only
what has been seen, no forecast:

    from ``start`` (a fraction of the budget) on, stop at each look every running run whose level
    (the mean of its evaluations over the last 10% of the compute so far,
    :func:`rlcurves.shapes.reached_level`) is more than ``gap`` below the best running run's.

over a grid of ``start`` (10%-40%) and ``gap`` (0.02-0.40 reward units), and reports:

- **in sample**: the settings that keep the winner of every one of the 28 sweeps, the cheapest
  first: the least compute any gap rule needs to keep them all, knowing the finals;
- **nested**: the setting chosen on the OTHER families' sweeps (the least compute keeping all of
  their winners, as ``race_corpus`` chooses Race's), scored on the family's own, over all other
  families and over the other families of the same kind of metric only.

Race's rows are ``race_corpus``'s (benchmarks/results/race_corpus.json), not rerun here.

Run: python -m benchmarks.race_gap_rule [--out PATH]  (about 20 seconds)
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import machine
from benchmarks.race_corpus import (
    EARLY,
    RESULTS,
    by_kind,
    far_behind,
    load_sweeps,
    oracle,
    summarize,
    table_by_kind,
)
from benchmarks.race_replay import Outcome, Sweep, rung_grid, score

STARTS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
GAPS = tuple(round(g, 2) for g in np.arange(0.02, 0.401, 0.02))
LAST_LOOK = 0.95  # no stop at the last look, as Race (it saves almost nothing)
LAG_FROM = (0.25, 0.4)  # the winners' lag behind the leader, from these fractions on


def gap_rule(sweep: Sweep, start: float, gap: float) -> Outcome:
    """Race ``sweep`` with the gap rule (see the module docstring): a stopped run's compute ends
    at its last evaluation seen."""
    from rlcurves.shapes import reached_level

    used: dict[str, float] = {}
    stopped: set[str] = set()
    for hi in rung_grid(sweep):
        fraction = hi / sweep.budget
        levels = {}
        for name, df in sweep.runs.items():
            if name in stopped:
                continue
            seen = df[df["compute"] <= hi + 1e-9]
            if len(seen):
                c, r = seen["compute"].to_numpy(float), seen["reward"].to_numpy(float)
                used[name] = float(c[-1])
                levels[name] = reached_level(c, r, hi)
        if fraction < start - 1e-9 or fraction > LAST_LOOK + 1e-9 or not levels:
            continue
        lead = max(levels.values())
        stopped |= {name for name, v in levels.items() if v < lead - gap}
    used = {k: (sweep.budget if k not in stopped else used.get(k, 0.0)) for k in sweep.runs}
    return score(sweep, "gap rule", used, 0.0)


def _keeps_all(outcomes: list[Outcome], names: set[str]) -> bool:
    return all(o.kept_winner for o in outcomes if o.sweep in names)


def _compute(outcomes: list[Outcome], names: set[str]) -> float:
    return float(np.mean([o.compute_fraction for o in outcomes if o.sweep in names]))


def nested(grid: dict, sweeps: list[Sweep], same_kind: bool) -> tuple[list[Outcome], dict]:
    """Per family: the cheapest setting keeping every winner of the other families' sweeps (of
    its kind only with ``same_kind``), scored on its own sweeps; None (no stop) when none does."""
    family = {s.name: s.family for s in sweeps}
    kind = {s.name: s.kind for s in sweeps}
    out, picks = [], {}
    for fam in dict.fromkeys(family.values()):
        fam_kind = next(kind[n] for n, f in family.items() if f == fam)
        other = {
            n for n, f in family.items() if f != fam and (not same_kind or kind[n] == fam_kind)
        }
        ok = [key for key, v in grid.items() if _keeps_all(v, other)]
        # ties: the later start, then the larger gap (the more cautious)
        pick = min(ok, key=lambda k: (_compute(grid[k], other), -k[0], -k[1]), default=None)
        picks[fam] = None if pick is None else {"start": pick[0], "gap": pick[1]}
        mine = {n for n, f in family.items() if f == fam}
        if pick is None:  # nothing kept them all: run every sweep to the end
            out += [gap_rule(s, 2.0, 1.0) for s in sweeps if s.name in mine]
        else:
            out += [o for o in grid[pick] if o.sweep in mine]
    return out, picks


def _row(outcomes: list[Outcome], sweeps: list[Sweep], oracle_compute: float) -> dict:
    row = summarize(outcomes, sweeps, oracle_compute)
    row["compute_by_kind"] = by_kind(outcomes, sweeps)
    row["lost"] = {o.sweep: o.regret for o in outcomes if not o.kept_winner}
    return row


def table(rows: dict[str, dict]) -> str:
    return table_by_kind(rows, "rule")


def lag_table(lag: dict[str, dict], kinds: dict[str, str]) -> str:
    """Per kind of metric: how many sweeps' winners trailed the best running level by more than
    0.02 and 0.05 at some look from 25% (and from 40%) of the budget on, and the largest lag."""
    lines = [
        "| kind of metric | sweeps | winner > 0.02 behind the leader at a look from 25% on | "
        "> 0.05 behind | > 0.05 behind from 40% on | largest lag from 25% on (sweep) |",
        "|---|---|---|---|---|---|",
    ]
    for kind in dict.fromkeys(kinds.values()):
        mine = {n: v for n, v in lag.items() if kinds[n] == kind}
        worst = max(mine, key=lambda n: mine[n]["0.25"])
        lines.append(
            f"| {kind} | {len(mine)} | {sum(v['0.25'] > 0.02 for v in mine.values())} | "
            f"{sum(v['0.25'] > 0.05 for v in mine.values())} | "
            f"{sum(v['0.4'] > 0.05 for v in mine.values())} | {mine[worst]['0.25']:.3f} "
            f"({worst}) |"
        )
    return "\n".join(lines)


def run(sweeps: list[Sweep]) -> dict:
    """Every setting on every sweep, the in-sample frontier and the nested rows."""
    oracle_compute = float(np.mean([oracle(s).compute_fraction for s in sweeps]))
    grid = {
        (s0, g): [gap_rule(s, s0, g) for s in sweeps] for s0, g in itertools.product(STARTS, GAPS)
    }
    names = {s.name for s in sweeps}
    keeping = sorted(
        (key for key, v in grid.items() if _keeps_all(v, names)),
        key=lambda k: (_compute(grid[k], names), -k[0], -k[1]),
    )
    rows = {}
    if keeping:
        best = keeping[0]
        rows[f"in sample: the cheapest keeping all (from {best[0]:.0%}, gap {best[1]:.2f})"] = _row(
            grid[best], sweeps, oracle_compute
        )
    picks = {}
    for same_kind, label in (
        (False, "all the other families"),
        (True, "the other families of its kind"),
    ):
        out, picks[label] = nested(grid, sweeps, same_kind)
        rows[f"nested: chosen on {label}"] = _row(out, sweeps, oracle_compute)
    oracle_row = _row([oracle(s) for s in sweeps], sweeps, oracle_compute)
    rows["oracle (stops at 25% every run ending > 0.02 behind)"] = oracle_row
    frontier = [
        {"start": k[0], "gap": k[1], "compute_used": _compute(grid[k], names)} for k in keeping
    ]
    # how far behind its sweep's leader each winner was, at its worst, from each start on
    lag = {s.name: {str(s0): _winner_lag(s, s0) for s0 in LAG_FROM} for s in sweeps}
    return {"oracle_compute": oracle_compute, "rows": rows, "picks": picks,
            "frontier_keeping_all": frontier, "winner_lag": lag}  # fmt: skip


def _winner_lag(sweep: Sweep, start: float) -> float:
    """The most the sweep's winner (and every run ending within 0.01 of it) trailed the best
    running level at a look from ``start`` to the last: a gap rule from ``start`` that keeps the
    winner needs a gap at least this large."""
    from rlcurves.shapes import reached_level

    finals = sweep.finals()
    best = max(finals.values())
    keep = [k for k, v in finals.items() if v >= best - 0.01]
    worst = 0.0
    for hi in rung_grid(sweep):
        if hi / sweep.budget < start - 1e-9 or hi / sweep.budget > LAST_LOOK + 1e-9:
            continue
        levels = {}
        for name, df in sweep.runs.items():
            seen = df[df["compute"] <= hi + 1e-9]
            if len(seen):
                levels[name] = reached_level(
                    seen["compute"].to_numpy(float), seen["reward"].to_numpy(float), hi
                )
        if not levels:
            continue
        lead = max(levels.values())
        # the rule keeps the winner when at least one run within 0.01 of the best survives
        worst = max(worst, min(lead - levels.get(k, -np.inf) for k in keep))
    return float(worst)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RESULTS / "race_gap_rule.json"), help="JSON results")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    sweeps = load_sweeps()
    res = run(sweeps)
    print(table(res["rows"]))
    print("\nchosen in the folds:", json.dumps(res["picks"]))
    print()
    print(lag_table(res["winner_lag"], {s.name: s.kind for s in sweeps}))
    res.update(machine=machine(), seconds=time.perf_counter() - t0, sweeps=len(sweeps),
               early=EARLY, far_behind={s.name: far_behind(s) for s in sweeps})  # fmt: skip
    Path(args.out).write_text(json.dumps(res, indent=1, default=float))
    print(f"({res['seconds']:.0f} s) wrote {args.out}")
    return res


__all__ = ["gap_rule", "nested", "run"]

if __name__ == "__main__":
    main()
