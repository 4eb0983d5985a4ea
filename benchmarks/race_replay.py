"""Replay the real sweeps of the corpora: who keeps the winner, at what compute.

Every sweep is replayed as if its runs were launched together and ran in parallel: each run's
evaluations arrive in compute order, and at every rung (each 5% of the budget) every method sees
what has arrived and says whom to stop. A stopped run's compute ends at its last evaluation.

The sweeps (from the files' metadata: the runs that vary one part of one recipe, from one
launch or one table of the source; truncated at the common budget, the smallest final compute of
the sweep's runs):

- GSM8K family (rlcurves/data/curves/, verl runs of Qwen2.5-0.5B-Instruct, validation mean@1 on
  the 1,319 GSM8K test prompts every 5 steps; compute = training step):
  ``gsm8k_settings``: the 9 settings of the Deep-GRPO sweep file (branching gamma x loss weight
  lambda, one launch, the date tag 01161659), budget 2,520 steps;
  ``gsm8k_budget``: the 4 budget variants of the wall-clock file (p1-b8, p1b4, p2b4,
  p1b8-expandall; they cost different compute per step, so compute = wall-clock seconds on one
  node), budget 153,590 s.
- MATH family (cs336_grpo_math_qwen25math15b.csv, GRPO of Qwen2.5-Math-1.5B, validation accuracy
  on 1,024 problems every 5 steps; compute = GRPO step; budget 200 steps):
  ``math_lr``: the learning-rate sweep (5e-6, 1e-5, 2e-5, 3e-5, 4e-5 = the reference, 5e-5);
  ``math_offpolicy``: the reference and the four GRPO-Clip off-policy variants (clip range,
  epochs per rollout batch, train batch);
  ``math_ablations``: the reference and its one-switch ablations (no baseline, no std
  normalization, masked_normalize and batch_token_mean length normalization, question-only
  prompt).
  Left out: the 400-step leaderboard run (another validation set) and the SFT-initialized run
  (another starting model).

A run's final value is the mean of its evaluations in the last 10% of the budget; the winner is
the run with the best final value; a method keeps the winner when the best final value among the
runs it did not stop is within 0.01 of the winner's (regret <= 0.01). Compute used is the
compute of all runs, as stopped, over the compute of running them all to the budget.

Methods:
- ``race``: :class:`rlcurves.Race` with its defaults (alpha 0.05, tolerance 0.01, no
  identification guard, the rule's hold; chosen on 200 sweeps by benchmarks/race_sweeps.py;
  each stop also passes issue 27's measured per-run rule,
  :data:`rlcurves.decide.DEFAULT_RULE`, and its hysteresis; the forecasts' misspecification
  scale tau refitted on the sweep's own runs' backtests within their windows, as Race does by
  default). Its forecasts are never calibrated on the sweep's own finished runs:
  ``--calibration family`` uses the shipped records of the OTHER family only
  (leave-one-family-out: a GSM8K sweep is forecast with the prior tau and the scores of the
  MATH runs, and the other way round), ``sweep`` the records of every run outside the sweep
  (what a user racing a new sweep has: other launches of the same family included); ``both``
  (default) reports both. A grid of settings (alpha x require_identified x confirm) gives the
  frontier (compute against winners kept), and a setting chosen leave-one-family-out: chosen
  on one family's sweeps, scored on the other's. The refits are shared between the settings (a
  run's forecast at a rung does not depend on them: :func:`cached_race_class`).
- ``asha``: Ray Tune's own ``ASHAScheduler`` (reduction factor 3, grace period 1/9 of the
  budget, so rungs at 1/9 and 1/3) fed the results offline through ``on_trial_result``.
- ``median``: Ray Tune's own ``MedianStoppingRule`` (grace period 25% of the budget,
  min_samples_required 3), fed the same way.
- ``optuna_median`` / ``optuna_sha``: Optuna's ``MedianPruner`` and ``SuccessiveHalvingPruner``
  in a real in-memory study with the stored intermediate values. Optuna's median pruner compares
  with completed trials only, so in a parallel sweep it never prunes; both Optuna pruners are
  therefore replayed as Optuna runs by default, one trial after another, in 20 random orders
  (fixed seeds) whose rates are averaged.

Evaluation density ("density"): Race at its defaults (calibrated on the other family), the
median stopping rule and ASHA on every sweep with each run's evaluations thinned to 40, 20 and
12 to the budget (:func:`thinned`; the final values and winners stay the sweep's own). A
forecast needs evaluations: Race stops nothing before a run has 8 (the rule's ``min_points``,
the fewest any calibration forecast was fitted on), and its window backtests need more.

Independence ("independence"): Race's joint risk and p(best) treat the runs' forecast errors as
independent. Every forecast Race makes at its defaults on every sweep at every rung (nothing
stopped) is scored against the run's final value (:func:`forecast_errors`), and per family
:func:`independence` reports the correlation of two runs' errors at the same rung and how often
the difference of their finals falls outside the 90% interval of the difference of independent
forecasts, with intervals from a bootstrap over runs.

Run: python -m benchmarks.race_replay [--quick] [--calibration family|sweep|both]
[--figure docs/figures/race_math_lr.png]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from benchmarks._common import race_default

RESULTS = Path(__file__).parent / "results"
RUNGS = 20  # a look every 5% of the budget
TOLERANCE = 0.01
FINAL_WINDOW = 0.1  # a run's final value: its mean over the last 10% of the budget
MATH_FILE = "cs336_grpo_math_qwen25math15b.csv"
FAMILY_OTHER = {"gsm8k": "math", "math": "gsm8k"}
_SHARED_MATH = Path("/work/shared/data/curves") / MATH_FILE
MATH_REF = "ref_onpolicy_reinforce_baseline_lr4e-5"
MATH_SWEEPS = {
    "math_lr": ["lr5e-6", "lr1e-5", "lr2e-5", "lr3e-5", MATH_REF, "lr5e-5"],
    "math_offpolicy": [
        MATH_REF,
        "grpo_clip0.2-0.28_e2_tb256",
        "grpo_clip0.2_e2_tb128",
        "grpo_clip0.2_e2_tb256",
        "grpo_clip0.2_e4_tb256",
    ],
    "math_ablations": [
        MATH_REF,
        "no_baseline_lr4e-5",
        "no_std_normalization_lr4e-5",
        "masked_normalize_lr4e-5",
        "batch_token_mean_lr4e-5",
        "question_only_prompt_lr4e-5",
    ],
}


@dataclass
class Sweep:
    name: str
    family: str
    budget: float
    runs: dict[str, pd.DataFrame]  # each: compute, reward (sorted, truncated at the budget)
    unit: str
    sources: tuple[str, ...] = ()  # the runs' names in the corpus (and the calibration records)
    final_values: dict[str, float] | None = None  # the finals when not the runs' own (thinned)
    kind: str = "validation"  # the metric's kind in the corpus (its calibration's)

    def finals(self) -> dict[str, float]:
        if self.final_values is not None:
            return dict(self.final_values)
        out = {}
        for k, df in self.runs.items():
            tail = df[df["compute"] > (1 - FINAL_WINDOW) * self.budget]
            out[k] = float(tail["reward"].mean())
        return out


def _read(filename: str) -> pd.DataFrame:
    try:
        with resources.files("rlcurves.data").joinpath("curves", filename).open("r") as fh:
            return pd.read_csv(fh, comment="#")
    except FileNotFoundError:
        if filename == MATH_FILE and _SHARED_MATH.exists():
            return pd.read_csv(_SHARED_MATH, comment="#")
        raise


def _truncate(runs: dict[str, pd.DataFrame], name: str, family: str, unit: str, sources) -> Sweep:
    budget = min(float(df["compute"].max()) for df in runs.values())
    cut = {
        k: df[df["compute"] <= budget].sort_values("compute").reset_index(drop=True)
        for k, df in runs.items()
    }
    return Sweep(name, family, budget, cut, unit, tuple(sources))


def _short(name: str) -> str:
    """The part of a Deep-GRPO run name that varies (gamma2.0-lam1.0, p1b4, ...)."""
    s = name.replace("Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-", "")
    return s.rsplit("-", 1)[0].replace("p1-b8-", "")


def load_sweeps() -> list[Sweep]:
    """The five sweeps of the two families (see the module docstring)."""
    sweeps = []
    d = _read("deepgrpo_gsm8k_sweeps.csv")
    runs = {
        _short(k): pd.DataFrame(
            {"compute": g["step"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
        for k, g in d.groupby("run", sort=True)
    }
    sweeps.append(_truncate(runs, "gsm8k_settings", "gsm8k", "step", d["run"].unique()))
    w = _read("deepgrpo_gsm8k_wallclock.csv")
    runs = {
        _short(k): pd.DataFrame(
            {"compute": g["wallclock_s"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
        )
        for k, g in w.groupby("run", sort=True)
    }
    sweeps.append(_truncate(runs, "gsm8k_budget", "gsm8k", "wall-clock s", w["run"].unique()))
    m = _read(MATH_FILE)
    for name, members in MATH_SWEEPS.items():
        runs = {}
        for k in members:
            g = m[m["run"] == k]
            runs[k.replace("_onpolicy_reinforce_baseline", "")] = pd.DataFrame(
                {"compute": g["x"].to_numpy(float), "reward": g["metric"].to_numpy(float)}
            )
        sweeps.append(_truncate(runs, name, "math", "step", members))
    return sweeps


# ---- one replay ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    sweep: str
    method: str
    kept: list[str]
    used: dict[str, float]  # compute each run used
    regret: float
    compute_fraction: float
    seconds: float
    stopped_at: dict[str, float]

    @property
    def kept_winner(self) -> bool:
        return self.regret <= TOLERANCE + 1e-12


def score(sweep: Sweep, method: str, used: dict[str, float], seconds: float) -> Outcome:
    finals = sweep.finals()
    kept = [k for k, c in used.items() if c >= sweep.budget - 1e-9]
    best = max(finals.values())
    regret = best - max((finals[k] for k in kept), default=-math.inf)
    frac = sum(used.values()) / (len(used) * sweep.budget)
    stopped = {k: c / sweep.budget for k, c in used.items() if k not in kept}
    return Outcome(sweep.name, method, kept, used, float(regret), frac, seconds, stopped)


#: Evaluations per run in the thinned replays: how Race's savings depend on how often a run is
#: evaluated (the corpora's runs have 41 evaluations to the budget (MATH) and 472-505 (GSM8K)).
DENSITIES = (40, 20, 12)


def thinned(sweep: Sweep, n_points: int) -> Sweep:
    """``sweep`` with each run's evaluations thinned to ``n_points`` spread evenly over its grid
    (the first and last kept); the final values stay those of every evaluation, so the winner
    and the regret are the sweep's own."""
    runs = {}
    for k, df in sweep.runs.items():
        idx = np.unique(np.linspace(0, len(df) - 1, min(n_points, len(df))).round().astype(int))
        runs[k] = df.iloc[idx].reset_index(drop=True)
    return replace(sweep, runs=runs, final_values=sweep.finals())


