"""benchmarks/race_reasons.py (issue 43): why Race keeps the runs that end far behind, sorted from
the reasons its reports give; the page shows what it wrote."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from benchmark_modules import benchmark

import rlcurves.decide
import rlcurves.race

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return benchmark("race_reasons")


def test_every_kind_is_marked_by_words_the_library_writes(bench):
    """Each kind's marker is in the source that writes the reason (a reworded reason would fall
    into "other" unnoticed otherwise), and real reasons sort into their kinds."""
    source = inspect.getsource(rlcurves.decide) + inspect.getsource(rlcurves.race)
    for kind, words in bench.KINDS:
        assert any(w in source for w in words), kind
    said = {
        "5 of the 8 evaluations needed (min_points)": "too few evaluations (min_points)",
        "p(best) = 0.014; not yet: 'unlikely to beat the baseline' must hold on 2 consecutive "
        "refits over 3.5% of the budget (1 so far)": "the hold",
        "p(best) = 0.262; forecast 0.559 [0.490, 0.832] (90%) at the budget: p(beats the "
        "baseline) = 0.46, not decided yet": "the forecast does not exclude the leader's",
        "p(best) = 0.034; p(best) = 0.034: 'unlikely to beat the baseline' for the run alone "
        "(...), but stopping it would raise the risk of losing the winner by more than 0.01 by "
        "more than the alpha left (0.041 of 0.05 spent)": "the sweep's alpha spent",
        "the only run kept: nothing to compare with": "no rival to compare with",
        "most likely the best at the budget: 0.629 [0.355, 0.959]": "it leads",
        "something new": "other",
    }
    for reason, kind in said.items():
        assert bench.kind_of(reason) == kind, reason


def test_race_page_shows_what_the_reasons_benchmark_wrote(bench):
    res = json.loads((ROOT / "benchmarks" / "results" / "race_reasons.json").read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text(encoding="utf-8")
    rows = [line for line in bench.table(res).splitlines() if line.startswith("| ")]
    assert len(rows) >= 4
    for line in rows:
        assert line in page, f"the race page lacks the reasons benchmark's row: {line}"
    assert res["far_behind_runs"]["validation"] + res["far_behind_runs"]["training reward"] == 42
