"""Calibration study: do rlcurves' forecast intervals hold on runs unlike the calibration runs?

Everything here is out of sample and goes through the library's public path
(``rlcurves.fit_sigmoid`` on a prefix, then ``rlcurves.forecast(fit, budget, calibration=...)``).

**Real runs**, two families bundled in ``rlcurves/data/curves/`` (:func:`rlcurves.calibrate.
load_corpus`): 12 verl runs of Qwen2.5-0.5B on GSM8K (365-898 evaluations) and 17 GRPO runs of
Qwen2.5-Math-1.5B on MATH (21-41 evaluations). Each run is fitted on its first 25%, 50% and 75% of
compute and forecast at its final compute; the target is the mean of the run's evaluations over
the last 10% of its compute (what the default interval is for). Two splits:

- leave-one-run-out: the calibration is made from the other 28 runs (both families);
- leave-one-family-out: calibrated on one family, tested on every run of the other, both ways.

Reported per (split, family, fraction): the number of runs, how many the 90% interval covered,
the Wilson 95% interval of that rate, the median width and median absolute error; and the median
errors of the sigmoid alone and the power law alone, fitted on the same prefix.

**Regimes** in which a forecast's interval used to be too narrow (issue 26), each forecast with
the SHIPPED calibration (it never saw them): simulated runs from the ScaleRL paper's ten parameter
sets (NOT real training; mean@16 evaluation noise, random-walk drift of the policy, fit on half
the budget, target the mean expected reward over the last 10% of the budget) with 1,000 prompts,
with 20,000 prompts (low noise), and smoothed as W&B does (EMA 0.9); the real runs smoothed the
same way (leave-one-run-out calibration, target the raw runs' last 10%); and the real runs'
trajectories (a centred moving average) with fresh noise of sd 0.002.

``--write-calibration`` recomputes the shipped calibration (rlcurves/data/calibration_corpus.json)
before measuring. ``--quick`` runs a CI-sized subset.

``--corpus all`` runs the real-run part on the **whole corpus** (every family of
``rlcurves.datasets.list_corpus()``) with today's method: one calibration of every run, each
family's runs forecast with the calibration of all the *other* families (leave-one-family-out)
and with all runs but themselves (leave-one-run-out), fit on 25%, 50% and 75% of each run's
compute. Its table counts a refusal (a prefix that cannot be fitted, or an unbounded interval) as
a miss and reports the refusals; the median width is over the bounded intervals. Writes
benchmarks/results/calibration_corpus.json.

Run: python -m benchmarks.calibration [--quick] [--write-calibration] [--corpus all]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import rlcurves
from rlcurves import fit_sigmoid, sigmoid
from rlcurves.calibrate import (
    CORPUS_NAME,
    NU,
    calibrate,
    default_calibration,
    fit_tau,
    load_corpus,
)
from rlcurves.ensemble import fit_tail_power_law
from rlcurves.powerlaw import fit_power_law

RESULTS = Path(__file__).parent / "results"
FRACTIONS = (0.25, 0.5, 0.75)
LEVEL = 0.9
TARGET_FRACTION = 0.1  # the target: mean of the evaluations over the last 10% of compute
R0 = 0.30
SHIPPED = Path(__file__).parent.parent / "rlcurves" / "data" / "calibration_corpus.json"
FAMILY_NAMES = {"gsm8k": "GSM8K", "math": "MATH"}

# (run, C_mid, B, A) as reported in the paper (see shared/SCALERL.md)
PAPER_SETS = [
    ("8B batch 768", 2542.0, 1.92, 0.610),
    ("32k generation", 11272.0, 1.89, 0.645),
    ("8 gens/prompt", 2542.0, 2.44, 0.585),
    ("24 gens/prompt", 3054.0, 2.22, 0.590),
    ("32 gens/prompt", 2936.0, 2.07, 0.595),
    ("Scout MoE", 4242.0, 1.65, 0.710),
    ("batch 512", 2818.0, 1.77, 0.605),
    ("batch 2048", 10909.0, 1.70, 0.645),
    ("math curve", 2896.0, 2.05, 0.595),
    ("code curve", 1675.0, 1.09, 0.615),
]


def wilson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate ``k / n``."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import norm

    z = float(norm.ppf((1 + conf) / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def target_of(c: np.ndarray, r: np.ndarray) -> float:
    """The observed target: the mean of the evaluations over the last 10% of compute."""
    return float(np.mean(r[c > (1 - TARGET_FRACTION) * c.max()]))


def fit_prefix(c, r, fraction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_sigmoid(c, r, max_compute=fraction * float(c.max()))


def forecast_record(fit, c, r, calibration, seed=0) -> dict:
    """The library's default forecast at the run's final compute, against the observed target."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc = rlcurves.forecast(
            fit, float(c.max()), calibration=calibration, seed=seed, progress=False
        )
    obs = target_of(c, r)
    return {
        "forecast": float(fc.mean),
        "lower": float(fc.lower),
        "upper": float(fc.upper),
        "unbounded": bool(fc.unbounded),
        "observed": obs,
        # an unbounded interval (the metric's whole range) is a refusal: a miss, never a cover
        "covered": not fc.unbounded and bool(fc.lower <= obs <= fc.upper),
        "width": float(fc.upper - fc.lower),
        "abs_error": abs(float(fc.mean) - obs),
        "info": {k: v for k, v in fc.info.items() if k in ("weights", "disagreement")},
    }


