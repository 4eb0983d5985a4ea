"""Today's ``Race``: the reference :mod:`benchmarks.race_scale` times and
``tests/test_race_scale.py`` compares the library's ``Race`` with.

``rlcurves/race.py`` and the sweep-level functions of ``rlcurves/decide.py`` as they were at
commit 33ce880 (issue 41's Race, before issue 43's sweep-scale work: a report that refits only
the runs with new evaluations and prices the sweep once per report), generated from that commit
by ``scripts/make_race_reference.py`` (``ast.unparse`` with docstrings, plotting and the
report's printing left out): every statement of the report's code path is the commit's. The
per-run forecasting it calls (``rlcurves.forecast``, ``rlcurves.calibrate.window_records``, the
fits, ``rlcurves.decide.decide``) is the library's own, the same code in both.
"""

# ruff: noqa
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from rlcurves._format import format_compute
from rlcurves.decide import (
    CONTINUE,
    DEFAULT_RULE,
    TOO_EARLY,
    Decision,
    Hysteresis,
    StopRule,
    _check_sign,
    _check_tolerance,
    _draws as _level_draws,
    decide,
)
from rlcurves.errors import RLCurvesError
from rlcurves.forecast import Forecast
from rlcurves.predictive import Predictive

COMMIT = "33ce880"


# ---- rlcurves/decide.py (sweep level) ----


def prob_best(runs: Mapping[str, Level], *, sign: int = 1, i: int = 0, seed: int = 0) -> dict:
    _check_sign(sign)
    if not runs:
        return {}
    names, m = _draw_matrix(runs, sign, seed, i)
    best = m.max(axis=1, keepdims=True)
    ties = (m == best).astype(float)
    share = ties / ties.sum(axis=1, keepdims=True)
    return dict(zip(names, share.mean(axis=0).tolist(), strict=True))


def _draw_matrix(
    runs: Mapping[str, Level], sign: int, seed: int, i: int = 0
) -> tuple[list[str], np.ndarray]:
    _check_sign(sign)
    names = list(runs)
    draws = [sign * _level_draws(runs[k], i) for k in names]
    n = max((d.size for d in draws))
    rng = np.random.default_rng(seed)
    cols = [d if d.size == n else rng.choice(d, n) for d in draws]
    return (names, np.column_stack([rng.permutation(c) for c in cols]))


def _risk(m: np.ndarray, stop: np.ndarray, tolerance: float) -> float:
    if not stop.any():
        return 0.0
    if stop.all():
        return 1.0
    return float(np.mean(m[:, stop].max(axis=1) - m[:, ~stop].max(axis=1) > tolerance))


def prob_regret_above(
    runs: Mapping[str, Level],
    stopped: Collection[str],
    *,
    tolerance: float = 0.0,
    sign: int = 1,
    seed: int = 0,
) -> float:
    _check_tolerance(tolerance)
    unknown = [s for s in stopped if s not in runs]
    if unknown:
        raise RLCurvesError(f"stopped names {unknown} are not among the runs {list(runs)}")
    names, m = _draw_matrix(runs, sign, seed)
    return _risk(m, np.isin(names, list(stopped)), tolerance)


def stop_set(
    runs: Mapping[str, Level],
    candidates: Sequence[str],
    *,
    alpha: float,
    tolerance: float = 0.0,
    stopped: Collection[str] = (),
    sign: int = 1,
    seed: int = 0,
    spent: float | None = None,
) -> tuple[list[str], float]:
    if not 0 <= alpha < 1:
        raise RLCurvesError(f"alpha must be in [0, 1), e.g. 0.05; got {alpha!r}")
    if spent is not None and (not 0 <= spent <= 1):
        raise RLCurvesError(f"spent must be a probability in [0, 1], got {spent!r}")
    names, m = _draw_matrix(runs, sign, seed)
    mask = np.isin(names, list(stopped))
    risk = before = _risk(m, mask, tolerance)
    limit = alpha if spent is None else alpha - spent + before
    chosen = []
    for c in candidates:
        if c not in runs:
            raise RLCurvesError(f"candidate {c!r} is not among the runs {list(runs)}")
        trial = mask | (np.asarray(names) == c)
        if trial.all():
            continue
        r = _risk(m, trial, tolerance)
        if r <= limit:
            mask, risk = (trial, r)
            chosen.append(c)
    return (chosen, risk)


