"""Does how far a run has already risen tell how much of its headroom it will still gain?

The prior of a run whose curve is still open (issue 42: four to six evaluations, or a run that
has not taken off) is the corpus's distribution of the share of the headroom its runs still
gained from the same fraction of their budget, ``h = (final - reached) / (1 - reached)``
(:mod:`rlcurves.shapes`); it conditions on the level reached and the fraction only. The obvious
next covariate is the run's own rise so far, as a share of the headroom it started with,
``rise = (reached - start) / (1 - start)``. This probe measures, on the corpus's shape records,
for each kind of metric and fraction: the Spearman correlation of ``rise`` and ``h`` within each
family (with at least 5 runs), and, leaving each family out, whether a straight line in ``rise``
fitted on the other families of its kind narrows the 90% spread of the held-out family's ``h``
(the 5-95% range of the residuals, pooled over folds) against no adjustment (``h`` less the other
families' median).

Run: python scripts/shape_rise_probe.py (a few seconds; prints one line per kind and fraction).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from rlcurves import datasets
from rlcurves.shapes import headroom_gain, shape_records

FRACTIONS = (0.05, 0.1, 0.15, 0.2, 0.25)


def records() -> pd.DataFrame:
    """The corpus's shape records with ``h``, ``rise`` and each family's kind of metric."""
    corpus = datasets.load_corpus()
    listed = datasets.list_corpus()
    kinds = dict(zip(listed["family"], listed["metric_kind"], strict=False))
    runs = {}
    for (family, run), g in corpus.groupby(["family", "run"]):
        frame = pd.DataFrame(
            {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
        frame.attrs["family"] = family
        runs[f"{family}/{run}"] = frame
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = shape_records(runs)
    rec["h"] = headroom_gain(rec["reached"], rec["final"])
    rec["rise"] = (rec["reached"] - rec["start"]) / np.maximum(1 - rec["start"], 1e-6)
    rec["kind"] = rec["family"].map(kinds)
    return rec


def spread(v: np.ndarray) -> float:
    return float(np.quantile(v, 0.95) - np.quantile(v, 0.05))


def cells() -> list[dict]:
    """One row per kind of metric and fraction: runs, the range of the within-family Spearman
    correlations of ``rise`` and ``h``, and the leave-one-family-out 90% spreads of ``h`` without
    and with the line in ``rise``."""
    rec = records()
    out = []
    for kind, of_kind in rec.groupby("kind"):
        for f in FRACTIONS:
            at = of_kind[np.isclose(of_kind["fraction"], f)]
            within = [
                spearmanr(g["rise"], g["h"])[0] for _, g in at.groupby("family") if len(g) >= 5
            ]
            raw, adjusted = [], []
            for fam in at["family"].unique():
                train, test = at[at["family"] != fam], at[at["family"] == fam]
                slope, icpt = np.polyfit(train["rise"], train["h"], 1)
                adjusted.append(test["h"] - (icpt + slope * test["rise"]))
                raw.append(test["h"] - train["h"].median())
            out.append({"kind": kind, "fraction": f, "runs": len(at),
                        "spearman_low": min(within), "spearman_high": max(within),
                        "spread": spread(np.concatenate(raw)),
                        "spread_adjusted": spread(np.concatenate(adjusted))})  # fmt: skip
    return out


def main() -> None:
    for c in cells():
        print(
            f"{c['kind']:15s} at {c['fraction']:.0%}: {c['runs']} runs; Spearman(rise, h) within "
            f"families {c['spearman_low']:+.2f} to {c['spearman_high']:+.2f}; "
            f"leave-one-family-out 90% spread of h {c['spread']:.3f}, after a line in rise "
            f"{c['spread_adjusted']:.3f}"
        )


if __name__ == "__main__":
    main()