def rung_grid(sweep: Sweep, rungs: int = RUNGS) -> np.ndarray:
    return sweep.budget * np.arange(1, rungs + 1) / rungs


# what Race._refit sets on an entry (a cache hit restores them)
_REFIT_FIELDS = ("fit", "forecast", "extra", "seed", "window", "identified", "why")


def cached_race_class():
    """:class:`rlcurves.Race` whose refits are shared through a cache of (run, rung) -> fit and
    forecast: a run's forecast at a rung depends only on its points, the budget and the
    calibration, not on the race's settings or the other runs, so every setting of a grid (and
    every sweep that holds the run) reuses it; the decisions are Race's own. Each run's forecast
    seed is its index in ``index`` (what Race gives the i-th run to arrive)."""
    from rlcurves import Race

    class CachedRace(Race):
        def __init__(self, *args, cache: dict, index: dict[str, int], **kwargs):
            super().__init__(*args, **kwargs)
            self._cache = cache
            self._index = index

        def _refit(self, e, i):
            key = tuple((n, self._rung(r), r.failed, r.ended) for n, r in e.runs.items())
            if key == e.key:
                return
            (run,) = e.runs.values()
            ck = (e.name, self._rung(run))
            hit = self._cache.get(ck)
            if hit is None:
                super()._refit(e, self._index[e.name])
                self._cache[ck] = tuple(getattr(e, f) for f in _REFIT_FIELDS)
                return
            e.key, e.fresh = key, True
            for f, v in zip(_REFIT_FIELDS, hit, strict=True):
                setattr(e, f, v)

    return CachedRace