def sweep_baseline(
    runs: Mapping[str, Level], name: str, *, tolerance: float = 0.0, sign: int = 1, seed: int = 0
) -> np.ndarray:
    _check_tolerance(tolerance)
    if name not in runs:
        raise RLCurvesError(f"{name!r} is not among the runs {list(runs)}")
    if len(runs) < 2:
        raise RLCurvesError(f"no run besides {name!r} to compare with")
    names, m = _draw_matrix(runs, sign, seed)
    rest = np.asarray(names) != name
    return sign * (m[:, rest].max(axis=1) + tolerance)


# ---- rlcurves/race.py ----

LEADER = "leader"


STOP = "stop"


FINISHED = "finished"


ENDED = "ended"


FAILED = "failed"


SILENT = "silent"


ADVICE = (TOO_EARLY, CONTINUE, LEADER, STOP, FINISHED, ENDED, FAILED, SILENT)


@dataclass(eq=False)
class _Run:
    name: str
    compute: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)
    failed: str | None = None
    ended: bool = False
    stopped_at: float | None = None

    @property
    def now(self) -> float:
        return max(self.compute) if self.compute else 0.0


@dataclass(eq=False)
class _Entry:
    name: str
    runs: dict[str, _Run] = field(default_factory=dict)
    stopped: bool = False
    hold: Hysteresis = field(default_factory=Hysteresis)
    decision: Decision | None = None
    fresh: bool = False
    reason: str = ""
    key: tuple = ()
    fit: Any = None
    forecast: Forecast | None = None
    draws: np.ndarray | None = None
    identified: bool = False
    why: str = ""
    extra: np.ndarray | None = None
    seed: int = 0
    window: pd.DataFrame | None = None
    used_info: dict = field(default_factory=dict)

    @property
    def now(self) -> float:
        return max((r.now for r in self.runs.values()), default=0.0)

    @property
    def n_points(self) -> int:
        return sum((len(r.compute) for r in self.runs.values()))

    @property
    def failed(self) -> bool:
        return all((r.failed is not None for r in self.runs.values()))

    def points(self) -> pd.DataFrame:
        frames = [
            pd.DataFrame({"compute": r.compute, "reward": r.reward, "run": r.name})
            for r in self.runs.values()
            if r.failed is None or r.compute
        ]
        df = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame({"compute": [], "reward": [], "run": []})
        )
        return (
            df.astype({"compute": float, "reward": float})
            .sort_values("compute", kind="stable")
            .reset_index(drop=True)
        )


@dataclass(eq=False)
class RaceReport:
    stop: list[str]
    stopped_now: list[str]
    leader: str | None
    table: pd.DataFrame
    compute_saved: float
    fraction_saved: float
    risk: float
    budget: float
    level: float
    alpha: float
    tolerance: float
    points: dict[str, pd.DataFrame] = field(default_factory=dict)
    fits: dict[str, Any] = field(default_factory=dict)
    forecasts: dict[str, Forecast] = field(default_factory=dict)
    stop_compute: dict[str, float] = field(default_factory=dict)
    higher_is_better: bool = True
    tau: float | None = None
    tau_calibration: float | None = None
    tau_backtests: int = 0
    spent: float = 0.0


