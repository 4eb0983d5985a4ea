"""The ``rlcurves`` command line: a thin layer over the library's functions."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ._format import format_compute
from .errors import RLCurvesError
from .fit import fit_sigmoid


def _load(
    path: str, compute: str | None, reward: str | None, run: str | None = None, **log_kws
) -> tuple[pd.DataFrame, str, str]:
    """Read a curve file; returns the frame and the compute/reward column names."""
    from .logs import read_log

    df = read_log(path, compute=compute, reward=reward, run=run, **log_kws)
    return df, "compute", "reward"


def _log_kws(args: argparse.Namespace) -> dict:
    """The reader's options from the command line (format and how to derive GPU-hours)."""
    return {
        "format": getattr(args, "format", "auto"),
        "gpus": getattr(args, "gpus", None),
        "gpu_hours_per_step": getattr(args, "gpu_hours_per_step", None),
    }


def _add_io_args(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument(
            "files", nargs="+", help="one log per variant (or one file with a run column)"
        )
    else:
        p.add_argument("file", help="a log or table: CSV/TSV, Parquet, JSONL, W&B export, ...")
    _add_log_args(p)


def _add_log_args(p: argparse.ArgumentParser) -> None:
    from .logs import FORMATS

    p.add_argument("--compute", help="compute column (default: detected, e.g. gpu_hours)")
    p.add_argument("--reward", help="reward column (default: detected, e.g. val_pass_rate)")
    p.add_argument("--run", help="run/seed column, for files holding several runs")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", *FORMATS],
        help="log format (default: detected from the file)",
    )
    p.add_argument(
        "--gpus",
        type=float,
        help="GPUs in use: compute = elapsed hours x gpus when no GPU-hours column",
    )
    p.add_argument(
        "--gpu-hours-per-step",
        type=float,
        help="compute = step x this, when neither GPU-hours nor time is logged",
    )


def _json(obj) -> str:
    """Strict JSON: infinities and NaN (an unreachable target, a missing error) as strings."""

    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, (float, np.floating)):
            return float(v) if math.isfinite(v) else str(float(v))
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.ndarray):
            return clean(v.tolist())
        return v

    return json.dumps(clean(obj), indent=2, allow_nan=False)


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


def _add_interval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap")


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
    df, c, r = _load(args.file, args.compute, args.reward, args.run, **_log_kws(args))
    fit = _fit_from_args(args, df, c, r, Path(args.file).stem)
    print(_json(fit.to_dict()) if args.json else fit.summary())
    return 0


def _quiet_fit(args: argparse.Namespace, df: pd.DataFrame, label: str, **override):
    # The command prints the fit's message itself; Python warnings would repeat it on stderr.
    kw = dict(
        r0=args.r0,
        min_compute=args.min_compute,
        max_compute=args.max_compute,
        method=args.method,
        label=label,
    )
    kw.update(override)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid("compute", "reward", data=df, **kw)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)  # a CLI run keeps no figures open
    return path


def _forecast_lines(fc, observed: dict[float, float] | None = None) -> list[str]:
    pct = f"{fc.level:.0%}"
    lines = [
        f"[[Forecast]] {pct} intervals ({fc.method}): curve = where the run's mean reward will be; "
        "prediction = range of one evaluation",
        f"    {'compute':>12}  {'forecast':>8}  {'curve interval':>18}  {'prediction':>18}",
    ]
    for i, c in enumerate(np.atleast_1d(fc.at)):
        m = np.atleast_1d(fc.mean)[i]
        lo, hi = np.atleast_1d(fc.lower)[i], np.atleast_1d(fc.upper)[i]
        plo, phi = np.atleast_1d(fc.prediction_lower)[i], np.atleast_1d(fc.prediction_upper)[i]
        line = (
            f"    {format_compute(c):>12}  {m:>8.3f}  [{lo:.3f}, {hi:.3f}]    "
            f"[{plo:.3f}, {phi:.3f}]"
        )
        if observed and float(c) in observed:
            line += f"   observed {observed[float(c)]:.3f}"
        lines.append(line)
    return lines


def _seed_runs(df: pd.DataFrame, method: str) -> dict:
    """Several runs (seeds) in one file: the pooled fit's intervals resample whole runs."""
    if method == "bootstrap" and "run" in df.columns and df["run"].nunique() > 1:
        print(f"{df['run'].nunique()} runs pooled; intervals resample whole runs", file=sys.stderr)
        return {"kind": "run", "runs": df["run"].to_numpy()}
    return {}


