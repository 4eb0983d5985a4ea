"""The paired-seed study's table (README): each cell against the cell it differs from by one switch.

Reads the runs of ``scripts/run_study.sh`` (``OUT/CELL-sSEED/log.jsonl``; by default the bundled
``recipe_study_*`` runs) on generated tokens. Two views of one question, "does this switch move A
or B beyond seed noise?":

- run level: :func:`rlcurves.fit_runs` per cell (pooled fit, run-level draws) and
  :func:`rlcurves.compare` of the two cells (the difference from Welch's t on the per-seed
  fits), whose verdict on A needs the interval of the difference beyond the paper's 0.02 margin;
- paired: :func:`rlcurves.paired_differences`, per seed the difference of the two runs' fitted A
  (and log B), since the runs of one seed share warm-up, prompt order and sampler seed; mean and
  a t interval over seeds.

Two cells of different lengths are compared on their common compute range
(:func:`rlcurves.shared_compute`): the longer one is refitted up to it (unless ``--own-ranges``,
or when too few of its evaluations lie below it, which the table's pair label says).

And, since a sigmoid fit says nothing about a run that rose and then fell, each cell's peak and
final validation pass rate per seed (mean of the last three evaluations).

``--study long`` (issue 30): the long-completion study of the trainer modes (the bundled
``recipe_long_*`` runs: sync, PPO-off-policy-8, PipelineRL-8 on the addition chain with vLLM),
fitted on ``gpu_hours`` (the axis the modes' efficiency claims are about; ``--compute
tokens_total`` for the load-free one), every cell on its whole runs (the modes generate the same
tokens; on gpu_hours PipelineRL's runs end first, and cutting the others to its range would fit
them on their first three evaluations). It adds, per pair, the paired difference of log C_mid
and the paired ratio of the runs' total GPU-hours (the same tokens in every mode), and per cell
where the time went: the per-step seconds of waiting for the batch, training and the weight
push, each side's busy seconds per step, the idle fractions of generator and trainer, the lag,
the completion length, the machine load the run saw, and the overlap bound: the share of a run's
time that would remain if its generation and training overlapped perfectly with their measured
durations (max over sum), the most a pipeline could save by overlap alone.

Usage: python scripts/study_table.py [OUT_DIR] [--study lsb|long] [--pair VARIANT=BASELINE ...]
       [--compute COLUMN] [--own-ranges] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from rlcurves import compare, fit_runs, paired_differences, read_log, shared_compute
from rlcurves.datasets import example_path, list_examples, load_example
from rlcurves.errors import RLCurvesError

RUN_DIR = re.compile(r"^(?P<cell>.+)-s(?P<seed>\d+)$")


GROUPS = {"lsb": "recipe_study", "long": "recipe_long"}
# the long study's pairs beyond each cell's bundled baseline: PipelineRL-8 against sync too
EXTRA_PAIRS = {"long": [("pipe8", "sync")]}


def bundled(study: str = "lsb") -> tuple[dict[str, dict[int, Path]], list[tuple[str, str]]]:
    """A bundled study: cell -> seed -> run folder, and (variant cell, baseline cell) pairs."""
    cells: dict[str, dict[int, Path]] = {}
    pairs: list[tuple[str, str]] = []
    for name in list_examples(group=GROUPS[study]):
        attrs = load_example(name).attrs
        cells.setdefault(attrs["cell"], {})[attrs["seed"]] = example_path(name)
        if attrs["baseline"] is not None:
            pair = (attrs["cell"], load_example(attrs["baseline"]).attrs["cell"])
            pairs += [pair] if pair not in pairs else []
    pairs += [p for p in EXTRA_PAIRS.get(study, []) if set(p) <= set(cells)]
    return cells, pairs


def discover(out: Path) -> dict[str, dict[int, Path]]:
    """Cell -> seed -> run folder, for folders named CELL-sSEED holding a log.jsonl."""
    cells: dict[str, dict[int, Path]] = {}
    for path in sorted(out.iterdir()):
        m = RUN_DIR.match(path.name)
        if m and (path / "log.jsonl").is_file():
            cells.setdefault(m["cell"], {})[int(m["seed"])] = path
    return cells


def cell_frame(runs: dict[int, Path], compute: str) -> pd.DataFrame:
    parts = [read_log(runs[s], compute=compute).assign(run=f"s{s}") for s in sorted(runs)]
    return pd.concat(parts, ignore_index=True)


def train_rows(folder: Path) -> pd.DataFrame:
    """The trainer's per-step rows of a run (its own log format, recipe/train.py)."""
    rows = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    return pd.DataFrame([r for r in rows if r.get("kind") == "train"])


