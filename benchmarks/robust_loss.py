"""Robust loss: what soft-L1 and Huber buy on runs with isolated bad evaluations, at what cost.

Simulated runs (NOT real training; the calibration study's AR(1)-drift regime, the paper's ten
parameter sets), fit on half the budget with R0 fixed. In the "bad evaluations" set, 3 random
evaluations inside the fit window are each lowered by 0.1-0.2 (a crashed or truncated eval job).
Reported per loss: median absolute error of A and of the full-budget forecast, clean and with bad
evaluations, over the same runs.

Run: python -m benchmarks.robust_loss [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from benchmarks.calibration import PAPER_SETS, RESULTS, Noise, simulate
from rlcurves import fit_sigmoid, sigmoid

LOSSES = ("linear", "soft_l1", "huber")


def run(n_runs: int, seed: int = 11) -> dict:
    rng = np.random.default_rng(seed)
    errs = {(d, loss): {"A": [], "forecast": []} for d in ("clean", "bad") for loss in LOSSES}
    for i in range(n_runs):
        params = PAPER_SETS[i % len(PAPER_SETS)]
        compute, rewards, truth = simulate(rng, params, Noise())
        clean = rewards[0]
        bad = clean.copy()
        budget = truth["budget"]
        inside = np.flatnonzero((compute >= budget * 1500 / 16000) & (compute <= budget / 2))
        hit = rng.choice(inside, 3, replace=False)
        bad[hit] -= rng.uniform(0.1, 0.2, 3)
        final = float(sigmoid(budget, truth["A"], truth["B"], truth["C_mid"], truth["R0"]))
        for data_name, y in (("clean", clean), ("bad", bad)):
            for loss in LOSSES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit = fit_sigmoid(
                        compute,
                        y,
                        r0=float(y[0]),
                        min_compute=budget * 1500 / 16000,
                        max_compute=budget / 2,
                        loss=loss,
                    )
                errs[(data_name, loss)]["A"].append(abs(fit.A - truth["A"]))
                errs[(data_name, loss)]["forecast"].append(abs(float(fit.predict(budget)) - final))
    return {
        f"{d}/{loss}": {k: float(np.median(v)) for k, v in e.items()}
        for (d, loss), e in errs.items()
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    n_runs = 30 if args.quick else 200
    t0 = time.perf_counter()
    res = run(n_runs)
    print(f"| data | loss | median abs err A | median abs err forecast | (n = {n_runs})")
    print("|---|---|---|---|")
    for key, v in res.items():
        d, loss = key.split("/")
        print(f"| {d} | {loss} | {v['A']:.4f} | {v['forecast']:.4f} |")
    out = {"n_runs": n_runs, "results": res, "seconds": time.perf_counter() - t0}
    RESULTS.mkdir(exist_ok=True)
    if not args.quick:
        (RESULTS / "robust_loss.json").write_text(json.dumps(out, indent=2))
    print(f"({out['seconds']:.0f} s)")
    return out


if __name__ == "__main__":
    main()
