"""The ``rlcurves`` command line: a thin layer over the library's functions."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._format import format_compute, unit_name
from .errors import RLCurvesError

if TYPE_CHECKING:  # the commands import what they use when they run: --help loads no pandas
    import pandas as pd

# The reader's and the fit's keywords, as the command line spells them (for error messages).
KEYWORD_FLAGS = {
    "compute": "--compute",
    "reward": "--reward",
    "run": "--run",
    "format": "--format",
    "gpus": "--gpus",
    "gpu_hours_per_step": "--gpu-hours-per-step",
    "r0": "--r0",
    "min_compute": "--min-compute",
    "max_compute": "--max-compute",
    "method": "--method",
    "level": "--level",
    "seed": "--seed",
    "n_samples": "--n-samples",
    "baseline": "--baseline",
    "fractions": "--fractions",
    "target": "--target",
    "calibration": "--metric-kind",
    "at": "--at",
    "budget": "--budget",
    "output": "-o",
}
#: --metric-kind's values, and the shipped calibration each names.
METRIC_KINDS = {"validation": "validation", "training-reward": "training reward"}
_KEYWORD = re.compile(
    r"(?<![\w.\-])(" + "|".join(KEYWORD_FLAGS) + r")="
    r"('[^']*'|\"[^\"]*\"|<[^>]*>|[\w/*][\w.\-/*]*)?"
)


def cli_words(message: str) -> str:
    """A library message in the command line's words: ``Pass gpus=<number of GPUs>`` becomes
    ``Pass --gpus <number of GPUs>``, ``reward='val'`` ``--reward val``, ``r0=`` ``--r0``."""

    def flag(match: re.Match) -> str:
        name, value = match.group(1), match.group(2)
        if value is None:
            return KEYWORD_FLAGS[name]
        value = value.rstrip(".")
        trail = match.group(2)[len(value) :]
        if value[:1] in "'\"" and value[-1:] == value[:1]:
            value = value[1:-1]
        if name == "calibration":  # a kind of metric: --metric-kind training-reward
            value = value.replace(" ", "-")
        return f"{KEYWORD_FLAGS[name]} {value}{trail}"

    # None is how Python leaves a keyword out; a flag is left out by not passing it
    return _KEYWORD.sub(flag, message.replace(" or None", ""))


def _say(args: argparse.Namespace, text: str) -> None:
    """What was read and repaired: on stderr, before the result; --quiet silences it."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def _reward_arg(reward: list[str] | None):
    if not reward:
        return None
    return (
        reward[0] if len(reward) == 1 and reward[0] != "*" else ("*" if "*" in reward else reward)
    )


def _load(
    path: str, compute: str | None, reward, run: str | None = None, *, args=None, **log_kws
) -> tuple[pd.DataFrame, str, str]:
    """Read a curve file, say what was read; returns the frame and the compute/reward columns."""
    from .errors import DataRepairWarning
    from .logs import read_log

    if isinstance(reward, list):
        reward = _reward_arg(reward)
    with warnings.catch_warnings():
        # the read report below names every repair; the warning would say it twice
        warnings.simplefilter("ignore", DataRepairWarning)
        df = read_log(path, compute=compute, reward=reward, run=run, **log_kws)
    if args is not None:
        _say(args, read_report(df, path))
    return df, "compute", "reward"


def read_report(df: pd.DataFrame, path: str) -> str:
    """What a command read: file, format, columns, compute axis and unit, rows kept, repairs."""
    runs = df.attrs.get("runs") or {}
    lines = []
    for name, a in runs.items():
        head = f"read {a['source']}" if len(runs) == 1 else f"read {a['source']} (run {name!r})"
        lines.append(f"{head}: {a['format']} ({a['format_how']})")
        columns = a.get("columns")
        if columns:
            shown = ", ".join(columns[:12]) + (
                f", ... ({len(columns)} in all)" if len(columns) > 12 else ""
            )
            lines.append(f"  columns: {shown}")
        unit = a["compute"]["unit"]
        lines.append(f"  compute axis: {unit}, from {a['compute']['how']}")
        lines.append(f"  reward: {a['reward']['column']!r} ({a['reward']['how']})")
        lines.append(f"  rows kept: {a['rows_kept']} of {a['rows_read']}")
        for entry in a["cleaning"]:
            if entry["rows"]:
                lines.append(
                    f"  {_repair_word(entry['step'])} {entry['rows']} rows: {entry['detail']}"
                )
    if not lines:
        lines.append(f"read {path}")
    return "\n".join(lines)