def t_interval(d: pd.Series, level: float) -> tuple[float, float, float]:
    """Mean and Student t interval over seeds of per-seed differences (NaN bounds with one)."""
    d = d.dropna()
    if len(d) < 2:
        return float(d.mean()), float("nan"), float("nan")
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(level)
    return float(d.mean()), float(ci.low), float(ci.high)


def paired_finals(
    base: pd.DataFrame, variant: pd.DataFrame, windows: tuple[float, float], level: float
) -> tuple[float, float, float]:
    """Mean and t interval over seeds of the difference in final validation pass rate (mean of
    each run's last three evaluations up to its cell's window): what the runs show, no model
    between."""

    def finals(df: pd.DataFrame, window: float) -> pd.Series:
        kept = df[df["compute"] <= window]
        return kept.groupby("run")["reward"].apply(lambda r: r.tail(3).mean())

    return t_interval(finals(variant, windows[1]) - finals(base, windows[0]), level)


def paired_log_cmid(base, variant, level: float) -> tuple[float, float, float]:
    """Per seed, log of the variant's fitted C_mid over the baseline's (negative: the variant
    gets halfway to its ceiling on less compute); mean and t interval over seeds."""
    shared = [r for r in base.runs if r in variant.per_run]
    d = pd.Series({r: np.log(variant.per_run[r].C_mid / base.per_run[r].C_mid) for r in shared})
    return t_interval(d, level)


def paired_cost_ratio(
    runs: dict[str, dict[int, Path]], base: str, variant: str, column: str, level: float
) -> tuple[float, float, float]:
    """Per seed, the variant's total ``column`` (gpu_hours) over the baseline's for the same
    steps (the same tokens), as a geometric mean with a t interval on the log scale."""
    shared = sorted(set(runs[base]) & set(runs[variant]))
    d = pd.Series({
        s: np.log(train_rows(runs[variant][s])[column].iloc[-1]
                  / train_rows(runs[base][s])[column].iloc[-1])
        for s in shared
    })  # fmt: skip
    return tuple(float(np.exp(x)) for x in t_interval(d, level))


