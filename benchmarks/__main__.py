"""Every benchmark in one run: prints each table and writes benchmarks/results/*.json.

Run: python -m benchmarks [--quick]     (make bench)

The README quotes the numbers this prints, with the machine they came from (in each JSON file).
"""

from __future__ import annotations

import argparse
import importlib

# fit speed and sweeps; bootstrap and MCMC against their loops; forecast calibration; trainer modes
SUITES = ["bench_fit", "bench_uncertainty", "calibration"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized versions of each")
    parser.add_argument("--only", nargs="+", choices=SUITES, help="run only these")
    args = parser.parse_args(argv)
    for name in args.only or SUITES:
        print(f"\n==== {name} ====", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        module.main(["--quick"] if args.quick else [])


if __name__ == "__main__":
    main()
