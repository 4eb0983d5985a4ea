"""Calibration study: do rlcurves' forecast intervals cover what happens later in a run?

Two parts, both out of sample.

**Real runs** (the bundled corpus, :func:`rlcurves.calibrate.load_corpus`: 12 verl runs of
Qwen2.5-0.5B on GSM8K). Each run is fit on its first 25%, 50% and 75% of compute and forecast at
the mean of its last 5 evaluations (the observed target). The default method's interval is
``forecast +- q * scale`` (:mod:`rlcurves.calibrate`) with ``q`` taken by leave-one-run-out: the
conformal quantile of the scores of the OTHER 11 runs (all three fractions). The plain bootstraps
(residual, block, AR(1)) give their percentile bands as they are. Reported: coverage at
50/80/90/95% and mean width, per fraction; the range over runs is in the JSON.

**Simulated runs** (NOT real training) from the ScaleRL paper's ten parameter sets (R0 = 0.30
assumed), 81 evaluations over 6.3 C_mid, evaluation noise mean@16 on 1,000 prompts, in four noise
regimes: no drift, AR(1) drift (sd .006, rho .9), two time scales (AR(1) plus a slow AR(1),
sd .006, rho .99) and a random walk (sd .0015 per evaluation). Fit on half the budget (R0 fixed,
the paper's early window dropped), forecast the true expected value at the full budget. The
default uses the SHIPPED corpus calibration (it never saw a simulation): this measures whether
the real-run scores transfer.

``--write-calibration`` recomputes the shipped scores (rlcurves/data/calibration_corpus.json).

Run: python -m benchmarks.calibration [--quick] [--write-calibration]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from rlcurves import fit_sigmoid, sigmoid
from rlcurves.bootstrap import band, bootstrap
from rlcurves.calibrate import (
    CORPUS_NAME,
    N_EVAL,
    Calibration,
    calibrate,
    default_calibration,
    forecast_scale,
    load_corpus,
)

RESULTS = Path(__file__).parent / "results"
LEVELS = (0.5, 0.8, 0.9, 0.95)
FRACTIONS = (0.25, 0.5, 0.75)
RAW_KINDS = ("residual", "block", "ar1")
R0 = 0.30
SHIPPED = Path(__file__).parent.parent / "rlcurves" / "data" / "calibration_corpus.json"

# (run, C_mid, B, A) as reported in the paper (see shared/SCALERL.md)
PAPER_SETS = [
    ("8B batch 768", 2542.0, 1.92, 0.610),
    ("32k generation", 11272.0, 1.89, 0.645),
    ("8 gens/prompt", 2542.0, 2.44, 0.585),
    ("24 gens/prompt", 3054.0, 2.22, 0.590),
    ("32 gens/prompt", 2936.0, 2.07, 0.595),
    ("Scout MoE", 4242.0, 1.65, 0.710),
    ("batch 512", 2818.0, 1.77, 0.605),
    ("batch 2048", 10909.0, 1.70, 0.645),
    ("math curve", 2896.0, 2.05, 0.595),
    ("code curve", 1675.0, 1.09, 0.615),
]


@dataclass(frozen=True)
class Noise:
    """Evaluation noise: mean@n_gen on n_prompts plus drift of the policy.

    Drift: AR(1) (sd ``drift_sd``, lag-1 correlation ``drift_rho``), plus a slow second AR(1)
    component (``slow_sd``, ``slow_rho``: two time scales), plus a random walk (``walk_sd`` per
    evaluation).
    """

    drift_sd: float = 0.006
    drift_rho: float = 0.9
    slow_sd: float = 0.0
    slow_rho: float = 0.99
    walk_sd: float = 0.0
    n_prompts: int = 1000
    n_gen: int = 16
    concentration: float = 2.0  # Beta(c p, c (1 - p)) prompt difficulties


def _ar1(rng, k, n, sd, rho):
    out = np.zeros((k, n))
    if sd == 0:
        return out
    innovation = math.sqrt(1 - rho**2) * sd
    out[:, 0] = sd * rng.standard_normal(k)
    for t in range(1, n):
        out[:, t] = rho * out[:, t - 1] + innovation * rng.standard_normal(k)
    return out


def simulate(rng, params, noise: Noise, n_runs: int = 1):
    """``n_runs`` seeds of one configuration: compute (81,), rewards (n_runs, 81), truth."""
    _, c_mid, b, a = params
    budget = 6.3 * c_mid
    compute = np.linspace(0.0, budget, 81)
    mean = sigmoid(compute, a, b, c_mid, R0)
    k, n = n_runs, compute.size
    drift = _ar1(rng, k, n, noise.drift_sd, noise.drift_rho)
    drift += _ar1(rng, k, n, noise.slow_sd, noise.slow_rho)
    if noise.walk_sd:
        drift += np.cumsum(noise.walk_sd * rng.standard_normal((k, n)), axis=1)
    p = np.clip(mean[None, :] + drift, 1e-3, 1 - 1e-3)
    conc = noise.concentration
    difficulty = rng.beta(conc * p[..., None], conc * (1 - p[..., None]), (k, n, noise.n_prompts))
    passes = rng.binomial(noise.n_gen, difficulty).sum(axis=-1)
    reward = passes / (noise.n_prompts * noise.n_gen)
    return compute, reward, dict(A=a, B=b, C_mid=c_mid, R0=R0, budget=budget)


def fit_half(compute, reward, budget, runs=None):
    """Fit on half the budget, early window dropped, R0 fixed to the measured start."""
    r0 = float(np.mean(reward[compute == 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(
            compute,
            reward,
            r0=r0,
            min_compute=budget * 1500 / 16000,
            max_compute=budget / 2,
        )


REGIMES = {
    "no drift": Noise(drift_sd=0.0),
    "AR(1) drift": Noise(),
    "two time scales": Noise(slow_sd=0.006),
    "random walk": Noise(drift_sd=0.0, walk_sd=0.0015),
}


def _raw_bands(fit, at, n_boot, seed):
    """Percentile bands of the plain bootstraps at ``at`` (mean over ``at``), by kind and level."""
    out, ar1_curves = {}, None
    for kind in RAW_KINDS:
        b = bootstrap(fit, n_boot, kind=kind, seed=seed, progress=False)
        curves = b.curves(at)
        if kind == "ar1":
            ar1_curves = curves
        m = curves.mean(axis=1)[:, None]
        out[kind] = {lv: tuple(float(v[0]) for v in band(m, lv, b.bounds)) for lv in LEVELS}
    return out, ar1_curves


def real_runs(n_boot, seed=0):
    """Leave-one-run-out coverage on the corpus: one record per (run, fraction)."""
    corpus = load_corpus()
    cal = calibrate(corpus, name=CORPUS_NAME, n_boot=n_boot, seed=seed, progress=False)
    records = []
    for i, (name, frame) in enumerate(tqdm(corpus.items(), desc="real runs", leave=False)):
        c, r = frame["compute"].to_numpy(), frame["reward"].to_numpy()
        others = cal.without(name)
        for f in FRACTIONS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = fit_sigmoid(c, r, max_compute=f * c.max())
            tail_c = c[-N_EVAL:]
            raw, _ = _raw_bands(fit, tail_c, n_boot, seed + i)
            row = cal.details[(cal.details["run"] == name) & (cal.details["fraction"] == f)]
            d = row.iloc[0]
            records.append(
                {
                    "run": name,
                    "fraction": f,
                    "forecast": float(d["forecast"]),
                    "target": float(d["observed"]),
                    "default": {
                        lv: (
                            d["forecast"] - others.quantile(lv) * d["scale"],
                            d["forecast"] + others.quantile(lv) * d["scale"],
                        )
                        for lv in LEVELS
                    },
                    **raw,
                }
            )
    return records, cal


def simulated_runs(n_runs, n_boot, seed, shipped: Calibration):
    """Coverage of the true full-budget value on simulated runs, per noise regime."""
    out = {}
    for r_i, (regime, noise) in enumerate(REGIMES.items()):
        rng = np.random.default_rng(seed + 1000 * r_i)
        records = []
        for i in tqdm(range(n_runs), desc=regime, leave=False):
            params = PAPER_SETS[i % len(PAPER_SETS)]
            compute, rewards, truth = simulate(rng, params, noise)
            fit = fit_half(compute, rewards[0], truth["budget"])
            at = np.array([truth["budget"]])
            est = float(fit.predict(at[0]))
            raw, ar1_curves = _raw_bands(fit, at, n_boot, seed + i)
            scale = float(forecast_scale(fit, at, ar1_curves, shipped.n_eval)[0])
            target = float(sigmoid(at[0], truth["A"], truth["B"], truth["C_mid"], R0))
            default = {
                lv: (est - shipped.quantile(lv) * scale, est + shipped.quantile(lv) * scale)
                for lv in LEVELS
            }
            records.append(
                {"set": params[0], "forecast": est, "target": target, "default": default, **raw}
            )
        out[regime] = records
    return out


def coverage(records, method):
    """Coverage at every level and mean width at 90% of ``method`` over ``records``."""
    out = {"n": len(records)}
    for lv in LEVELS:
        inside = [r[method][lv][0] <= r["target"] <= r[method][lv][1] for r in records]
        out[f"cov_{int(lv * 100)}"] = float(np.mean(inside))
    out["width_90"] = float(np.mean([np.diff(r[method][0.9])[0] for r in records]))
    out["mae"] = float(np.median([abs(r["forecast"] - r["target"]) for r in records]))
    return out


METHODS = ("default", *RAW_KINDS)


def table(rows):
    lines = [
        "| data | method | n | 50% | 80% | 90% | 95% | mean width 90% | median abs err |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, method, cov in rows:
        lines.append(
            f"| {label} | {method} | {cov['n']} | {cov['cov_50']:.0%} | {cov['cov_80']:.0%} "
            f"| {cov['cov_90']:.0%} | {cov['cov_95']:.0%} | {cov['width_90']:.3f} "
            f"| {cov['mae']:.4f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized: fewer simulated runs")
    ap.add_argument("--runs", type=int, default=None, help="simulated runs per noise regime")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples per fit")
    ap.add_argument(
        "--write-calibration",
        action="store_true",
        help=f"recompute the shipped corpus scores ({SHIPPED.name})",
    )
    args = ap.parse_args(argv)
    n_runs = args.runs or (20 if args.quick else 100)
    t0 = time.perf_counter()
    real, cal = real_runs(args.boot)
    if args.write_calibration:
        d = cal.to_dict()
        d["made_by"] = "python -m benchmarks.calibration --write-calibration"
        SHIPPED.write_text(json.dumps(d, indent=1))
        print(f"wrote {SHIPPED}")
    shipped = default_calibration()
    rows = []
    results = {"real": {}, "simulated": {}}
    for f in FRACTIONS:
        recs = [r for r in real if r["fraction"] == f]
        for m in METHODS:
            cov = coverage(recs, m)
            results["real"][f"fraction {f}/{m}"] = cov
            rows.append((f"real, fit on {f:.0%} (leave-one-run-out)", m, cov))
    sims = simulated_runs(n_runs, args.boot, 7, shipped)
    for regime, recs in sims.items():
        for m in METHODS:
            cov = coverage(recs, m)
            results["simulated"][f"{regime}/{m}"] = cov
            rows.append((f"simulated, {regime}", m, cov))
    per_run = {}
    for r in real:
        lo, hi = r["default"][0.9]
        per_run.setdefault(r["run"], []).append(bool(lo <= r["target"] <= hi))
    out = {
        "corpus": CORPUS_NAME,
        "shipped_multipliers": {str(lv): shipped.quantile(lv) for lv in LEVELS},
        "shipped_n_scores": shipped.n,
        "n_boot": args.boot,
        "simulated_runs_per_regime": n_runs,
        "regimes": {k: asdict(v) for k, v in REGIMES.items()},
        "results": results,
        "real_per_run_covered_90": per_run,
        "real_records": [
            {k: v for k, v in r.items() if k in ("run", "fraction", "forecast", "target")}
            | {"default_90": r["default"][0.9], "ar1_90": r["ar1"][0.9]}
            for r in real
        ],
    }
    out["seconds"] = time.perf_counter() - t0
    print(table(rows))
    print(f"({out['seconds']:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / ("calibration_quick.json" if args.quick else "calibration.json")
    path.write_text(json.dumps(out, indent=2, default=float))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
