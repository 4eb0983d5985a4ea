"""The ``rlcurves watch`` and ``rlcurves report`` commands: follow a running job; share runs.

``watch`` follows a log as it grows (anything :func:`rlcurves.read_log` reads), refits with
:class:`rlcurves.monitor.Monitor` after each new evaluation, prints the report when it changes and
keeps a figure (PNG) and the report (JSON lines) up to date. ``report`` writes one self-contained
HTML page (:mod:`rlcurves.report`). Registered in :mod:`rlcurves.cli` by :func:`add_commands`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from .decide import DEFAULT_RULE
from .errors import RLCurvesError

MONITOR_JSONL = "rlcurves_monitor.jsonl"
MONITOR_PNG = "rlcurves_monitor.png"


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``watch`` and ``report`` to the ``rlcurves`` command's sub-parsers."""
    from . import cli

    p = sub.add_parser(
        "watch",
        help="follow a running job's log: forecast at the budget, stop/continue advice",
        description="Follow a log as it grows; refit after each new evaluation; print the report "
        "when it changes; keep a figure (PNG) and the report (JSON lines) updated.",
    )
    p.add_argument("path", help="the run's log or run folder (anything read_log reads)")
    p.add_argument("--budget", type=float, required=True, help="planned compute of the run")
    p.add_argument(
        "--baseline",
        help="what to beat at the budget: a finished run's log or folder (one that ended short "
        "of the budget is forecast there), or a reward level (a number, e.g. 0.62)",
    )
    p.add_argument("--target", type=cli.finite_arg, help="a reward to reach: compute to reach it")
    p.add_argument(
        "--every", type=float, default=30.0, help="seconds between looks at the log (default 30)"
    )
    p.add_argument("--once", action="store_true", help="look once, print the report and exit")
    p.add_argument(
        "--max-minutes", type=float, default=None, help="stop following after this many minutes"
    )
    p.add_argument(
        "--out",
        help=f"folder for {MONITOR_PNG} and {MONITOR_JSONL} (default: next to the log)",
    )
    cli._add_log_args(p)
    p.add_argument("--min-compute", type=cli.finite_arg, help="drop points below this compute")
    p.add_argument("--r0", type=cli.finite_arg, help="fix R0 (the starting model's pass rate)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=cli.seed_arg, default=0, help="random seed of the bootstrap")
    p.add_argument(
        "--n-samples", type=int, default=500, help="bootstrap resamples per forecast (500)"
    )
    cli.add_metric_kind_arg(p)
    p.add_argument("--min-points", type=int, help="evaluations before any advice (8)")
    p.add_argument(
        "--min-fraction",
        type=float,
        help="fraction of the budget before any stop advice (default: the measured rule's, "
        f"{DEFAULT_RULE.min_fraction:g})",
    )
    p.add_argument(
        "--p-unlikely",
        type=float,
        help="advise stopping when p(beats the baseline/target) is at most this (default: the "
        f"measured rule's, {_schedule_words()})",
    )
    p.add_argument(
        "--p-on-track",
        type=float,
        help="say 'on track' when p(beats the baseline/target) is at least this (0.8)",
    )
    p.add_argument(
        "--hold",
        type=int,
        help="consecutive refits a stop advice must hold before it is given (2)",
    )
    p.add_argument(
        "--identified-guard",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="before this fraction of the budget give advice only once the fit determines the "
        "run's ceiling; 1: always, 0: never (0: the calibrated forecast decides from the first "
        "fit)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG figure")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser(
        "report",
        help="one self-contained HTML report of runs: fits, forecasts, comparison, backtests",
    )
    p.add_argument("runs", nargs="+", help="logs or run folders, one per run")
    p.add_argument("--baseline", help="run to compare the others against (default: the first)")
    p.add_argument("-o", "--output", required=True, help="HTML file to write")
    p.add_argument("--budget", type=float, help="forecast every run at this compute")
    cli._add_log_args(p)
    p.add_argument("--min-compute", type=cli.finite_arg, help="drop points below this compute")
    p.add_argument("--r0", type=cli.finite_arg, help="fix R0 (the starting model's pass rate)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=cli.seed_arg, default=0, help="random seed of the bootstrap")
    p.add_argument(
        "--n-samples", type=int, default=500, help="bootstrap draws per run and prefix (500)"
    )
    cli.add_metric_kind_arg(p)
    p.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=[0.25, 0.5, 0.75],
        help="backtest: fractions of each run's compute to fit up to (0.25 0.5 0.75)",
    )
    p.add_argument("--title", help="title of the page")
    p.set_defaults(func=cmd_report)


def _schedule_words() -> str:
    """The measured rule's schedule in words, for argparse help (``%`` escaped as ``%%``)."""
    words = ", ".join(f"{t:g} from {f:.0%} of the budget" for f, t in DEFAULT_RULE.schedule)
    return words.replace("%", "%%")


# the Monitor's keywords as watch spells them, beside the reader's and the fit's (cli.cli_words)
_WATCH_FLAGS = {"min_points": "--min-points", "min_fraction": "--min-fraction",
                "p_unlikely": "--p-unlikely", "p_on_track": "--p-on-track",
                "require_identified": "--identified-guard"}  # fmt: skip
_WATCH_KEYWORD = re.compile(r"(?<![\w.\-])(" + "|".join(_WATCH_FLAGS) + r")(=|\b)")
# keywords whose bare name is a common word ("the budget"): a flag only where a setting is refused
_WATCH_SETTINGS = {"budget": "--budget", "target": "--target", "hold": "--hold",
                   "n_samples": "--n-samples"}  # fmt: skip
_WATCH_SETTING = re.compile(r"(?<![\w.\-])(" + "|".join(_WATCH_SETTINGS) + r")=?(?= must)")


def watch_words(text: str) -> str:
    """A report in the command line's words: ``fix R0 with r0=`` becomes ``fix R0 with --r0``,
    ``(min_points)`` ``(--min-points)``."""
    from .cli import cli_words

    def flag(m: re.Match) -> str:
        return _WATCH_FLAGS[m.group(1)] + (" " if m.group(2) == "=" else "")

    text = _WATCH_SETTING.sub(lambda m: _WATCH_SETTINGS[m.group(1)], text)
    return _WATCH_KEYWORD.sub(flag, cli_words(text))


def _read_kws(args: argparse.Namespace) -> dict:
    from .cli import _log_kws, _reward_arg

    kws = {k: v for k, v in _log_kws(args).items() if v is not None}
    if getattr(args, "compute", None) is not None:
        kws["compute"] = args.compute
    reward = _reward_arg(getattr(args, "reward", None))
    if reward is not None:
        kws["reward"] = reward
    return kws


def _fit_kws(args: argparse.Namespace) -> dict:
    return {k: v for k, v in (("min_compute", args.min_compute), ("r0", args.r0)) if v is not None}


def _out_dir(args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out)
    path = Path(args.path)
    return path if path.is_dir() else path.parent


def _last_record(path: Path) -> dict | None:
    """The last complete record of the JSON-lines report (None if there is none)."""
    if not path.exists():
        return None
    for line in reversed(path.read_text(encoding="utf-8").splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def _monitor(args: argparse.Namespace, read_kws: dict):
    from . import cli
    from .monitor import Monitor

    return Monitor(
        args.budget,
        baseline=_baseline_arg(args.baseline),
        target=args.target,
        level=args.level,
        min_points=args.min_points,
        min_fraction=args.min_fraction,
        p_unlikely=args.p_unlikely,
        p_on_track=args.p_on_track,
        hold=args.hold,
        require_identified=args.identified_guard,
        n_samples=args.n_samples,
        seed=args.seed,
        fit_kws=_fit_kws(args),
        read_log_kws=read_kws,
        label=Path(args.path).name,
        calibration=cli.calibration_arg(args),
    )


def cmd_watch(args: argparse.Namespace) -> int:
    if args.every <= 0:
        raise RLCurvesError(f"--every must be a positive number of seconds, got {args.every}")
    if args.max_minutes is not None and args.max_minutes < 0:
        raise RLCurvesError(f"--max-minutes must be >= 0, got {args.max_minutes}")
    read_kws = _read_kws(args)
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        # said now, not as a FileExistsError once the first report is to be written
        raise RLCurvesError(
            f"--out {args.out}: is a file; --out takes the folder for {MONITOR_PNG} and "
            f"{MONITOR_JSONL} (default: the log's folder)"
        )
    try:
        monitor = _monitor(args, read_kws)
    except RLCurvesError as exc:  # the Monitor's keywords, as the flags that set them
        raise RLCurvesError(watch_words(str(exc)), **exc.details) from None
    out = _out_dir(args)
    jsonl, png = out / MONITOR_JSONL, out / MONITOR_PNG
    last = _last_record(jsonl)
    last_key = None if last is None else last.get("key")
    if last is not None and last.get("label") == monitor.label and "hold_state" in last:
        monitor.resume(last)  # a stop advice holds across `watch --once` calls too
    deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
    seen_state = None
    waiting_said = None
    while True:
        state = _log_state(args.path)
        if state != seen_state:
            seen_state = state
            try:
                report = monitor.update_from(args.path)
            except RLCurvesError as exc:
                if args.once:
                    raise RLCurvesError(f"watch: cannot read {args.path}: {exc}") from exc
                if str(exc) != waiting_said:  # say it once, then keep waiting quietly
                    print(f"waiting for {args.path}: {watch_words(str(exc))}", flush=True)
                    waiting_said = str(exc)
                report = None
            if report is not None:
                key = json.loads(json.dumps(list(report.key())))
                changed = key != last_key
                if changed or args.once:
                    print(watch_words(report.summary()), flush=True)
                    print(flush=True)
                if changed:
                    out.mkdir(parents=True, exist_ok=True)
                    with jsonl.open("a", encoding="utf-8") as fh:
                        fh.write(json.dumps({**report.to_dict(), "key": key}) + "\n")
                    if not args.no_plot:
                        _save_plot(report, png)
                    last_key = key
                if report.fraction >= 1:
                    print(f"the budget {args.budget:g} is reached; stopped watching", flush=True)
                    return 0
        if args.once:
            return 0
        if deadline is not None and time.monotonic() + args.every > deadline:
            print(f"--max-minutes {args.max_minutes:g} reached; stopped watching", flush=True)
            return 0
        time.sleep(args.every)


def _baseline_arg(text: str | None) -> str | float | None:
    """``--baseline``: a log or run folder, or a number (a reward level to beat)."""
    if text is None or text.startswith(("example:", "wandb:")) or Path(text).exists():
        return text
    try:
        return float(text)
    except ValueError:
        raise RLCurvesError(
            f"--baseline {text}: no such file or folder, and not a number. Give a finished run's "
            "log or folder, or a reward level to beat (--baseline 0.62); --target REWARD asks "
            "for the compute to reach a reward instead."
        ) from None


def _log_state(path: str) -> tuple:
    """Sizes and modification times of the files under ``path``: changes when the log grows."""
    p = Path(path)
    if not p.exists():
        return ("missing",)
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    out = []
    for q in files:
        if q.name in (MONITOR_JSONL, MONITOR_PNG):
            continue
        st = q.stat()
        out.append((str(q), st.st_size, st.st_mtime_ns))
    return tuple(out)


def _save_plot(report, png: Path) -> None:
    import matplotlib.pyplot as plt

    fig = report.plot()
    tmp = png.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(png)  # a viewer never sees a half-written image


def _report_baseline(runs: list[str], baseline: str | None) -> str | None:
    """``--baseline`` as the report names the runs: a run's path, its name (``recipe_a`` for
    ``example:recipe_a`` or ``runs/recipe_a``) or the report's own name for it."""
    if baseline is None:
        return None
    names = []
    for p in runs:  # as write_report names them
        name = Path(p).name or str(p)
        names.append(str(p) if name in names else name)
    for p, name in zip(runs, names, strict=True):
        short = p.split(":", 1)[1] if p.startswith("example:") else Path(p).name
        if baseline in (p, name, short, f"example:{baseline}") or (
            Path(baseline).name == short and Path(baseline).name
        ):
            return name
    raise RLCurvesError(
        f"--baseline {baseline!r} is not one of the runs; give one of "
        f"{[p.split(':', 1)[1] if p.startswith('example:') else Path(p).name for p in runs]}"
    )


def cmd_report(args: argparse.Namespace) -> int:
    from . import cli
    from .report import write_report

    path = write_report(
        args.runs,
        args.output,
        baseline=_report_baseline(args.runs, args.baseline),
        budget=args.budget,
        level=args.level,
        seed=args.seed,
        n_samples=args.n_samples,
        fractions=args.fractions,
        fit_kws=_fit_kws(args),
        read_log_kws=_read_kws(args),
        title=args.title,
        command=" ".join(["rlcurves", *sys.argv[1:]]) if sys.argv else None,
        calibration=cli.calibration_arg(args),
    )
    print(f"report written to {path}")
    return 0
