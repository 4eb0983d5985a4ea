"""Shared helpers for the benchmarks: timing, machine facts, result files."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"


def median_time(fn: Callable[[], object], *, repeat: int = 30, min_time: float = 0.0) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` calls (after one warm-up call)."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def wilson(k: float, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate ``k / n`` (``k`` may be a mean over orders)."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import norm

    z = float(norm.ppf((1 + conf) / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    import numpy
    import scipy

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=float))
    return path


def race_default(keyword: str):
    """The default of one of :class:`rlcurves.Race`'s keywords (the benchmarks' grid keys and
    labels follow the library's defaults instead of repeating them)."""
    import inspect

    from rlcurves import Race

    return inspect.signature(Race).parameters[keyword].default