def cmd_forecast(args: argparse.Namespace) -> int:
    from .forecast import forecast

    df, _, _ = _load(args.file, args.compute, args.reward, args.run, **_log_kws(args))
    fit = _quiet_fit(args, df, Path(args.file).stem)
    fc = forecast(
        fit,
        np.asarray(args.at, dtype=float),
        level=args.level,
        method=args.forecast_method,
        seed=args.seed,
        progress=False,
        **_seed_runs(df, args.forecast_method),
    )
    if args.json:
        out = {"fit": fit.to_dict(), "forecast": fc.to_frame().to_dict(orient="records")}
        if args.target is not None:
            out["target"] = fit.compute_to_reach(
                args.target, level=args.level, seed=args.seed
            ).to_dict()
        print(_json(out))
        return 0
    print(fit.summary())
    print()
    print("\n".join(_forecast_lines(fc)))
    if args.target is not None:
        target = fit.compute_to_reach(args.target, level=args.level, seed=args.seed)
        print(f"\n[[Compute to target]]\n    {target}")
    if args.plot:
        from .plot import plot_forecast

        grid = np.linspace(
            float(fit.fit_compute.min()), max(np.max(args.at), fit.compute.max()), 200
        )
        band = forecast(fit, grid, level=args.level, seed=args.seed, progress=False)
        print(f"\nplot saved to {_save(plot_forecast(fit, band), args.plot)}")
    return 0


