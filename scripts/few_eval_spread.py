"""How much can four to six evaluations say about where a run ends? The spread of what is to come.

Issue 42 asks forecasts from a run's first 4-6 evaluations to cover 85-95% with a median 90%
width of at most 0.25. Whatever the forecast, it has the level the run has reached (the mean of
its evaluations over the last 10% of its compute so far, :func:`rlcurves.shapes.reached_level`)
and how far into its budget it is; the rest is the gain still to come, ``final - reached``
(``final`` the mean of its evaluations over the last 10% of its budget). This measures, on every
run of the corpus, from its first ``n`` = 4, 5 and 6 evaluations:

- the 5-95% range of that gain across the runs (what a forecast knowing nothing else must span);
- leave-one-family-out, a straight line in the level reached and the budget fraction fitted on
  the other families' runs, with the 5-95% range of their residuals as the interval: its width
  (the median over the folds) and how many held-out runs it covers.

Run: python scripts/few_eval_spread.py (a few seconds; prints a markdown table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlcurves import datasets
from rlcurves.ensemble import level_mask
from rlcurves.shapes import reached_level

COUNTS = (4, 5, 6)


def records() -> pd.DataFrame:
    """One row per run and evaluation count: family, level reached, budget fraction, final."""
    corpus = datasets.load_corpus()
    rows = []
    for (family, run), g in corpus.groupby(["family", "run"]):
        c, r = g["x"].to_numpy(float), g["metric"].to_numpy(float)
        order = np.argsort(c, kind="stable")
        c, r = c[order], r[order]
        final = float(np.mean(r[level_mask(c, float(c.max()))]))
        for n in COUNTS:
            if c.size > n:
                rows.append({"run": f"{family}/{run}", "family": family, "n": n,
                             "reached": reached_level(c[:n], r[:n], float(c[n - 1])),
                             "fraction": float(c[n - 1] / c.max()), "final": final})  # fmt: skip
    out = pd.DataFrame(rows)
    out["gain"] = out["final"] - out["reached"]
    return out


def _range(v: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(v, 0.05)), float(np.quantile(v, 0.95))


def rows() -> list[dict]:
    """Per evaluation count: runs, the 5-95% range of the gain to come, and the leave-one-family-
    out line's median interval width and coverage."""
    rec = records()
    out = []
    for n, at in rec.groupby("n"):
        lo, hi = _range(at["gain"].to_numpy())
        widths, covered = [], 0
        for fam in at["family"].unique():
            train, test = at[at["family"] != fam], at[at["family"] == fam]
            x = np.column_stack([np.ones(len(train)), train["reached"], train["fraction"]])
            beta = np.linalg.lstsq(x, train["gain"].to_numpy(), rcond=None)[0]
            r_lo, r_hi = _range(train["gain"].to_numpy() - x @ beta)
            xt = np.column_stack([np.ones(len(test)), test["reached"], test["fraction"]])
            pred = xt @ beta
            g = test["gain"].to_numpy()
            covered += int(np.sum((g >= pred + r_lo) & (g <= pred + r_hi)))
            widths.append(r_hi - r_lo)
        out.append({"n": int(n), "runs": len(at), "gain_low": lo, "gain_high": hi,
                    "line_width": float(np.median(widths)), "line_covered": covered})  # fmt: skip
    return out


def table(rs: list[dict]) -> str:
    lines = [
        "| evaluations | runs | gain still to come, 5-95% over the runs (width) | a line in the "
        "level reached and the fraction, leave-one-family-out: median 90% width | covered |",
        "|---|---|---|---|---|",
    ]
    for r in rs:
        lines.append(
            f"| {r['n']} | {r['runs']} | {r['gain_low']:.2f} to {r['gain_high']:.2f} "
            f"({r['gain_high'] - r['gain_low']:.2f}) | {r['line_width']:.2f} | "
            f"{r['line_covered']} of {r['runs']} ({r['line_covered'] / r['runs']:.0%}) |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(rows()))
