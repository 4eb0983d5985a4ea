"""Are the forecast errors of runs in one sweep correlated? The intraclass correlation, by sweep.

Race pairs the forecasts' draws of different runs at random: it treats their errors as
independent. Issue 43's statistical review found that claim resting on 2-3 sweeps per family, a
design that detects a true correlation of 0.3 only 7-21% of the time. The corpus now has 28
sweeps (``benchmarks.race_corpus``); this measures it on them.

**The errors.** The shipped calibrations' backtests (``default_calibration(kind).records``, one per
run and fraction 0.2, 0.3, ..., 0.8 of the run's budget at which the forecast was made; ``error``
is the final value observed minus the forecast), one kind of metric at a time (validation,
training reward). Each error is standardized by its family and fraction: z = error / sd of the
errors of all records of that family and fraction (the sample sd; the mean is not removed, so a
family's common bias is an error its runs share).

**The sweeps.** Each run is counted in the first sweep of the corpus list that holds it
(``benchmarks/race_corpus_sweeps.json``, the registry's order): a few runs (a sweep's baseline)
sit in several sweeps, and counting them in each would correlate the sweeps. Runs with records
but in no sweep are used for the standardization only. At a fraction, a sweep counts when at
least 2 of its runs have a record there.

**The measures**, per kind of metric, for each fraction and pooled over 0.2-0.5 (where Race's
stop decisions are made):

- the intraclass correlation (ICC) of z within sweeps, the one-way random-effects ANOVA
  estimator for unequal group sizes, (MSB - MSW) / (MSB + (n0 - 1) MSW) with
  n0 = (N - sum n_i^2 / N) / (k - 1); pooled, the groups are (sweep, fraction);
- a one-sided permutation p-value (2,000 permutations): the sweep labels shuffled among the
  runs of each family (one shuffle of the runs for every fraction, so a run's errors at
  different fractions stay together; the null keeps the families apart). The permutations' mean
  ICC is what the families' differences alone give ("families alone");
- a 90% percentile interval from 1,000 bootstrap resamples of the sweeps (a sweep drawn twice
  counts as two groups; pooled, a sweep brings all its fractions);
- what it means for Race: two runs of one sweep with correlation rho have a difference whose sd
  is sqrt(1 - rho) times what independence assumes, so with rho > 0 Race's probabilities for
  their comparison are conservative (its intervals of the differences too wide).

Seeded (numpy's default_rng, one stream per kind and row), numpy only, a few seconds.

Run: python -m benchmarks.error_correlation [--out PATH] (the results go to
benchmarks/results/error_correlation.json and the table is printed; docs/benchmarks/race.md
shows it.)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
KINDS = ("validation", "training reward")
FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
POOLED = (0.2, 0.3, 0.4, 0.5)  # where Race's stop decisions are made
MIN_RUNS = 2  # runs with a record at the fraction for a sweep to count
LEVEL = 0.90


# ---- the estimator -------------------------------------------------------------------------------


def icc_from_sums(n, s, q, min_size: int = 1):
    """The one-way ANOVA intraclass correlation from each group's size ``n``, sum ``s`` and sum
    of squares ``q`` (arrays, groups on the last axis; any leading axes are replicates). Groups
    with fewer than ``min_size`` members are left out; NaN where fewer than 2 groups remain or
    nothing varies."""
    n, s, q = (np.asarray(a, dtype=float) for a in (n, s, q))
    keep = (n >= max(min_size, 1)).astype(float)
    n, s, q = n * keep, s * keep, q * keep
    big_n, k = n.sum(-1), keep.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        between = np.where(n > 0, s * s / np.where(n > 0, n, 1.0), 0.0)
        ssb = between.sum(-1) - s.sum(-1) ** 2 / big_n
        ssw = q.sum(-1) - between.sum(-1)
        msb, msw = ssb / (k - 1), ssw / (big_n - k)
        n0 = (big_n - (n * n).sum(-1) / big_n) / (k - 1)
        out = (msb - msw) / (msb + (n0 - 1) * msw)
    return np.where((k >= 2) & (big_n > k), out, np.nan)


def icc(y, groups, min_size: int = 1) -> float:
    """The intraclass correlation of the values ``y`` within ``groups`` (any labels), the one-way
    random-effects ANOVA estimator with unequal group sizes (n0 adjustment)."""
    y = np.asarray(y, dtype=float)
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    n = np.bincount(g)
    return float(icc_from_sums(n, np.bincount(g, y, len(n)), np.bincount(g, y * y, len(n)),
                               min_size))  # fmt: skip


def _batch_icc(y, codes, n_groups: int, min_size: int):
    """The ICC of ``y`` for each row of ``codes`` (replicates x records, group indices)."""
    reps = codes.shape[0]
    flat = (codes + n_groups * np.arange(reps)[:, None]).ravel()
    size = reps * n_groups
    yy = np.broadcast_to(y, codes.shape).ravel()
    n = np.bincount(flat, minlength=size).reshape(reps, n_groups)
    s = np.bincount(flat, yy, size).reshape(reps, n_groups)
    q = np.bincount(flat, yy * yy, size).reshape(reps, n_groups)
    return icc_from_sums(n, s, q, min_size)


def permutation_test(y, unit, labels, strata, cell=None, *, n_perm: int = 2000, rng=None,
                     min_size: int = 1) -> tuple[float, float]:  # fmt: skip
    """One-sided permutation p-value of the ICC of ``y`` grouped by (its unit's label, its cell),
    and the permutations' mean ICC.

    ``y[j]`` belongs to unit ``unit[j]`` (an index into ``labels`` and ``strata``, e.g. a run);
    ``labels[u]`` is the unit's group (its sweep), ``strata[u]`` its stratum (its family);
    ``cell[j]`` splits the groups further (the fraction; None: one cell). The permutations
    shuffle the labels among the units of each stratum, all of a unit's values moving together,
    and apply the same statistic (groups with fewer than ``min_size`` values left out). The
    p-value is (1 + #{permuted ICC >= observed}) / (1 + n_perm)."""
    rng = np.random.default_rng(rng)
    y = np.asarray(y, dtype=float)
    unit = np.asarray(unit)
    _, lab = np.unique(np.asarray(labels), return_inverse=True)
    _, strata = np.unique(np.asarray(strata), return_inverse=True)
    _, cell = np.unique(np.zeros(len(y)) if cell is None else np.asarray(cell), return_inverse=True)
    n_cells, n_labels = int(cell.max()) + 1, int(lab.max()) + 1
    perm = np.tile(lab, (n_perm + 1, 1))  # row 0: the labels as observed
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        order = np.argsort(rng.random((n_perm, len(members))), axis=1)
        perm[1:, members] = lab[members][order]
    codes = perm[:, unit] * n_cells + cell
    stats = _batch_icc(y, codes, n_labels * n_cells, min_size)
    observed, null = stats[0], stats[1:]
    p = (1 + np.sum(null >= observed - 1e-12)) / (1 + n_perm)
    return float(p), float(np.nanmean(null))


def bootstrap_interval(y, sweep, cell=None, *, n_boot: int = 1000, rng=None, level=LEVEL,
                       min_size: int = 1) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of the ICC of ``y`` grouped by (``sweep``, ``cell``), resampling the
    sweeps with replacement (a sweep drawn twice is two groups; it brings all its cells)."""
    rng = np.random.default_rng(rng)
    y = np.asarray(y, dtype=float)
    _, sw = np.unique(np.asarray(sweep), return_inverse=True)
    _, cell = np.unique(np.zeros(len(y)) if cell is None else np.asarray(cell), return_inverse=True)
    k, c = int(sw.max()) + 1, int(cell.max()) + 1
    idx = sw * c + cell
    n = np.bincount(idx, minlength=k * c).reshape(k, c)
    s = np.bincount(idx, y, k * c).reshape(k, c)
    q = np.bincount(idx, y * y, k * c).reshape(k, c)
    draw = rng.integers(0, k, size=(n_boot, k))
    stats = icc_from_sums(*(a[draw].reshape(n_boot, k * c) for a in (n, s, q)), min_size)
    lo, hi = np.nanquantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# ---- the corpus ----------------------------------------------------------------------------------


def standardized(kind: str, sweeps) -> tuple:
    """The backtests of ``kind`` with ``z`` (error over the sd of its family and fraction) and
    ``sweep`` (the first sweep of the corpus list that holds the run; None when none does)."""
    from rlcurves.calibrate import default_calibration

    r = default_calibration(kind).records.copy()
    r["fraction"] = r["fraction"].astype(float).round(6)
    r["z"] = r["error"] / r.groupby(["family", "fraction"])["error"].transform("std")
    first: dict[str, str] = {}
    for s in sweeps:
        if s.kind == kind:
            for src in s.sources:
                first.setdefault(f"{s.family}/{src}", s.name)
    r["sweep"] = r["run"].map(first)
    return r, first


def measure_one(r, first: dict, fractions, *, n_perm: int, n_boot: int, seed) -> dict:
    """The row for ``fractions`` (one, or several pooled with (sweep, fraction) as the groups)."""
    at = r[r["fraction"].isin([round(f, 6) for f in fractions]) & r["sweep"].notna()]
    at = at[np.isfinite(at["z"])]
    counts = at.groupby(["sweep", "fraction"])["run"].transform("size")
    used = at[counts >= MIN_RUNS]
    # the permutation's units: every run of a sweep of this kind (its family, its first sweep)
    runs = sorted(first)
    fam = [x.split("/", 1)[0] for x in runs]
    unit = used["run"].map({x: i for i, x in enumerate(runs)}).to_numpy()
    y = used["z"].to_numpy(float)
    ss = np.random.SeedSequence(seed)
    perm_seed, boot_seed = ss.spawn(2)
    rho = icc(y, used["sweep"] + "@" + used["fraction"].astype(str), MIN_RUNS)
    p, null = permutation_test(y, unit, [first[x] for x in runs], fam, used["fraction"],
                               n_perm=n_perm, rng=perm_seed, min_size=MIN_RUNS)  # fmt: skip
    lo, hi = bootstrap_interval(y, used["sweep"], used["fraction"], n_boot=n_boot,
                                rng=boot_seed, min_size=MIN_RUNS)  # fmt: skip
    return {
        "fractions": [float(f) for f in fractions],
        "sweeps": int(used["sweep"].nunique()),
        "families": int(used["family"].nunique()),
        "runs": int(used["run"].nunique()),
        "records": len(used),
        "icc": float(rho),
        "interval": [lo, hi],
        "families_alone": null,
        "p": p,
        "sd_ratio": math.sqrt(1 - rho) if rho < 1 else 0.0,
    }


def measure(*, n_perm: int = 2000, n_boot: int = 1000, seed: int = 0, sweeps=None) -> dict:
    """Every row: per kind of metric, the pooled 0.2-0.5 row and one per fraction."""
    from benchmarks.race_corpus import load_sweeps

    sweeps = load_sweeps() if sweeps is None else sweeps
    out: dict = {}
    for i, kind in enumerate(KINDS):
        r, first = standardized(kind, sweeps)
        rows = {"pooled": measure_one(r, first, POOLED, n_perm=n_perm, n_boot=n_boot,
                                      seed=[seed, i, 0])}  # fmt: skip
        for j, f in enumerate(FRACTIONS, start=1):
            rows[f"{f:g}"] = measure_one(r, first, (f,), n_perm=n_perm, n_boot=n_boot,
                                         seed=[seed, i, j])  # fmt: skip
        out[kind] = rows
    return out


def table(res: dict) -> str:
    """The rows as the race page shows them."""
    lines = [
        "| kind of metric | fraction of the budget | sweeps | runs | ICC (90% bootstrap over "
        "sweeps) | families alone | p (permutation) | "
        "sd of two runs' difference / independence's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        for key, row in res["rows"][kind].items():
            frac = "0.2-0.5, pooled" if key == "pooled" else key
            lo, hi = row["interval"]
            lines.append(
                f"| {kind} | {frac} | {row['sweeps']} | {row['runs']} | {row['icc']:+.2f} "
                f"[{lo:+.2f}, {hi:+.2f}] | {row['families_alone']:+.2f} | {row['p']:.3f} | "
                f"{row['sd_ratio']:.2f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    from benchmarks._common import machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=str(RESULTS / "error_correlation.json"), help="JSON results"
    )
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    res = {
        "machine": machine(),
        "permutations": args.permutations,
        "bootstrap": args.bootstrap,
        "seed": args.seed,
        "level": LEVEL,
        "rows": measure(n_perm=args.permutations, n_boot=args.bootstrap, seed=args.seed),
    }
    res["seconds"] = time.perf_counter() - t0
    print(table(res))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(f"written {args.out} ({res['seconds']:.1f} s)")
    return res


if __name__ == "__main__":
    main()
