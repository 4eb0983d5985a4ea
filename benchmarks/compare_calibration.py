"""Comparison study: parameter intervals per parameter, and how often compare's verdicts are false.

Simulated runs (NOT real training) from the ScaleRL paper's reported parameter sets (R0 = 0.30
assumed), 81 evaluations over 6.3 C_mid of compute, evaluation noise mean@16 on 1,000 prompts
(Beta-spread prompt difficulties, binomial generations) plus AR(1) run-level drift (sd 0.006,
lag-1 correlation 0.9), fitted with the paper's early window dropped (the first 1.5/16 of the
budget), R0 free, as a user of :func:`rlcurves.compare` would fit them.

1. Per-parameter coverage of the raw AR(1) bootstrap (the draws behind compare), and the one
   spread factor per parameter (same for every level) that makes its 90% interval cover 90%:
   fitted on one set of runs (``--calibrate`` prints it), validated on fresh seeds at 50/80/90/95%
   with the library's :data:`rlcurves._samples.PARAMETER_INFLATION`.
2. Verdict false rates at nominal 10% (level 0.9): identical-recipe pairs (false "higher"/"lower"
   ceiling, false "steeper"/"shallower", false "sooner"/"later"); pairs whose A differ by exactly
   the margin 0.02 (false "same ceiling"); pairs with delta A = +0.015 and equal B, C_mid (false
   "more efficient": the issue's 55% case).
3. Several seeds: three seeds per recipe with seed-to-seed A sd 0.012; coverage of the recipe's A
   by :func:`rlcurves.fit_runs`'s run-level interval.
4. compare() with several seeds per recipe (issue 26): pairs of recipes, three seeds each (the
   seeds' A scatter with sd 0.012 around the recipe's), true delta A 0 or +0.03 (B, C_mid
   equal): coverage of the true delta A by the 90% interval (Welch's t on the per-run fits) and
   how often the ceiling verdict is "higher"/"lower"/"same".
5. MCMC: how often :func:`rlcurves.bayes.posterior` (4 over-dispersed ensembles, split
   rank-normalized R-hat and bulk/tail ESS) reports non-convergence on these runs, and its
   max R-hat.

Run: python -m benchmarks.compare_calibration [--quick] [--calibrate]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from tqdm.auto import tqdm

from rlcurves import RLCurvesError, compare, fit_runs, fit_sigmoid, sigmoid
from rlcurves._samples import PARAMETER_INFLATION, parameter_samples

from ._common import save

R0 = 0.30
LEVELS = (0.5, 0.8, 0.9, 0.95)
PARAMS = ("A", "B", "C_mid", "R0")
# (C_mid, B, A) as reported in the paper (shared/SCALERL.md)
PAPER_SETS = [
    (2542.0, 1.92, 0.610),
    (11272.0, 1.89, 0.645),
    (2542.0, 2.44, 0.585),
    (3054.0, 2.22, 0.590),
    (2936.0, 2.07, 0.595),
    (4242.0, 1.65, 0.710),
    (2818.0, 1.77, 0.605),
    (10909.0, 1.70, 0.645),
    (2896.0, 2.05, 0.595),
    (1675.0, 1.09, 0.615),
]


def simulate(rng, c_mid, b, a, *, drift_sd=0.006, rho=0.9, n_prompts=1000, n_gen=16):
    """One run: compute (81,), rewards (81,), with binomial mean@16 noise and AR(1) drift."""
    c = np.linspace(0, 6.3 * c_mid, 81)
    p = sigmoid(c, a, b, c_mid, R0)
    drift = np.empty(c.size)
    drift[0] = rng.normal(0, drift_sd)
    for t in range(1, c.size):
        drift[t] = rho * drift[t - 1] + math.sqrt(1 - rho * rho) * rng.normal(0, drift_sd)
    q = np.clip(p + drift, 1e-3, 1 - 1e-3)
    conc = 2.0
    diff = rng.beta(conc * q[:, None], conc * (1 - q[:, None]), size=(c.size, n_prompts))
    y = rng.binomial(n_gen, diff).mean(axis=1) / n_gen
    return c, y


def fit_run(c, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, y, min_compute=c.max() * 1.5 / 16)


def _scale(p, v):
    return np.log(v) if p in ("B", "C_mid") else v


def needed_factors(fit, draws, truth, level=0.9):
    """Per parameter: the spread factor the raw draws need for their interval to reach truth."""
    q_lo, q_hi = (1 - level) / 2, (1 + level) / 2
    out = {}
    for p in PARAMS:
        est = _scale(p, fit.params[p])
        lo, hi = np.quantile(_scale(p, draws[p].to_numpy()), [q_lo, q_hi])
        t = _scale(p, truth[p])
        side = hi - est if t >= est else est - lo
        out[p] = abs(t - est) / side if side > 0 else math.inf
    return out


def coverage_part(n_runs, seed0, n_boot, factors):
    needed = {p: [] for p in PARAMS}
    hits = {p: {lv: 0 for lv in LEVELS} for p in PARAMS}
    for i in tqdm(range(n_runs), desc="parameters", leave=False):
        rng = np.random.default_rng([seed0, i])
        c_mid, b, a = PAPER_SETS[i % len(PAPER_SETS)]
        fit = fit_run(*simulate(rng, c_mid, b, a))
        truth = {"A": a, "B": b, "C_mid": c_mid, "R0": R0}
        raw = parameter_samples(fit, n_boot, seed=i, inflation=1.0)
        for p, k in needed_factors(fit, raw, truth).items():
            needed[p].append(k)
        cal = parameter_samples(fit, n_boot, seed=i, inflation=factors)
        for p in PARAMS:
            for lv in LEVELS:
                lo, hi = np.quantile(cal[p], [(1 - lv) / 2, (1 + lv) / 2])
                hits[p][lv] += lo <= truth[p] <= hi
    return needed, {p: {lv: hits[p][lv] / n_runs for lv in LEVELS} for p in PARAMS}


def verdict_part(n_pairs, seed0, n_samples):
    cases = {
        "identical": (0.0, 0.0),
        "delta A = margin": (0.02, 0.0),
        "delta A = +0.015, same B": (0.015, 0.0),
    }
    out = {}
    for case, (d_a, _) in cases.items():
        counts = {"same ceiling": 0, "ceiling ranked": 0, "B ranked": 0, "reach ranked": 0}
        for i in tqdm(range(n_pairs), desc=case, leave=False):
            rng = np.random.default_rng([seed0, i, int(d_a * 1000)])
            c_mid, b, a = PAPER_SETS[i % len(PAPER_SETS)]
            fb = fit_run(*simulate(rng, c_mid, b, a))
            fv = fit_run(*simulate(rng, c_mid, b, a + d_a))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cmp = compare({"base": fb, "variant": fv}, n_samples=n_samples, seed=i)
                v = cmp.verdicts().iloc[0]
                reach = cmp.reach().iloc[0]["reach"]
            counts["same ceiling"] += v["ceiling"] == "same ceiling"
            counts["ceiling ranked"] += v["ceiling"] in ("higher", "lower")
            counts["B ranked"] += v["efficiency"] in ("higher", "lower")
            counts["reach ranked"] += reach in ("sooner", "later")
        out[case] = {k: v / n_pairs for k, v in counts.items()}
    return out


def seeds_part(n_recipes, seed0, n_boot):
    hits = {lv: 0 for lv in LEVELS}
    for i in tqdm(range(n_recipes), desc="seeds", leave=False):
        rng = np.random.default_rng([seed0, i, 7])
        c_mid, b, a = PAPER_SETS[i % len(PAPER_SETS)]
        import pandas as pd

        frames = []
        for s, a_s in enumerate(a + rng.normal(0, 0.012, 3)):
            c, y = simulate(rng, c_mid, b, a_s)
            frames.append(pd.DataFrame({"compute": c, "reward": y, "run": f"s{s}"}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rf = fit_runs(pd.concat(frames), min_compute=c.max() * 1.5 / 16, n_boot=n_boot, seed=i)
        for lv in LEVELS:
            ci = rf.ci(lv).set_index("parameter").loc["A"]
            hits[lv] += ci["lower"] <= a <= ci["upper"]
    return {lv: hits[lv] / n_recipes for lv in LEVELS}


def seeded_pair(rng, c_mid, b, a, delta, n_seeds=3, seed_sd=0.012):
    """Two recipes (A and A + delta), each ``n_seeds`` runs whose A scatter around the recipe's."""
    import pandas as pd

    out = {}
    for name, a_recipe in (("base", a), ("variant", a + delta)):
        frames = []
        for s_i, a_s in enumerate(a_recipe + rng.normal(0, seed_sd, n_seeds)):
            c, y = simulate(rng, c_mid, b, a_s)
            frames.append(pd.DataFrame({"compute": c, "reward": y, "run": f"s{s_i}"}))
        out[name] = pd.concat(frames, ignore_index=True)
    return out, c


