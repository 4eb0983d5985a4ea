"""benchmarks/race_gap_rule.py: the gap rule (stop every run more than ``gap`` below the best
running level), the winners' lag behind the leader, the nested choice, and the race page showing
what the benchmark wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from benchmark_modules import benchmark

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def bench():
    return benchmark("race_gap_rule")


def _sweep(curves: dict, name: str = "toy/sweep", family: str = "toy", n: int = 40):
    """A sweep whose runs follow ``curves[k](fraction)``, evaluated every 2.5% of a budget 100."""
    from benchmarks.race_replay import Sweep

    c = np.linspace(100 / n, 100, n)
    runs = {k: pd.DataFrame({"compute": c, "reward": f(c / 100)}) for k, f in curves.items()}
    return Sweep(name, family, 100.0, runs, "step")


def flat(v):
    return lambda f: np.full(f.size, v)


def late(f):
    """Flat at 0.3 to 45% of the budget, then climbing to 0.95: behind by 0.5 at 40%, the winner."""
    return np.where(f < 0.45, 0.3, 0.3 + 0.65 * np.minimum((f - 0.45) / 0.4, 1.0))


def test_gap_rule_stops_runs_further_behind_than_the_gap_from_its_start(bench):
    """From 25% on a run 0.3 below the leader is stopped at the first look (its compute ends at
    its last evaluation by then) and one 0.01 below is not; before the start nothing is
    stopped; a gap wider than any lag stops nothing."""
    s = _sweep({"best": flat(0.8), "near": flat(0.79), "far": flat(0.5)})
    o = bench.gap_rule(s, 0.25, 0.1)
    assert o.used == {"best": 100.0, "near": 100.0, "far": 25.0}
    assert o.kept_winner and o.compute_fraction == pytest.approx(0.75)
    assert bench.gap_rule(s, 0.5, 0.1).used["far"] == 50.0
    assert bench.gap_rule(s, 0.1, 0.4).stopped_at == {}


def test_a_late_winner_is_lost_by_any_gap_below_its_lag(bench):
    """The winner trails the leader by 0.5 at 40%: its lag from 25% on is 0.5, a gap rule with a
    smaller gap stops it (regret 0.15: it ends 0.95, the leader 0.8), a larger one keeps it."""
    s = _sweep({"early": flat(0.8), "late": late})
    assert bench._winner_lag(s, 0.25) == pytest.approx(0.5)  # 0.8 - 0.3 until the climb
    lost = bench.gap_rule(s, 0.25, 0.3)
    assert not lost.kept_winner and lost.regret == pytest.approx(0.15)
    assert bench.gap_rule(s, 0.25, 0.52).kept_winner


def test_nested_choice_is_the_cheapest_keeping_the_other_families_winners(bench):
    """Family a's sweep needs a gap of at least 0.5 to keep its late winner; family b's sweep
    keeps its winner at any gap. Family b is scored with a's choice (the cheapest setting that
    keeps a's winner: gap 0.5 or more, stopping nothing of b's 0.3-behind run), family a with
    b's (from the earliest start, where gaps 0.02 and 0.1 stop b's far run alike: the larger, 0.1),
    which loses a's winner."""
    a = _sweep({"early": flat(0.8), "late": late}, "a/s", "a")
    b = _sweep({"best": flat(0.8), "far": flat(0.5)}, "b/s", "b")
    grid = {
        (s0, g): [bench.gap_rule(s, s0, g) for s in (a, b)]
        for s0 in (0.1, 0.25)
        for g in (0.02, 0.1, 0.52)
    }
    out, picks = bench.nested(grid, [a, b], same_kind=False)
    assert picks["b"] == {"start": 0.25, "gap": 0.52}  # ties: the later start
    assert picks["a"] == {"start": 0.1, "gap": 0.1}  # ties: the larger gap
    by = {o.sweep: o for o in out}
    assert not by["a/s"].kept_winner
    assert by["b/s"].kept_winner and by["b/s"].stopped_at == {}


def test_race_page_shows_what_the_gap_rule_benchmark_wrote(bench):
    """The race page's two tables are the committed results' (every setting, the nested rows
    and the lags), and the results cover the corpus's 28 sweeps."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_gap_rule.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text(encoding="utf-8")
    assert bench.table(res["rows"]) in page
    from benchmarks.race_corpus import load_sweeps

    sweeps = load_sweeps()
    assert res["sweeps"] == len(sweeps) == len(res["winner_lag"])
    assert bench.lag_table(res["winner_lag"], {s.name: s.kind for s in sweeps}) in page


def test_readme_quotes_the_in_sample_gap_rule(bench):
    """The README's corpus row quotes the cheapest in-sample gap rule's compute."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_gap_rule.json").read_text())
    (row,) = [v for k, v in res["rows"].items() if k.startswith("in sample")]
    assert row["kept_winner"] == row["sweeps"]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = f"keeps every winner for less than {row['compute_used']:.1%}, even chosen knowing"
    assert said in readme, said
