"""benchmarks/error_correlation.py (issue 43's statistical review): the intraclass correlation of
the forecast errors of runs in one sweep, its permutation p-value and bootstrap interval; the
committed results are what the module computes, and the race page shows them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from benchmark_modules import benchmark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "error_correlation.json"


@pytest.fixture(scope="module")
def bench():
    return benchmark("error_correlation")


def _draw(rng, rho: float, groups: int, size: int, shift=None):
    """Values of a random-effects model: a group effect of variance rho plus noise of variance
    1 - rho (correlation rho within a group); ``shift`` adds a stratum's effect per group."""
    g = np.repeat(np.arange(groups), size)
    y = math.sqrt(rho) * rng.standard_normal(groups)[g]
    y = y + math.sqrt(1 - rho) * rng.standard_normal(groups * size)
    if shift is not None:
        y = y + shift[g]
    return y, g


def _se(rho: float, groups: int, size: int) -> float:
    """The large-sample standard error of the ANOVA ICC with equal groups (Fisher):
    sqrt(2 (1 - rho)^2 (1 + (n - 1) rho)^2 / (n (n - 1) (k - 1)))."""
    n, k = size, groups
    return math.sqrt(2 * (1 - rho) ** 2 * (1 + (n - 1) * rho) ** 2 / (n * (n - 1) * (k - 1)))


@pytest.mark.parametrize("rho", [0.4, 0.0])
def test_icc_recovers_a_known_correlation(bench, rho):
    """1,000 groups of 3: the estimate is within 4 standard errors of the truth (about 0.08 at
    rho 0.4 and 0.07 at 0; a miss that far has probability 6e-5 under normality)."""
    y, g = _draw(np.random.default_rng(7), rho, 1000, 3)
    est = bench.icc(y, g)
    assert abs(est - rho) < 4 * _se(rho, 1000, 3), est


def test_icc_is_the_anova_estimator_with_unequal_groups(bench):
    """Against the textbook formula written out, on groups of sizes 2-5; a group below
    ``min_size`` is left out; labels may be any values."""
    rng = np.random.default_rng(3)
    sizes = [2, 3, 5, 4, 2, 3]
    g = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.standard_normal(len(g)) + 0.8 * rng.standard_normal(len(sizes))[g]
    big_n, k = len(y), len(sizes)
    means = np.array([y[g == i].mean() for i in range(k)])
    msb = sum(n * (m - y.mean()) ** 2 for n, m in zip(sizes, means, strict=True)) / (k - 1)
    msw = sum(((y[g == i] - means[i]) ** 2).sum() for i in range(k)) / (big_n - k)
    n0 = (big_n - sum(n * n for n in sizes) / big_n) / (k - 1)
    want = (msb - msw) / (msb + (n0 - 1) * msw)
    assert bench.icc(y, [f"sweep {i}" for i in g]) == pytest.approx(want, rel=1e-12)
    one = np.append(y, 9.0), np.append(g, 99)
    assert bench.icc(*one, min_size=2) == pytest.approx(want, rel=1e-12)
    assert bench.icc(*one) != pytest.approx(want)


def test_permutation_detects_a_correlation(bench):
    """rho = 0.5, 30 groups of 3 (the ICC's standard error about 0.11): p < 0.01 at this seed;
    the permutations' row 0 is the statistic as observed."""
    y, g = _draw(np.random.default_rng(11), 0.5, 30, 3)
    units = np.arange(len(y))
    p, null = bench.permutation_test(y, units, g, np.zeros(len(y)), n_perm=2000, rng=5)
    assert p < 0.01
    assert abs(null) < 0.1  # the permutations' mean ICC: about -1 / (N - 1) under no effect


