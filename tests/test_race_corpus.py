"""benchmarks/race_corpus.py (issue 43, item 6): the replay of every corpus sweep, its list frozen
before anything was tuned on it, its oracle and its scores; the results it wrote are what the
race page and the README show."""

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
    return benchmark("race_corpus")


def _sweep(bench, finals: dict[str, float], n: int = 20, budget: float = 100.0):
    """A sweep of flat runs at the given levels, evaluated every budget / n."""
    from benchmarks.race_replay import Sweep

    c = np.linspace(budget / n, budget, n)
    runs = {k: pd.DataFrame({"compute": c, "reward": np.full(n, v)}) for k, v in finals.items()}
    return Sweep("toy/sweep", "toy", budget, runs, "step")


def test_the_replayed_sweeps_are_the_registrys_frozen_list(bench):
    """The sweeps replayed were committed (benchmarks/race_corpus_sweeps.json) before any setting
    was chosen on them: the registry must still list exactly those, run for run, and every one
    loads with at least two runs cut at a common budget."""
    frozen = json.loads(bench.SWEEP_LIST.read_text())["sweeps"]
    assert bench.registry_sweeps() == frozen
    sweeps = bench.load_sweeps()
    assert [s.name for s in sweeps] == [f"{s['family']}/{s['sweep']}" for s in frozen]
    for s in sweeps:
        assert len(s.runs) >= 2
        assert all(df["compute"].max() <= s.budget for df in s.runs.values())
        assert max(df["compute"].max() for df in s.runs.values()) == s.budget
        assert s.kind in ("validation", "training reward")


def test_oracle_stops_at_a_quarter_every_run_ending_more_than_two_points_behind(bench):
    """The issue's oracle: runs ending more than 0.02 behind the winner use 25% of the budget
    (their last evaluation by then), the others all of it; it always keeps the winner."""
    s = _sweep(bench, {"best": 0.80, "near": 0.79, "behind": 0.77, "far": 0.50})
    o = bench.oracle(s)
    assert o.kept_winner and o.regret == 0.0
    assert o.used == {"best": 100.0, "near": 100.0, "behind": 25.0, "far": 25.0}
    assert o.compute_fraction == pytest.approx(0.625)
    assert bench.far_behind(s) == ["far"]  # more than 0.05 behind


def test_summary_counts_far_behind_runs_stopped_by_40_percent_and_the_oracles_saving(bench):
    """The row: winners kept with a Wilson interval counted in sweeps, compute, the share of the
    oracle's saving, and far-behind runs stopped by 40% (a stop at 45% does not count)."""
    from benchmarks.race_replay import score

    a = _sweep(bench, {"best": 0.8, "far": 0.5, "far2": 0.6})
    early = score(a, "m", {"best": 100.0, "far": 40.0, "far2": 45.0}, 0.0)
    row = bench.summarize([early], [a], oracle_compute=0.5)
    assert row["kept_winner"] == 1 and row["sweeps"] == 1
    assert row["far_behind_runs"] == 2 and row["far_behind_stopped_by_40"] == 1
    assert row["compute_used"] == pytest.approx(185 / 300)
    assert row["oracle_saving_captured"] == pytest.approx((1 - 185 / 300) / 0.5)
    lo, hi = row["kept_wilson"]
    assert 0.2 < lo < 0.21 and hi == 1.0  # Wilson 95% of 1 of 1
    lost = score(a, "m", {"best": 10.0, "far": 100.0, "far2": 100.0}, 0.0)
    row = bench.summarize([lost], [a], oracle_compute=0.5)
    assert row["kept_winner"] == 0 and row["worst_regret"] == pytest.approx(0.2)


def test_setting_chosen_in_a_fold_never_sees_the_folds_own_sweeps(bench, monkeypatch):
    """choose_in_folds: a family's setting is the least compute that kept every winner of the
    OTHER families' sweeps; a setting that is cheapest only on the family itself is not chosen
    for it, and one that lost another family's winner is never chosen."""
    from benchmarks.race_replay import Outcome

    def out(sweep, kept, compute):
        return Outcome(sweep, "race", [], {}, 0.0 if kept else 0.1, compute, 0.0, {})

    class S:
        def __init__(self, name, family):
            self.name, self.family = name, family

    sweeps = [S("a/1", "a"), S("b/1", "b"), S("c/1", "c")]
    cheap_on_a = ("x",)
    loses_c = ("y",)
    grid = {
        bench.DEFAULT: [out("a/1", True, 0.9), out("b/1", True, 0.9), out("c/1", True, 0.9)],
        cheap_on_a: [out("a/1", True, 0.1), out("b/1", True, 0.95), out("c/1", True, 0.95)],
        loses_c: [out("a/1", True, 0.5), out("b/1", True, 0.2), out("c/1", False, 0.2)],
    }
    monkeypatch.setattr(bench, "setting_label", str)  # the toy keys are not Race settings
    chosen, picks = bench.choose_in_folds(grid, sweeps)
    assert picks == {"a": str(bench.DEFAULT), "b": str(cheap_on_a), "c": str(loses_c)}
    assert [o.compute_fraction for o in chosen] == [0.9, 0.95, 0.2]


def test_race_page_and_readme_show_what_the_corpus_replay_wrote(bench):
    """The race page's corpus tables (methods; Race by kind of metric) are the benchmark's tables
    of the results it wrote, row for row, and the README's row quotes its defaults' numbers."""
    res = json.loads((ROOT / "benchmarks" / "results" / "race_corpus.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text(encoding="utf-8")
    rows = [line for line in bench.table(res["table"]).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(res["table"])  # the header and one row per method
    kinds = [line for line in bench.kind_table(res).splitlines() if line.startswith("| ")]
    assert len(kinds) == 3  # the header, validation, training reward
    for line in rows + kinds:
        assert line in page, f"the race page lacks the corpus replay's row: {line}"
    d = res["table"]["Race (defaults)"]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = (
        f"{d['kept_winner']:.0f} of {d['sweeps']} winners kept at {d['compute_used']:.0%} of the "
        f"compute"
    )
    assert said in readme, said
    assert len(res["sweeps"]) == len(json.loads(bench.SWEEP_LIST.read_text())["sweeps"])
    known = json.loads(
        (ROOT / "benchmarks" / "results" / "race_corpus_known_family.json").read_text()
    )
    (row,) = [
        line for line in bench.table(known["table"]).splitlines() if "Race (defaults)" in line
    ]
    assert row in page, f"the race page lacks the known-family replay's row: {row}"
    assert set(known["sweeps"]) == set(res["sweeps"])
