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
(:func:`rlcurves.shared_compute`): the longer one is refitted up to it.

And, since a sigmoid fit says nothing about a run that rose and then fell, each cell's peak and
final validation pass rate per seed (mean of the last three evaluations).

Usage: python scripts/study_table.py [OUT_DIR] [--pair VARIANT=BASELINE ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

import pandas as pd
from scipy import stats

from rlcurves import compare, fit_runs, paired_differences, read_log, shared_compute
from rlcurves.datasets import example_path, list_examples, load_example

RUN_DIR = re.compile(r"^(?P<cell>.+)-s(?P<seed>\d+)$")


def bundled() -> tuple[dict[str, dict[int, Path]], dict[str, str]]:
    """The bundled study: cell -> seed -> run folder, and variant cell -> baseline cell."""
    cells: dict[str, dict[int, Path]] = {}
    pairs: dict[str, str] = {}
    for name in list_examples(group="recipe_study"):
        attrs = load_example(name).attrs
        cells.setdefault(attrs["cell"], {})[attrs["seed"]] = example_path(name)
        if attrs["baseline"] is not None:
            pairs[attrs["cell"]] = load_example(attrs["baseline"]).attrs["cell"]
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


def paired_finals(
    base: pd.DataFrame, variant: pd.DataFrame, windows: tuple[float, float], level: float
) -> tuple[float, float, float]:
    """Mean and t interval over seeds of the difference in final validation pass rate (mean of
    each run's last three evaluations up to its cell's window): what the runs show, no model
    between."""

    def finals(df: pd.DataFrame, window: float) -> pd.Series:
        kept = df[df["compute"] <= window]
        return kept.groupby("run")["reward"].apply(lambda r: r.tail(3).mean())

    d = (finals(variant, windows[1]) - finals(base, windows[0])).dropna()
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(level)
    return float(d.mean()), float(ci.low), float(ci.high)


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
    parser.add_argument("--compute", default="tokens_total")
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.out is None:
        cells, pairs = bundled()
    else:
        cells = discover(args.out)
        first = next(iter(cells), None)
        pairs = {c: first for c in cells if c != first}
    if args.pair:  # only the cells named (a folder's other cells may still be running)
        pairs = dict(spec.partition("=")[::2] for spec in args.pair)
        cells = {
            c: cells[c] for c in dict.fromkeys(c for p in pairs.items() for c in p) if c in cells
        }
    missing = {c for pair in pairs.items() for c in pair} - set(cells)
    if not cells or missing:
        print(f"no runs of cell(s) {sorted(missing) or 'any'}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")  # short seeds are often weakly identified: the table says so
    frames = {cell: cell_frame(runs, args.compute) for cell, runs in cells.items()}
    fits = {cell: fit_runs(df, label=cell, level=args.level, seed=0) for cell, df in frames.items()}
    out: dict = {"cells": {}, "pairs": {}}
    print(
        "| cell | seeds | fitted A per seed | peak / final val per seed | "
        f"run-level A [{args.level:.0%}] |"
    )
    print("|---|---|---|---|---|")
    for cell, fit in fits.items():
        df = frames[cell]
        per = [(df[df["run"] == r]["reward"]) for r in fit.runs]
        peak_final = ", ".join(f"{s.max():.2f} / {s.tail(3).mean():.2f}" for s in per)
        a_s = ", ".join(f"{fit.per_run[r].A:.2f}" for r in fit.runs)
        ci = fit.ci(args.level).set_index("parameter").loc["A"]
        print(f"| `{cell}` | {len(fit.runs)} | {a_s} | {peak_final} | "
              f"{fit.A:.2f} [{ci['lower']:.2f}, {ci['upper']:.2f}] |")  # fmt: skip
        out["cells"][cell] = {
            "runs": fit.runs, "A_per_run": {r: fit.per_run[r].A for r in fit.runs},
            "peak": [float(s.max()) for s in per], "final": [float(s.tail(3).mean()) for s in per],
            "A": [fit.A, ci["lower"], ci["upper"]],
        }  # fmt: skip
    print()
    print("| variant vs baseline | compare(): A | compare(): B | paired dA [t int.] | "
          "paired d log B [t int.] | paired d final val [t int.] |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for variant, base in pairs.items():
        pair_fits = {base: fits[base], variant: fits[variant]}
        window = shared_compute(frames[base], frames[variant])
        cut = {c: float("inf") for c in pair_fits}
        for cell in pair_fits:  # a longer cell is refitted on the pair's common range
            if frames[cell]["compute"].max() > 1.05 * window:
                cut[cell] = window
                pair_fits[cell] = fit_runs(frames[cell], max_compute=window, label=cell,
                                           level=args.level, seed=0)  # fmt: skip
        cmp = compare(pair_fits, baseline=base, level=args.level)
        row = cmp.table.set_index("variant").loc[variant]
        v = cmp.verdicts().iloc[0]
        d = paired_differences(pair_fits[base], pair_fits[variant], level=args.level)
        d = d.set_index("parameter")
        a, b = d.loc["A"], d.loc["log_B"]
        fin = paired_finals(frames[base], frames[variant], (cut[base], cut[variant]), args.level)
        refit = any(pair_fits[c] is not fits[c] for c in pair_fits)
        span = f" (both to {window:.3g})" if refit else ""
        print(
            f"| `{variant}` vs `{base}`{span} | {v['ceiling']} (dA {row['delta_A_lower']:+.2f} to "
            f"{row['delta_A_upper']:+.2f}) | {v['efficiency']} | {a['mean']:+.2f} "
            f"[{a['lower']:+.2f}, {a['upper']:+.2f}] | {b['mean']:+.2f} [{b['lower']:+.2f}, "
            f"{b['upper']:+.2f}] | {fin[0]:+.3f} [{fin[1]:+.3f}, {fin[2]:+.3f}] |"
        )
        out["pairs"][f"{variant} vs {base}"] = {
            "ceiling": str(v["ceiling"]), "efficiency": str(v["efficiency"]),
            "delta_A": [row["delta_A_lower"], row["delta_A_upper"]],
            "paired_dA": [a["mean"], a["lower"], a["upper"]],
            "paired_dlogB": [b["mean"], b["lower"], b["upper"]], "max_compute": window,
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
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