def _repair_word(step: str) -> str:
    return "repaired" if step.startswith(("repair", "join")) else "dropped"


def _log_kws(args: argparse.Namespace) -> dict:
    """The reader's options from the command line (format and how to derive GPU-hours)."""
    return {
        "format": getattr(args, "format", "auto"),
        "gpus": getattr(args, "gpus", None),
        "gpu_hours_per_step": getattr(args, "gpu_hours_per_step", None),
    }


def _read(args: argparse.Namespace, path: str) -> pd.DataFrame:
    df, _, _ = _load(path, args.compute, args.reward, args.run, args=args, **_log_kws(args))
    return df


def _curves(args: argparse.Namespace) -> dict[str, pd.DataFrame]:
    """One curve per --reward column (a wide table), else the file's one curve (several seeds in
    a long table stay together: the commands pool them)."""
    df = _read(args, args.file)
    stem = _stem(args.file)
    reward = _reward_arg(args.reward)
    if reward is None or (isinstance(reward, str) and reward != "*"):
        return {f"{stem}: {_reward_column(df)}": df}
    return {
        f"{stem}: {name}": _with_attrs(part.drop(columns="run"), df, name)
        for name, part in df.groupby("run", sort=False)
    }


def _with_attrs(part: pd.DataFrame, whole: pd.DataFrame, run: str) -> pd.DataFrame:
    """One run of a long frame, with that run's own attrs (its reward column and unit)."""
    attrs = dict(whole.attrs.get("runs", {}).get(run, whole.attrs))
    attrs["runs"] = {run: attrs.copy()}
    part.attrs = attrs
    return part


def _stem(path: str) -> str:
    return path.split(":", 1)[1] if path.startswith("example:") else Path(path).stem


def _reward_column(df: pd.DataFrame) -> str:
    how = df.attrs.get("reward") or {}
    if isinstance(how, dict) and "column" in how:
        return str(how["column"])
    columns = {v.get("column") for v in how.values()} if isinstance(how, dict) else set()
    return str(columns.pop()) if len(columns) == 1 else "reward"


def _unit(df_or_fit) -> str | None:
    attrs = getattr(df_or_fit, "attrs", None)
    if attrs is not None:
        return attrs.get("compute_unit")
    return getattr(df_or_fit, "units", {}).get("compute")


def _add_io_args(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    where = "(example:NAME for a bundled example; `rlcurves examples` lists them)"
    if many:
        p.add_argument(
            "files", nargs="+", help=f"one log per variant (or one file with a run column) {where}"
        )
    else:
        p.add_argument(
            "file", help=f"a log or table: CSV/TSV, Parquet, JSONL, W&B export, ... {where}"
        )
    _add_log_args(p)


def _add_log_args(p: argparse.ArgumentParser) -> None:
    from .logs import FORMATS

    p.add_argument("--compute", help="compute column (default: detected, e.g. gpu_hours)")
    p.add_argument(
        "--reward",
        nargs="+",
        metavar="COLUMN",
        help="reward column (default: detected, e.g. val_pass_rate); several, or '*' for every "
        "numeric column, read a wide table (one column per model or variant) as one curve each",
    )
    p.add_argument(
        "--run",
        help="the column that splits a file of several runs (a run or seed column); for a file "
        "of one run, its name",
    )
    p.add_argument(
        "--format",
        default="auto",
        choices=list(dict.fromkeys(FORMATS)),
        help="log format (default: auto, detected from the file)",
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
    p.add_argument(
        "-q", "--quiet", action="store_true", help="do not report what was read and repaired"
    )


def _json(obj) -> str:
    """Strict JSON: NaN (a missing value, a fixed parameter's error) as null; infinities (an
    unreachable target, an undetermined error) as the strings "inf" / "-inf"."""

    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, str) and v.lower() == "nan":
            return None  # the library's JSON-safe dicts write NaN as the string "nan"
        if isinstance(v, (float, np.floating)):
            if math.isnan(v):
                return None
            return float(v) if math.isfinite(v) else str(float(v))
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, np.ndarray):
            return clean(v.tolist())
        return v

    return json.dumps(clean(obj), indent=2, allow_nan=False)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