def replay_race(
    sweep: Sweep,
    race_kws: dict,
    cache: dict | None = None,
    index: dict | None = None,
    on_report: Callable[[object], None] | None = None,
    rungs: int = RUNGS,
) -> tuple[Outcome, object]:
    """Race at every rung; a stopped run reports nothing more. ``cache`` (one per calibration and
    budget) shares the refits between settings and sweeps; ``index`` gives each run its forecast
    seed (default: its place in the sweep, as Race would); ``on_report`` sees every report;
    the race looks at ``rungs`` equal steps of the budget (pass Race the same ``rungs``)."""
    t0 = time.perf_counter()
    race = cached_race_class()(
        sweep.budget,
        cache={} if cache is None else cache,
        index={k: i for i, k in enumerate(sweep.runs)} if index is None else index,
        **race_kws,
    )
    used = {k: 0.0 for k in sweep.runs}
    stopped: set[str] = set()
    lo = -math.inf
    report = None
    for hi in rung_grid(sweep, rungs):
        for k, df in sweep.runs.items():
            if k in stopped:
                continue
            part = df[(df["compute"] > lo) & (df["compute"] <= hi)]
            if len(part):
                race.update(k, part["compute"].to_numpy(), part["reward"].to_numpy())
                used[k] = float(part["compute"].iloc[-1])
        lo = hi
        report = race.report()
        if on_report is not None:
            on_report(report)
        stopped |= set(report.stop)
    used = {k: (sweep.budget if k not in stopped else c) for k, c in used.items()}
    return score(sweep, "race", used, time.perf_counter() - t0), report


def _events(sweep: Sweep, rng: np.random.Generator) -> list[tuple[float, int, str, float]]:
    """Every evaluation of the sweep as (compute, tie-break, run, reward) in arrival order: by
    compute, runs that report at the same compute in a random order (``rng``)."""
    names = list(sweep.runs)
    rank = dict(zip(names, rng.permutation(len(names)).tolist(), strict=True))
    ev = [
        (float(c), rank[k], k, float(r))
        for k, df in sweep.runs.items()
        for c, r in zip(df["compute"], df["reward"], strict=True)
    ]
    return sorted(ev)


