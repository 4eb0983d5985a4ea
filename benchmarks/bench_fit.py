"""One fit of a 100-point curve: rlcurves (no start guess) against scipy curve_fit given a good
start, lmfit's Model.fit given the same start, and the paper's grid procedure; a sweep of many
curves with fit_sigmoid_batch against a loop of single fits (on one and on two threads); and the
start-up cost of the compiled solver: ``import rlcurves``, the first fit in a fresh process with
an empty numba cache (compiles) and with a warm one (loads). Prints ratios, writes JSON.

Run: python -m benchmarks.bench_fit [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from scipy.optimize import curve_fit

from rlcurves import fit_sigmoid, fit_sigmoid_batch, sigmoid
from rlcurves.fit import resolve_bounds
from rlcurves.lmfit_model import SigmoidModel
from rlcurves.model import log_compute
from rlcurves.solver import solve_single

from ._common import median_time, save

TRUTH = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)  # the paper's 8B run, R0 assumed


def curve(seed: int, n: int = 100):
    rng = np.random.default_rng(seed)
    compute = np.linspace(0, 16000, n + 1)[1:]
    return compute, sigmoid(compute, **TRUTH) + rng.normal(0, 0.01, n)


def run(quick: bool = False) -> dict:
    compute, reward = curve(0)
    p0 = [TRUTH["A"], TRUTH["B"], TRUTH["C_mid"], TRUTH["R0"]]
    f = lambda c, A, B, C_mid, R0: sigmoid(c, A, B, C_mid, R0)  # noqa: E731
    model = SigmoidModel()
    params = model.make_params(**TRUTH)
    repeat = 20 if quick else 200
    t_ours = median_time(lambda: fit_sigmoid(compute, reward), repeat=repeat)
    t_cf = median_time(lambda: curve_fit(f, compute, reward, p0=p0), repeat=repeat)
    # the solver alone (what fit_sigmoid adds: validation, covariance, the result object)
    x, ones, box = log_compute(compute), np.ones(compute.size), resolve_bounds("auto", reward, None)
    t_solver = median_time(lambda: solve_single(x, reward, ones, None, box), repeat=repeat)
    t_lm = median_time(lambda: model.fit(reward, params, compute=compute), repeat=repeat // 4)
    ours = fit_sigmoid(compute, reward)
    cf, _ = curve_fit(f, compute, reward, p0=p0)
    # Paper grid: 71 x 100 nodes with curve_fit for B at each (R0 fixed, as in the paper).
    grid_opts = (
        {}
        if not quick
        else {"A_grid": np.arange(0.45, 0.8, 0.02), "C_mid_grid": np.linspace(100, 40000, 30)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        grid = fit_sigmoid(compute, reward, r0=ours.R0, method="paper-grid", options=grid_opts)
        t_grid = time.perf_counter() - t0
        t_ours_r0 = median_time(lambda: fit_sigmoid(compute, reward, r0=ours.R0), repeat=repeat)

    # A sweep: many curves, one compute grid.
    k = 1000 if quick else 10_000
    rng = np.random.default_rng(1)
    truths = np.column_stack(
        [
            rng.uniform(0.5, 0.7, k),
            rng.uniform(1.2, 2.8, k),
            rng.uniform(1500, 6000, k),
            rng.uniform(0.2, 0.35, k),
        ]
    )
    c50 = np.linspace(0, 16000, 51)[1:]
    rewards = np.array([sigmoid(c50, *t) for t in truths]) + rng.normal(0, 0.01, (k, c50.size))
    import numba

    threads = numba.get_num_threads()
    fit_sigmoid_batch(c50, rewards[:10])  # compiled (or loaded) before the clock starts
    t_batch_threads = {}
    for n_threads in sorted({1, threads}):
        numba.set_num_threads(n_threads)
        t0 = time.perf_counter()
        table = fit_sigmoid_batch(c50, rewards)
        t_batch_threads[n_threads] = time.perf_counter() - t0
    numba.set_num_threads(threads)
    t_batch = t_batch_threads[threads]
    t0 = time.perf_counter()
    fit_sigmoid_batch(c50, rewards, chunk_size=k)
    t_batch_one_chunk = time.perf_counter() - t0
    n_loop = 200
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop_rss = [fit_sigmoid(c50, rewards[i]).rss for i in range(n_loop)]
    t_loop = (time.perf_counter() - t0) / n_loop * k
    t0 = time.perf_counter()
    for i in range(n_loop):
        curve_fit(f, c50, rewards[i], p0=truths[i], maxfev=10_000)
    t_cf_loop = (time.perf_counter() - t0) / n_loop * k
    # What a start guess costs: curve_fit from a heuristic p0 a user might write, on the same
    # sweep, counted as a success when it reaches the exact optimum's RSS (to 1e-6).
    n_guess, ok_guess, ok_default = 200, 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n_guess):
            y = rewards[i]
            guess = [y.max(), 1.0, float(np.median(c50)), y.min()]
            for p0, counter in ((guess, "guess"), (None, "default")):
                try:
                    p, _ = curve_fit(f, c50, y, p0=p0, maxfev=10_000)
                    rss = float(np.sum((y - f(c50, *p)) ** 2))
                    hit = rss <= loop_rss[i] * (1 + 1e-6) if i < n_loop else False
                except (RuntimeError, ValueError):
                    hit = False
                if counter == "guess":
                    ok_guess += hit
                else:
                    ok_default += hit
    batch_vs_single = float(
        np.max(np.abs(table["rss"].to_numpy()[:n_loop] - loop_rss) / np.array(loop_rss))
    )
    return {
        "load_average_1min": os.getloadavg()[0],
        "single_fit_seconds": {
            "rlcurves": t_ours,
            "rlcurves_solver_only": t_solver,
            "curve_fit_good_p0": t_cf,
            "lmfit_good_p0": t_lm,
            "paper_grid": t_grid,
            "rlcurves_fixed_r0": t_ours_r0,
        },
        "ratios": {
            "rlcurves/curve_fit": t_ours / t_cf,
            "rlcurves_solver_only/curve_fit": t_solver / t_cf,
            "curve_fit/rlcurves": t_cf / t_ours,
            "lmfit/rlcurves": t_lm / t_ours,
            "paper_grid/rlcurves_fixed_r0": t_grid / t_ours_r0,
        },
        "agreement": {
            "max_rel_param_diff_vs_curve_fit": float(
                np.max(np.abs(np.array([ours.A, ours.B, ours.C_mid, ours.R0]) - cf) / np.abs(cf))
            ),
            "paper_grid_rss_over_exact": grid.rss / fit_sigmoid(compute, reward, r0=ours.R0).rss,
        },
        "sweep": {
            "curves": k,
            "points": int(c50.size),
            "batch_seconds": t_batch,
            "batch_seconds_by_threads": t_batch_threads,
            "batch_seconds_one_chunk": t_batch_one_chunk,
            "curve_fit_loop_over_batch": t_cf_loop / t_batch,
            "loop_of_fit_sigmoid_seconds_extrapolated": t_loop,
            "loop_of_curve_fit_true_p0_seconds_extrapolated": t_cf_loop,
            "max_rel_rss_diff_batch_vs_single": batch_vs_single,
            "curve_fit_heuristic_p0_success": ok_guess / n_guess,
            "curve_fit_default_p0_success": ok_default / n_guess,
        },
    }


_STARTUP = """
import time
t0 = time.perf_counter()
import numpy as np
import rlcurves
t1 = time.perf_counter()
c = np.linspace(0, 16000, 101)[1:]
y = rlcurves.sigmoid(c, 0.61, 1.92, 2542.0, 0.3) + np.random.default_rng(0).normal(0, 0.01, 100)
rlcurves.fit_sigmoid(c, y)
t2 = time.perf_counter()
rlcurves.fit_sigmoid_batch(c, np.tile(y, (8, 1)))
t3 = time.perf_counter()
print({"import": t1 - t0, "first_fit": t2 - t1, "first_batch": t3 - t2})
"""


def startup(repeat: int) -> dict:
    """Fresh processes: ``import rlcurves``, then the first fit and first batch fit, with an empty
    numba cache (cold: every kernel compiles) and then with the cache the cold run wrote (warm)."""

    def child(cache_dir):
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        out = subprocess.run(
            [sys.executable, "-c", _STARTUP], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout.strip().replace("'", '"'))

    runs = {"cold": [], "warm": []}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            runs["cold"].append(child(cache))
            runs["warm"].append(child(cache))
    return {kind: {key: [r[key] for r in rows] for key in rows[0]} for kind, rows in runs.items()}


def report(res: dict) -> str:
    s, r, w = res["single_fit_seconds"], res["ratios"], res["sweep"]
    lines = [
        "One fit, 100 points (median wall time)",
        f"  rlcurves (no start guess)        {s['rlcurves'] * 1e3:8.2f} ms"
        f"   rlcurves/curve_fit = {r['rlcurves/curve_fit']:.2f}",
        f"  its solver alone                 {s['rlcurves_solver_only'] * 1e3:8.2f} ms"
        f"   solver/curve_fit = {r['rlcurves_solver_only/curve_fit']:.2f}",
        f"  scipy curve_fit (true p0)        {s['curve_fit_good_p0'] * 1e3:8.2f} ms",
        f"  lmfit Model.fit (true p0)        {s['lmfit_good_p0'] * 1e3:8.2f} ms"
        f"   lmfit/rlcurves = {r['lmfit/rlcurves']:.2f}",
        f"  paper grid (R0 fixed)            {s['paper_grid'] * 1e3:8.0f} ms"
        f"   grid/rlcurves(R0 fixed) = {r['paper_grid/rlcurves_fixed_r0']:.0f}",
        f"  max rel. parameter difference vs curve_fit: "
        f"{res['agreement']['max_rel_param_diff_vs_curve_fit']:.1e}; paper-grid RSS / exact RSS: "
        f"{res['agreement']['paper_grid_rss_over_exact']:.4f}",
        f"Sweep of {w['curves']:,} curves x {w['points']} points",
        f"  fit_sigmoid_batch                {w['batch_seconds']:8.2f} s"
        f"   (by numba threads: "
        + ", ".join(f"{n}: {t:.2f} s" for n, t in w["batch_seconds_by_threads"].items())
        + f"; one chunk {w['batch_seconds_one_chunk']:.2f} s)",
        f"  loop of fit_sigmoid (extrap.)    "
        f"{w['loop_of_fit_sigmoid_seconds_extrapolated']:8.2f} s",
        f"  loop of curve_fit, true p0       "
        f"{w['loop_of_curve_fit_true_p0_seconds_extrapolated']:8.2f} s"
        f"   curve_fit loop / batch = {w['curve_fit_loop_over_batch']:.1f}",
        f"  batch vs single fits: max rel. RSS difference "
        f"{w['max_rel_rss_diff_batch_vs_single']:.1e}",
        f"  curve_fit reaching the optimum: heuristic p0 (max, 1, median C, min) "
        f"{w['curve_fit_heuristic_p0_success']:.0%}, default p0 (all ones) "
        f"{w['curve_fit_default_p0_success']:.0%}",
    ]
    if "startup" in res:
        for kind, v in res["startup"].items():
            lines.append(
                f"Start-up, {kind} numba cache: import rlcurves "
                f"{min(v['import']):.2f}-{max(v['import']):.2f} s, first fit "
                f"{min(v['first_fit']):.2f}-{max(v['first_fit']):.2f} s, first batch fit "
                f"{min(v['first_batch']):.2f}-{max(v['first_batch']):.2f} s"
            )
    lines.append(f"(load average over the last minute: {res['load_average_1min']:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    res = run(quick=args.quick)
    res["startup"] = startup(1 if args.quick else 3)
    print(report(res))
    path = save("fit", res)
    print(f"written: {path}")
    return res


if __name__ == "__main__":
    main()
