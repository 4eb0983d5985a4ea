"""benchmarks/race_run_tau.py (issue 43, item 3): a tau per run against one tau for the sweep, on
every corpus sweep; the race page shows what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_modules import benchmark

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def bench():
    return benchmark("race_run_tau")


def _cut(alone: dict, sweep_tau: float, run_tau: float, widths=(0.2, 0.1)) -> dict:
    return {
        "fraction": 0.5,
        "alone": alone,
        "odd": [],
        "run_taus": {k: run_tau for k in alone},
        "sweep": {"tau": sweep_tau, "median_width_others": widths[0]},
        "run": {"tau": run_tau, "median_width_others": widths[1]},
    }


def test_summaries_count_what_they_say(bench):
    """A cut moved when the typical tau moved by more than 10%; a run is odd when it asks alone
    for twice its sweep-mates' median; the width ratios are run over sweep."""
    res = {
        "scales": {
            "f/a": [_cut({"x": 0.03, "y": 0.03, "z": 0.2}, 0.06, 0.04)],
            "f/b": [_cut({"x": 0.03, "w": 0.05}, 0.05, 0.052, widths=(0.1, 0.105))],
        }
    }
    assert [bench.moved(c) for v in res["scales"].values() for c in v] == [True, False]
    assert bench.odd_runs(res) == (["f/z"], 4)
    w = bench.width_ratios(res)
    assert (w["cuts"], w["moved"]) == (2, 1)
    assert w["smallest"] == pytest.approx(0.5) and w["largest"] == pytest.approx(1.05)


def test_race_page_shows_what_the_benchmark_wrote(bench):
    res = json.loads((ROOT / "benchmarks" / "results" / "race_run_tau.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text()
    assert bench.scale_table(res, moved_only=True) in page
    assert bench.replay_table(res) in page
    w = bench.width_ratios(res)
    assert f"Of the {w['cuts']} cuts, the typical runs' tau moved by more than 10% in" in page
    assert f"factor of {w['smallest']:.2f} to {w['largest']:.2f} (median {w['median']:.2f})" in page
    odd, seen = bench.odd_runs(res)
    calibrate = (ROOT / "rlcurves" / "calibrate.py").read_text()
    assert f"{len(odd)} of the {seen} runs with backtests" in calibrate