class _Trial:
    """The part of ``ray.tune.experiment.Trial`` the schedulers read offline."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id
        self.status = "RUNNING"

    def __repr__(self) -> str:
        return self.trial_id


class _Controller:
    """The part of Ray Tune's TuneController the schedulers call: no trial waits to run."""

    def get_live_trials(self) -> list:
        return []


def replay_ray(sweep: Sweep, make: Callable[[Sweep], object], method: str, seed: int) -> Outcome:
    """Feed a Ray Tune scheduler every result, in arrival order; STOP ends the trial."""
    from ray.tune.schedulers import TrialScheduler

    t0 = time.perf_counter()
    sched = make(sweep)
    trials = {k: _Trial(k) for k in sweep.runs}
    ctl = _Controller()
    for t in trials.values():
        sched.on_trial_add(ctl, t)
    used = {k: 0.0 for k in sweep.runs}
    stopped: set[str] = set()
    for c, _, k, r in _events(sweep, np.random.default_rng(seed)):
        if k in stopped:
            continue
        used[k] = c
        action = sched.on_trial_result(ctl, trials[k], {"compute": c, "reward": r})
        if action == TrialScheduler.STOP and c < sweep.budget:
            stopped.add(k)
    used = {k: (sweep.budget if k not in stopped else c) for k, c in used.items()}
    return score(sweep, method, used, time.perf_counter() - t0)


def make_asha(sweep: Sweep):
    from ray.tune.schedulers import ASHAScheduler

    # time in ninths of the budget: grace 1, max_t 9, rf 3 -> rungs at 1/9 and 1/3 (and the end)
    class _Scaled(ASHAScheduler):
        def on_trial_result(self, ctl, trial, result):
            result = {**result, "compute": 9 * result["compute"] / sweep.budget}
            return super().on_trial_result(ctl, trial, result)

    return _Scaled(
        time_attr="compute",
        metric="reward",
        mode="max",
        max_t=9,
        grace_period=1,
        reduction_factor=3,
    )


def make_median(sweep: Sweep):
    from ray.tune.schedulers import MedianStoppingRule

    return MedianStoppingRule(
        time_attr="compute",
        metric="reward",
        mode="max",
        grace_period=0.25 * sweep.budget,
        min_samples_required=3,
    )