def _variants(args: argparse.Namespace) -> dict[str, pd.DataFrame]:
    """One variant per file; a single file holding several runs gives one variant per run."""
    frames = {}
    for path in args.files:
        df, _, _ = _load(path, args.compute, args.reward, args.run, **_log_kws(args))
        frames[Path(path).stem] = df
    if len(frames) == 1:
        ((name, df),) = frames.items()
        if "run" in df.columns and df["run"].nunique() > 1:
            return {str(k): part.drop(columns="run") for k, part in df.groupby("run", sort=False)}
        raise RLCurvesError(
            f"compare needs at least two variants: give several files, or one file whose 'run' "
            f"column names the variants ({name!r} holds a single run)"
        )
    return frames


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    frames = _variants(args)
    fits = {name: _quiet_fit(args, df, name) for name, df in frames.items()}
    # files with several seeds keep them: compare pools them with run-level uncertainty
    curves = {
        n: frames[n] if "run" in frames[n].columns and frames[n]["run"].nunique() > 1 else f
        for n, f in fits.items()
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = compare(
            curves,
            baseline=args.baseline,
            level=args.level,
            n_samples=args.n_samples,
            seed=args.seed,
            min_compute=args.min_compute,
            max_compute=args.max_compute,
            r0=args.r0,
        )
    if args.json:
        print(cmp.table.to_json(orient="records", indent=2))
        return 0
    with pd.option_context("display.width", 140, "display.precision", 4):
        print(cmp.table.to_string(index=False))
    print()
    print(cmp.summary())
    if args.plot:
        from .plot import plot_comparison

        print(f"\nplot saved to {_save(plot_comparison(cmp), args.plot)}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .forecast import forecast
    from .plot import plot_forecast

    df, _, _ = _load(args.file, args.compute, args.reward, args.run, **_log_kws(args))
    fit = _quiet_fit(args, df, Path(args.file).stem)
    end = args.to or max(2.0 * float(fit.fit_compute.max()), float(fit.compute.max()))
    grid = np.linspace(float(fit.fit_compute.min()), end, 200)
    band = forecast(fit, grid, level=args.level, seed=args.seed, progress=False)
    fig = plot_forecast(fit, band, logx=args.logx)
    print(f"plot saved to {_save(fig, args.output)}")
    return 0


def cmd_backtest(args: argparse.Namespace) -> int:
    from .backtest import backtest

    df, _, _ = _load(args.file, args.compute, args.reward, args.run, **_log_kws(args))
    bt = backtest(
        "compute",
        "reward",
        data=df,
        fractions=args.fractions,
        min_compute=args.min_compute,
        r0=args.r0,
        level=args.level,
        n_samples=args.n_samples,
        seed=args.seed,
        label=Path(args.file).stem,
    )
    if args.json:
        print(bt.table.to_json(orient="records", indent=2))
        return 0
    print(bt.summary())
    if args.plot:
        print(f"\nplot saved to {_save(bt.plot(), args.plot)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import load_example
    from .forecast import forecast
    from .plot import plot_forecast

    df = load_example(args.example, compute=args.compute)
    unit = df.attrs["compute_unit"]
    print(f"example: {args.example}\n  {df.attrs['description']}\n  compute axis: {unit}\n")
    end = float(df["compute"].max())
    half = end / 2
    print(
        f"Fit on the first half of the budget ({format_compute(args.min_compute)} <= C <= "
        f"{format_compute(half)} of {format_compute(end)}), forecast the end.\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_sigmoid(
            "compute",
            "reward",
            data=df,
            min_compute=args.min_compute,
            max_compute=half,
            label=f"{args.example}, first half",
        )
        full = fit_sigmoid("compute", "reward", data=df, min_compute=args.min_compute)
    print(fit.summary())
    print()
    grid = np.linspace(float(fit.fit_compute.min()), end, 200)
    band = forecast(fit, grid, seed=0, progress=False)
    at_end = forecast(fit, end, seed=0, progress=False)
    last = df.loc[df["compute"].idxmax(), "reward"]
    print("\n".join(_forecast_lines(at_end, {end: float(last)})))
    print(f"    whole-run fit at the end: {float(full.predict(end)):.3f} (A {full.A:.3f})")
    # default target: where the whole run ended (by its own fit), so the half-budget answer can
    # be checked against the compute the run actually took
    reached = math.floor(float(full.predict(end)) * 100) / 100
    target = args.target if args.target is not None else reached
    print(f"\n[[Compute to target]]\n    {fit.compute_to_reach(target, level=0.9, seed=0)}")
    if args.target is None:
        took = format_compute(full.compute_to_reach(target))
        print(f"    (the whole-run fit reaches {target:g} at C = {took})")
    _demo_comparisons(args, df.attrs["group"], full)
    fig = plot_forecast(fit, band)
    fig.axes[0].set_title(
        f"{args.example} (SIMULATED): fit on the first half, forecast of the rest"
        if df.attrs["simulated"]
        else f"{args.example}: fit on the first half, forecast of the rest",
        fontsize=10,
    )
    fig.axes[0].set_xlabel(f"compute ({unit})")
    path = _save(fig, Path(args.out) / f"{args.example}_fit.png")
    print(f"\nplot saved to {path}")
    return 0


def _demo_comparisons(args: argparse.Namespace, group: str, example_fit) -> None:
    """Compare each bundled run of the example's family with the run it differs from by one
    switch (``attrs["baseline"]``): the example's own variants first, then any other pairs."""
    from .compare import compare
    from .datasets import list_examples, load_example

    family = {n: load_example(n, compute=args.compute) for n in list_examples(group=group)}
    others = {df.attrs.get("baseline") for df in family.values()} - {None, args.example}
    baselines = [args.example, *sorted(others)]
    for base in baselines:
        variants = [n for n, df in family.items() if df.attrs.get("baseline") == base]
        if not variants:
            continue
        fits = {base: example_fit} if base == args.example else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in [base, *variants]:
                if name not in fits:
                    fits[name] = fit_sigmoid(
                        "compute",
                        "reward",
                        data=family[name],
                        min_compute=args.min_compute,
                        label=name,
                    )
        cmp = compare(fits, baseline=base)
        cols = ["variant", "A", "A_lower", "A_upper", "B", "B_lower", "B_upper", "p_A_higher"]
        print()
        print(cmp.table[cols].round(3).to_string(index=False))
        print(cmp.summary())
        path = _save(cmp.plot(), Path(args.out) / f"{base}_compare.png")
        print(f"comparison plot saved to {path}")


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

    p = sub.add_parser("forecast", help="fit and forecast the curve at given compute values")
    _add_io_args(p)
    _add_fit_args(p)
    p.add_argument("--at", type=float, nargs="+", required=True, help="compute value(s)")
    _add_interval_args(p)
    p.add_argument(
        "--forecast-method",
        default="bootstrap",
        choices=["bootstrap", "profile", "mcmc"],
        help="interval method (default: calibrated bootstrap)",
    )
    p.add_argument("--target", type=float, help="also: compute to reach this reward")
    p.add_argument("--plot", help="save the fit with its forecast band to this image")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_forecast)

    p = sub.add_parser("compare", help="compare recipe variants (one file each) by A and B")
    _add_io_args(p, many=True)
    _add_fit_args(p)
    p.add_argument("--baseline", help="variant to compare against (default: the first)")
    _add_interval_args(p)
    p.add_argument("--n-samples", type=int, default=1000, help="bootstrap draws per variant")
    p.add_argument("--plot", help="save the A-B comparison plot to this image")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("plot", help="plot the fit with its forecast band")
    _add_io_args(p)
    _add_fit_args(p)
    p.add_argument("-o", "--output", required=True, help="image file to write (png, pdf, svg)")
    p.add_argument("--to", type=float, help="forecast up to this compute (default: 2x the fit)")
    p.add_argument("--logx", action="store_true", help="log-scale compute axis")
    _add_interval_args(p)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("backtest", help="refit a finished run on prefixes; score the forecasts")
    _add_io_args(p)
    p.add_argument("--min-compute", type=float, help="drop points below this compute")
    p.add_argument("--r0", type=float, help="fix R0 (the starting model's pass rate)")
    p.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=[0.25, 0.5, 0.75],
        help="fractions of the final compute to fit up to (default: 0.25 0.5 0.75)",
    )
    _add_interval_args(p)
    p.add_argument("--n-samples", type=int, default=1000, help="bootstrap resamples per prefix")
    p.add_argument("--plot", help="save the backtest plot to this image")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=cmd_backtest)

    p = sub.add_parser(
        "demo", help="forecast the bundled example run from half its budget; print and plot"
    )
    p.add_argument("--example", default="simulated_scalerl_8b")
    p.add_argument(
        "--min-compute",
        type=float,
        default=1500.0,
        help="fit window start (the paper drops the first ~1.5k GPU-hours)",
    )
    p.add_argument("--target", type=float, help="reward to compute the budget for")
    p.add_argument(
        "--compute",
        help="column of the example to use as compute (default: its GPU-hours column; "
        "tokens_total for a load-free axis on the real runs)",
    )
    p.add_argument("--out", default="out", help="folder for the figures")
    p.set_defaults(func=cmd_demo)
    from .cli_live import add_commands as add_live_commands  # watch, report

    add_live_commands(sub)
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