def test_permutation_p_is_uniform_under_no_correlation_within_strata(bench):
    """No correlation within groups beyond their stratum's shift (3 strata of 10 groups of 3,
    shifts of sd 1): shuffling within the strata keeps the test's size. Over 400 seeded null
    replicates (200 permutations each, P(p < 0.05) = 10 / 201 exactly) the share of p < 0.05 is
    Binomial(400, 0.0498) / 400, sd 0.011; 0.02-0.09 (8 to 36 of 400) leaves out 0.07% below
    and 0.03% above. Without the strata the stratum shifts make it reject."""
    rng = np.random.default_rng(2024)
    strata_of_group = np.repeat(np.arange(3), 10)
    small, pooled = [], []
    for _ in range(400):
        shift = rng.standard_normal(3)[strata_of_group]
        y, g = _draw(rng, 0.0, 30, 3, shift=shift)
        units = np.arange(len(y))
        p, _ = bench.permutation_test(y, units, g, strata_of_group[g], n_perm=200, rng=rng)
        small.append(p < 0.05)
        if len(pooled) < 20:
            pooled.append(bench.permutation_test(y, units, g, np.zeros(len(y)), n_perm=200,
                                                 rng=rng)[0] < 0.05)  # fmt: skip
    assert 0.02 <= np.mean(small) <= 0.09, np.mean(small)
    assert np.mean(pooled) > 0.5  # the stratum shifts, read as correlation when not kept apart


def test_permutation_moves_a_units_values_together(bench):
    """Pooled over cells (fractions), a unit's (run's) values move with it: its cells' groups
    stay the same sweep, so a run's persistent error does not look like fresh evidence at each
    fraction. Two units, each with one value per cell, two labels: every permutation either keeps
    or swaps both cells' labels, so the statistic takes two values only."""
    y = np.array([2.0, 2.1, 2.2, 2.0, 0.0, 0.1, 0.2, -0.1])  # units 0, 1 high; 2, 3 low
    unit = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    cell = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    labels, strata = np.array([0, 0, 1, 1]), np.zeros(4)
    p, _ = bench.permutation_test(y, unit, labels, strata, cell, n_perm=500, rng=1)
    # of the 4! / (2! 2!) = 6 labelings, the observed one and its mirror give the largest ICC:
    # p near 1/3 (shuffled cell by cell, both cells would match by chance 1/9 of the time)
    assert p == pytest.approx(1 / 3, abs=0.08)


def test_bootstrap_interval_covers_the_estimate(bench):
    y, g = _draw(np.random.default_rng(9), 0.4, 40, 3)
    lo, hi = bench.bootstrap_interval(y, g, n_boot=400, rng=2)
    assert lo < bench.icc(y, g) < hi and hi - lo < 0.6


def test_committed_results_are_what_the_module_computes(bench):
    """The counts and the ICCs (deterministic) recomputed from the shipped records, with few
    permutations and resamples; the committed p-values and intervals come from the full counts
    and the committed seed."""
    res = json.loads(RESULTS.read_text())
    assert (res["permutations"], res["bootstrap"]) == (2000, 1000)
    again = bench.measure(n_perm=20, n_boot=20, seed=res["seed"])
    assert list(again) == list(res["rows"]) == list(bench.KINDS)
    for kind, rows in res["rows"].items():
        assert list(again[kind]) == list(rows)
        for key, row in rows.items():
            new = again[kind][key]
            for field in ("fractions", "sweeps", "families", "runs", "records"):
                assert new[field] == row[field], (kind, key, field)
            assert new["icc"] == pytest.approx(row["icc"], rel=1e-9, abs=1e-12), (kind, key)
            assert new["sd_ratio"] == pytest.approx(row["sd_ratio"], rel=1e-9), (kind, key)
            assert 0 < row["p"] <= 1 and row["interval"][0] <= row["interval"][1]


def test_race_page_shows_what_the_benchmark_wrote(bench):
    res = json.loads(RESULTS.read_text())
    page = (ROOT / "docs" / "benchmarks" / "race.md").read_text(encoding="utf-8")
    rows = [line for line in bench.table(res).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 * (1 + len(bench.FRACTIONS))  # the header, then the rows
    for line in rows:
        assert line in page, f"the race page lacks the error-correlation benchmark's row: {line}"
    assert "python -m benchmarks.error_correlation" in page
