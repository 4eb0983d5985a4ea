"""Several runs (seeds) of one recipe: a pooled fit with run-level uncertainty, and per-run fits.

Evaluation noise within a run is not the only noise: seeds of the same recipe differ (the paper
saw A within +-0.015 across three seeds). Pooling the points of all runs into one fit and quoting
its residual-based errors would ignore that. :func:`fit_runs` therefore fits the pooled curve and
takes its intervals from the spread of the per-run fits (a Student-t random-effects view, see
:func:`run_level_draws`), and fits every run separately to show the spread.

A bootstrap over whole runs has only a handful of distinct resamples (3 runs: 10 multisets) and
covered 67% at a nominal 90%; the t with ``k - 1`` degrees of freedom says how little three seeds
know about their spread, so its intervals are wide, honestly.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._data import check_resamples, check_seed
from ._samples import tails
from .errors import RLCurvesError
from .model import PARAM_NAMES
from .result import SigmoidFit


@dataclass(eq=False, repr=False)
class RunsFit:
    """Fits of several runs of one recipe.

    Attributes
    ----------
    pooled : SigmoidFit
        One curve through the points of every run.
    per_run : dict
        Run name -> SigmoidFit of that run alone (empty when ``per_run=False``).
    samples : pandas.DataFrame
        Draws of the pooled parameters with run-level spread (columns ``A, B, C_mid, R0``; see
        :func:`run_level_draws`), usable wherever parameter draws are taken (e.g.
        :func:`rlcurves.compare`).
    runs : list
        Run names, in order of appearance.
    level : float
        Default interval level of :meth:`ci` and :meth:`summary`.

    Examples
    --------
    >>> seeds = ["example:recipe_cpu_demo_seed0", "example:recipe_cpu_demo_seed1"]
    >>> runs = rlcurves.read_logs(seeds)
    >>> both = rlcurves.fit_runs(runs, n_boot=100)
    >>> both.table[["run", "A", "B"]].round(2)
                         run     A     B
    0  recipe_cpu_demo_seed0  0.46  2.96
    1  recipe_cpu_demo_seed1  0.48  1.78
    >>> print(both.summary().splitlines()[0])
    [[Several runs]] 2 runs, 82 points pooled
    """

    pooled: SigmoidFit
    per_run: dict[str, SigmoidFit]
    samples: pd.DataFrame
    runs: list
    level: float = 0.9
    label: str | None = None

    @property
    def A(self) -> float:
        return self.pooled.A

    @property
    def B(self) -> float:
        return self.pooled.B

    @property
    def C_mid(self) -> float:
        return self.pooled.C_mid

    @property
    def R0(self) -> float:
        return self.pooled.R0

    def predict(self, compute):
        """The pooled curve at ``compute``."""
        return self.pooled.predict(compute)

    @property
    def table(self) -> pd.DataFrame:
        """One row per run: ``run, A, B, C_mid, R0, n, rss, converged``."""
        rows = [
            {"run": name, **fit.params, "n": fit.n, "rss": fit.rss, "converged": fit.converged}
            for name, fit in self.per_run.items()
        ]
        return pd.DataFrame(rows, columns=["run", *PARAM_NAMES, "n", "rss", "converged"])

    def spread(self) -> pd.DataFrame:
        """Across-run spread of the per-run parameters: ``parameter, mean, sd, min, max``."""
        t = self.table
        rows = [
            {
                "parameter": p,
                "mean": t[p].mean(),
                "sd": t[p].std(ddof=1) if len(t) > 1 else math.nan,
                "min": t[p].min(),
                "max": t[p].max(),
            }
            for p in PARAM_NAMES
        ]
        return pd.DataFrame(rows)

    def ci(self, level: float | None = None) -> pd.DataFrame:
        """Run-level percentile intervals of the pooled parameters (from :attr:`samples`).

        Returns
        -------
        pandas.DataFrame
            Columns ``parameter, estimate, lower, upper``.
        """
        q_lo, q_hi = tails(self.level if level is None else level)
        rows = []
        for p in PARAM_NAMES:
            lo, hi = np.quantile(self.samples[p], [q_lo, q_hi])
            rows.append(
                {"parameter": p, "estimate": self.pooled.params[p], "lower": lo, "upper": hi}
            )
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """Pooled parameters with run-level intervals, and the per-run spread."""
        ci = self.ci().set_index("parameter")
        spread = self.spread().set_index("parameter")
        name = "" if self.label is None else f": {self.label}"
        lines = [f"[[Several runs{name}]] {len(self.runs)} runs, {self.pooled.n} points pooled"]
        head = f"{self.level:.0%} run-level interval"
        lines.append(f"    {'parameter':<9}  {'pooled':>9}  {head:<28}  {'per-run mean':>12}  sd")
        for p in PARAM_NAMES:
            c, s = ci.loc[p], spread.loc[p]
            interval = f"[{c['lower']:.4g}, {c['upper']:.4g}]"
            lines.append(
                f"    {p:<9}  {c['estimate']:>9.4g}  {interval:<28}  {s['mean']:>12.4g}  "
                f"{s['sd']:.3g}"
            )
        if len(self.runs) < 5:
            lines.append(
                f"    note: with {len(self.runs)} runs the run-level spread is known only to "
                f"{len(self.runs) - 1} degrees of freedom; read the per-run spread too"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def plot(self, ax=None, **kwargs):
        """See :func:`rlcurves.plot.plot_runs`."""
        from .plot import plot_runs

        return plot_runs(self, ax=ax, **kwargs)

    def __repr__(self) -> str:
        p = self.pooled.params
        return (
            f"RunsFit({len(self.runs)} runs, pooled A={p['A']:.4g}, B={p['B']:.4g}, "
            f"C_mid={p['C_mid']:.4g})"
        )


def shared_compute(*tables: pd.DataFrame, compute: str = "compute", run: str = "run") -> float:
    """The largest compute every run of every table reaches: the common window of a comparison.

    Runs of different lengths fitted each on its own range answer different questions (a
    longer run pins down a ceiling a shorter one cannot); compare them on
    ``max_compute=shared_compute(...)``.

    Parameters
    ----------
    *tables : pandas.DataFrame
        Long tables as for :func:`fit_runs`.
    compute, run : str
        Column names.

    Returns
    -------
    float
        The minimum over all runs of each run's largest compute.

    Raises
    ------
    RLCurvesError
        No table, or a table without the columns.

    Examples
    --------
    >>> seeds = ["example:recipe_cpu_demo_seed0", "example:recipe_cpu_demo_seed1"]
    >>> runs = rlcurves.read_logs(seeds)
    >>> common = rlcurves.shared_compute(runs)  # the compute every run reaches
    >>> bool(common == runs.groupby("run")["compute"].max().min())
    True
    """
    if not tables:
        raise RLCurvesError("shared_compute needs at least one table")
    tops = []
    for table in tables:
        missing = [c for c in (compute, run) if c not in table.columns]
        if missing:
            raise RLCurvesError(
                f"no column {missing[0]!r} (columns: {list(table.columns)}); pass compute= / run=",
                column=missing[0],
            )
        tops.append(table.groupby(run)[compute].max().min())
    return float(min(tops))


def fit_runs(
    data: pd.DataFrame,
    compute: str = "compute",
    reward: str = "reward",
    run: str = "run",
    *,
    r0: float | None = None,
    min_compute: float | None = None,
    max_compute: float | None = None,
    per_run: bool = True,
    n_boot: int = 1000,
    level: float = 0.9,
    seed: int | None = 0,
    label: str | None = None,
) -> RunsFit:
    """Fit several runs (seeds) of one recipe: pooled, with run-level uncertainty, and per run.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table with one row per evaluation, e.g. from :func:`rlcurves.read_logs`.
    compute, reward, run : str
        Column names; ``run`` labels the seed/run of each row.
    r0, min_compute, max_compute
        As in :func:`rlcurves.fit_sigmoid`, applied to every fit.
    per_run : bool
        Also fit every run on its own.
    n_boot : int
        Draws behind the pooled intervals.
    level : float
        Default interval level.
    seed : int, optional
        Seed of the draws.
    label : str, optional
        Name of the recipe.

    Returns
    -------
    RunsFit

    Raises
    ------
    RLCurvesError
        A missing column, or fewer than two runs.

    Examples
    --------
    >>> seeds = ["example:recipe_cpu_demo_seed0", "example:recipe_cpu_demo_seed1"]
    >>> runs = rlcurves.read_logs(seeds)
    >>> both = rlcurves.fit_runs(runs, n_boot=100)  # a pooled fit, intervals over the runs
    >>> list(both.table["run"])
    ['recipe_cpu_demo_seed0', 'recipe_cpu_demo_seed1']
    """
    from .fit import fit_sigmoid

    tails(level)
    check_resamples("n_boot", n_boot)
    check_seed(seed)  # numpy's own error names no keyword
    if not isinstance(data, pd.DataFrame):
        raise RLCurvesError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    for col, role in ((compute, "compute"), (reward, "reward"), (run, "run")):
        if col not in data.columns:
            raise RLCurvesError(
                f"column {col!r} (for {role}) is not in the DataFrame; available columns: "
                f"{list(data.columns)}. Pass {role}='<one of these>'.",
                column=col,
            )
    names = list(pd.unique(data[run]))
    if len(names) < 2:
        raise RLCurvesError(
            f"column {run!r} holds {len(names)} run(s); several runs are needed for run-level "
            "uncertainty. For one run use rlcurves.fit_sigmoid.",
            runs=names,
        )
    kw = dict(r0=r0, min_compute=min_compute, max_compute=max_compute)
    pooled = fit_sigmoid(compute, reward, data=data, label=label, **kw)
    fits: dict[str, SigmoidFit] = {}
    for name in names:
        part = data[data[run] == name]
        with warnings.catch_warnings():
            # one short seed is often weakly identified; the table shows it, no need to shout
            warnings.simplefilter("ignore")
            fits[str(name)] = fit_sigmoid(compute, reward, data=part, label=str(name), **kw)
    samples = run_level_draws(pooled, fits, data[run].to_numpy(), n_boot, seed)
    if not per_run:
        fits = {}
    return RunsFit(
        pooled=pooled,
        per_run=fits,
        samples=samples,
        runs=[str(n) for n in names],
        level=level,
        label=label,
    )


# the largest magnitude of a log-scale draw (exp of it is a finite, nonzero float)
_LOG_FINITE = 700.0


def run_level_draws(
    pooled: SigmoidFit, per_run: dict[str, SigmoidFit], runs, n: int, seed: int | None
) -> pd.DataFrame:
    """Draws of the pooled parameters with run-level spread (a random-effects view of seeds).

    Each seed's parameters are the recipe's plus a seed effect, so the pooled estimate's error
    is the spread of the per-run estimates over ``sqrt(k)``, and with ``k`` seeds that spread is
    known only to ``k - 1`` degrees of freedom: the draws are the pooled fit's AR(1) bootstrap
    (noise modelled within each run; it gives the joint shape of the parameters) rescaled per
    parameter, on the sampled scale (log for B and C_mid), to ``max(run spread / sqrt(k),
    bootstrap sd)``, each draw times ``sqrt((k - 1) / chi2_{k-1})`` (Student t with k - 1 degrees
    of freedom). A bootstrap over 3 whole runs instead covered 67% at 90%; the coverage of this
    one is measured in ``benchmarks/compare_calibration.py``.
    """
    from .bootstrap import bootstrap

    boot = bootstrap(pooled, n, kind="ar1", runs=runs, seed=seed, progress=False)
    rng = np.random.default_rng(None if seed is None else [seed, 1])
    k = len(per_run)
    t_scale = np.sqrt((k - 1) / rng.chisquare(k - 1, size=n))
    out = {}
    for p in PARAM_NAMES:
        log = p in ("B", "C_mid")
        draws = boot.samples[p].to_numpy(dtype=float)
        center = math.log(pooled.params[p]) if log else pooled.params[p]
        dev = (np.log(draws) if log else draws) - center
        per = np.array([f.params[p] for f in per_run.values()], dtype=float)
        per = np.log(per) if log else per
        sd_boot = float(np.std(dev))
        sd_runs = float(np.std(per, ddof=1) / math.sqrt(k)) if np.all(np.isfinite(per)) else 0.0
        target = max(sd_boot, sd_runs)
        if sd_boot > 0:
            dev = dev * (target / sd_boot)
        value = center + dev * t_scale
        if log:  # a t draw of 1 or 2 dof can leave the floats: B = 0 and C_mid = inf make a NaN
            value = np.clip(value, -_LOG_FINITE, _LOG_FINITE)  # curve; the extremes are finite
        out[p] = np.exp(value) if log else value
    out["A"] = np.clip(out["A"], *pooled.bounds.A)
    out["R0"] = np.clip(out["R0"], *pooled.bounds.R0)
    return pd.DataFrame({p: out[p] for p in PARAM_NAMES})


def per_run_values(fit: RunsFit | SigmoidFit, parameter: str) -> np.ndarray:
    """The per-run estimates of ``parameter`` (``A``, ``B``, ``C_mid``, ``R0``, or ``log_B``,
    ``log_C_mid``, ``log_C90``: the log of B, of C_mid, of the compute to reach 90% of the gain):
    one value per seed of a :class:`RunsFit` with per-run fits, one for a single fit."""
    fits = list(fit.per_run.values()) if isinstance(fit, RunsFit) else [fit]
    values = []
    for f in fits:
        p = f.params
        if parameter == "log_C90":
            from .compare import reach_compute

            values.append(math.log(float(reach_compute(p))))
        elif parameter.startswith("log_"):
            values.append(math.log(p[parameter[4:]]))
        else:
            values.append(float(p[parameter]))
    return np.asarray(values, dtype=float)


def welch_difference(x: np.ndarray, y: np.ndarray, level: float = 0.9) -> dict[str, float]:
    """Difference of two recipes' means from their per-run estimates, with Welch's t.

    ``x`` and ``y`` are one estimate per run (seed). With two or more runs on each side it is
    Welch's unequal-variance t (:func:`scipy.stats.ttest_ind`, ``equal_var=False``); when one
    side is a single run, that run is one new draw from the other side's seed distribution
    (standard error ``s sqrt(1 + 1/k)``, ``k - 1`` degrees of freedom).

    Returns
    -------
    dict
        ``mean`` (mean(x) - mean(y)), ``lower``, ``upper`` (the two-sided ``level`` interval),
        ``df``, ``se``, ``p_greater`` (the t distribution's probability that the difference is
        above 0; 0.5 when the standard error is 0 and the means are equal).
    """
    from scipy import stats

    tails(level)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size + y.size < 3 or min(x.size, y.size) < 1:
        raise RLCurvesError(
            f"Welch's t needs at least 3 runs with one on each side, got {x.size} and {y.size}"
        )
    diff = float(x.mean() - y.mean())
    if x.size >= 2 and y.size >= 2:
        res = stats.ttest_ind(x, y, equal_var=False)
        df = float(res.df)
        se = math.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
    else:
        many = x if x.size >= 2 else y
        df = float(many.size - 1)
        se = float(many.std(ddof=1)) * math.sqrt(1 + 1 / many.size)
    half = float(stats.t.ppf((1 + level) / 2, df)) * se
    if se > 0:
        p = float(stats.t.cdf(diff / se, df))
    else:
        p = 1.0 if diff > 0 else 0.0 if diff < 0 else 0.5
    return {"mean": diff, "lower": diff - half, "upper": diff + half, "df": df, "se": se,
            "p_greater": p}  # fmt: skip


def paired_differences(baseline: RunsFit, variant: RunsFit, *, level: float = 0.9) -> pd.DataFrame:
    """Per-seed differences of two recipes whose runs are paired by name (seed).

    When the runs of one seed share everything but the switch under test (warm-up, prompt
    order, sampler seed), seed-to-seed variation common to both cancels in the difference of
    their fits, which a comparison of the two pooled fits cannot use. For each seed present in
    both, the difference of the per-run fits: ``A`` (variant - baseline) and ``log_B``
    (log of the ratio of the B's); then their mean and a two-sided Student t interval over
    seeds (``k - 1`` degrees of freedom for ``k`` pairs).

    Parameters
    ----------
    baseline, variant : RunsFit
        Fits from :func:`fit_runs` with ``per_run=True``; runs are paired by their names.
    level : float
        Interval level.

    Returns
    -------
    pandas.DataFrame
        One row per parameter (``A``, ``log_B``): ``parameter, mean, lower, upper, pairs,
        per_pair`` (a dict seed -> difference). ``lower``/``upper`` are NaN with one pair.

    Raises
    ------
    RLCurvesError
        No run name in common, or a fit without per-run fits.

    Examples
    --------
    >>> def cell(loss):
    ...     paths = [f"example:recipe_study_ppo4_{loss}_s{seed}" for seed in (0, 1, 2)]
    ...     runs = rlcurves.read_logs(paths, run=["s0", "s1", "s2"], compute="tokens_total")
    ...     return rlcurves.fit_runs(runs, n_boot=50)
    ...
    >>> diff = rlcurves.paired_differences(cell("cispo"), cell("dapo"))
    >>> list(diff.columns)
    ['parameter', 'mean', 'lower', 'upper', 'pairs', 'per_pair']
    """
    from scipy import stats

    tails(level)
    if not baseline.per_run or not variant.per_run:
        raise RLCurvesError(
            "paired_differences needs the per-run fits: call fit_runs(..., per_run=True)"
        )
    shared = [r for r in baseline.runs if r in variant.per_run]
    if not shared:
        raise RLCurvesError(
            f"no run in common to pair: baseline runs {baseline.runs}, variant runs "
            f"{variant.runs}; name the runs of one seed alike in both (the `run` column)",
            runs=[baseline.runs, variant.runs],
        )
    rows = []
    for name, diff in (
        ("A", lambda b, v: v.A - b.A),
        ("log_B", lambda b, v: math.log(v.B) - math.log(b.B)),
    ):
        per = {r: float(diff(baseline.per_run[r], variant.per_run[r])) for r in shared}
        d = np.array(list(per.values()))
        mean = float(d.mean())
        lo = hi = math.nan
        if d.size >= 2 and np.all(np.isfinite(d)):
            lo, hi = stats.ttest_1samp(d, 0.0).confidence_interval(level)
        rows.append(
            {"parameter": name, "mean": mean, "lower": lo, "upper": hi, "pairs": d.size,
             "per_pair": per}
        )  # fmt: skip
    return pd.DataFrame(rows)