def time_split(runs: dict[int, Path]) -> dict | None:
    """Where a cell's step time went (means over its seeds' steps), from the trainer's per-step
    fields; None for runs logged before they existed."""
    rows = [train_rows(runs[s]) for s in sorted(runs)]
    if not all("step_seconds" in r.columns for r in rows):
        return None
    train = pd.concat(rows, ignore_index=True)
    mean = {k: float(train[k].mean()) for k in (
        "step_seconds", "batch_wait_seconds", "train_seconds", "push_seconds", "lag_mean",
        "load_average",
    )}  # fmt: skip
    # idle fractions weighted by the steps' wall time: the share of the whole run (a plain mean
    # over steps would count PPO-off-policy's one long generating step like its short ones)
    for k in ("generator_idle_fraction", "trainer_idle_fraction"):
        mean[k] = float((train[k] * train["step_seconds"]).sum() / train["step_seconds"].sum())
    # seconds per step each side worked: in sync and PPO-off-policy the generator's is the
    # generation of a batch, in PipelineRL the engine's busy time per trained batch
    for side in ("generator", "trainer"):
        busy = (1 - train[f"{side}_idle_fraction"].clip(0, 1)) * train["step_seconds"]
        mean[f"{side}_busy_seconds"] = float(busy.mean())
    mean["completion_tokens"] = float(train["tokens"].sum() / train["samples"].sum())
    # and per seed (the seeds ran at different machine loads; a seed's modes side by side)
    mean["per_seed"] = {
        f"s{s}": {k: float(r[k].mean()) for k in (
            "step_seconds", "batch_wait_seconds", "train_seconds", "push_seconds", "load_average",
        )} for s, r in zip(sorted(runs), rows, strict=True)
    }  # fmt: skip
    # the most that overlapping this cell's generation with its training could save, the
    # durations unchanged: from their sum to the larger of the two (per seed, as a ratio)
    mean["overlap_bound"] = [
        float(max(r["batch_wait_seconds"].sum(), (r["train_seconds"] + r["push_seconds"]).sum())
              / r["step_seconds"].sum())
        for r in rows
    ]  # fmt: skip
    mean["gpu_hours"] = [float(r["gpu_hours"].iloc[-1]) for r in rows]
    mean["load_range"] = [float(train["load_average"].min()), float(train["load_average"].max())]
    return mean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "out", nargs="?", type=Path, help="run_study.sh's folder (default: bundled)"
    )
    parser.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="VARIANT=BASELINE",
        help="cells to compare, only these (default: the bundled pairs; for a folder, every "
        "cell against the first)",
    )
    parser.add_argument(
        "--study", choices=sorted(GROUPS), default="lsb",
        help="which bundled study (lsb: issue 19's losses; long: issue 30's trainer modes)",
    )  # fmt: skip
    parser.add_argument(
        "--compute", help="compute axis (default: tokens_total; gpu_hours for --study long)"
    )
    parser.add_argument(
        "--own-ranges", action=argparse.BooleanOptionalAction,
        help="fit every cell on its whole runs, not a pair's common compute range (default for "
        "--study long: its modes generate the same tokens, and on gpu_hours the cheaper mode's "
        "range would cut the others to their first few evaluations)",
    )  # fmt: skip
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.compute is None:
        args.compute = "gpu_hours" if args.study == "long" else "tokens_total"
    if args.own_ranges is None:
        args.own_ranges = args.study == "long"
    if args.out is None:
        cells, pairs = bundled(args.study)
    else:
        cells = discover(args.out)
        first = next(iter(cells), None)
        pairs = [(c, first) for c in cells if c != first]
    if args.pair:  # only the cells named (a folder's other cells may still be running)
        pairs = [tuple(spec.partition("=")[::2]) for spec in args.pair]
        cells = {c: cells[c] for c in dict.fromkeys(c for p in pairs for c in p) if c in cells}
    missing = {c for pair in pairs for c in pair} - set(cells)
    if not cells or missing:
        print(f"no runs of cell(s) {sorted(missing) or 'any'}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")  # short seeds are often weakly identified: the table says so
    frames = {cell: cell_frame(runs, args.compute) for cell, runs in cells.items()}
    fits = {cell: fit_runs(df, label=cell, level=args.level, seed=0) for cell, df in frames.items()}
    out: dict = {"cells": {}, "pairs": {}}
    print(f"compute axis: {args.compute}")
    print(
        "| cell | seeds | fitted A per seed | peak / final val per seed | "
        f"run-level A [{args.level:.0%}] | B | C_mid |"
    )
    print("|---|---|---|---|---|---|---|")
    for cell, fit in fits.items():
        df = frames[cell]
        per = [(df[df["run"] == r]["reward"]) for r in fit.runs]
        peak_final = ", ".join(f"{s.max():.2f} / {s.tail(3).mean():.2f}" for s in per)
        a_s = ", ".join(f"{fit.per_run[r].A:.2f}" for r in fit.runs)
        ci = fit.ci(args.level).set_index("parameter")
        b, c = ci.loc["B"], ci.loc["C_mid"]
        print(f"| `{cell}` | {len(fit.runs)} | {a_s} | {peak_final} | "
              f"{fit.A:.2f} [{ci.loc['A', 'lower']:.2f}, {ci.loc['A', 'upper']:.2f}] | "
              f"{fit.B:.2f} [{b['lower']:.2f}, {b['upper']:.2f}] | "
              f"{fit.C_mid:.3g} [{c['lower']:.3g}, {c['upper']:.3g}] |")  # fmt: skip
        out["cells"][cell] = {
            "runs": fit.runs, "A_per_run": {r: fit.per_run[r].A for r in fit.runs},
            "peak": [float(s.max()) for s in per], "final": [float(s.tail(3).mean()) for s in per],
            "A": [fit.A, ci.loc["A", "lower"], ci.loc["A", "upper"]],
            "B": [fit.B, b["lower"], b["upper"]], "C_mid": [fit.C_mid, c["lower"], c["upper"]],
            "compute": args.compute,
        }  # fmt: skip
    print()
    # the trainer modes' extra columns: the long study, or any folder whose runs log the timings
    long = args.study == "long" or all(
        "step_seconds" in train_rows(r).columns for runs in cells.values() for r in runs.values()
    )
    head = "| paired d log C_mid [t int.] | gpu_hours ratio [t int.] |" if long else "|"
    print("| variant vs baseline | compare(): A | compare(): B | paired dA [t int.] | "
          "paired d log B [t int.] | paired d final val [t int.] " + head)  # fmt: skip
    print("|---|---|---|---|---|---|" + ("---|---|" if long else ""))
    for variant, base in pairs:
        pair_fits = {base: fits[base], variant: fits[variant]}
        window = shared_compute(frames[base], frames[variant])
        cut = {c: float("inf") for c in pair_fits}
        note = ""
        for cell in pair_fits:  # a longer cell is refitted on the pair's common range
            if args.own_ranges or frames[cell]["compute"].max() <= 1.05 * window:
                continue
            try:
                pair_fits[cell] = fit_runs(frames[cell], max_compute=window, label=cell,
                                           level=args.level, seed=0)  # fmt: skip
                cut[cell] = window
            except RLCurvesError:  # too few evaluations below the window: say so, keep its own
                note = f" (own ranges: `{cell}` has too few evaluations below {window:.3g})"
        cmp = compare(pair_fits, baseline=base, level=args.level)
        row = cmp.table.set_index("variant").loc[variant]
        v = cmp.verdicts().iloc[0]
        d = paired_differences(pair_fits[base], pair_fits[variant], level=args.level)
        d = d.set_index("parameter")
        a, b = d.loc["A"], d.loc["log_B"]
        fin = paired_finals(frames[base], frames[variant], (cut[base], cut[variant]), args.level)
        refit = any(pair_fits[c] is not fits[c] for c in pair_fits)
        span = f" (both to {window:.3g})" if refit else note
        extra = ""
        if long:
            lc = paired_log_cmid(pair_fits[base], pair_fits[variant], args.level)
            cost = paired_cost_ratio(cells, base, variant, "gpu_hours", args.level)
            extra = (f" {lc[0]:+.2f} [{lc[1]:+.2f}, {lc[2]:+.2f}] | "
                     f"{cost[0]:.2f} [{cost[1]:.2f}, {cost[2]:.2f}] |")  # fmt: skip
        print(
            f"| `{variant}` vs `{base}`{span} | {v['ceiling']} (dA {row['delta_A_lower']:+.2f} to "
            f"{row['delta_A_upper']:+.2f}) | {v['efficiency']} | {a['mean']:+.2f} "
            f"[{a['lower']:+.2f}, {a['upper']:+.2f}] | {b['mean']:+.2f} [{b['lower']:+.2f}, "
            f"{b['upper']:+.2f}] | {fin[0]:+.3f} [{fin[1]:+.3f}, {fin[2]:+.3f}] |{extra}"
        )
        if long:
            out.setdefault("pairs_long", {})[f"{variant} vs {base}"] = {
                "paired_dlogCmid": list(lc), "gpu_hours_ratio": list(cost),
            }  # fmt: skip
        out["pairs"][f"{variant} vs {base}"] = {
            "ceiling": str(v["ceiling"]), "efficiency": str(v["efficiency"]),
            "delta_A": [row["delta_A_lower"], row["delta_A_upper"]],
            "paired_dA": [a["mean"], a["lower"], a["upper"]],
            "paired_dlogB": [b["mean"], b["lower"], b["upper"]],
            "max_compute": None if args.own_ranges or note else window,  # own ranges: none
            "paired_dfinal": list(fin),
        }  # fmt: skip
    print()
    print("| cell | rho_max (median over steps) | clip fraction | zero-gradient fraction | "
          "entropy first -> last 20 steps | lag (mean) | wall min per run |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for cell, runs in cells.items():
        train = pd.concat([train_rows(runs[s]) for s in sorted(runs)], ignore_index=True)
        ent = [train_rows(runs[s])["entropy"] for s in sorted(runs)]
        first = sum(e.head(20).mean() for e in ent) / len(ent)
        last = sum(e.tail(20).mean() for e in ent) / len(ent)
        stats = {
            "rho_max": float(train["rho_max"].median()),
            "clip_fraction": float(train["clip_fraction"].mean()),
            "zero_grad_fraction": float(train["zero_grad_fraction"].mean()),
            "entropy": [first, last],
            "lag_mean": float(train["lag_mean"].mean()),
            "wall_minutes": [float(train_rows(runs[s])["wall_seconds"].iloc[-1] / 60)
                             for s in sorted(runs)],
        }  # fmt: skip
        out["cells"][cell]["off_policy"] = stats
        print(f"| `{cell}` | {stats['rho_max']:.2f} | {stats['clip_fraction']:.4f} | "
              f"{stats['zero_grad_fraction']:.4f} | {first:.2f} -> {last:.2f} | "
              f"{stats['lag_mean']:.2f} | "
              f"{', '.join(f'{m:.0f}' for m in stats['wall_minutes'])} |")  # fmt: skip
    if long:
        print()
        print(
            "| cell | s per step: total = wait for batch + train + push | busy s per step: "
            "generator / trainer | generator idle | trainer idle | lag (mean) | tokens per "
            "completion | load (mean, range) | gpu_hours per run | overlap bound per run |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
        for cell, runs in cells.items():
            t = time_split(runs)
            if t is None:
                continue
            out["cells"][cell]["time"] = t
            print(f"| `{cell}` | {t['step_seconds']:.1f} = {t['batch_wait_seconds']:.1f} + "
                  f"{t['train_seconds']:.1f} + {t['push_seconds']:.2f} | "
                  f"{t['generator_busy_seconds']:.1f} / {t['trainer_busy_seconds']:.1f} | "
                  f"{t['generator_idle_fraction']:.2f} | {t['trainer_idle_fraction']:.2f} | "
                  f"{t['lag_mean']:.2f} | {t['completion_tokens']:.1f} | "
                  f"{t['load_average']:.1f} ({t['load_range'][0]:.1f}-{t['load_range'][1]:.1f}) | "
                  f"{', '.join(f'{g:.3f}' for g in t['gpu_hours'])} | "
                  f"{', '.join(f'{b:.2f}' for b in t['overlap_bound'])} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
