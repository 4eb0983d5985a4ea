"""benchmarks/race_correlated.py: Race with the error its runs share taken out, on the corpus; the
race page shows what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_modules import benchmark

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def bench():
    return benchmark("race_correlated")


@pytest.fixture(scope="module")
def res():
    return json.loads((ROOT / "benchmarks" / "results" / "race_correlated.json").read_text())


def test_fold_correlations_leave_the_family_out(bench, res):
    """Each family's correlation is the other families' (of its kind) pooled ICC, clipped at 0:
    recomputed, and different from the one that includes the family's own sweeps."""
    sweeps = benchmark("race_corpus").load_sweeps()
    got = bench.fold_correlations(sweeps)
    assert got == pytest.approx(res["fold_correlations"], abs=1e-12)
    ec = benchmark("error_correlation")
    r, _ = ec.standardized("training reward", sweeps)
    at = r[r["fraction"].isin(bench.POOLED) & r["sweep"].notna() & np.isfinite(r["z"])]
    groups = at["sweep"] + "@" + at["fraction"].astype(str)
    every = ec.icc(at["z"].to_numpy(float), groups, ec.MIN_RUNS)
    for family in ("gsm8k_trl_train", "gsm8k_qwen3_train"):
        assert got[family] != pytest.approx(every, abs=1e-6)
    assert all(v >= 0 for v in got.values())


def test_race_page_shows_what_the_benchmark_wrote(bench, res):
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text()
    assert bench.table(res["rows"]) in page
    assert bench.simulated_table(res["simulated"]) in page
    assert bench.drawn_table(res["drawn"]) in page


def test_readme_quotes_the_benchmarks(res):
    """The README's row: the correlations measured and the replay at 0.4 and 0.2, as written."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    ec = json.loads((ROOT / "benchmarks" / "results" / "error_correlation.json").read_text())
    train, valid = (ec["rows"][k]["pooled"]["icc"] for k in ("training reward", "validation"))
    assert f"+{train:.2f} on the corpus's training-reward sweeps, +{valid:.2f} on validation" in (
        readme
    )
    r4, r2 = res["rows"]["0.4"], res["rows"]["0.2"]
    assert (
        f"`Race(error_correlation=0.4)` on the corpus: {r4['kept_winner']:.0f} of {r4['sweeps']} "
        f"winners kept at {r4['compute_used']:.1%} of the compute ("
        f"{res['rows']['0 (default)']['compute_used']:.1%} without), "
        f"{r4['far_behind_stopped_by_40']:.0f} of {r4['far_behind_runs']} far-behind runs"
    ) in readme
    assert f"0.2: {r2['kept_winner']:.0f} of {r2['sweeps']}" in readme
    assert f"lost by {r2['worst_regret']:.3f}) at {r2['compute_used']:.1%}" in readme
    assert sum(res["simulated"]["lost"].values()) == 0 and "no winner lost on 100" in readme
