"""Race's settings measured on many sweeps drawn from the corpora, chosen leave-one-family-out.

The five real sweeps of :mod:`benchmarks.race_replay` cannot tell Race's settings apart (every
setting keeps 5 of 5 winners) nor show "the winner kept in 95% of sweeps" (5 of 5 has a Wilson
95% lower bound of 57%). Here Race replays many sweeps: random subsets of 3 to 8 runs of one
family, all truncated at the family's common budget (MATH: the 15 GRPO runs of
Qwen2.5-Math-1.5B at 200 steps, which contain math_lr, math_offpolicy and math_ablations; GSM8K:
the 9 Deep-GRPO settings at 2,520 steps, which are gsm8k_settings). A run's forecast at a rung
depends only on its own points, the budget and the calibration, so it is computed once per
(run, rung) and shared by every sweep that holds the run; the sweeps then differ only in
Race's decisions. Forecasts are calibrated on the other family only (leave-one-family-out).

For every setting (alpha x the identification guard: throughout, before 40% of the budget, never
x the hold: the rule's 2 refits or 1) and family: the number of sweeps whose winner is kept
(regret <= 0.01, with a Wilson 95% interval; the sweeps share runs, so the interval is narrower
than it should be) and the compute used. :func:`choose` picks Race's defaults: at alpha 0.05
(a risk bound, not tuned: see choose), the least compute among the settings whose kept count
has a Wilson lower bound >= 95% on every family; it also reports the choice over every alpha and
the leave-one-family-out choice (made on one family, scored on the other). Three
sensitivity rows (not candidates): the calibration's tau instead of the sweep's, and the
calibration weighing 0.5 or 2 runs against the sweep's own backtests. "tails": how often a
run's final value falls outside the 5-95% band of its forecast (with the calibration's tau), by
whether the fit was identified, before the default guard's end (15-35% of the budget) and after
it (40-95%). "interval_coverage": the same for the 90% intervals Race printed (its decisions'
draws), with the sweep's tau and with the calibration's. "oracle_compute": a reference, the
compute of an oracle that knows the finals and stops at 25% every run more than a gap behind.
"sweep_tau": the range of the sweep tau over the reports of the defaults' replays.

Run: python -m benchmarks.race_sweeps [--sweeps 100] [--quick]  (22 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from benchmarks._common import race_default
from benchmarks.race_replay import (
    _REFIT_FIELDS,
    MATH_FILE,
    RESULTS,
    RUNGS,
    TOLERANCE,
    Sweep,
    _read,
    _short,
    replay_race,
)

SIZES = (3, 4, 5, 6, 7, 8)
GSM8K_BUDGET = 2520.0
MATH_BUDGET = 200.0
OTHER = {"gsm8k": "math", "math": "gsm8k"}
FIGURE = "docs/figures/race_settings.png"
TARGET = 0.95  # the "winner kept in at least 95% of sweeps"
ALPHA = 0.05  # Race's risk bound, not tuned here (see choose)


def guard_words(guard: bool | float) -> str:
    """A ``require_identified`` value as the settings' labels name it."""
    return {True: "on", False: "off"}.get(guard, f"before {guard:.0%}")  # type: ignore[arg-type]


DEFAULT_GUARD = race_default("require_identified")  # the sensitivity rows vary the tau around it
DEFAULT_LABEL = f"alpha 0.05, guard {guard_words(DEFAULT_GUARD)}"  # Race's defaults
CALIBRATION_TAU_LABEL = f"{DEFAULT_LABEL}, calibration's tau"
ONE_TAU_LABEL = f"{DEFAULT_LABEL}, one tau for every run of the sweep"


