"""The ``rlcurves`` command line: a thin layer over the library's functions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from .errors import RLCurvesError
from .fit import fit_sigmoid


def _load(path: str, compute: str | None, reward: str | None) -> tuple[pd.DataFrame, str, str]:
    """Read a curve file; returns the frame and the compute/reward column names."""
    from .logs import read_log

    df = read_log(path, compute=compute, reward=reward)
    return df, "compute", "reward"


def _add_io_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a log or table: CSV/TSV, Parquet, JSONL, W&B export, ...")
    p.add_argument("--compute", help="compute column (default: detected, e.g. gpu_hours)")
    p.add_argument("--reward", help="reward column (default: detected, e.g. val_pass_rate)")
    p.add_argument("--run", help="run/seed column, for files holding several runs")


def _add_fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-compute", type=float, help="drop points below this compute")
    p.add_argument("--max-compute", type=float, help="drop points above this compute")
    p.add_argument("--r0", type=float, help="fix R0 (the starting model's pass rate)")
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "exact", "paper-grid", "lmfit"],
        help="fitting procedure (default: the exact solver)",
    )


def _fit_from_args(args: argparse.Namespace, df: pd.DataFrame, c: str, r: str, label: str):
    return fit_sigmoid(
        c,
        r,
        data=df,
        r0=args.r0,
        min_compute=args.min_compute,
        max_compute=args.max_compute,
        method=args.method,
        label=label,
    )


def cmd_fit(args: argparse.Namespace) -> int:
    df, c, r = _load(args.file, args.compute, args.reward)
    fit = _fit_from_args(args, df, c, r, Path(args.file).stem)
    print(json.dumps(fit.to_dict(), indent=2) if args.json else fit.summary())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import load_example

    df = load_example(args.example)
    print(f"example: {args.example}\n  {df.attrs['description']}\n")
    fit = fit_sigmoid(
        "compute", "reward", data=df, min_compute=args.min_compute, label=args.example
    )
    print(fit.summary())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig = fit.plot()
    fig.axes[0].set_title(f"{args.example} (SIMULATED)" if df.attrs["simulated"] else args.example)
    path = out / f"{args.example}_fit.png"
    fig.savefig(path, dpi=120)
    print(f"\nplot saved to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlcurves",
        description="Fit, forecast and compare RL compute-scaling curves (the ScaleRL sigmoid).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("fit", help="fit the sigmoid to one curve and print the summary")
    _add_io_args(p)
    _add_fit_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("demo", help="fit the bundled example run, print it and save a plot")
    p.add_argument("--example", default="simulated_scalerl_8b")
    p.add_argument(
        "--min-compute",
        type=float,
        default=1500.0,
        help="fit window start (the paper drops the first ~1.5k GPU-hours)",
    )
    p.add_argument("--out", default="out", help="folder for the figures")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rlcurves`` command."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RLCurvesError as exc:
        print(f"rlcurves: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