def single_family_errors(c, r, fraction) -> dict:
    """Absolute errors of the sigmoid alone and of the power law alone (fitted on the prefix's
    tail as the forecast does, and on the whole prefix), on the same prefix."""
    end = fraction * float(c.max())
    win = c > (1 - TARGET_FRACTION) * c.max()
    obs = float(np.mean(r[win]))
    inside = c <= end
    fitters = {
        "sigmoid": lambda: fit_sigmoid(c, r, max_compute=end),
        "power_law": lambda: fit_tail_power_law(c[inside], r[inside], float(c[inside].max())),
        "power_law_whole_prefix": lambda: fit_power_law(c, r, max_compute=end),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in fitters.items():
            try:
                out[name] = abs(float(np.mean(fn().predict(c[win]))) - obs)
            except rlcurves.RLCurvesError:
                out[name] = math.nan
    return out


def corpus_runs(families, qualify: bool = False) -> tuple[dict, dict[str, list[str]]]:
    """The runs of ``families`` as calibrate's frames, and each family's run keys. ``qualify``
    keys them ``family/run`` (run names repeat across families of the whole corpus)."""
    corpus, members = {}, {}
    for fam in families:
        runs = load_corpus(fam)
        keys = [f"{fam}/{name}" if qualify else name for name in runs]
        corpus.update(zip(keys, runs.values(), strict=True))
        members[fam] = keys
    return corpus, members


def real_runs(quick: bool, seed: int = 0, families=tuple(FAMILY_NAMES), qualify: bool = False):
    """Leave-one-run-out and leave-one-family-out records on the corpus runs of ``families``.

    Leave-one-family-out forecasts each family's runs with the calibration of every other family
    (with two families, the other one). A prefix that cannot be fitted is recorded as a refusal
    (``fit_failed`` says why; ``unbounded`` True, ``covered`` False), as is an unbounded interval
    in the whole-corpus table."""
    corpus, families = corpus_runs(families, qualify)
    if quick:  # a few runs of each family
        families = {f: names[:4] for f, names in families.items()}
        corpus = {k: corpus[k] for names in families.values() for k in names}
    # one calibration of every run; each split leaves out what it tests (tau is refitted)
    name = CORPUS_NAME if not qualify else f"corpus ({len(corpus)} runs, {len(families)} families)"
    cal_all = calibrate(corpus, name=name, seed=seed, progress=True)
    cal_family = {}
    for f in families:
        others = [k for g, names in families.items() if g != f for k in names]
        cal_family[f] = cal_all.subset(others)
        names = [FAMILY_NAMES.get(g, g) for g in families if g != f]
        cal_family[f].corpus = f"{', '.join(names)} runs"
    records = []
    items = [(f, k) for f, names in families.items() for k in names]
    for fam, name in tqdm(items, desc="real runs", leave=False):
        frame = corpus[name]
        c, r = frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)
        splits = {
            "leave-one-run-out": cal_all.without(name),
            "leave-one-family-out": cal_family[fam],
        }
        for fraction in FRACTIONS:
            try:
                fit = fit_prefix(c, r, fraction)
            except rlcurves.RLCurvesError as e:
                for split in splits:
                    records.append(refusal_record(split, fam, name, fraction, c, r, str(e)))
                continue
            single = single_family_errors(c, r, fraction)
            for split, cal in splits.items():
                rec = forecast_record(fit, c, r, cal, seed)
                records.append(
                    {
                        "split": split,
                        "family": fam,
                        "run": name,
                        "fraction": fraction,
                        "calibrated_on": cal.name,
                        **single,
                        **rec,
                    }
                )
    return records, cal_all, families