def _add_fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-compute", type=finite_arg, help="drop points below this compute")
    p.add_argument("--max-compute", type=finite_arg, help="drop points above this compute")
    p.add_argument("--r0", type=finite_arg, help="fix R0 (the starting model's pass rate)")
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "exact", "paper-grid", "lmfit"],
        help="fitting procedure (default: the exact solver)",
    )


def image_arg(text: str) -> str:
    """An image file's type: a name whose extension matplotlib can write, checked before the
    work (matplotlib is imported only when the flag is given)."""
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(text).suffix.lower().lstrip(".")
    if suffix not in kinds:
        what = f"'{text}' has no extension" if not suffix else f"matplotlib cannot write .{suffix}"
        others = ", ".join(sorted(kinds))
        raise argparse.ArgumentTypeError(
            f"{what}; end the file name in .png, .pdf or .svg (or one of {others})"
        )
    return text


def finite_arg(text: str) -> float:
    """A number flag's type where NaN and infinities mean nothing (a reward, a compute bound)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def seed_arg(text: str) -> int:
    """``--seed``'s type: a non-negative integer (numpy's generators take no other)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return seed


def add_metric_kind_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metric-kind",
        choices=list(METRIC_KINDS),
        help="what the reward measures, which says what calibrates the intervals: a held-out "
        "pass rate (validation, the default) or the reward on the prompts being trained on "
        "(training-reward: calibrated on the corpus's training-reward runs, several times wider)",
    )


def calibration_arg(args: argparse.Namespace) -> str | None:
    """The shipped calibration --metric-kind names (None: the library's default, which notes a
    reward column that reads as a training reward)."""
    kind = getattr(args, "metric_kind", None)
    return None if kind is None else METRIC_KINDS[kind]


def _add_interval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=seed_arg, default=0, help="random seed of the bootstrap")


def _fit_from_args(args: argparse.Namespace, df: pd.DataFrame, c: str, r: str, label: str):
    from .fit import fit_sigmoid

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


def _axis_line(fit_or_df) -> str:
    unit = _unit(fit_or_df)
    return f"    compute axis    = {unit or 'unit not given'} (C_mid and every C in this unit)"


def cmd_fit(args: argparse.Namespace) -> int:
    curves = _curves(args)
    results = []
    for label, df in curves.items():
        fit = _fit_from_args(args, df, "compute", "reward", label)
        results.append(fit)
        if not args.json:
            print(fit.summary())
            print(_axis_line(df))
            if len(curves) > 1:
                print()
    if args.json:
        dicts = [{**f.to_dict(), "compute_unit": _unit(f)} for f in results]
        print(_json(dicts[0] if len(dicts) == 1 else dicts))
    return 0


def _quiet_fit(args: argparse.Namespace, df: pd.DataFrame, label: str, **override):
    from .fit import fit_sigmoid

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


