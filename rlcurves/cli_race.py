"""The ``rlcurves race`` command: a sweep's logs in, who to stop and why out, and the figure.

Each LOG (anything :func:`rlcurves.read_log` reads) is one run of the sweep; a log holding several
runs (a ``run`` column) is taken as seeds of one recipe, which race as one entry. The race is
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
        help="one log or run folder per run (a log with several runs: seeds of one recipe)",
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
        default=0.4,
        metavar="FRACTION",
        help="before this fraction of the budget a run is stopped only once its fit determines "
        "its ceiling (a late bloomer before its midpoint is not); 1: always, 0: never (0.4)",
    )
    p.add_argument(
        "--misspecification",
        choices=("sweep", "calibration"),
        default="sweep",
        help="the forecasts' misspecification scale: refitted on the sweep's own runs "
        "(backtests within their windows; default) or the calibration's",
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
    p.add_argument("--min-compute", type=float, help="drop points below this compute")
    p.add_argument("--r0", type=float, help="fix R0 (the starting model's pass rate)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the forecasts")
    p.add_argument(
        "--n-samples", type=int, default=300, help="bootstrap resamples per forecast (300)"
    )
    p.set_defaults(func=cmd_race)


def _flag_words(message: str) -> str:
    """``alpha must be ...`` -> ``--alpha must be ...``."""
    return _KEYWORD.sub(lambda m: _FLAGS[m.group(1)], message)


def _curves(args: argparse.Namespace) -> dict[str, list[tuple[str, object]]]:
    """Entry name -> [(run name, frame)]: one entry per log, its runs the log's runs."""
    from .cli import _load, _log_kws

    entries: dict[str, list] = {}
    for path in args.logs:
        df, _, _ = _load(path, args.compute, args.reward, args.run, args=args, **_log_kws(args))
        name = Path(path.split(":", 1)[1] if path.startswith("example:") else path).stem
        base, k = name, 2
        while name in entries:  # two logs of one name (run1/log.jsonl, run2/log.jsonl)
            name, k = f"{base}-{k}", k + 1
        if "run" in df.columns and df["run"].nunique() > 1:
            entries[name] = [(f"{name}/{r}", g) for r, g in df.groupby("run", sort=False)]
        else:
            entries[name] = [(name, df)]
    return entries


def cmd_race(args: argparse.Namespace) -> int:
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
            higher_is_better=not args.lower_is_better,
            n_samples=args.n_samples,
            seed=args.seed,
            fit_kws=kws,
        )
    except RLCurvesError as exc:
        raise RLCurvesError(_flag_words(str(exc))) from exc
    if args.at is not None and not 0 < args.at <= 1:
        raise RLCurvesError(f"--at must be a fraction of the budget in (0, 1], got {args.at}")
    entries = _curves(args)
    if sum(len(v) for v in entries.values()) < 2 and len(entries) < 2:
        raise RLCurvesError("a race needs at least two runs: pass two or more LOG paths")
    step = args.budget / args.rungs
    fed: dict[str, int] = {}
    report = None
    # look `confirm` times, one rung apart, up to each run's latest point
    for back in range(race.confirm - 1, -1, -1):
        for entry, runs in entries.items():
            group = entry if len(runs) > 1 else None
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

        out = Path(args.out or RACE_PNG)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig = report.plot()
        fig.savefig(out, dpi=110)
        plt.close(fig)
        print(f"figure written to {out}")
    return 0