def refusal_record(split, family, run, fraction, c, r, why) -> dict:
    """A forecast that could not be made (the prefix could not be fitted): a miss."""
    nan = math.nan
    return {"split": split, "family": family, "run": run, "fraction": fraction,
            "calibrated_on": None, "sigmoid": nan, "power_law": nan,
            "power_law_whole_prefix": nan, "forecast": nan, "lower": nan, "upper": nan,
            "unbounded": True, "fit_failed": why, "observed": target_of(c, r), "covered": False,
            "width": nan, "abs_error": nan, "info": {}}  # fmt: skip


def summarize(records: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Coverage with its Wilson interval, median width and errors, grouped by ``keys``."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        groups.setdefault(tuple(rec[k] for k in keys), []).append(rec)
    rows = []
    for key, recs in groups.items():
        n = len(recs)
        k = sum(r["covered"] for r in recs)
        lo, hi = wilson(k, n)
        made = [r for r in recs if "fit_failed" not in r]
        row = dict(zip(keys, key, strict=True))
        row.update(
            n=n,
            covered=k,
            coverage=k / n,
            wilson_low=lo,
            wilson_high=hi,
            unbounded=sum(r["unbounded"] for r in recs),
            median_width=float(np.median([r["width"] for r in made])) if made else math.nan,
            median_abs_error=float(np.median([r["abs_error"] for r in made])) if made else math.nan,
        )
        for m in ("sigmoid", "power_law", "power_law_whole_prefix"):
            if m in recs[0]:
                vals = [r[m] for r in recs]
                row[f"median_abs_error_{m}"] = (
                    float(np.nanmedian(vals)) if np.isfinite(vals).any() else math.nan
                )
        rows.append(row)
    return rows


def real_table(rows: list[dict]) -> str:
    lines = [
        "| split | tested on | fit on | runs | 90% covered | Wilson 95% | median width | "
        "median abs. error | sigmoid alone | power law alone (tail fit) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['split']} | {FAMILY_NAMES.get(r['family'], r['family'])} | "
            f"{r['fraction']:.0%} | {r['n']} | {r['covered']}/{r['n']} ({r['coverage']:.0%}) | "
            f"{r['wilson_low']:.0%}-{r['wilson_high']:.0%} | {r['median_width']:.3f} | "
            f"{r['median_abs_error']:.4f} | {r['median_abs_error_sigmoid']:.4f} | "
            f"{r['median_abs_error_power_law']:.4f} |"
        )
    return "\n".join(lines)


def pooled_table(rows: list[dict]) -> str:
    lines = [
        "| split | fit on | runs (both families) | 90% covered | Wilson 95% | median width |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['split']} | {r['fraction']:.0%} | {r['n']} | {r['covered']}/{r['n']} "
            f"({r['coverage']:.0%}) | {r['wilson_low']:.0%}-{r['wilson_high']:.0%} | "
            f"{r['median_width']:.3f} |"
        )
    return "\n".join(lines)


# ---- the whole corpus ----------------------------------------------------------------------


def corpus_summary(records: list[dict], split: str = "leave-one-family-out") -> list[dict]:
    """Per family and pooled: at each fraction, runs, covered (a refusal counts as a miss),
    refusals (a prefix that could not be fitted or an unbounded interval), the Wilson interval
    of the coverage and the median width and absolute error of the bounded intervals."""
    recs = [r for r in records if r["split"] == split]
    groups: dict[tuple, list[dict]] = {}
    for r in recs:
        groups.setdefault((r["family"], r["fraction"]), []).append(r)
        groups.setdefault(("pooled", r["fraction"]), []).append(r)
    rows = []
    for (fam, fraction), g in groups.items():
        n = len(g)
        refused = [r for r in g if r["unbounded"]]
        bounded = [r for r in g if not r["unbounded"]]
        k = sum(r["covered"] for r in bounded)
        lo, hi = wilson(k, n)
        rows.append(
            {
                "split": split,
                "family": fam,
                "fraction": fraction,
                "runs": n,
                "covered": k,
                "coverage": k / n,
                "wilson_low": lo,
                "wilson_high": hi,
                "refused": len(refused),
                "fit_failed": sum("fit_failed" in r for r in g),
                "coverage_of_bounded": k / len(bounded) if bounded else math.nan,
                "median_width": float(np.median([r["width"] for r in bounded]))
                if bounded
                else math.nan,
                "median_abs_error": float(np.median([r["abs_error"] for r in bounded]))
                if bounded
                else math.nan,
            }
        )
    return rows


def corpus_table(rows: list[dict], kinds: dict[str, str]) -> str:
    """One line per family (and pooled): coverage at 25/50/75% of the budget with refusals as
    misses, refusals, median width at half the budget."""
    by = {(r["family"], r["fraction"]): r for r in rows}
    fams = list(dict.fromkeys(r["family"] for r in rows if r["family"] != "pooled"))
    calibrated = {
        "leave-one-family-out": "calibrated on the other families",
        "leave-one-run-out": "calibrated on every other run",
    }[rows[0]["split"]]
    lines = [
        f"| tested on ({calibrated}) | metric | runs | 90% covered at 25% of the budget | "
        "at 50% | at 75% | refused (25/50/75%) | median width at 50% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fam in [*fams, "pooled"]:
        cells = []
        for f in FRACTIONS:
            r = by[(fam, f)]
            cells.append(
                f"{r['covered']}/{r['runs']} ({r['coverage']:.0%}; "
                f"{r['wilson_low']:.0%}-{r['wilson_high']:.0%})"
            )
        refused = "/".join(str(by[(fam, f)]["refused"]) for f in FRACTIONS)
        half = by[(fam, 0.5)]
        lines.append(
            f"| {fam} | {kinds.get(fam, 'all')} | {half['runs']} | {' | '.join(cells)} | "
            f"{refused} | {half['median_width']:.3f} |"
        )
    return "\n".join(lines)


def whole_corpus(args) -> dict:
    """The real-run part on every family of the corpus (``--corpus all``)."""
    from rlcurves.datasets import list_corpus

    t0 = time.perf_counter()
    listed = list_corpus()
    families = tuple(dict.fromkeys(listed["family"]))
    kinds = dict(zip(listed["family"], listed["metric_kind"], strict=False))
    real, cal_all, members = real_runs(args.quick, families=families, qualify=True)
    out = {
        "level": LEVEL,
        "fractions": FRACTIONS,
        "target": "mean of the evaluations over the last 10% of compute",
        "families": {f: len(m) for f, m in members.items()},
        "calibration_all": {"n": cal_all.n, "tau": cal_all.tau},
        "tau_by_family": {f: cal_all.subset(m).tau for f, m in members.items()},
        "summary": [
            *corpus_summary(real, "leave-one-family-out"),
            *corpus_summary(real, "leave-one-run-out"),
        ],
        "real_records": real,
    }
    for split in ("leave-one-family-out", "leave-one-run-out"):
        print(f"\n{split}:")
        print(corpus_table([r for r in out["summary"] if r["split"] == split], kinds))
    print(f"\ntau fitted on each family alone: {out['tau_by_family']}; on all: {cal_all.tau:.4f}")
    out["seconds"] = time.perf_counter() - t0
    print(f"({out['seconds']:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / (args.out or ("calibration_corpus_quick.json" if args.quick
                                   else "calibration_corpus.json"))  # fmt: skip
    path.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {path}")
    return out


# ---- the misspecification term's form ------------------------------------------------------

GROWTH_FORMS = {
    "sqrt(d)": np.sqrt,
    "d": lambda d: d,
    "d^1.5": lambda d: d**1.5,
    "d^2": lambda d: d**2,
}
DISTANCE_BINS = (0.0, 0.3, 0.6, 0.9, 1.2, 1.9)


def _t_loglik(err, v, nu=NU) -> np.ndarray:
    from scipy.stats import t

    return t.logpdf(err / np.sqrt(v), nu) - 0.5 * np.log(v)


def misspecification(cal, families: dict[str, list[str]]) -> dict:
    """Is ``tau^2 g(d)`` with ``g(d) = d`` the right form for the misspecification term?

    Two views, for each candidate ``g``: (1) tau fitted on all runs, the median and 90th
    percentile of the scores ``|error| / sqrt(V)`` by distance past the window (a right form
    leaves them flat in ``d``: the conformal multiplier is one number for every distance);
    (2) tau fitted on one family, the mean Student-t log-likelihood of the other family's errors
    (higher is better), both ways.
    """
    r = cal.records
    base = (r["fit_var"] + r["mix_var"] + r["noise_var"]).to_numpy(float)
    err = r["error"].to_numpy(float)
    d = r["distance"].to_numpy(float)
    bins = []
    for lo, hi in itertools.pairwise(DISTANCE_BINS):
        m = (d > lo) & (d <= hi)
        if m.any():
            bins.append({"d_low": lo, "d_high": hi, "mean_d": float(d[m].mean()),
                         "n": int(m.sum())})  # fmt: skip
    forms = {}
    for name, g in GROWTH_FORMS.items():
        tau = fit_tau(r, growth=g)
        score = np.abs(err) / np.sqrt(base + tau**2 * g(d))
        row = {"tau": tau, "median": [], "q90": []}
        for b in bins:
            m = (d > b["d_low"]) & (d <= b["d_high"])
            row["median"].append(float(np.median(score[m])))
            row["q90"].append(float(np.quantile(score[m], 0.9)))
        for train, test in (("gsm8k", "math"), ("math", "gsm8k")):
            rt = r[r["run"].isin(families[train])]
            re = r[r["run"].isin(families[test])]
            tau_t = fit_tau(rt, growth=g)
            v = (re["fit_var"] + re["mix_var"] + re["noise_var"]).to_numpy(float)
            v = v + tau_t**2 * g(re["distance"].to_numpy(float))
            row[f"{train}->{test}"] = float(np.mean(_t_loglik(re["error"].to_numpy(float), v)))
            row[f"tau {train}"] = tau_t
        forms[name] = row
    return {"bins": bins, "forms": forms, "tau": cal.tau}


def misspecification_tables(m: dict) -> str:
    names = list(m["forms"])
    lines = [
        "90th percentile (median) of |error| / sqrt(V) by distance past the fit window, for each "
        "g(d), tau fitted on all runs:",
        "",
        "| distance d (log compute) | forecasts | " + " | ".join(f"g = {n}" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for i, b in enumerate(m["bins"]):
        cells = [f"{m['forms'][n]['q90'][i]:.2f} ({m['forms'][n]['median'][i]:.2f})" for n in names]
        lines.append(
            f"| {b['d_low']:.1f}-{b['d_high']:.1f} (mean {b['mean_d']:.2f}) | {b['n']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "| g(d) | tau fitted on GSM8K | log-lik. on MATH | tau fitted on MATH | "
        "log-lik. on GSM8K |",
        "|---|---|---|---|---|",
    ]
    for name, row in m["forms"].items():
        lines.append(
            f"| {name} | {row['tau gsm8k']:.4f} | {row['gsm8k->math']:.3f} | "
            f"{row['tau math']:.4f} | {row['math->gsm8k']:.3f} |"
        )
    return "\n".join(lines)


# ---- regimes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Noise:
    """Evaluation noise: mean@n_gen on n_prompts (Beta-spread prompt difficulties) plus a random
    walk of the policy (``walk_sd`` per evaluation) and an optional EMA smoothing of the logged
    metric (``ema``: the weight of the previous smoothed value, as W&B's smoothing slider)."""

    walk_sd: float = 0.0015
    n_prompts: int = 1000
    n_gen: int = 16
    concentration: float = 2.0
    ema: float = 0.0


SIM_REGIMES = {
    "random walk, 1,000 prompts": Noise(),
    "random walk, 20,000 prompts (low noise)": Noise(n_prompts=20_000),
    "random walk, 1,000 prompts, EMA 0.9": Noise(ema=0.9),
}


def ema(y: np.ndarray, weight: float) -> np.ndarray:
    """W&B-style exponential smoothing: s_t = weight s_{t-1} + (1 - weight) y_t, debiased."""
    if weight <= 0:
        return y
    out = np.empty_like(y, dtype=float)
    acc, norm = 0.0, 0.0
    for i, v in enumerate(y):
        acc = weight * acc + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out[i] = acc / norm
    return out


def simulate(rng, params, noise: Noise):
    """One simulated run: compute (81,), logged metric (81,), expected reward of the policy."""
    _, c_mid, b, a = params
    compute = np.linspace(0.0, 6.3 * c_mid, 81)
    p = sigmoid(compute, a, b, c_mid, R0) + np.cumsum(noise.walk_sd * rng.standard_normal(81))
    p = np.clip(p, 1e-3, 1 - 1e-3)
    conc = noise.concentration
    passes = np.zeros(81)
    for j in range(0, noise.n_prompts, 5000):  # chunks keep memory small at 20,000 prompts
        m = min(5000, noise.n_prompts - j)
        difficulty = rng.beta(conc * p[:, None], conc * (1 - p[:, None]), (81, m))
        passes += rng.binomial(noise.n_gen, difficulty).sum(axis=1)
    reward = passes / (noise.n_prompts * noise.n_gen)
    return compute, ema(reward, noise.ema), p


def simulated(n_runs: int, seed: int) -> dict[str, list[dict]]:
    shipped = default_calibration()
    out = {}
    for i_reg, (regime, noise) in enumerate(SIM_REGIMES.items()):
        rng = np.random.default_rng([seed, i_reg])
        recs = []
        for i in tqdm(range(n_runs), desc=regime, leave=False):
            params = PAPER_SETS[i % len(PAPER_SETS)]
            c, y, truth = simulate(rng, params, noise)
            fit = fit_prefix(c, y, 0.5)
            rec = forecast_record(fit, c, truth, shipped, seed + i)
            recs.append({"set": params[0], **rec})
        out[regime] = recs
    return out


def real_regimes(quick: bool, seed: int = 0) -> dict[str, list[dict]]:
    """The real runs smoothed (EMA 0.9), and their trajectories with noise of sd 0.002."""
    corpus = load_corpus()
    if quick:
        names = [k for k in corpus if corpus[k].attrs["family"] == "gsm8k"][:3]
        names += [k for k in corpus if corpus[k].attrs["family"] == "math"][:3]
        corpus = {k: corpus[k] for k in names}
    rng = np.random.default_rng(seed)
    variants: dict[str, dict] = {"real runs, EMA 0.9": {}, "real trajectories + noise sd 0.002": {}}
    for name, frame in corpus.items():
        c, r = frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)
        variants["real runs, EMA 0.9"][name] = (c, ema(r, 0.9), r)
        # the run's trajectory: a centred moving average over ~5% of its evaluations (>= 3)
        w = max(3, round(0.05 * c.size) | 1)
        traj = np.convolve(np.pad(r, w // 2, mode="edge"), np.ones(w) / w, mode="valid")
        variants["real trajectories + noise sd 0.002"][name] = (
            c,
            traj + rng.normal(0, 0.002, c.size),
            traj,
        )
    shipped = default_calibration()
    out = {}
    for label, runs in variants.items():
        recs = []
        for name, (c, logged, truth) in tqdm(runs.items(), desc=label, leave=False):
            cal = shipped.without(name) if name in set(shipped.runs) else shipped
            for fraction in FRACTIONS:
                try:
                    fit = fit_prefix(c, logged, fraction)
                except rlcurves.RLCurvesError:
                    continue
                recs.append(
                    {"run": name, "fraction": fraction, **forecast_record(fit, c, truth, cal, seed)}
                )
        out[label] = recs
    return out


def regime_table(rows: list[dict]) -> str:
    lines = [
        "| regime | forecasts | 90% covered | Wilson 95% | median width | median abs. error |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['regime']} | {r['n']} | {r['covered']}/{r['n']} ({r['coverage']:.0%}) | "
            f"{r['wilson_low']:.0%}-{r['wilson_high']:.0%} | {r['median_width']:.3f} | "
            f"{r['median_abs_error']:.4f} |"
        )
    return "\n".join(lines)


def timing(repeat: int = 20) -> dict:
    """Seconds of one default forecast (fit on half of a MATH and of a GSM8K run, at the end)."""
    from benchmarks._common import median_time

    corpus = load_corpus()
    out = {}
    for fam in FAMILY_NAMES:
        frame = next(v for v in corpus.values() if v.attrs["family"] == fam)
        c, r = frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)
        fit = fit_prefix(c, r, 0.5)
        out[fam] = median_time(
            lambda fit=fit, c=c: rlcurves.forecast(fit, float(c.max()), seed=0, progress=False),
            repeat=repeat,
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized: a few runs of each part")
    ap.add_argument("--runs", type=int, default=None, help="simulated runs per regime")
    ap.add_argument("--out", default=None, help="result file name (default calibration.json)")
    ap.add_argument(
        "--corpus",
        choices=("bundled", "all"),
        default="bundled",
        help="bundled: the shipped calibration's two families, every part of the study; all: "
        "every corpus family, the real-run splits only (calibration_corpus.json)",
    )
    ap.add_argument(
        "--write-calibration",
        action="store_true",
        help=f"recompute the shipped calibration ({SHIPPED.name}) first",
    )
    args = ap.parse_args(argv)
    if args.corpus == "all":
        return whole_corpus(args)
    t0 = time.perf_counter()
    if args.write_calibration:
        cal = calibrate(load_corpus(), name=CORPUS_NAME, seed=0, progress=True)
        d = cal.to_dict()
        d["made_by"] = "python -m benchmarks.calibration --write-calibration"
        SHIPPED.write_text(json.dumps(d, indent=1))
        print(f"wrote {SHIPPED}")
    n_sim = args.runs or (10 if args.quick else 100)
    real, cal_all, families = real_runs(args.quick)
    real_rows = summarize(real, ("split", "family", "fraction"))
    pooled_rows = summarize(real, ("split", "fraction"))
    print(real_table(real_rows))
    print()
    print(pooled_table(pooled_rows))
    mis = misspecification(cal_all, families)
    print()
    print(misspecification_tables(mis))
    regimes = {**simulated(n_sim, 7), **real_regimes(args.quick)}
    regime_rows = []
    for label, recs in regimes.items():
        regime_rows += [{"regime": label, **row} for row in summarize(recs, ())]
    print()
    print(regime_table(regime_rows))
    seconds_forecast = timing(5 if args.quick else 20)
    print(f"\none default forecast: {seconds_forecast}")
    out = {
        "level": LEVEL,
        "fractions": FRACTIONS,
        "target": "mean of the evaluations over the last 10% of compute",
        "shipped": default_calibration().name,
        "real": real_rows,
        "real_pooled": pooled_rows,
        "misspecification": mis,
        "regimes": regime_rows,
        "sim_regimes": {k: asdict(v) for k, v in SIM_REGIMES.items()},
        "simulated_runs_per_regime": n_sim,
        "seconds_per_default_forecast": seconds_forecast,
        "real_records": real,
        "seconds": time.perf_counter() - t0,
    }
    print(f"({out['seconds']:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    name = args.out or ("calibration_quick.json" if args.quick else "calibration.json")
    path = RESULTS / name
    path.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