def seeded_compare_part(n_pairs, seed0, n_samples=200):
    """Coverage of the true delta A by compare()'s seeded interval, and its verdict rates."""
    out = {}
    for delta in (0.0, 0.03):
        hits, verdicts, widths = 0, {}, []
        for i in tqdm(range(n_pairs), desc=f"seeds, delta A {delta:+.2f}", leave=False):
            rng = np.random.default_rng([seed0, i, int(delta * 1000)])
            c_mid, b, a = PAPER_SETS[i % len(PAPER_SETS)]
            data, c = seeded_pair(rng, c_mid, b, a, delta)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cmp = compare(data, n_samples=n_samples, seed=i, min_compute=c.max() * 1.5 / 16)
            row = cmp.table.set_index("variant").loc["variant"]
            hits += row["delta_A_lower"] <= delta <= row["delta_A_upper"]
            widths.append(row["delta_A_upper"] - row["delta_A_lower"])
            v = cmp.verdicts().iloc[0]["ceiling"]
            verdicts[v] = verdicts.get(v, 0) + 1
        out[f"{delta:+.2f}"] = {
            "pairs": n_pairs,
            "coverage_90": hits / n_pairs,
            "median_width": float(np.median(widths)),
            "verdicts": {k: v / n_pairs for k, v in verdicts.items()},
            "basis": str(row["basis"]),
        }
    return out


