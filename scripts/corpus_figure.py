"""The calibration corpus at a glance: a figure of every run normalised to its budget (one panel
per family) and the README's table of the families.

x is the fraction of the run's budget (its compute axis divided by where it stopped), y the metric
as logged. Writes docs/figures/corpus_runs.png and prints the table.

Run: python scripts/corpus_figure.py
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from rlcurves.datasets import describe_corpus, load_corpus

OUT = Path(__file__).parent.parent / "docs" / "figures" / "corpus_runs.png"


def main() -> Path:
    families = describe_corpus()
    runs = load_corpus()
    n = len(families)
    cols = 3
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), sharex=True)
    axes = axes.ravel()
    for ax, (_, fam) in zip(axes, families.iterrows(), strict=False):
        mine = runs[runs["family"] == fam["family"]]
        for _, g in mine.groupby("run", sort=False):
            x = g["x"].to_numpy(float)
            ax.plot(x / x.max(), g["metric"], lw=0.8, alpha=0.75)
        kind = "" if fam["metric_kind"] == "validation" else " (TRAINING reward)"
        title = textwrap.fill(f"{fam['family']}: {fam['model']}, {fam['task']}", 50)
        ax.set_title(f"{title}\n{fam['runs']} runs{kind}", fontsize=8)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[-cols:]:
        ax.set_xlabel("fraction of the run's budget", fontsize=8)
    for ax in axes[::cols]:
        ax.set_ylabel("metric as logged", fontsize=8)
    fig.suptitle(
        f"The calibration corpus: {len(runs.groupby(['family', 'run']))} real runs in "
        f"{n} families, each run normalised to its budget",
        fontsize=10,
    )
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=110)
    plt.close(fig)
    return OUT


def family_table() -> str:
    """The README's table: one row per family."""
    lines = [
        "| family | model | task | code base | metric | runs | sweeps (runs) | knobs | "
        "evaluations per run | source (repository@commit) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, f in describe_corpus().iterrows():
        metric = f["metric"]
        repo, commit = f["source"].split("@")
        lines.append(
            f"| {f['family']} | {f['model']} | {f['task']} | {f['code_base']} | {metric} | "
            f"{f['runs']} | {f['sweeps']} | {f['knobs']} | {f['evaluations']} | "
            f"{repo}@{commit[:8]} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(f"wrote {main()}")
    print(family_table())
