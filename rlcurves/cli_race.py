"""The ``rlcurves race`` command: a sweep's logs in, who to stop and why out, and the figure.

Each run of each LOG (anything :func:`rlcurves.read_log` reads) is one member of the sweep: a log
of one run, or each run of a log holding several (a ``run`` column, a W&B sweep export).
``--seeds-of COLUMN`` races the runs that share a value of COLUMN (a recipe) as one entry, their
seeds pooled; ``--ended RUN`` marks a run that ended short of the budget (it keeps its forecast at
the budget, said to be one, and is not stopped). The race is
looked at ``--confirm`` times, one rung apart (each run's points up to one rung, two rungs...
before its latest), so a stop is made only when the refits one rung apart agree, as a live race
would have made it. Registered in :mod:`rlcurves.cli` by :func:`add_commands`.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from .errors import RLCurvesError

RACE_PNG = "rlcurves_race.png"
# Race's keywords and the flags that set them (for error messages in the command line's words)
_FLAGS = {
    "budget": "--budget",
    "alpha": "--alpha",
    "tolerance": "--tolerance",
    "level": "--level",
    "min_fraction": "--min-fraction",
    "min_points": "--min-points",
    "confirm": "--confirm",
    "n_samples": "--n-samples",
    "rungs": "--rungs",
    "require_identified": "--identified-guard",
    "error_correlation": "--error-correlation",
}
_KEYWORD = re.compile(r"\b(" + "|".join(_FLAGS) + r")\b(?= must)")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``race`` to the ``rlcurves`` command's sub-parsers."""
    from . import cli

    p = sub.add_parser(
        "race",
        help="race a sweep's runs to one budget: who to stop now and why, and the figure",
        description="Fit every run of a sweep, forecast it at the budget and say which runs to "
        "stop: those unlikely to be the best at the budget, with the risk of stopping the "
        "eventual winner (by more than --tolerance) over the whole sweep at most --alpha.",
    )
    p.add_argument(
        "logs",
        nargs="+",
        metavar="LOG",
        help="logs or run folders: each run in them races on its own (a log with several runs, "
        "such as a W&B sweep export, gives one racer per run; see --seeds-of)",
    )
    p.add_argument(
        "--seeds-of",
        metavar="COLUMN",
        help="race the runs that share a value of this column (e.g. recipe) as one entry: "
        "seeds of one recipe, their curves pooled",
    )
    p.add_argument(
        "--ended",
        nargs="+",
        metavar="RUN",
        default=[],
        help="runs that ended short of the budget (will not report again): they keep their "
        "forecast at the budget and are not stopped",
    )
    p.add_argument(
        "--budget",
        type=float,
        required=True,
        help="the compute every run is planned to reach (units of the compute axis)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="largest risk of stopping the eventual winner, over the sweep (0.05)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.01,
        help="regret that does not count as losing the winner (0.01)",
    )
    p.add_argument(
        "--min-fraction",
        type=float,
        default=None,
        help="fraction of the budget a run must reach before it may be stopped (default: the "
        "measured stop rule's, rlcurves.decide.DEFAULT_RULE)",
    )
    p.add_argument(
        "--min-points",
        type=int,
        default=None,
        help="evaluations a run needs before it may be stopped (default: the stop rule's, 8)",
    )
    p.add_argument(
        "--confirm",
        type=int,
        default=None,
        help="refits one rung apart that must agree on a stop (default: the stop rule's hold, 2)",
    )
    p.add_argument(
        "--identified-guard",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="before this fraction of the budget a run is stopped, and counts as a rival, only "
        "once its fit determines its ceiling (a late bloomer before its midpoint); 1: always, "
        "0: never (0: a run's calibrated forecast decides from its first fit)",
    )
    p.add_argument(
        "--misspecification",
        choices=("run", "sweep", "calibration"),
        default="run",
        help="the forecasts' misspecification scale: refitted on the sweep's own runs "
        "(backtests within their windows), any run whose backtests miss far getting its own "
        "(run; default), one for every run (sweep), or the calibration's",
    )
    p.add_argument(
        "--error-correlation",
        type=float,
        default=0.0,
        metavar="RHO",
        help="the correlation of two runs' forecast errors in one sweep, taken out of every "
        "comparison between runs (0: independent, the default; about 0.4 on the corpus's "
        "training-reward sweeps, 0.15 on validation pass rates)",
    )
    p.add_argument(
        "--rungs",
        type=int,
        default=20,
        help="refit a run each 1/RUNGS of the budget (20: each 5%%)",
    )
    p.add_argument(
        "--at",
        type=float,
        help="replay finished logs: the race as it stood at this fraction of the budget (0.4)",
    )
    p.add_argument(
        "--lower-is-better", action="store_true", help="the reward is a loss: lower wins"
    )
    p.add_argument("--out", help=f"the figure to write (default: {RACE_PNG} here)")
    p.add_argument("--no-plot", action="store_true", help="do not write the figure")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    cli._add_log_args(p)
    p.add_argument("--min-compute", type=cli.finite_arg, help="drop points below this compute")
    p.add_argument("--r0", type=cli.finite_arg, help="fix R0 (the starting model's pass rate)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=cli.seed_arg, default=0, help="random seed of the forecasts")
    p.add_argument(
        "--n-samples", type=int, default=300, help="bootstrap resamples per forecast (300)"
    )
    cli.add_metric_kind_arg(p)
    p.set_defaults(func=cmd_race)


def _flag_words(message: str) -> str:
    """``alpha must be ...`` -> ``--alpha must be ...``."""
    return _KEYWORD.sub(lambda m: _FLAGS[m.group(1)], message)


def _curves(args: argparse.Namespace) -> dict[str, list[tuple[str, object]]]:
    """Entry name -> [(run name, frame)]: each run of each log its own entry, or (``--seeds-of
    COLUMN``) the runs sharing a value of COLUMN one entry."""
    from .cli import _load, _log_kws

    found: list[tuple[str, str | None, object]] = []  # (log name, run in the log, frame)
    for path in args.logs:
        df, _, _ = _load(path, args.compute, args.reward, args.run, args=args, **_log_kws(args))
        stem = Path(path.split(":", 1)[1] if path.startswith("example:") else path).stem
        if args.seeds_of is not None and args.seeds_of not in df.columns:
            columns = [str(c) for c in df.columns if c not in ("compute", "reward")]
            raise RLCurvesError(
                f"--seeds-of {args.seeds_of}: {path} has no column {args.seeds_of!r}; its "
                f"columns: {columns}. Name the column that says which recipe each run is."
            )
        if "run" in df.columns and df["run"].nunique() > 1:
            found += [(stem, str(r), g) for r, g in df.groupby("run", sort=False)]
        else:
            found.append((stem, None, df))
    units = {str(df.attrs.get("compute_unit")) for _, _, df in found}
    if len(units) > 1:
        raise RLCurvesError(
            f"the logs are on different compute axes ({sorted(units)}); pass --compute (or --gpus "
            "/ --gpu-hours-per-step) so that every run shares one unit and one budget."
        )
    names = _run_names([(stem, run) for stem, run, _ in found])
    entries: dict[str, list] = {}
    for name, (_, _, df) in zip(names, found, strict=True):
        if args.seeds_of is None:
            entries[name] = [(name, df)]
            continue
        recipes = df[args.seeds_of].dropna().astype(str).unique()
        if len(recipes) != 1:
            raise RLCurvesError(
                f"--seeds-of {args.seeds_of}: run {name!r} has {len(recipes)} values of "
                f"{args.seeds_of!r} ({list(recipes)[:5]}); each run needs one (its recipe). Pass "
                "--run with the column naming the runs (seeds)."
            )
        entries.setdefault(recipes[0], []).append((name, df))
    return entries


def _note_training_reward(args: argparse.Namespace, entries: dict[str, list]) -> None:
    """Without --metric-kind, a note on stderr when the logs' reward column reads as a training
    reward (the forecasts are then calibrated on validation pass rates)."""
    from ._format import units_of
    from .calibrate import looks_like_training_reward, training_reward_note
    from .cli import _say

    if getattr(args, "metric_kind", None) is not None:
        return
    frame = next(iter(entries.values()))[0][1]
    column = units_of(frame, "compute", "reward").get("reward")
    if looks_like_training_reward(column):
        note = training_reward_note(f"the reward column {column!r}", "the forecasts are",
                                    "pass --metric-kind training-reward")  # fmt: skip
        _say(args, f"note: {note}")


def _run_names(found: list[tuple[str, str | None]]) -> list[str]:
    """Each racer's name: its run's name in the log (a log of one run: the log's name), with
    the log's name in front where two logs share a run name (``logA/seed0``)."""
    short = [stem if run is None else run for stem, run in found]
    names = []
    for (stem, run), name in zip(found, short, strict=True):
        if run is not None and short.count(name) > 1:
            name = f"{stem}/{run}"
        base, k = name, 2
        while name in names:  # two logs of one name (run1/log.jsonl, run2/log.jsonl)
            name, k = f"{base}-{k}", k + 1
        names.append(name)
    return names


def _ended(args: argparse.Namespace, entries: dict[str, list]) -> list[str]:
    """The runs ``--ended`` names (an entry's name ends all its runs); unknown names refused."""
    runs = [run for members in entries.values() for run, _ in members]
    out = []
    for name in args.ended:
        if name in runs:
            out.append(name)
        elif name in entries:
            out += [run for run, _ in entries[name]]
        else:
            raise RLCurvesError(f"--ended {name}: no such run in the race; the runs: {runs}")
    return out


def cmd_race(args: argparse.Namespace) -> int:
    from .cli import calibration_arg
    from .race import Race

    if args.out and Path(args.out).suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise RLCurvesError(f"--out must name an image file (.png, .pdf, .svg), got {args.out}")
    kws = {k: v for k, v in (("min_compute", args.min_compute), ("r0", args.r0)) if v is not None}
    try:
        race = Race(
            args.budget,
            alpha=args.alpha,
            tolerance=args.tolerance,
            level=args.level,
            min_fraction=args.min_fraction,
            min_points=args.min_points,
            confirm=args.confirm,
            rungs=args.rungs,
            require_identified=args.identified_guard,
            misspecification=args.misspecification,
            error_correlation=args.error_correlation,
            higher_is_better=not args.lower_is_better,
            n_samples=args.n_samples,
            seed=args.seed,
            fit_kws=kws,
            calibration=calibration_arg(args),
        )
    except RLCurvesError as exc:
        raise RLCurvesError(_flag_words(str(exc))) from exc
    if args.at is not None and not 0 < args.at <= 1:
        raise RLCurvesError(f"--at must be a fraction of the budget in (0, 1], got {args.at}")
    entries = _curves(args)
    if len(entries) < 2:
        raise RLCurvesError(
            "a race needs at least two racers: pass two or more LOG paths, or a log holding "
            f"several runs{' of several recipes' if args.seeds_of else ''}"
        )
    ended = _ended(args, entries)
    _note_training_reward(args, entries)
    step = args.budget / args.rungs
    fed: dict[str, int] = {}
    report = None
    # look `confirm` times, one rung apart, up to each run's latest point
    for back in range(race.confirm - 1, -1, -1):
        for entry, runs in entries.items():
            group = entry if args.seeds_of is not None or len(runs) > 1 else None
            for run, df in runs:
                df = df.sort_values("compute", kind="stable")
                if args.at is not None:
                    df = df[df["compute"] <= args.at * args.budget]
                c = df["compute"].to_numpy(float)
                r = df["reward"].to_numpy(float)
                upto = c.max() - back * step if c.size else 0.0
                keep = np.flatnonzero(c <= upto + 1e-12)[fed.get(run, 0) :]
                if keep.size:
                    race.update(run, c[keep], r[keep], group=group)
                    fed[run] = fed.get(run, 0) + keep.size
        for run in ended:
            if run in fed:
                race.end(run)
        report = race.report()
    print(report.summary())
    if report.stop:
        print(f"\nstop now: {' '.join(report.stop)}")
    else:
        print("\nstop now: none")
    if args.json:
        print(json.dumps(json.loads(report.table.to_json(orient="records")), indent=2))
    if not args.no_plot:
        import matplotlib.pyplot as plt

        from ._format import compute_label, units_of

        out = Path(args.out or RACE_PNG)
        out.parent.mkdir(parents=True, exist_ok=True)
        # the axes in the logs' words (every log shares one unit: _curves checks it)
        units = units_of(next(iter(entries.values()))[0][1], "compute", "reward")
        fig = report.plot(
            compute_label=compute_label(units.get("compute")),
            reward_label=units.get("reward") or "reward",
        )
        fig.savefig(out, dpi=110)
        plt.close(fig)
        print(f"figure written to {out}")
    return 0