def family_runs() -> dict[str, tuple[float, dict[str, pd.DataFrame]]]:
    """family -> (budget, run -> points truncated at the budget)."""
    d = _read("deepgrpo_gsm8k_sweeps.csv")
    gsm8k = {}
    for k, g in d.groupby("run", sort=True):
        df = pd.DataFrame(
            {"compute": g["step"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
        gsm8k[_short(k)] = df[df["compute"] <= GSM8K_BUDGET].reset_index(drop=True)
    m = _read(MATH_FILE)
    math_runs = {}
    for k, g in m.groupby("run", sort=True):
        if g["x"].max() != MATH_BUDGET or g["x"].min() != 0:  # the 400-step and SFT-init runs
            continue
        math_runs[k] = pd.DataFrame(
            {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
    return {"gsm8k": (GSM8K_BUDGET, gsm8k), "math": (MATH_BUDGET, math_runs)}


def as_sweep(budget: float, runs: dict[str, pd.DataFrame]) -> Sweep:
    """Runs of one family as race_replay's Sweep (already truncated at ``budget``)."""
    return Sweep("drawn", "", budget, runs, "")


def draw_sweeps(names: list[str], n: int, seed: int) -> list[tuple[str, ...]]:
    """``n`` distinct random subsets of ``names``: an equal share of each size in SIZES (all the
    subsets of a size when it has fewer), the rest from the other sizes."""
    from itertools import combinations

    rng = np.random.default_rng(seed)
    pools = []
    for size in (s for s in SIZES if s <= len(names)):
        combos = list(combinations(sorted(names), size))
        pools.append([combos[i] for i in rng.permutation(len(combos))])
    out: list[tuple[str, ...]] = []
    while len(out) < n and any(pools):
        for pool in pools:
            if pool and len(out) < n:
                out.append(pool.pop())
    return out


def family_sweeps(fam: str, runs: dict, n: int) -> list[tuple[str, ...]]:
    """The ``n`` drawn sweeps of one family (fixed seeds)."""
    return draw_sweeps(sorted(runs), n, seed=1 if fam == "math" else 2)


def replay(budget, runs, members, kws, cache, index, on_report=None) -> tuple[float, float, dict]:
    """One sweep raced rung by rung (race_replay.replay_race): (regret, compute used, run ->
    fraction when stopped)."""
    sweep = as_sweep(budget, {k: runs[k] for k in members})
    out, _ = replay_race(sweep, kws, cache, index, on_report=on_report)
    return out.regret, out.compute_fraction, out.stopped_at


def fill_cache(budget, runs, calibration, cache, index) -> None:
    """Every run's fit and forecast at every rung, through Race's own refit (one run per race)."""
    for k in runs:
        replay(budget, runs, [k], {"calibration": calibration}, cache, index)


def tail_coverage(budget, runs, cache, lo: float = 0.15, hi: float = 0.95) -> dict:
    """How often a run's final value lies above its forecast's upper 95% quantile (the tail a
    stop bets against) and below its lower 5% quantile (the tail a leader's level bets on), by
    whether the fit was identified, over the rungs from ``lo`` to ``hi`` of the budget."""
    fin = as_sweep(budget, runs).finals()
    rows = []
    for (k, rung), hit in cache.items():
        fields = dict(zip(_REFIT_FIELDS, hit, strict=True))
        fc, ident = fields["forecast"], fields["identified"]
        if fc is None or fc.predictive is None or not lo <= rung / RUNGS <= hi:
            continue
        draws = fc.predictive.column(0)  # the calibration's tau: the forecast's own draws
        q05, q95 = np.quantile(draws, [0.05, 0.95])
        rows.append((bool(ident), fin[k] > q95, fin[k] < q05, fin[k] - float(np.mean(draws))))
    out = {}
    for name, sel in (("identified", True), ("not identified", False)):
        r = [x for x in rows if x[0] == sel]
        n = len(r)
        above, below = sum(x[1] for x in r), sum(x[2] for x in r)
        out[name] = {
            "forecasts": n,
            "above_q95": above,
            "above_q95_rate": above / n if n else math.nan,
            "above_q95_ci": wilson(above, n),
            "below_q05": below,
            "below_q05_rate": below / n if n else math.nan,
            "median_error": float(np.median([x[3] for x in r])) if n else math.nan,
        }
    return out


def oracle_compute(budget, runs, sweeps, gaps=(0.01, 0.02, 0.03, 0.05), at: float = 0.25) -> dict:
    """A reference, not a method: the compute of an oracle that knows every run's final value,
    stops at ``at`` of the budget (where Race's first stops come) every run that ends more than
    ``gap`` below its sweep's winner and runs the others to the end. With ``gap`` 0.01 it never
    loses the winner; a race must tell runs ``gap`` apart to match it."""
    fin = as_sweep(budget, runs).finals()
    out = {}
    for gap in gaps:
        used = []
        for members in sweeps:
            best = max(fin[k] for k in members)
            used.append(np.mean([1.0 if best - fin[k] <= gap else at for k in members]))
        out[f"{gap:g}"] = float(np.mean(used))
    return out


class IntervalCoverage:
    """How often a run's final value fell outside the 90% interval Race printed for it (its
    report's table, the draws its decisions used), over every running run at every rung of the
    sweeps replayed with it as ``on_report``, before the default guard's end (15-35% of the
    budget) and after it (40-95%); nominal 5% above and 5% below."""

    def __init__(self, finals: dict[str, float]) -> None:
        self.finals = finals
        self.rows: list[tuple[float, bool, bool]] = []
        self.taus: list[float] = []

    def __call__(self, report) -> None:
        if report.tau is not None:
            self.taus.append(float(report.tau))
        t = report.table
        for _, r in t[(t["status"] == "running") & np.isfinite(t["upper"])].iterrows():
            fin = self.finals[r["run"]]
            self.rows.append((r["fraction"], fin > r["upper"], fin < r["lower"]))

    def tau_summary(self) -> dict:
        """The sweep tau of every report seen (reward units): how low and how high it went."""
        t = np.asarray(self.taus, dtype=float)
        if not t.size:
            return {"reports": 0}
        q = np.quantile(t, [0.05, 0.5, 0.95])
        return {"reports": int(t.size), "min": float(t.min()), "q05": float(q[0]),
                "median": float(q[1]), "q95": float(q[2]), "max": float(t.max())}  # fmt: skip

    def summary(self) -> dict:
        out = {}
        for lo, hi in ((0.15, 0.35), (0.4, 0.95)):
            r = [x for x in self.rows if lo - 1e-9 <= x[0] <= hi + 1e-9]
            n = len(r)
            out[f"{lo:.0%}-{hi:.0%}"] = {
                "forecasts": n,
                "above_upper": sum(x[1] for x in r) / n if n else math.nan,
                "below_lower": sum(x[2] for x in r) / n if n else math.nan,
            }
        return out


def wilson(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def settings_grid(quick: bool) -> list[dict]:
    """alpha x the identification guard (throughout, before 40% of the budget, never) x the
    hold (the rule's 2 refits, or 1), every one with the sweep's own tau (Race's default); then
    four sensitivity rows at Race's defaults (alpha 0.05, its guard, hold 2; not candidates for
    the defaults): the calibration's tau (Race before the sweep's tau), one tau for every run of
    the sweep (``misspecification="sweep"``, Race before a run could have its own), and the
    sweep's tau with the calibration weighing 0.5 and 2 runs."""
    alphas = (0.05, 0.2) if quick else (0.05, 0.1, 0.2, 0.3)
    guards = (True, 0.4, False)
    grid = []
    for alpha, guard, confirm in product(alphas, guards, (None, 1)):
        label = f"alpha {alpha:g}, guard {guard_words(guard)}" + (
            ", confirm 1" if confirm == 1 else ""
        )
        grid.append(
            {"label": label, "alpha": alpha, "require_identified": guard, "confirm": confirm}
        )
    base = {"alpha": 0.05, "require_identified": DEFAULT_GUARD, "confirm": None,
            "sensitivity": True}  # fmt: skip
    grid += [
        {**base, "label": CALIBRATION_TAU_LABEL, "misspecification": "calibration"},
        {**base, "label": ONE_TAU_LABEL, "misspecification": "sweep"},
        {**base, "label": f"{DEFAULT_LABEL}, tau_prior_runs 0.5", "tau_prior_runs": 0.5},
        {**base, "label": f"{DEFAULT_LABEL}, tau_prior_runs 2", "tau_prior_runs": 2.0},
    ]
    return grid


def run_family(fam: str, n_sweeps: int, quick: bool) -> tuple[dict, dict, dict, dict]:
    """Every setting on ``n_sweeps`` sweeps of one family: (label -> result, tail coverage,
    the coverage of Race's printed intervals with the sweep's and the calibration's tau, the
    range of the sweep tau over the defaults' reports)."""
    warnings.simplefilter("ignore")
    from rlcurves.calibrate import default_calibration

    budget, runs = family_runs()[fam]
    shipped = default_calibration()  # the validation runs'; every other family of the kind
    calibration = shipped.of_families([f for f in shipped.families if f != fam])
    cache: dict = {}
    index = {k: i for i, k in enumerate(runs)}
    sweeps = family_sweeps(fam, runs, n_sweeps)
    fill_cache(budget, runs, calibration, cache, index)
    tails = {
        f"{lo:.0%}-{hi:.0%}": tail_coverage(budget, runs, cache, lo, hi)
        for lo, hi in ((0.15, 0.35), (0.4, 0.95))  # before the 40% guard's end, and after
    }
    # the intervals' coverage, seen in the replays of the defaults and of the calibration's tau
    finals = as_sweep(budget, runs).finals()
    coverage = {how: IntervalCoverage(finals) for how in ("sweep", "calibration")}
    watched = {DEFAULT_LABEL: coverage["sweep"], CALIBRATION_TAU_LABEL: coverage["calibration"]}
    out = {}
    for s in settings_grid(quick):
        kws = {
            "alpha": s["alpha"],
            "require_identified": s["require_identified"],
            "confirm": s["confirm"],
            "calibration": calibration,
            **{k: s[k] for k in ("misspecification", "tau_prior_runs") if k in s},
        }
        rows = [
            replay(budget, runs, m, kws, cache, index, on_report=watched.get(s["label"]))
            for m in tqdm(sweeps, desc=f"{fam}: {s['label']}", leave=False, disable=fam != "math")
        ]
        kept = sum(r[0] <= TOLERANCE + 1e-12 for r in rows)
        out[s["label"]] = {
            "sensitivity": bool(s.get("sensitivity", False)),
            "sweeps": len(rows),
            "kept": int(kept),
            "kept_rate": kept / len(rows),
            "kept_ci": wilson(kept, len(rows)),
            "worst_regret": max(r[0] for r in rows),
            "compute_used": float(np.mean([r[1] for r in rows])),
            "per_sweep": [
                {"runs": list(m), "regret": r[0], "compute_used": r[1], "stopped_at": r[2]}
                for m, r in zip(sweeps, rows, strict=True)
            ],
        }
    summaries = {how: c.summary() for how, c in coverage.items()}
    return out, tails, summaries, coverage["sweep"].tau_summary()


def _alpha(label: str) -> float:
    return float(label.split(",")[0].split()[1])


def choose(results: dict, alpha: float = ALPHA) -> dict:
    """Choices of setting. ``lofo``: for each family, the least compute on the OTHER family
    among the settings that keep its winner in >= 95% of its sweeps (scored on this family).
    ``robust`` (Race's defaults): at ``alpha``, the least compute (mean over the families) among
    the settings whose kept count has a Wilson 95% lower bound >= 95% on every family (with 100
    sweeps: none lost). alpha is not tuned: it bounds the risk of stopping the winner among
    many runs stopped at once, which sweeps of 3-8 runs cannot measure (on them the per-run
    rule and its hold bind first), so a larger alpha that saves compute here may lose winners
    in a sweep of 30 trials. ``robust_any_alpha``: the same choice over every alpha, for
    comparison."""
    results = {
        k: v for k, v in results.items() if not any(r.get("sensitivity") for r in v.values())
    }
    fams = sorted({f for v in results.values() for f in v})
    lofo = {}
    for fam in fams:
        other = OTHER[fam]
        ok = [k for k, v in results.items() if v[other]["kept_rate"] >= TARGET]
        lofo[fam] = min(ok, key=lambda k: results[k][other]["compute_used"], default=None)
    ok = [
        k
        for k, v in results.items()
        if all(wilson(v[f]["kept"], v[f]["sweeps"])[0] >= TARGET for f in fams)
    ]

    def mean_compute(k: str) -> float:
        return float(np.mean([results[k][f]["compute_used"] for f in fams]))

    robust = min((k for k in ok if _alpha(k) == alpha), key=mean_compute, default=None)
    any_alpha = min(ok, key=mean_compute, default=None)
    return {"lofo": lofo, "robust": robust, "robust_any_alpha": any_alpha}


def readme_table(res: dict) -> str:
    """The settings table as README shows it (from the JSON this benchmark writes)."""
    lines = [
        "| setting | MATH: winner kept | compute | GSM8K: winner kept | compute |",
        "|---|---|---|---|---|",
    ]
    for label, v in res["results"].items():
        cells = " | ".join(
            f"{v[f]['kept']} of {v[f]['sweeps']} | {v[f]['compute_used']:.0%}"
            for f in ("math", "gsm8k")
        )
        lines.append(f"| {label} | {cells} |")
    return "\n".join(lines)


def coverage_table(res: dict) -> str:
    """How often the final value fell outside Race's 90% intervals, as README shows it."""
    lines = [
        "| family | tau | at 15-35% of the budget: forecasts | above / below the interval "
        "| at 40-95%: forecasts | above / below |",
        "|---|---|---|---|---|---|",
    ]
    names = {"math": "MATH", "gsm8k": "GSM8K"}
    words = {"sweep": "the sweep's (default)", "calibration": "the calibration's"}
    for fam, by in res["interval_coverage"].items():
        for how, bands in by.items():
            cells = " | ".join(
                f"{b['forecasts']} | {b['above_upper']:.1%} / {b['below_lower']:.1%}"
                for b in bands.values()
            )
            lines.append(f"| {names[fam]} | {words[how]} | {cells} |")
    return "\n".join(lines)


def figure(res: dict, path: str) -> None:
    """Winners kept against compute used, one point per setting, a panel per family: the
    issue's corner (>= 95% kept, <= 60% compute) shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    markers = {"guard on": "s", "guard before 40%": "o", "guard off": "^"}
    for ax, fam, title in zip(axes, ("math", "gsm8k"), ("MATH (15 runs)", "GSM8K (9 runs)"),
                              strict=True):  # fmt: skip
        ax.axhspan(95, 100.9, xmin=0, xmax=(60 - 50) / (100 - 50), color="0.9", zorder=0)
        ax.text(51, 95.3, "the issue's target", fontsize=8, color="0.35")
        ax.axvline(60, color="0.5", lw=0.8, ls=":")
        ax.axhline(95, color="0.5", lw=0.8, ls=":")
        for label, v in res["results"].items():
            r = v[fam]
            if r.get("sensitivity"):
                continue
            guard = next(g for g in markers if g in label)
            hold1 = "confirm 1" in label
            alpha = _alpha(label)
            default = label == res["chosen"]["robust"]
            ax.scatter(
                100 * r["compute_used"],
                r["kept"] / r["sweeps"] * 100,
                marker=markers[guard],
                s=30 + 150 * alpha,
                facecolor="none" if hold1 else "C0",
                edgecolor="C3" if default else ("C1" if hold1 else "C0"),
                linewidth=2 if default else 1,
                zorder=3,
            )
            if default:
                ax.annotate("defaults", (100 * r["compute_used"], 100 * r["kept"] / r["sweeps"]),
                            xytext=(-8, -14), textcoords="offset points", color="C3",
                            ha="right")  # fmt: skip
        ax.set_title(f"{title}: {res['sweeps_per_family']} sweeps of 3-8 runs", fontsize=10)
        ax.set_xlabel("compute used, % of running every run to the budget")
        ax.set_xlim(50, 100)
        ax.set_ylim(90, 100.9)
    axes[0].set_ylabel("sweeps whose winner was kept (regret <= 0.01), %")
    handles = [
        plt.Line2D([], [], marker=m, ls="", color="C0", label=g) for g, m in markers.items()
    ] + [
        plt.Line2D([], [], marker="o", ls="", color="C0", label="hold 2 refits"),
        plt.Line2D([], [], marker="o", ls="", mfc="none", color="C1", label="confirm 1"),
    ]
    axes[1].legend(handles=handles, fontsize=8, loc="lower left", title="size: alpha 0.05-0.3",
                   title_fontsize=8)  # fmt: skip
    fig.suptitle("Race's settings on sweeps drawn from the corpora (forecasts calibrated on the "
                 "other family)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    from concurrent.futures import ProcessPoolExecutor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=100, help="sweeps per family")
    parser.add_argument("--quick", action="store_true", help="20 sweeps, 2 alphas")
    parser.add_argument("--out", default=str(RESULTS / "race_sweeps.json"))
    parser.add_argument("--figure", help="also write the settings figure to this PNG")
    parser.add_argument(
        "--figure-only", action="store_true", help="redraw the figure from --out, run nothing"
    )
    args = parser.parse_args(argv)
    if args.figure_only:
        figure(json.loads(Path(args.out).read_text()), args.figure or FIGURE)
        return
    warnings.simplefilter("ignore")
    n_sweeps = 20 if args.quick else args.sweeps
    t0 = time.perf_counter()
    fams = ("math", "gsm8k")
    with ProcessPoolExecutor(2) as pool:  # one family per core
        jobs = {f: pool.submit(run_family, f, n_sweeps, args.quick) for f in fams}
        done = {f: j.result() for f, j in jobs.items()}
    tails = {f: done[f][1] for f in fams}
    coverage = {f: done[f][2] for f in fams}
    sweep_tau = {f: done[f][3] for f in fams}
    results: dict[str, dict] = {}
    for f in fams:
        for label, r in done[f][0].items():
            results.setdefault(label, {})[f] = r
    oracles = {}
    corpora = family_runs()
    for fam in fams:
        budget, runs = corpora[fam]
        oracles[fam] = oracle = oracle_compute(budget, runs, family_sweeps(fam, runs, n_sweeps))
        print(
            f"{fam}: an oracle stopping at 25% every run that ends more than gap behind uses "
            + ", ".join(f"{v:.0%} (gap {g})" for g, v in oracle.items())
        )
        for band, t in tails[fam].items():
            for k, v in t.items():
                print(
                    f"{fam:5s} at {band:7s} of the budget, {k:15s}: {v['forecasts']:4d} "
                    f"forecasts, final above the 95% quantile {v['above_q95']} "
                    f"({v['above_q95_rate']:.1%}), below the 5% quantile {v['below_q05']} "
                    f"({v['below_q05_rate']:.1%}) (nominal 5% each); median final - forecast "
                    f"{v['median_error']:+.3f}"
                )
    print(
        f"\n{'setting':38s} {'MATH kept':>16s} {'compute':>8s} {'GSM8K kept':>16s} {'compute':>8s}"
    )
    for label, v in results.items():
        cells = "".join(
            f" {v[f]['kept']:>4d}/{v[f]['sweeps']} ({v[f]['kept_rate']:6.1%}) "
            f"{v[f]['compute_used']:>7.1%}"
            for f in fams
        )
        print(f"{label:38s}{cells}")
    print("\n" + coverage_table({"interval_coverage": coverage}))
    for f, t in sweep_tau.items():
        print(
            f"{f}: the sweep tau over the defaults' {t['reports']} reports: min {t['min']:.4f}, "
            f"5% {t['q05']:.4f}, median {t['median']:.4f}, 95% {t['q95']:.4f}, max {t['max']:.4f}"
        )
    print("\n" + readme_table({"results": results}))
    chosen = choose(results)
    for fam, pick in chosen["lofo"].items():
        r = results[pick][fam]
        print(
            f"{fam} held out, setting chosen on {OTHER[fam]}: {pick}: kept {r['kept']}/"
            f"{r['sweeps']} ({r['kept_rate']:.1%}), compute {r['compute_used']:.1%}"
        )
    print(f"robust choice at alpha {ALPHA:g} (Race's default): {chosen['robust']}")
    print(f"robust choice over every alpha: {chosen['robust_any_alpha']}")
    payload = {
        "sweeps_per_family": n_sweeps,
        "oracle_compute": oracles,
        "sizes": list(SIZES),
        "target": TARGET,
        "seconds": time.perf_counter() - t0,
        "tails": tails,
        "interval_coverage": coverage,
        "sweep_tau": sweep_tau,
        "chosen": chosen,
        "results": results,
    }
    from benchmarks._common import machine

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"machine": machine(), **payload}, indent=1, default=float)
    )
    print(f"written {args.out}")
    if args.figure:
        figure(json.loads(Path(args.out).read_text()), args.figure)


if __name__ == "__main__":
    main()