def mcmc_part(n_runs, seed0):
    from rlcurves.bayes import posterior

    failed, rhats = 0, []
    for i in tqdm(range(n_runs), desc="mcmc", leave=False):
        rng = np.random.default_rng([seed0, i, 11])
        c_mid, b, a = PAPER_SETS[i % len(PAPER_SETS)]
        fit = fit_run(*simulate(rng, c_mid, b, a))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = posterior(fit, seed=i, progress=False, target_ess=1000, max_steps=4000)
        except RLCurvesError:  # could not start: a failure too, reported
            failed += 1
            continue
        failed += not post.converged
        rhats.append(max(post.rhat.values()))
    top = float(np.max(rhats)) if rhats else math.nan
    return {"runs": n_runs, "not converged": failed, "max R-hat": top}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--calibrate", action="store_true", help="print the factors, fitted")
    args = parser.parse_args(argv)
    n_runs, n_pairs, n_seeds, n_mcmc = (30, 20, 10, 2) if args.quick else (120, 60, 30, 6)
    n_seeded = 40 if args.quick else 300
    t0 = time.perf_counter()
    needed, _ = coverage_part(n_runs if not args.calibrate else 200, 1, 300, PARAMETER_INFLATION)
    fitted = {p: round(float(np.quantile(needed[p], 0.9)), 2) for p in PARAMS}
    print(f"factors making each raw 90% interval cover 90% (calibration set): {fitted}")
    if args.calibrate:
        return
    _, coverage = coverage_part(n_runs, 2, 300, PARAMETER_INFLATION)
    print(f"\nvalidation ({n_runs} fresh runs), factors {PARAMETER_INFLATION}:")
    print(f"{'parameter':<9} " + " ".join(f"{lv:>5.0%}" for lv in LEVELS))
    for p in PARAMS:
        print(f"{p:<9} " + " ".join(f"{coverage[p][lv]:>5.0%}" for lv in LEVELS))
    verdicts = verdict_part(n_pairs, 3, 300)
    print(f"\nverdicts at level 0.9 ({n_pairs} pairs per case; a false rate should be <= 10%):")
    for case, rates in verdicts.items():
        print(f"  {case:<26} " + ", ".join(f"{k} {v:.0%}" for k, v in rates.items()))
    seeds = seeds_part(n_seeds, 4, 300)
    print(f"\n3 seeds per recipe ({n_seeds} recipes): coverage of A " + str(seeds))
    seeded = seeded_compare_part(n_seeded, 6)
    print(f"\ncompare() with 3 seeds per recipe ({n_seeded} pairs per true delta A):")
    for delta, r in seeded.items():
        print(
            f"  delta A {delta}: 90% interval covered {r['coverage_90']:.1%} (median width "
            f"{r['median_width']:.3f}); verdicts {r['verdicts']}"
        )
    mcmc = mcmc_part(n_mcmc, 5)
    print(f"\nMCMC on {n_mcmc} runs: {mcmc}")
    path = save(
        "compare_calibration",
        {
            "fitted_factors": fitted,
            "factors": PARAMETER_INFLATION,
            "coverage": coverage,
            "verdicts": verdicts,
            "seeds_coverage_A": seeds,
            "seeded_compare": seeded,
            "mcmc": mcmc,
            "seconds": time.perf_counter() - t0,
        },
    )
    print(f"\nsaved {path} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
