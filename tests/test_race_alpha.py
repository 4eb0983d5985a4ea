"""benchmarks/race_alpha.py (issue 43, item 4): the simulated near-tie sweeps it races, the
per-run rule that leaves the stops to the sweep-level rule, and the page's table of what it
wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_modules import benchmark

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def bench():
    return benchmark("race_alpha")


def test_near_tie_sweeps_are_near_ties_with_every_kind_of_misbehaviour(bench):
    """Over 40 seeds: 5 runs of 25 evaluations each, the finals the noiseless curves' (not the
    noisy evaluations'), all four kinds drawn, and near-ties common: the runner-up ends within
    0.02 of the winner in at least 40% of the sweeps (55% over 300 seeds), where a race can
    lose the winner."""
    kinds_seen, close = set(), 0
    for seed in range(40):
        sweep, finals, kinds = bench.near_tie_sweep(seed)
        assert len(sweep.runs) == bench.RUNS and sweep.finals() == finals
        assert all(len(df) == bench.N_EVALS for df in sweep.runs.values())
        top, second = sorted(finals.values())[::-1][:2]
        close += top - second < 0.02
        kinds_seen |= set(kinds.values())
    assert kinds_seen == set(bench.KINDS)
    assert close >= 16
    a, b = bench.near_tie_sweep(3), bench.near_tie_sweep(3)
    assert all(np.array_equal(a[0].runs[k], b[0].runs[k]) for k in a[0].runs)  # seeded


def test_sweep_rule_alone_agrees_to_every_stop_after_its_evaluations(bench):
    """The per-run rule of "the sweep-level rule alone" advises a clear non-winner to stop at
    once (threshold 0.999 from the start, no hold), so that the race's stops are alpha's."""
    from rlcurves.decide import DEFAULT_RULE

    rule = bench.sweep_rule_alone()
    assert rule.threshold(0.05) == pytest.approx(0.999) and rule.hold == 1
    assert rule.min_points == DEFAULT_RULE.min_points
    assert rule.threshold(0.05) > DEFAULT_RULE.threshold(0.5)


def test_race_page_shows_what_the_alpha_benchmark_wrote(bench):
    """The race page's table of winners lost against alpha is the benchmark's for the results
    it wrote, row for row; the rates are counts of the sweeps it says."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_alpha.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text(encoding="utf-8")
    rows = [line for line in bench.table(res["rows"]).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 * len(bench.ALPHAS)
    for line in rows:
        assert line in page, f"the race page lacks the alpha benchmark's row: {line}"
    for r in res["rows"].values():
        assert 0 <= r["lost"] <= r["sweeps"] and r["lost_rate"] == r["lost"] / r["sweeps"]
