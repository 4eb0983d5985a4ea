"""The first fit after a fresh install: numba compiling into an empty cache, and the warm-up.

Each step runs in a fresh process with ``NUMBA_CACHE_DIR`` pointing at a new empty folder (a fresh
install's cache): (1) ``import rlcurves``, the first fit, the first bootstrap and the first forecast
with the cache cold; (2) :func:`rlcurves.warm_up` (what ``make`` runs at install) in one process;
(3) the same first steps in a new process after it. Side by side: cold against warmed.

Run: python -m benchmarks.first_fit [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from ._common import save

FIRST_STEPS = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import rlcurves
t1 = time.perf_counter()
c = np.linspace(0, 16000, 81)
y = rlcurves.sigmoid(c, 0.61, 1.9, 2500, 0.3) + np.random.default_rng(0).normal(0, 0.005, 81)
fit = rlcurves.fit_sigmoid(c, y, max_compute=8000)
t2 = time.perf_counter()
fit.bootstrap(200, seed=0, progress=False)
t3 = time.perf_counter()
rlcurves.forecast(fit, 16000, seed=0, progress=False)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first_fit": t2 - t1, "first_bootstrap": t3 - t2,
                  "first_forecast": t4 - t3}))
"""
WARM_UP = "import rlcurves, json; print(json.dumps({'warm_up': rlcurves.warm_up(verbose=False)}))"


def _run(code: str, cache: str) -> tuple[dict, str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def once() -> dict:
    with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as warmed:
        cold_steps, notice = _run(FIRST_STEPS, cold)
        warm_up, _ = _run(WARM_UP, warmed)
        after, notice_after = _run(FIRST_STEPS, warmed)
    return {
        "cold": cold_steps,
        "warm_up": warm_up["warm_up"],
        "after_warm_up": after,
        "notice_when_cold": "first use after install" in notice,
        "notice_after_warm_up": "first use after install" in notice_after,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one repeat")
    args = ap.parse_args(argv)
    runs = [once() for _ in range(1 if args.quick else args.repeat)]
    for r in runs:
        c, a = r["cold"], r["after_warm_up"]
        print(
            f"cold cache: import {c['import']:.1f} s, first fit {c['first_fit']:.1f} s, first "
            f"bootstrap {c['first_bootstrap']:.1f} s, first forecast {c['first_forecast']:.1f} s"
            f" (notice printed: {r['notice_when_cold']})"
        )
        print(
            f"warm-up at install: {r['warm_up']:.1f} s; then import {a['import']:.1f} s, first "
            f"fit {a['first_fit']:.2f} s ({c['first_fit'] / a['first_fit']:.0f}x faster), first "
            f"bootstrap {a['first_bootstrap']:.2f} s, first forecast {a['first_forecast']:.2f} s"
            f" (notice printed: {r['notice_after_warm_up']})"
        )
    path = save("first_fit", {"runs": runs})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
