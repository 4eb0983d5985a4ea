"""Shared helpers for the benchmarks: timing, machine facts, result files."""

from __future__ import annotations

import json
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