def replay_optuna(sweep: Sweep, pruner_name: str, seed: int) -> Outcome:
    """A real Optuna study, one trial after another in a random order: each trial reports the
    run's latest evaluation at every rung (step 1..RUNGS) and is pruned when the pruner says."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    if pruner_name == "optuna_median":
        # n_warmup_steps: the first quarter of the budget, as Ray's median rule's grace period;
        # two finished trials before pruning (the default 5 would never prune a 4-6 run sweep)
        pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=RUNGS // 4)
    else:
        # rungs at 2, 6, 18 of 20 steps: ~1/9, ~1/3 (reduction factor 3, as ASHA)
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=2, reduction_factor=3)
    study = optuna.create_study(
        direction="maximize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    order = np.random.default_rng(seed).permutation(list(sweep.runs))
    rungs = rung_grid(sweep)
    used = {}
    for k in order:
        df = sweep.runs[k]
        trial = study.ask()
        used[k] = sweep.budget
        for step, hi in enumerate(rungs, start=1):
            seen = df[df["compute"] <= hi + 1e-9]
            if not len(seen):
                continue
            trial.report(float(seen["reward"].iloc[-1]), step)
            if step < RUNGS and trial.should_prune():
                used[k] = float(seen["compute"].iloc[-1])
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, float(df["reward"].iloc[-1]))
    used = {k: used[k] for k in sweep.runs}
    return score(sweep, pruner_name, used, time.perf_counter() - t0)


#: The schedulers Race is compared with, by key: what each row of the tables says.
OTHER_LABELS = {
    "asha": "Ray Tune ASHA (rf 3, rungs 1/9, 1/3)",
    "median": "Ray Tune median stopping rule (grace 25%)",
    "optuna_median": "Optuna MedianPruner (sequential, warm-up 25%)",
    "optuna_sha": "Optuna SuccessiveHalvingPruner (sequential, rf 3)",
}


def other_methods(sweeps: list[Sweep], n_orders: int) -> dict[str, list[Outcome]]:
    """Ray Tune's ASHA and median stopping rule and Optuna's two pruners on every sweep, in
    ``n_orders`` random orders each (keys of :data:`OTHER_LABELS`)."""
    others: dict[str, list[Outcome]] = {}
    for s in tqdm(sweeps, desc="ASHA, median, Optuna"):
        for seed in range(n_orders):
            for name, make in (("asha", make_asha), ("median", make_median)):
                others.setdefault(name, []).append(replay_ray(s, make, name, seed))
            for name in ("optuna_median", "optuna_sha"):
                others.setdefault(name, []).append(replay_optuna(s, name, seed))
    return others


# ---- the table -----------------------------------------------------------------------------------

N_ORDERS = 20  # random arrival/trial orders for the methods that depend on them
# the Race settings (alpha, require_identified, confirm), reported leave-one-family-out
GRID = tuple(
    (a, guard, confirm)
    for guard in (True, 0.4, False)
    for confirm in (None, 1)
    for a in (0.05, 0.1, 0.2, 0.3)
)
# Race's defaults as a GRID key (None: the rule's hold)
DEFAULT = (race_default("alpha"), race_default("require_identified"), None)


def summarize(outcomes: list[Outcome]) -> dict:
    """Per method: sweeps where the winner is kept, mean and worst regret, compute used. With
    several orders per sweep, 'kept' is the mean over orders (a fraction of a sweep)."""
    by_sweep: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_sweep.setdefault(o.sweep, []).append(o)
    kept = [np.mean([o.kept_winner for o in v]) for v in by_sweep.values()]
    reg = [np.mean([o.regret for o in v]) for v in by_sweep.values()]
    worst = max(o.regret for o in outcomes)
    used = [np.mean([o.compute_fraction for o in v]) for v in by_sweep.values()]
    return {
        "sweeps": len(by_sweep),
        "kept_winner": float(np.sum(kept)),
        "mean_regret": float(np.mean(reg)),
        "worst_regret": float(worst),
        "compute_used": float(np.mean(used)),
        "per_sweep": per_sweep(by_sweep),
    }


def per_sweep(by_sweep: dict[str, list[Outcome]]) -> dict[str, dict]:
    """Per sweep: winner kept, regret and compute (means over orders), and where each run was
    stopped (with one outcome)."""
    return {
        k: {
            "kept_winner": float(np.mean([o.kept_winner for o in v])),
            "regret": float(np.mean([o.regret for o in v])),
            "compute_used": float(np.mean([o.compute_fraction for o in v])),
            "stopped_at": v[0].stopped_at if len(v) == 1 else None,
        }
        for k, v in by_sweep.items()
    }


def calibrations(sweeps: list[Sweep], how: str = "family") -> dict[str, object]:
    """Each sweep's forecast calibration, never made on its own runs: the shipped records of the
    OTHER validation families only ("family", leave-one-family-out), or of every run outside the
    sweep ("sweep": what a user racing a new sweep has; runs of the same family, other
    launches); tau is refitted on the records kept."""
    from rlcurves.calibrate import default_calibration

    cal = default_calibration()  # the validation runs' (every sweep here logs a validation metric)
    if how == "family":  # every other family of the kind, as the calibration study's folds
        other = {f: cal.of_families([g for g in cal.families if g != f]) for f in FAMILY_OTHER}
        return {s.name: other[s.family] for s in sweeps}
    if how == "sweep":  # the shipped calibration keys the corpus's runs family/run
        return {s.name: cal.without([f"{s.family}/{r}" for r in s.sources]) for s in sweeps}
    raise ValueError(f"calibration must be 'family' or 'sweep', got {how!r}")


def _setting(key: tuple) -> str:
    alpha, guard, confirm = key
    g = {True: "guard on", False: "guard off"}.get(guard, f"guard before {guard:.0%}")
    return f"alpha {alpha:g}, {g}" + ("" if confirm is None else f", confirm {confirm}")


def lofo(race_grid: dict[tuple, list[Outcome]], sweeps: list[Sweep]) -> list[Outcome]:
    """Leave-one-family-out choice of the setting: for each family, the setting that used the
    least compute while keeping the winner in every sweep of the OTHER family (the default if
    none did); its outcomes on this family."""
    family = {s.name: s.family for s in sweeps}
    out = []
    for fam in sorted(set(family.values())):
        other = {k for k, f in family.items() if f != fam}

        def on(key, names):
            return [o for o in race_grid[key] if o.sweep in names]

        ok = [k for k in race_grid if all(o.kept_winner for o in on(k, other))]
        pick = min(
            ok,
            key=lambda k: np.mean([o.compute_fraction for o in on(k, other)]),
            default=DEFAULT,
        )
        mine = {k for k, f in family.items() if f == fam}
        print(f"  {fam} sweeps: setting chosen on the other family: {_setting(pick)}")
        out += [
            Outcome(**{**o.__dict__, "method": f"race ({_setting(pick)})"}) for o in on(pick, mine)
        ]
    return out


def table(rows: dict[str, dict]) -> str:
    lines = [
        "| method | winner kept (regret <= 0.01) | mean regret | worst regret | compute used |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        kept = r["kept_winner"]
        kept_s = (
            f"{kept:.0f} of {r['sweeps']}"
            if float(kept).is_integer()
            else (f"{kept:.1f} of {r['sweeps']}")
        )
        lines.append(
            f"| {name} | {kept_s} | {r['mean_regret']:.3f} | {r['worst_regret']:.3f} | "
            f"{r['compute_used']:.0%} |"
        )
    return "\n".join(lines)


def frontier_table(frontier: list[dict]) -> str:
    """The frontier as README shows it: one row per setting, winners kept and compute used with
    either calibration."""
    cells: dict[str, dict[str, str]] = {}
    for r in frontier:
        kept = r["kept_winner"]
        k = f"{kept:.0f}" if float(kept).is_integer() else f"{kept:.1f}"
        cells.setdefault(r["setting"], {})[r["calibration"]] = (
            f"{k} of {r['sweeps']}, {r['compute_used']:.0%}"
        )
    lines = [
        "| setting | calibrated on the other family | on the runs outside the sweep |",
        "|---|---|---|",
    ]
    for setting, c in cells.items():
        lines.append(f"| {setting} | {c.get('family', '-')} | {c.get('sweep', '-')} |")
    return "\n".join(lines)


def density_study(sweeps: list[Sweep], n_orders: int, logged: dict[str, dict]) -> dict:
    """Race at its defaults (forecasts calibrated on the other family), Ray Tune's median stopping
    rule and ASHA on every sweep thinned to each of :data:`DENSITIES` evaluations per run;
    ``logged``: the same three on the sweeps as logged. Evaluations per run -> method -> summary."""
    cals = calibrations(sweeps, "family")
    out = {"as logged": logged}
    for n in DENSITIES:
        thin = [thinned(s, n) for s in sweeps]
        race = [
            replay_race(t, {"calibration": cals[t.name]})[0]
            for t in tqdm(thin, desc=f"{n} evaluations per run", leave=False)
        ]
        out[str(n)] = {
            "race": summarize(race),
            **{
                name: summarize(
                    [replay_ray(t, make, name, seed) for t in thin for seed in range(n_orders)]
                )
                for name, make in (("median", make_median), ("asha", make_asha))
            },
        }
    return out


def density_table(density: dict) -> str:
    """Winners kept and compute used per evaluation density, as README shows it."""
    lines = [
        "| evaluations per run | Race (defaults) | Ray Tune median stopping rule | Ray Tune ASHA |",
        "|---|---|---|---|",
    ]
    for n, by in density.items():
        words = "as logged (MATH 41, GSM8K 472-505)" if n == "as logged" else n
        cells = " | ".join(
            f"{by[m]['kept_winner']:.3g} of {by[m]['sweeps']}, {by[m]['compute_used']:.0%}"
            for m in ("race", "median", "asha")
        )
        lines.append(f"| {words} | {cells} |")
    return "\n".join(lines)


def pit_score(draws: np.ndarray, value: float) -> tuple[float, float]:
    """The PIT of ``value`` under ``draws`` (kept off 0 and 1) and its normal score."""
    from scipy.stats import norm

    pit = (float(np.sum(draws < value)) + 0.5) / (len(draws) + 1)
    return pit, float(norm.ppf(pit))


def forecast_errors(sweeps: list[Sweep]) -> pd.DataFrame:
    """Every forecast Race makes at its defaults (forecasts calibrated on the other family, the
    sweep's own tau) at every rung, scored against the run's final value. Nothing is stopped
    (``min_fraction=1``: the rule is never past its first fraction; the forecasts do not depend
    on the stops), so every run is forecast at every rung it has a fit at. One row per (sweep,
    rung, run): the PIT of the final value under the forecast's draws, its normal score ``z``,
    and the draws (for the difference intervals of :func:`independence`)."""
    cals = calibrations(sweeps, "family")
    rows = []
    for s in tqdm(sweeps, desc="forecast errors", leave=False):
        finals = s.finals()
        reports: list = []
        replay_race(s, {"calibration": cals[s.name], "min_fraction": 1.0}, on_report=reports.append)
        for rung, rep in enumerate(reports, start=1):
            for k, fc in rep.forecasts.items():
                if fc.predictive is None:  # no draws: Race has no forecast of this run yet
                    continue
                draws = np.asarray(fc.predictive.column(0), float)
                pit, z = pit_score(draws, finals[k])
                rows.append(
                    {
                        "sweep": s.name,
                        "family": s.family,
                        "rung": rung,
                        "fraction": rung / RUNGS,
                        "run": k,
                        "final": finals[k],
                        "pit": pit,
                        "z": z,
                        "draws": draws,
                    }
                )
    return pd.DataFrame(rows)


def error_pairs(errors: pd.DataFrame, level: float = 0.9, seed: int = 0) -> pd.DataFrame:
    """The pairs of runs of one sweep forecast at the same rung: both normal scores, and whether
    the difference of their finals fell outside the ``level`` interval of the difference of
    their forecasts taken as independent (the draws of one paired with a permutation of the
    other's, as :func:`rlcurves.decide.prob_regret_above` pairs them)."""
    rng = np.random.default_rng(seed)
    lo, hi = (1 - level) / 2, (1 + level) / 2
    out = []
    for (sweep, rung), g in errors.groupby(["sweep", "rung"], sort=False):
        recs = g.to_dict("records")
        for i in range(len(recs)):
            for j in range(i + 1, len(recs)):
                a, b = recs[i], recs[j]
                diff = a["draws"] - rng.permutation(b["draws"])
                u = float(np.mean(diff < a["final"] - b["final"]))
                out.append(
                    {
                        "sweep": sweep,
                        "family": a["family"],
                        "rung": rung,
                        "run_a": a["run"],
                        "run_b": b["run"],
                        "z_a": a["z"],
                        "z_b": b["z"],
                        "outside": not lo <= u <= hi,
                    }
                )
    return pd.DataFrame(out)


def _corr(rows: np.ndarray) -> float:
    """Correlation of the first two columns."""
    return float(np.corrcoef(rows[:, 0], rows[:, 1])[0, 1])


def independence(errors: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """Per family: the correlation of two runs' forecast errors (normal scores of the PIT) at the
    same rung of one sweep; the spread of the scores; and how often the difference of two finals
    falls outside the 90% interval of the difference of two independent forecasts (nominal
    10%). The 90% intervals come from a bootstrap over runs: each sweep's runs are resampled
    (a run with all its rungs, hence all its pairs: the pairs of one run share its errors) and
    the pairs of distinct runs among them kept."""
    pairs = error_pairs(errors, seed=seed)
    rng = np.random.default_rng(seed)
    out = {}
    for fam, g in pairs.groupby("family", sort=True):
        cols = ["z_a", "z_b", "outside"]
        by_pair = {
            key: v[cols].to_numpy(float) for key, v in g.groupby(["sweep", "run_a", "run_b"])
        }
        runs = {sw: sorted({*v["run_a"], *v["run_b"]}) for sw, v in g.groupby("sweep")}
        boot_corr, boot_out = [], []
        for _ in range(n_boot):
            parts = []
            for sw, names in runs.items():
                pick = [names[i] for i in rng.integers(len(names), size=len(names))]
                for i in range(len(pick)):
                    for j in range(i + 1, len(pick)):
                        if (sw, pick[i], pick[j]) in by_pair:
                            parts.append(by_pair[sw, pick[i], pick[j]])
                        elif (sw, pick[j], pick[i]) in by_pair:
                            parts.append(by_pair[sw, pick[j], pick[i]])
            rows = np.concatenate(parts)
            boot_corr.append(_corr(rows))
            boot_out.append(float(rows[:, 2].mean()))
        e = errors[errors["family"] == fam]
        out[fam] = {
            "sweeps": len(runs),
            "run_pairs": len(by_pair),
            "pairs": len(g),
            "z_sd": float(e["z"].std()),
            "correlation": _corr(g[cols].to_numpy(float)),
            "correlation_ci": [float(q) for q in np.quantile(boot_corr, [0.05, 0.95])],
            "difference_outside_90": float(g["outside"].mean()),
            "difference_outside_90_ci": [float(q) for q in np.quantile(boot_out, [0.05, 0.95])],
        }
    return out


def independence_table(indep: dict) -> str:
    """:func:`independence` per family, as README shows it."""
    lines = [
        "| family | sweeps, pairs of runs | correlation of two runs' errors | "
        "finals' difference outside its 90% interval | spread of one run's errors (z sd) |",
        "|---|---|---|---|---|",
    ]
    for fam, r in indep.items():
        c_lo, c_hi = r["correlation_ci"]
        o_lo, o_hi = r["difference_outside_90_ci"]
        lines.append(
            f"| {fam.upper()} | {r['sweeps']}, {r['run_pairs']} | "
            f"{r['correlation']:+.2f} [{c_lo:+.2f}, {c_hi:+.2f}] | "
            f"{r['difference_outside_90']:.1%} [{o_lo:.1%}, {o_hi:.1%}] | {r['z_sd']:.2f} |"
        )
    return "\n".join(lines)


def time_report(sweeps: list[Sweep], k: int = 7, repeat: int = 5) -> dict:
    """Seconds of one ``report()`` that refits K runs (every run crossed a rung), and of one
    that refits none (cached); the runs: the first K MATH runs at half the budget."""
    from benchmarks._common import median_time
    from rlcurves import Race

    runs = {}
    for s in sweeps:
        if s.family == "math":
            for name, df in s.runs.items():
                runs.setdefault(name, df[df["compute"] <= s.budget / 2])
    runs = dict(list(runs.items())[:k])

    def full():
        race = Race(200.0)
        for name, df in runs.items():
            race.update(name, df["compute"].to_numpy(), df["reward"].to_numpy())
        return race.report()

    race = Race(200.0)
    for name, df in runs.items():
        race.update(name, df["compute"].to_numpy(), df["reward"].to_numpy())
    race.report()
    return {
        "k": len(runs),
        "points_per_run": int(np.mean([len(df) for df in runs.values()])),
        "report_refit_all_s": median_time(full, repeat=repeat),
        "report_cached_s": median_time(race.report, repeat=repeat),
    }


CALIBRATIONS = {
    "family": "forecasts calibrated on the other family",
    "sweep": "forecasts calibrated on every run outside the sweep",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="two sweeps, Race at its defaults only, 3 orders"
    )
    parser.add_argument("--figure", help="write the race of math_lr to this PNG")
    parser.add_argument(
        "--calibration",
        choices=("family", "sweep", "both"),
        default="both",
        help="the forecasts' calibration: the other family's runs, every run outside the sweep, "
        "or both (default)",
    )
    parser.add_argument("--out", default=str(RESULTS / "race_replay.json"), help="JSON results")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    sweeps = load_sweeps()
    n_orders = N_ORDERS
    settings = GRID
    if args.quick:
        sweeps = [s for s in sweeps if s.name in ("math_lr", "gsm8k_budget")]
        n_orders, settings = 3, (DEFAULT,)
    hows = ("family", "sweep") if args.calibration == "both" else (args.calibration,)
    grids: dict[str, dict[tuple, list[Outcome]]] = {}
    seconds = []
    for how in hows:
        cals = calibrations(sweeps, how)
        grid = grids.setdefault(how, {k: [] for k in settings})
        for s in tqdm(sweeps, desc=f"Race ({how} calibration)"):
            cache: dict = {}
            for key in settings:
                kws = {
                    "calibration": cals[s.name],
                    "alpha": key[0],
                    "require_identified": key[1],
                    "confirm": key[2],
                }
                out, rep = replay_race(s, kws, cache)
                grid[key].append(out)
                seconds.append(out.seconds)
                if args.figure and s.name == "math_lr" and key == DEFAULT and how == hows[0]:
                    import matplotlib.pyplot as plt

                    fig = rep.plot(
                        compute_label="GRPO step", reward_label="validation accuracy (MATH)"
                    )
                    fig.axes[0].set_title(
                        "math_lr replayed with Race (defaults): stopped runs marked x, "
                        "forecasts at the budget",
                        fontsize=10,
                    )
                    fig.savefig(args.figure, dpi=110)
                    plt.close(fig)
    others = other_methods(sweeps, n_orders)
    labels = OTHER_LABELS
    rows = {}
    for how, grid in grids.items():
        rows[f"Race (defaults), {CALIBRATIONS[how]}"] = summarize(grid[DEFAULT])
        if len(settings) > 1:
            print(f"{CALIBRATIONS[how]}:")
            rows[f"Race, setting chosen on the other family, {CALIBRATIONS[how]}"] = summarize(
                lofo(grid, sweeps)
            )
    rows.update({labels[k]: summarize(v) for k, v in others.items()})
    print(table(rows))
    for how, grid in grids.items():
        print(f"\nRace per sweep (defaults, {CALIBRATIONS[how]}):")
        for o in grid[DEFAULT]:
            print(
                f"  {o.sweep}: regret {o.regret:.3f}, compute {o.compute_fraction:.0%}, stopped "
                f"{ {k: round(v, 2) for k, v in o.stopped_at.items()} }, {o.seconds:.1f} s"
            )
    print("\nThe frontier (all sweeps; not a choice: see the rows chosen on the other family):")
    frontier: list[dict] = []
    for how, grid in grids.items():
        for key, v in grid.items():
            r = summarize(v)
            frontier.append({"calibration": how, "setting": _setting(key), **r})
            print(
                f"  {how:6s} {_setting(key):40s} kept {r['kept_winner']:.0f}/{r['sweeps']}, "
                f"worst regret {r['worst_regret']:.3f}, compute {r['compute_used']:.0%} (per "
                f"sweep {', '.join(f'{x:.0%}' for x in _per_sweep(r))})"
            )
    density = {}
    if not args.quick and "family" in grids:
        logged = {
            "race": summarize(grids["family"][DEFAULT]),
            "median": summarize(others["median"]),
            "asha": summarize(others["asha"]),
        }
        density = density_study(sweeps, n_orders, logged)
        print("\nEvaluations per run (forecasts calibrated on the other family):")
        print(density_table(density))
    indep = {}
    if not args.quick:
        indep = independence(forecast_errors(sweeps))
        print("\nForecast errors of two runs of one sweep at the same rung (Race's forecasts):")
        print(independence_table(indep))
    cost = time_report(load_sweeps())
    print(
        f"\none report() refitting K={cost['k']} runs ({cost['points_per_run']} points each): "
        f"{cost['report_refit_all_s']:.2f} s; a report with nothing new: "
        f"{cost['report_cached_s'] * 1e3:.2f} ms"
    )
    payload = {
        "report_cost": cost,
        "sweeps": {
            s.name: {
                "family": s.family,
                "budget": s.budget,
                "unit": s.unit,
                "runs": list(s.runs),
                "finals": s.finals(),
            }
            for s in sweeps
        },
        "table": rows,
        "frontier": frontier,
        "density": density,
        "independence": indep,
        "orders": n_orders,
        "race_seconds_per_sweep": float(np.mean(seconds or [0.0])),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from benchmarks._common import machine

    Path(args.out).write_text(
        json.dumps({"machine": machine(), **payload}, indent=2, default=float)
    )
    print(f"\nwritten {args.out}")


def _per_sweep(r: dict) -> list[float]:
    return [v["compute_used"] for v in r["per_sweep"].values()]


if __name__ == "__main__":
    main()