def _forecast_lines(fc, observed: dict[float, float] | None = None, unit: str | None = None):
    pct = f"{fc.level:.0%}"
    name = unit_name(unit)
    head = f"compute ({name})" if name else "compute"
    width = max(12, len(head))
    lines = [
        f"[[Forecast]] {pct} intervals ({fc.method}): curve = where the run's mean reward will be; "
        "prediction = range of one evaluation",
        f"    {head:>{width}}  {'forecast':>8}  {'curve interval':>18}  {'prediction':>18}",
    ]
    for i, c in enumerate(np.atleast_1d(fc.at)):
        m = np.atleast_1d(fc.mean)[i]
        lo, hi = np.atleast_1d(fc.lower)[i], np.atleast_1d(fc.upper)[i]
        plo, phi = np.atleast_1d(fc.prediction_lower)[i], np.atleast_1d(fc.prediction_upper)[i]
        line = (
            f"    {format_compute(c):>{width}}  {m:>8.3f}  [{lo:.3f}, {hi:.3f}]    "
            f"[{plo:.3f}, {phi:.3f}]"
        )
        if observed and float(c) in observed:
            line += f"   observed {observed[float(c)]:.3f}"
        lines.append(line)
    calibration = getattr(fc, "calibration", "")
    if calibration:  # its name already counts the runs and the forecasts scored on them
        lines.append(f"    calibration: {calibration}")
    if getattr(fc, "note", ""):
        lines.append(f"    note: {cli_words(fc.note)}")
    return lines


def _seed_runs(args: argparse.Namespace, df: pd.DataFrame, method: str) -> dict:
    """Several runs (seeds) in one file: the pooled fit's intervals resample whole runs."""
    if method == "bootstrap" and "run" in df.columns and df["run"].nunique() > 1:
        _say(args, f"{df['run'].nunique()} runs pooled; intervals resample whole runs")
        return {"kind": "run", "runs": df["run"].to_numpy()}
    return {}


def cmd_forecast(args: argparse.Namespace) -> int:
    from .forecast import forecast

    out = []
    for label, df in _curves(args).items():
        fit = _quiet_fit(args, df, label)
        unit = _unit(df)
        fc = forecast(
            fit,
            np.asarray(args.at, dtype=float),
            level=args.level,
            method=args.forecast_method,
            seed=args.seed,
            progress=False,
            calibration=calibration_arg(args),
            **_seed_runs(args, df, args.forecast_method),
        )
        target = None
        if args.target is not None:
            target = fit.compute_to_reach(args.target, level=args.level, seed=args.seed)
        if args.json:
            item = {
                "fit": fit.to_dict(),
                "compute_unit": unit,
                "forecast": _records(fc.to_frame()),
                "calibration": fc.calibration,
                "calibration_n": fc.calibration_n,
                "unbounded": bool(fc.unbounded),
                "note": cli_words(fc.note),
            }
            if target is not None:
                item["target"] = target.to_dict()
            out.append(item)
            continue
        print(fit.summary())
        print(_axis_line(df))
        print()
        print("\n".join(_forecast_lines(fc, unit=unit)))
        if target is not None:
            name = unit_name(unit) or "the data's unit"
            print(f"\n[[Compute to target]] (compute in {name})")
            print(f"    {target}")
        if args.plot:
            from .plot import plot_forecast

            grid = np.linspace(
                float(fit.fit_compute.min()), max(np.max(args.at), fit.compute.max()), 200
            )
            band = forecast(fit, grid, level=args.level, seed=args.seed, progress=False,
                            band=True, calibration=calibration_arg(args))  # fmt: skip
            path = _save(plot_forecast(fit, band), _nth_path(args.plot, label, len(out)))
            print(f"\nplot saved to {path}")
        out.append(None)
    if args.json:
        print(_json(out[0] if len(out) == 1 else out))
    return 0


def _nth_path(path: str, label: str, index: int) -> str:
    """The image path of the index-th curve: the path itself for the first, then path-label.ext."""
    if index == 0:
        return path
    p = Path(path)
    safe = re.sub(r"[^\w.-]+", "_", label)
    return str(p.with_name(f"{p.stem}-{safe}{p.suffix}"))


