"""Every benchmark in one run: prints each table and writes benchmarks/results/*.json.

Run: python -m benchmarks [--quick]     (make bench)

The README quotes the numbers this prints, with the machine they came from (in each JSON file).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util

# fit speed and sweeps; bootstrap and MCMC against their loops; forecast calibration; trainer modes
SUITES = [
    "bench_fit",
    "bench_uncertainty",
    "calibration",
    "compare_calibration",
    "first_fit",
    "import_time",
    "bench_pipeline",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized versions of each")
    parser.add_argument("--only", nargs="+", choices=SUITES, help="run only these")
    args = parser.parse_args(argv)
    for name in args.only or SUITES:
        print(f"\n==== {name} ====", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        argv = ["--quick"] if args.quick and name != "bench_pipeline" else []
        if name == "bench_pipeline":
            if importlib.util.find_spec("vllm") is None:
                # vLLM lives in .venv-vllm (scripts/install_vllm_cpu.sh); say so, don't hide it
                print(
                    "vllm is not importable here: trainer modes measured with the torch "
                    "generator; run `.venv-vllm/bin/python -m benchmarks.bench_pipeline` for vLLM"
                )
                argv = ["--generator", "torch"]
            if args.quick:
                argv += ["--steps", "20"]
        module.main(argv)


if __name__ == "__main__":
    main()
