"""Start-up: ``import rlcurves`` against ``import scipy.optimize, pandas``, side by side.

Each statement runs in a fresh interpreter (``python -c``) that times it from its first line to
its last (the interpreter's own start-up left out), the statements interleaved round by round so
that all see the same machine load. Also timed: what a first fit adds (``rlcurves.fit_sigmoid``:
pandas, numba and the compiled kernels, loaded from their cache), and the command line up to its
output (``rlcurves --version``, ``rlcurves watch --help``: the parser built, nothing fitted).
The ratio the project holds to (issue 39): ``import rlcurves`` at most 1.3x ``import
scipy.optimize, pandas``.

``--also DIR`` times ``import rlcurves`` from another copy of the package too (a folder holding
``rlcurves/``, e.g. ``git archive <commit> rlcurves | tar -x -C DIR``), in the same rounds.

Run: python -m benchmarks.import_time [--rounds N] [--quick] [--also DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

from ._common import save

STATEMENTS = {
    "import scipy.optimize, pandas": "import scipy.optimize, pandas",
    "import rlcurves": "import rlcurves",
    "import rlcurves; first fit_sigmoid": (
        "import numpy as np, rlcurves; c = np.linspace(1, 100, 30); "
        "rlcurves.fit_sigmoid(c, 0.2 + 0.5 / (1 + (40 / c) ** 2))"
    ),
    "rlcurves --version": "from rlcurves.cli import main; main(['--version'])",
    "rlcurves watch --help": "from rlcurves.cli import main; main(['watch', '--help'])",
}
TARGET = 1.3  # import rlcurves / import scipy.optimize, pandas
_TIMED = """
import sys, time
t0 = time.perf_counter()
try:
    exec(sys.argv[1])
except SystemExit:
    pass
sys.stderr.write(f"seconds {time.perf_counter() - t0!r}\\n")
"""


def _seconds(code: str, path: str | None = None) -> float:
    """Seconds ``code`` takes in a fresh interpreter, timed inside it (``path`` first on the
    module search path)."""
    env = None if path is None else {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", _TIMED, code],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=path,  # `python -c` puts the working folder first on the path
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("seconds ")][-1]
    return float(line.split()[1])


def measure(rounds: int, also: str | None = None) -> dict[str, list[float]]:
    """Seconds per statement per round (each in a fresh interpreter)."""
    plan = [(name, code, None) for name, code in STATEMENTS.items()]
    if also is not None:
        plan.insert(2, (f"import rlcurves ({also})", "import rlcurves", also))
    for _, code, path in plan:  # warm the file cache (and numba's) once, not timed
        _seconds(code, path)
    out: dict[str, list[float]] = {name: [] for name, _, _ in plan}
    for _ in range(rounds):
        for name, code, path in plan:
            out[name].append(_seconds(code, path))
    return out


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 0.1 else f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="5 rounds")
    ap.add_argument("--also", help="a folder holding another copy of rlcurves/ to time too")
    args = ap.parse_args(argv)
    rounds = 5 if args.quick else args.rounds
    times = measure(rounds, args.also)
    ref = float(np.median(times["import scipy.optimize, pandas"]))
    rows = []
    for name, values in times.items():
        med = float(np.median(values))
        rows.append(
            {
                "statement": name,
                "median_s": med,
                "min_s": float(np.min(values)),
                "max_s": float(np.max(values)),
                "ratio_to_scipy_pandas": med / ref,
            }
        )
    ratio = float(np.median(times["import rlcurves"])) / ref
    print(f"start-up, {rounds} rounds, each statement timed inside a fresh interpreter:")
    print("| statement | median | fastest-slowest | vs `import scipy.optimize, pandas` |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| `{r['statement']}` | {_s(r['median_s'])} | {_s(r['min_s'])}-{_s(r['max_s'])}"
              f" | {r['ratio_to_scipy_pandas']:.2f}x |")  # fmt: skip
    verdict = "within" if ratio <= TARGET else "ABOVE"
    print(f"import rlcurves / import scipy.optimize, pandas = {ratio:.2f} ({verdict} {TARGET}x)")
    result = {
        "rounds": rounds,
        "also": args.also,
        "rows": rows,
        "ratio": ratio,
        "target": TARGET,
        "times": times,
    }
    path = save("import_time_quick" if args.quick else "import_time", result)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