def _variants(args: argparse.Namespace) -> dict[str, pd.DataFrame]:
    """One variant per file; a single file holding several runs (or several --reward columns)
    gives one variant per run."""
    frames = {}
    for path in args.files:
        frames[_stem(path)] = _read(args, path)
    if len(frames) == 1:
        ((name, df),) = frames.items()
        if "run" in df.columns and df["run"].nunique() > 1:
            return {
                str(k): _with_attrs(part.drop(columns="run"), df, k)
                for k, part in df.groupby("run", sort=False)
            }
        raise RLCurvesError(
            f"compare needs at least two variants: give several files, one file whose 'run' "
            f"column names the variants, or several --reward columns of a wide table ({name!r} "
            "holds a single run)"
        )
    return frames


def _comparison_table(cmp) -> pd.DataFrame:
    """compare's table with each variant's C_mid (in the data's compute unit) beside A and B."""
    table = cmp.table.copy()
    if "C_mid" not in table.columns:
        c_mid = table["variant"].map(lambda v: float(cmp.fits[v].C_mid))
        table.insert(
            table.columns.get_loc("B") if "B" in table.columns else len(table.columns),
            "C_mid",
            c_mid,
        )
    return table


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare

    frames = _variants(args)
    units = {_unit(df) for df in frames.values()}
    if len(units) > 1:
        raise RLCurvesError(
            f"the variants are on different compute axes ({sorted(map(str, units))}); pass "
            "--compute (or --gpus / --gpu-hours-per-step) so that all share one unit.",
        )
    unit = units.pop()
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
    table = _comparison_table(cmp)
    if args.json:
        print(_json([{**row, "compute_unit": unit} for row in _records(table)]))
        return 0
    import pandas as pd

    with pd.option_context("display.width", 160, "display.precision", 4):
        print(table.to_string(index=False))
    print(f"(compute axis: {unit or 'unit not given'}; C_mid and every C below in this unit)")
    print()
    print(cmp.summary())
    if args.plot:
        from .plot import plot_comparison

        print(f"\nplot saved to {_save(plot_comparison(cmp), args.plot)}")
    if args.plot_curves:
        from .plot import plot_fits

        print(f"curves plot saved to {_save(plot_fits(cmp.fits), args.plot_curves)}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .forecast import forecast
    from .plot import plot_fits, plot_forecast

    if args.to is not None and not (math.isfinite(args.to) and args.to > 0):
        # 0 was taken for "not given" (twice the fit), nan or a negative named --at
        raise RLCurvesError(
            f"--to must be a positive compute value (where the forecast ends), got {args.to:g}"
        )
    curves = _curves(args)
    fits = {label: _quiet_fit(args, df, label) for label, df in curves.items()}
    if len(fits) > 1:
        fig = plot_fits(
            fits,
            bands=not args.no_bands,
            level=args.level,
            seed=args.seed,
            extrapolate_to=args.to,
            logx=args.logx,
        )
        print(f"plot saved to {_save(fig, args.output)}")
        return 0
    (fit,) = fits.values()
    end = args.to or max(2.0 * float(fit.fit_compute.max()), float(fit.compute.max()))
    grid = np.linspace(float(fit.fit_compute.min()), end, 200)
    band = forecast(fit, grid, level=args.level, seed=args.seed, progress=False, band=True,
                    calibration=calibration_arg(args))  # fmt: skip
    fig = plot_forecast(fit, band, logx=args.logx)
    print(f"plot saved to {_save(fig, args.output)}")
    return 0


# What the backtest's coverage line means, in the CLI's own words.
BACKTEST_COVERAGE = (
    "    (coverage: of the prefixes fitted, the share whose interval held the reference: "
    "'forecast' = the curve interval held the whole-run fit's value at the end; 'last "
    "observation' = the prediction interval (the range of one evaluation) held the last logged "
    "evaluation; 'A' = the A interval held the whole-run fit's A; a refused forecast (no "
    "interval: too few points) is a miss. With three prefixes each share is 0%, 33%, 67% or "
    "100%: one run checks little; calibration needs many runs)"
)


def cmd_backtest(args: argparse.Namespace) -> int:
    from .backtest import backtest

    tables = []
    for label, df in _curves(args).items():
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
            label=label,
            progress=False,
            calibration=calibration_arg(args),
        )
        if args.json:
            rows = [{**row, "compute_unit": _unit(df)} for row in _records(bt.table)]
            tables.append({"label": label, "table": rows})
            continue
        print(bt.summary())
        print(BACKTEST_COVERAGE)
        print(_axis_line(df))
        if args.plot:
            path = _nth_path(args.plot, label, len(tables))
            print(f"\nplot saved to {_save(bt.plot(), path)}")
        tables.append(None)
    if args.json:
        print(_json(tables[0]["table"] if len(tables) == 1 else tables))
    return 0