class Race:
    def __init__(
        self,
        budget: float,
        *,
        alpha: float = 0.05,
        tolerance: float = 0.01,
        level: float = 0.9,
        rule: StopRule | None = None,
        min_fraction: float | None = None,
        min_points: int | None = None,
        confirm: int | None = None,
        require_identified: bool | float = 0.4,
        higher_is_better: bool = True,
        n_samples: int = 300,
        seed: int = 0,
        calibration: Calibration | None = None,
        fit_kws: dict[str, Any] | None = None,
        rungs: int | None = 20,
        stale_after: float | None = None,
        progress: bool = False,
        misspecification: str = "sweep",
        tau_prior_runs: float = 1.0,
    ) -> None:
        budget = float(budget)
        if not (math.isfinite(budget) and budget > 0):
            raise RLCurvesError(f"budget must be a positive compute value, got {budget}")
        if not 0 <= alpha < 1:
            raise RLCurvesError(f"alpha must be in [0, 1), e.g. 0.05; got {alpha}")
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise RLCurvesError(f"tolerance must be a reward difference >= 0, got {tolerance}")
        if not 0 < level < 1:
            raise RLCurvesError(f"level must be in (0, 1), e.g. 0.9; got {level}")
        if min_fraction is not None and (not 0 <= min_fraction <= 1):
            raise RLCurvesError(f"min_fraction must be in [0, 1], got {min_fraction}")
        for name, value in (
            ("min_points", min_points),
            ("confirm", confirm),
            ("n_samples", n_samples),
        ):
            if value is not None and int(value) < 1:
                raise RLCurvesError(f"{name} must be a positive integer, got {value}")
        if rule is not None and (not isinstance(rule, StopRule)):
            raise RLCurvesError(f"rule must be a rlcurves.decide.StopRule, got {rule!r}")
        changes = {
            k: v
            for k, v in (
                ("min_fraction", min_fraction),
                ("min_points", min_points),
                ("hold", confirm),
            )
            if v is not None
        }
        if confirm is not None and int(confirm) == 1:
            changes["hold_span"] = 0.0
        self.rule = (DEFAULT_RULE if rule is None else rule).replace(**changes)
        if stale_after is not None and (not stale_after > 0):
            raise RLCurvesError(
                f"stale_after must be a positive number of seconds, got {stale_after}"
            )
        self.budget = budget
        self.alpha = float(alpha)
        self.tolerance = float(tolerance)
        self.level = float(level)
        if isinstance(require_identified, bool):
            guard = 1.0 if require_identified else 0.0
        else:
            guard = float(require_identified)
            if not 0 <= guard <= 1:
                raise RLCurvesError(
                    f"require_identified must be a fraction of the budget in [0, 1], before which an unidentified fit is not stopped (1 or True: always, 0 or False: never); got {require_identified!r}"
                )
        self.require_identified = require_identified
        self._guard_until = guard
        self.sign = 1 if higher_is_better else -1
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self.calibration = calibration
        self.fit_kws = dict(fit_kws or {})
        if rungs is not None and int(rungs) < 1:
            raise RLCurvesError(f"rungs must be a positive integer or None, got {rungs}")
        self.rungs = None if rungs is None else int(rungs)
        self.stale_after = stale_after
        self.progress = progress
        if misspecification not in ("sweep", "calibration"):
            raise RLCurvesError(
                f"misspecification must be 'sweep' (tau refitted on the sweep's own backtests) or 'calibration' (the calibration's tau); got {misspecification!r}"
            )
        self.misspecification = misspecification
        if not (math.isfinite(tau_prior_runs) and tau_prior_runs > 0):
            raise RLCurvesError(
                f"tau_prior_runs must be a positive number of runs (how much the calibration weighs against the sweep's own backtests), got {tau_prior_runs}"
            )
        self.tau_prior_runs = float(tau_prior_runs)
        self._entries: dict[str, _Entry] = {}
        self._spent = 0.0
        self._run_entry: dict[str, str] = {}
        self._report: RaceReport | None = None
        self._state: tuple = ()
        self._clock = time.monotonic()

    @property
    def min_fraction(self) -> float:
        return self.rule.min_fraction

    @property
    def min_points(self) -> int:
        return self.rule.min_points

    @property
    def confirm(self) -> int:
        return self.rule.hold

    @property
    def runs(self) -> list[str]:
        return list(self._run_entry)

    def update(
        self, name: str, compute: ArrayLike, reward: ArrayLike, *, group: str | None = None
    ) -> None:
        name = str(name)
        c = np.atleast_1d(np.asarray(compute, dtype=float))
        r = np.atleast_1d(np.asarray(reward, dtype=float))
        if c.shape != r.shape or c.ndim != 1:
            raise RLCurvesError(
                f"compute and reward of run {name!r} must have the same length, got {c.shape} and {r.shape}"
            )
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(r))) or np.any(c < 0):
            raise RLCurvesError(
                f"compute and reward of run {name!r} must be finite and compute >= 0; got compute {c.tolist()[:5]}, reward {r.tolist()[:5]}"
            )
        run = self._run(name, group)
        run.compute.extend(c.tolist())
        run.reward.extend(r.tolist())
        run.last_seen = time.monotonic()

    def _run(self, name: str, group: str | None) -> _Run:
        entry_name = self._run_entry.get(name)
        wanted = name if group is None else str(group)
        if entry_name is not None:
            if group is not None and entry_name != wanted:
                raise RLCurvesError(
                    f"run {name!r} was added to group {entry_name!r}; it cannot move to group {wanted!r}"
                )
            return self._entries[entry_name].runs[name]
        if group is not None and group in self._run_entry and (group != name):
            raise RLCurvesError(f"group {group!r} is already the name of a run; name it otherwise")
        if group is None and name in self._entries:
            raise RLCurvesError(f"{name!r} is already the name of a group; name the run otherwise")
        entry = self._entries.setdefault(
            wanted, _Entry(wanted, hold=Hysteresis.for_rule(self.rule))
        )
        entry.runs[name] = _Run(name)
        self._run_entry[name] = wanted
        return entry.runs[name]

    def fail(self, name: str, reason: str = "crashed") -> None:
        run = self._known(name)
        run.failed = str(reason) or "failed"

    def end(self, name: str) -> None:
        self._known(name).ended = True

    def _known(self, name: str) -> _Run:
        entry = self._run_entry.get(str(name))
        if entry is None:
            raise RLCurvesError(f"no run {name!r} in the race; runs: {self.runs}")
        return self._entries[entry].runs[str(name)]

    def report(self) -> RaceReport:
        from tqdm.auto import tqdm

        self._clock = time.monotonic()
        state = tuple(
            (
                (n, self._rung(r), r.failed, r.ended, self._is_silent(r))
                for e in self._entries.values()
                for n, r in e.runs.items()
            )
        )
        if self._report is not None and state == self._state:
            return self._report
        live = [e for e in self._entries.values() if not e.failed]
        for e in self._entries.values():
            e.fresh = False
        for i, e in enumerate(tqdm(live, desc="race refits", disable=not self.progress)):
            self._refit(e, i)
        self._report = self._decide()
        self._state = state
        return self._report

    def _rung(self, run: _Run) -> int | float:
        if self.rungs is None:
            return len(run.compute)
        return min(math.floor(run.now / self.budget * self.rungs + 1e-09), self.rungs)

    def _is_silent(self, run: _Run) -> bool:
        return (
            self.stale_after is not None
            and run.failed is None
            and (not run.ended)
            and (run.now < self.budget)
            and (self._clock - run.last_seen > self.stale_after)
        )

    def _refit(self, e: _Entry, i: int) -> None:
        from rlcurves.forecast import forecast
        from rlcurves.monitor import identified

        key = tuple(((n, self._rung(r), r.failed, r.ended) for n, r in e.runs.items()))
        if key == e.key:
            return
        e.key = key
        e.fresh = True
        pts = e.points()
        pts = pts[pts["run"].isin([n for n, r in e.runs.items() if r.failed is None])]
        e.fit = e.forecast = e.draws = e.extra = e.window = None
        e.identified, e.why = (False, "")
        e.seed = seed = self.seed + 7919 * (i + 1)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit, extra = self._fit(e, pts, seed)
                fc = forecast(
                    fit,
                    self.budget,
                    level=self.level,
                    n=self.n_samples,
                    seed=seed,
                    progress=False,
                    calibration=self.calibration,
                )
        except RLCurvesError as exc:
            e.why = f"no fit yet: {exc}"
            return
        e.fit, e.forecast, e.extra = (fit, fc, extra)
        e.identified, e.why = identified(fit)
        if self.misspecification == "sweep":
            e.window = self._window(pts, seed)
        if fc.predictive is None:
            e.identified = False
            e.why = e.why or "the forecast interval is unbounded (too few points)"

    def _window(self, pts: pd.DataFrame, seed: int) -> pd.DataFrame | None:
        from rlcurves.calibrate import window_records

        frames = [
            window_records(
                g["compute"].to_numpy(float),
                g["reward"].to_numpy(float),
                str(run),
                seed=seed,
                fit_kwargs=self.fit_kws,
            )
            for run, g in pts.groupby("run", sort=True)
            if len(g) >= self.rule.min_points
        ]
        frames = [f for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else None

    def _draws(self, e: _Entry, tau: float | None) -> np.ndarray:
        fc = e.forecast
        d = fc.predictive.column(0)
        info = fc.info
        e.used_info = {}
        if tau is not None and "scale" in info and ("tau" in info):
            scale = float(np.ravel(info["scale"])[0])
            g = max(float(np.ravel(info.get("growth", info["distance"]))[0]), 0.0)
            base = max(scale**2 - info["tau"] ** 2 * g, 1e-16)
            mean = float(fc.mean)
            used = math.sqrt(base + tau**2 * g)
            d = np.clip(mean + (d - mean) * used / scale, *_range(e.fit))
            e.used_info = {
                "tau": np.full(np.shape(info["tau"]), tau),
                "scale": np.full(np.shape(info["scale"]), used),
            }
        if e.extra is not None:
            rng = np.random.default_rng(e.seed)
            d = np.clip(d + rng.permutation(np.resize(e.extra, d.size)), *_range(e.fit))
        return d

    def _used(self, e: _Entry) -> Forecast:
        fc = e.forecast
        if e.draws is None or fc is None or fc.predictive is None:
            return fc
        pred = fc.predictive
        lower, upper = _interval(e.draws, self.level)
        return replace(
            fc,
            lower=np.full(np.shape(fc.lower), lower) if np.ndim(fc.lower) else lower,
            upper=np.full(np.shape(fc.upper), upper) if np.ndim(fc.upper) else upper,
            info={**fc.info, **e.used_info},
            predictive=Predictive(pred.at, e.draws[:, None], pred.quantity, pred.info),
        )

    def _sweep_tau(self) -> tuple[float | None, int]:
        if self.misspecification != "sweep":
            return (None, 0)
        frames = [e.window for e in self._entries.values() if e.window is not None]
        records = pd.concat(frames, ignore_index=True) if frames else None
        tau = self._calibration().tau_with(records, prior_runs=self.tau_prior_runs)
        return (tau, 0 if records is None else len(records))

    def _calibration(self) -> Calibration:
        from rlcurves.calibrate import default_calibration

        return default_calibration() if self.calibration is None else self.calibration

    def _fit(self, e: _Entry, pts: pd.DataFrame, seed: int):
        from rlcurves.fit import fit_sigmoid
        from rlcurves.model import sigmoid
        from rlcurves.runs import fit_runs

        counts = pts.groupby("run")["compute"].size()
        seeds = [str(n) for n, k in counts.items() if k >= self.rule.min_points]
        if len(seeds) < 2:
            fit = fit_sigmoid(
                pts["compute"].to_numpy(), pts["reward"].to_numpy(), label=e.name, **self.fit_kws
            )
            return (fit, None)
        rf = fit_runs(
            pts[pts["run"].isin(seeds)],
            n_boot=self.n_samples,
            seed=seed,
            label=e.name,
            per_run=False,
            **self.fit_kws,
        )
        s = rf.samples
        curves = sigmoid(self.budget, s["A"], s["B"], s["C_mid"], s["R0"])
        curves = np.asarray(curves, dtype=float)
        return (rf.pooled, curves - curves.mean())

    def _decide(self) -> RaceReport:
        entries = list(self._entries.values())
        status = {e.name: self._status(e) for e in entries}
        tau, n_backtests = self._sweep_tau()
        for e in entries:
            if e.forecast is not None and e.forecast.predictive is not None:
                e.draws = self._draws(e, tau)
        with_draws = {
            e.name: e.draws
            for e in entries
            if e.draws is not None and status[e.name] not in (FAILED, SILENT)
        }
        p_best = prob_best(with_draws, sign=self.sign, seed=self.seed) if with_draws else {}
        racing = [k for k in p_best if status[k] != "stopped"] or list(p_best)
        leader = (
            max(racing, key=lambda k: (p_best[k], self.sign * float(np.mean(with_draws[k]))))
            if racing
            else None
        )
        stopped = [k for k in with_draws if status[k] == "stopped"]
        kept = {
            k: d
            for k, d in with_draws.items()
            if status[k] != "stopped" and (self._entries[k].identified or self._guard_until == 0)
        }
        raw = {e.name: self._advise(e, status[e.name], leader, kept) for e in entries}
        advised = [k for k, d in raw.items() if d is not None and d.stop and (k in with_draws)]
        counted = {k: d for k, d in with_draws.items() if k in {*stopped, *kept, *advised}}
        candidates = sorted(
            advised, key=lambda k: (p_best.get(k, 0.0), self.sign * float(np.mean(counted[k])))
        )
        proposal: list[str] = []
        if candidates:
            proposal, _ = stop_set(
                counted,
                candidates,
                alpha=self.alpha,
                tolerance=self.tolerance,
                stopped=stopped,
                sign=self.sign,
                seed=self.seed,
                spent=self._spent,
            )
        stopped_now: list[str] = []
        for e in entries:
            d = raw[e.name]
            if d is None or not d.stop or e.name not in proposal:
                e.hold.reset()
                if d is not None and d.stop:
                    d = replace(d, advice=CONTINUE, reason=self._refused(e, d, p_best))
                e.decision = d
                continue
            if e.fresh:
                e.decision = e.hold.update(d)
            if e.decision is not None and e.decision.stop:
                stopped_now.append(e.name)
        risk = 0.0
        if counted:
            for k in stopped_now:
                e = self._entries[k]
                e.stopped = True
                status[k] = "stopped"
                for r in e.runs.values():
                    r.stopped_at = r.now
            kws = {"tolerance": self.tolerance, "sign": self.sign, "seed": self.seed}
            risk = prob_regret_above(counted, [k for k in counted if status[k] == "stopped"], **kws)
            if stopped_now:
                risk_before = prob_regret_above(counted, stopped, **kws)
                self._spent += max(risk - risk_before, 0.0)
            for k in stopped_now:
                e = self._entries[k]
                e.reason = f"stopped at {e.now / self.budget:.0%} of the budget: p(best) = {p_best.get(k, 0.0):.3f}; {e.decision.reason}; the stops of this report raise p(a run stopped would end more than {self.tolerance:g} above every run kept) from {risk_before:.3f} to {risk:.3f}: alpha spent {self._spent:.3f} of {self.alpha:g}; the leader {leader}'s forecast {_fc_words(self._entries[leader], self.level)}"
        rows = [self._row(e, status[e.name], p_best, leader) for e in entries]
        table = pd.DataFrame(
            rows,
            columns=[
                "run",
                "runs",
                "status",
                "advice",
                "compute",
                "fraction",
                "n_points",
                "mean",
                "lower",
                "upper",
                "p_best",
                "reason",
            ],
        )
        order = np.argsort(
            -self.sign * table["mean"].fillna(-self.sign * np.inf).to_numpy(), kind="stable"
        )
        table = table.iloc[order].reset_index(drop=True)
        stop_runs = [
            n
            for e in entries
            if e.stopped
            for n, r in e.runs.items()
            if r.failed is None and (not r.ended) and (r.now < self.budget)
        ]
        stop_compute = {
            n: r.stopped_at
            for e in entries
            if e.stopped
            for n, r in e.runs.items()
            if r.stopped_at is not None
        }
        saved = float(sum((max(self.budget - c, 0.0) for c in stop_compute.values())))
        n_runs = sum((len(e.runs) for e in entries))
        return RaceReport(
            stop=stop_runs,
            stopped_now=stopped_now,
            leader=leader,
            table=table,
            compute_saved=saved,
            fraction_saved=saved / (n_runs * self.budget) if n_runs else 0.0,
            risk=risk,
            budget=self.budget,
            level=self.level,
            alpha=self.alpha,
            tolerance=self.tolerance,
            points={e.name: e.points() for e in entries},
            fits={e.name: e.fit for e in entries if e.fit is not None},
            forecasts={e.name: self._used(e) for e in entries if e.forecast is not None},
            stop_compute=stop_compute,
            higher_is_better=self.sign > 0,
            tau=tau,
            tau_calibration=self._calibration().tau,
            tau_backtests=n_backtests,
            spent=self._spent,
        )

    def _status(self, e: _Entry) -> str:
        if e.failed:
            return FAILED
        if e.stopped:
            return "stopped"
        live = [r for r in e.runs.values() if r.failed is None]
        if all((r.ended or r.now >= self.budget for r in live)):
            return FINISHED
        if all((self._is_silent(r) or r.ended or r.now >= self.budget for r in live)):
            return SILENT
        return "running"

    def _advise(
        self, e: _Entry, status: str, leader: str | None, kept: dict[str, np.ndarray]
    ) -> Decision | None:
        if status != "running" or e.name == leader:
            return None
        live = [r for r in e.runs.values() if r.failed is None and (not r.ended)]
        n = min((len(r.compute) for r in live))
        fraction = e.now / self.budget
        last = 1 - 1 / (self.rungs or 20)
        if fraction > last + 1e-12:
            return Decision(
                CONTINUE,
                f"{fraction:.0%} of the budget spent: a stop now saves less than {1 - last:.0%} of it, so the run finishes",
                fraction=fraction,
            )
        if e.forecast is None:
            return Decision(TOO_EARLY, e.why or "no forecast yet", fraction=fraction)
        rivals = {**kept, e.name: e.draws}
        baseline = None
        if e.draws is not None and len(rivals) > 1:
            baseline = sweep_baseline(
                rivals, e.name, tolerance=self.tolerance, sign=self.sign, seed=self.seed
            )
        ok = True if self._trusted(e) else (e.identified, e.why)
        fc = self._used(e)
        now = float(e.now)
        d = decide(
            fc,
            fraction=fraction,
            n_points=n,
            identified=ok,
            baseline=baseline,
            baseline_label=None if baseline is None else float(np.mean(baseline)),
            fitted_now=float(e.fit.predict(now)),
            progress=now / float(e.fit.C_mid),
            sign=self.sign,
            rule=self.rule,
        )
        if baseline is None and d.advice != TOO_EARLY:
            return replace(d, advice=CONTINUE, reason="the only run kept: nothing to compare with")
        return d

    def _trusted(self, e: _Entry) -> bool:
        return e.identified or (
            self._guard_until < 1 and e.now >= self._guard_until * self.budget - 1e-12
        )

    def _refused(self, e: _Entry, d: Decision, p_best: dict) -> str:
        return f"p(best) = {p_best.get(e.name, 0.0):.3f}: '{d.advice}' for the run alone ({d.reason}), but stopping it would raise the risk of losing the winner by more than {self.tolerance:g} by more than the alpha left ({self._spent:.3f} of {self.alpha:g} spent)"

    def _row(self, e: _Entry, status: str, p_best: dict, leader: str | None) -> dict:
        fc = e.forecast
        mean = lower = upper = math.nan
        if fc is not None and (not fc.unbounded):
            mean, lower, upper = (float(fc.mean), float(fc.lower), float(fc.upper))
        if e.draws is not None:
            lower, upper = _interval(e.draws, self.level)
        pb = p_best.get(e.name, math.nan)
        if status == FAILED:
            reasons = sorted({r.failed for r in e.runs.values() if r.failed})
            advice, reason = (FAILED, f"failed: {'; '.join(reasons)}")
        elif status == SILENT:
            advice, reason = (
                SILENT,
                f"no report for more than {self.stale_after:g} s (stale_after): out of the race until it reports again",
            )
        elif status == "stopped":
            advice, reason = (STOP, e.reason)
        elif status == FINISHED and e.now < self.budget * (1 - 1e-09):
            at = f"{e.now / self.budget:.0%} of the budget (C = {format_compute(e.now)})"
            reason = f"ended at {at}: its value at the budget is a forecast, extrapolated {_times(self.budget, e.now)} past its last evaluation: {_fc_words(e, self.level)}"
            advice = ENDED
        elif status == FINISHED:
            advice, reason = (FINISHED, f"reached the budget; forecast {_fc_words(e, self.level)}")
        elif e.name == leader:
            words = _fc_words(e, self.level)
            advice, reason = (LEADER, f"most likely the best at the budget: {words}")
        elif e.decision is not None and e.decision.advice == TOO_EARLY:
            advice, reason = (TOO_EARLY, e.decision.reason)
        elif e.decision is not None:
            advice, reason = (CONTINUE, f"p(best) = {pb:.3f}; {e.decision.reason}")
        else:
            advice, reason = (CONTINUE, f"p(best) = {pb:.3f}")
        return {
            "run": e.name,
            "runs": list(e.runs),
            "status": status,
            "advice": advice,
            "compute": e.now,
            "fraction": e.now / self.budget,
            "n_points": e.n_points,
            "mean": mean,
            "lower": lower,
            "upper": upper,
            "p_best": pb,
            "reason": reason,
        }


def _times(budget: float, now: float) -> str:
    return f"{budget / now:.1f}x" if now > 0 else "from no compute"


def _range(fit) -> tuple[float, float]:
    from rlcurves.bootstrap import metric_range

    return metric_range(fit)


def _interval(draws: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return (float(lo), float(hi))


def _fc_words(e: _Entry, level: float) -> str:
    fc = e.forecast
    if fc is None or fc.unbounded:
        return "(no forecast)"
    lo, hi = (float(fc.lower), float(fc.upper)) if e.draws is None else _interval(e.draws, level)
    return f"{float(fc.mean):.3f} [{lo:.3f}, {hi:.3f}]"