def cmd_examples(args: argparse.Namespace) -> int:
    from .datasets import describe_examples

    table = describe_examples()
    if args.json:
        print(_json(_records(table)))
        return 0
    print(
        "bundled examples: pass example:NAME wherever a log path goes "
        "(rlcurves fit example:recipe_loo_scalerl), or demo --example NAME\n"
    )
    for group, rows in table.groupby("group", sort=False):
        print(f"[{group}]")
        for row in rows.itertuples():
            base = f" (baseline: {row.baseline})" if isinstance(row.baseline, str) else ""
            print(f"  {row.name}{base}")
            if args.verbose:
                print(f"      {row.description}")
    if not args.verbose:
        print("\n(-v for each example's description)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import load_example
    from .fit import fit_sigmoid
    from .forecast import forecast
    from .plot import plot_forecast

    df = load_example(args.example, compute=args.compute)
    unit = df.attrs["compute_unit"]
    print(f"example: {args.example}\n  {df.attrs['description']}\n  compute axis: {unit}\n")
    end = float(df["compute"].max())
    half = end / 2
    print(
        f"Fit on the first half of the budget ({format_compute(args.min_compute)} <= C <= "
        f"{format_compute(half)} of {format_compute(end, unit)}), forecast the end.\n"
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
    band = forecast(fit, grid, seed=0, progress=False, band=True)
    at_end = forecast(fit, end, seed=0, progress=False)
    last = df.loc[df["compute"].idxmax(), "reward"]
    print("\n".join(_forecast_lines(at_end, {end: float(last)}, unit=unit)))
    print(f"    whole-run fit at the end: {float(full.predict(end)):.3f} (A {full.A:.3f})")
    # default target: where the whole run ended (by its own fit), so the half-budget answer can
    # be checked against the compute the run actually took
    reached = math.floor(float(full.predict(end)) * 100) / 100
    target = args.target if args.target is not None else reached
    print(f"\n[[Compute to target]] (compute in {unit_name(unit)})")
    if args.target is None and not reached > full.R0:
        # the run did not climb: there is no level it reached by spending compute
        print(
            f"    no default target: the whole run's fit does not rise (R0 {full.R0:.3f}, at the "
            f"end {float(full.predict(end)):.3f}); pass --target REWARD to ask anyway"
        )
    else:
        print(f"    {fit.compute_to_reach(target, level=0.9, seed=0)}")
    if args.target is None and reached > full.R0:
        took = format_compute(full.compute_to_reach(target), unit)
        print(f"    (the whole-run fit reaches {target:g} at C = {took})")
    _demo_comparisons(args, df.attrs["group"], full)
    fig = plot_forecast(fit, band)
    fig.axes[0].set_title(
        f"{args.example} (SIMULATED): fit on the first half, forecast of the rest"
        if df.attrs["simulated"]
        else f"{args.example}: fit on the first half, forecast of the rest",
        fontsize=10,
    )
    path = _save(fig, Path(args.out) / f"{args.example}_fit.png")
    print(f"\nplot saved to {path}")
    return 0


def df_unit(df: pd.DataFrame) -> str:
    return unit_name(df.attrs.get("compute_unit")) or "unit not given"


def _demo_comparisons(args: argparse.Namespace, group: str, example_fit) -> None:
    """Compare each bundled run of the example's family with the run it differs from by one
    switch (``attrs["baseline"]``): the example's own variants first, then any other pairs."""
    from .compare import compare
    from .datasets import list_examples, load_example
    from .fit import fit_sigmoid

    family = {n: load_example(n, compute=args.compute) for n in list_examples(group=group)}
    if any("cell" in df.attrs for df in family.values()):
        _demo_study(args, family)
        return
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
        cols = ["variant", "A", "A_lower", "A_upper", "B", "B_lower", "B_upper", "C_mid"]
        cols.append("p_A_higher")
        print()
        table = _comparison_table(cmp)
        print(table[cols].round(3).to_string(index=False))
        print(f"(compute axis: {df_unit(family[base])}; C_mid in this unit)")
        print(cmp.summary())
        path = _save(cmp.plot(), Path(args.out) / f"{base}_compare.png")
        print(f"comparison plot saved to {path}")


def _demo_study(args: argparse.Namespace, family: dict[str, pd.DataFrame]) -> None:
    """A paired-seed study: the seeds of each cell pooled (:func:`rlcurves.fit_runs`), each cell
    compared with the cell it differs from by one switch (run-level draws), and the per-seed
    paired differences (:func:`rlcurves.paired_differences`)."""
    import pandas as pd

    from .compare import compare
    from .runs import RunsFit, fit_runs, paired_differences, shared_compute

    cells: dict[str, list[pd.DataFrame]] = {}
    base_of: dict[str, str | None] = {}
    for df in family.values():
        cell = df.attrs["cell"]
        cells.setdefault(cell, []).append(df.assign(run=f"s{df.attrs['seed']}"))
        base = df.attrs.get("baseline")
        base_of[cell] = None if base is None else family[base].attrs["cell"]
    tables = {cell: pd.concat(parts, ignore_index=True) for cell, parts in cells.items()}
    for cell, table in tables.items():  # concat keeps no attrs: the axis unit and reward column
        first = cells[cell][0].attrs
        table.attrs = {k: first[k] for k in ("compute_unit", "reward") if k in first}

    def fit_cell(cell: str, max_compute: float | None = None) -> RunsFit:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_runs(tables[cell], min_compute=args.min_compute, max_compute=max_compute,
                            label=cell, seed=0)  # fmt: skip

    fits = {cell: fit_cell(cell) for cell in tables}
    seeds = ", ".join(sorted({run for f in fits.values() for run in f.runs}))
    print(f"\n[[Paired-seed study]] cells {list(fits)}, seeds {seeds}")
    for f in fits.values():
        print(f.summary())
    for base in dict.fromkeys(b for b in base_of.values() if b is not None):
        variants = [c for c, b in base_of.items() if b == base]
        group = [base, *variants]
        window = shared_compute(*(tables[c] for c in group))
        # cells of different lengths are compared on their common compute range, unless too few
        # evaluations of a cell lie in it (on GPU-hours a faster mode's range can hold only a
        # slower one's first few): then on their own ranges, and the summary says so
        group_fits, own = {c: fits[c] for c in group}, []
        for c in group:
            if tables[c]["compute"].max() > 1.05 * window:
                try:
                    group_fits[c] = fit_cell(c, window)
                except RLCurvesError:
                    own.append(c)
        if own:  # all on their own ranges, not a mixture
            group_fits = {c: fits[c] for c in group}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cmp = compare(group_fits, baseline=base)
        print()
        if own:
            print(f"(compared on the cells' own ranges: {own} have too few evaluations below "
                  f"the common range's end, compute {window:.4g})")  # fmt: skip
        elif any(group_fits[c] is not fits[c] for c in group):
            print(f"(compared on the cells' common range: compute <= {window:.4g})")
        print(cmp.summary())
        for cell in variants:
            d = paired_differences(group_fits[base], group_fits[cell]).set_index("parameter")
            for p, what in (("A", "A"), ("log_B", "log B")):
                r = d.loc[p]
                print(
                    f"    paired {cell} - {base}, {what}: {r['mean']:+.3f} [{r['lower']:+.3f}, "
                    f"{r['upper']:+.3f}] (90% t interval over {r['pairs']} seeds)"
                )
        path = _save(cmp.plot(), Path(args.out) / f"{base}_study_compare.png")
        print(f"comparison plot saved to {path}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlcurves",
        description="Fit, forecast and compare RL compute-scaling curves (the ScaleRL sigmoid).",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"rlcurves {__version__}")
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
    add_metric_kind_arg(p)
    p.add_argument("--target", type=finite_arg, help="also: compute to reach this reward")
    p.add_argument(
        "--plot", type=image_arg, help="save the fit with its forecast band to this image"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_forecast)

    p = sub.add_parser("compare", help="compare recipe variants (one file each) by A and B")
    _add_io_args(p, many=True)
    _add_fit_args(p)
    p.add_argument("--baseline", help="variant to compare against (default: the first)")
    _add_interval_args(p)
    p.add_argument("--n-samples", type=int, default=1000, help="bootstrap draws per variant")
    p.add_argument("--plot", type=image_arg, help="save the A-B comparison plot to this image")
    p.add_argument(
        "--plot-curves",
        type=image_arg,
        help="save every variant's curve, overlaid, to this image",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("plot", help="plot the fit with its forecast band")
    _add_io_args(p)
    _add_fit_args(p)
    p.add_argument(
        "-o", "--output", type=image_arg, required=True, help="image file to write (png, pdf, svg)"
    )
    p.add_argument("--to", type=float, help="forecast up to this compute (default: 2x the fit)")
    p.add_argument("--logx", action="store_true", help="log-scale compute axis")
    p.add_argument(
        "--no-bands", action="store_true", help="several --reward curves: leave out the bands"
    )
    _add_interval_args(p)
    add_metric_kind_arg(p)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("backtest", help="refit a finished run on prefixes; score the forecasts")
    _add_io_args(p)
    p.add_argument("--min-compute", type=finite_arg, help="drop points below this compute")
    p.add_argument("--r0", type=finite_arg, help="fix R0 (the starting model's pass rate)")
    p.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=[0.25, 0.5, 0.75],
        help="fractions of the final compute to fit up to (default: 0.25 0.5 0.75)",
    )
    _add_interval_args(p)
    p.add_argument("--n-samples", type=int, default=1000, help="bootstrap resamples per prefix")
    add_metric_kind_arg(p)
    p.add_argument("--plot", type=image_arg, help="save the backtest plot to this image")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=cmd_backtest)

    p = sub.add_parser(
        "demo", help="forecast the bundled example run from half its budget; print and plot"
    )
    p.add_argument(  # the name is checked when the command runs (load_example lists them)
        "--example",
        default="simulated_scalerl_8b",
        metavar="NAME",
        help="bundled run to forecast (default: simulated_scalerl_8b; `rlcurves examples` "
        "lists them all: the simulated one, the real CPU-demo seeds and the leave-one-out runs)",
    )
    p.add_argument(
        "--min-compute",
        type=finite_arg,
        default=1500.0,
        help="fit window start (the paper drops the first ~1.5k GPU-hours)",
    )
    p.add_argument("--target", type=finite_arg, help="reward to compute the budget for")
    p.add_argument(
        "--compute",
        help="column of the example to use as compute (default: its GPU-hours column; "
        "tokens_total for a load-free axis on the real runs)",
    )
    p.add_argument("--out", default="out", help="folder for the figures")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "examples", help="list the bundled example runs (use them as example:NAME for a path)"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print each one's description")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_examples)
    from .cli_live import add_commands as add_live_commands  # watch, report

    add_live_commands(sub)
    from .cli_race import add_commands as add_race_command  # race

    add_race_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rlcurves`` command."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = args.func(args)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler below
            return code
    except RLCurvesError as exc:
        print(f"rlcurves: error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader of our output left (`rlcurves ... | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one CLI line, in CLI words (not Python's file:line form)."""
    print(f"rlcurves: warning: {cli_words(str(message))}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
