"""Compare recipe variants: ceilings and efficiencies with intervals, crossovers, p(ahead).

The paper's "bitter lesson": a recipe that looks better at a fixed early budget often has the lower
ceiling. So variants are compared by their fitted A (the ceiling) and B (the efficiency), with
intervals, and by where their curves cross. Every interval and probability here is computed from
the same draws of each variant's parameters (bootstrap refits by default, see
:mod:`rlcurves._samples`), so the table, :meth:`Comparison.crossover` and
:meth:`Comparison.p_ahead` agree with each other. Variants are independent runs, so draws of two
variants are independent and every pair of draws is compared.

The paper's shared-A rule is :meth:`Comparison.shared_a`: B depends strongly on A (they trade off
in the fit), so slopes are compared only after refitting every curve with one common A, and its
log-log view, ``log F(R)`` against ``log C`` with slope B, is :meth:`Comparison.loglog`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from ._data import check_resamples
from ._format import format_compute
from ._samples import SampleMethod, parameter_samples, tails
from .decide import prob_greater
from .errors import RLCurvesError
from .model import PARAM_NAMES, sigmoid
from .result import SigmoidFit
from .runs import RunsFit, per_run_values, welch_difference
from .target import quantile_with_inf

TABLE_COLUMNS = [
    "variant",
    "A",
    "A_lower",
    "A_upper",
    "B",
    "B_lower",
    "B_upper",
    "C_mid",
    "delta_A",
    "delta_B",
    "p_A_higher",
    "delta_A_lower",
    "delta_A_upper",
    "p_B_higher",
    "C_mid_lower",
    "C_mid_upper",
    "C90",
    "C90_lower",
    "C90_upper",
    "p_sooner",
    "basis",
]
# the compute to reach this fraction of a run's gain (A - R0) is what "sooner" refers to
REACH_FRACTION = 0.9
# The paper's margin on A: three seeds of one recipe gave A within +-0.015, so it treats As
# within 0.02 as equal. A bootstrap of one run sees evaluation noise, not seed-to-seed variation,
# so a ceiling difference is called real only beyond both the interval and this margin.
PAPER_MARGIN_A = 0.02


@dataclass(frozen=True)
class Crossover:
    """Where two curves cross: from ``compute`` on, ``leader_after`` is ahead.

    Attributes
    ----------
    compute : float
        The (last) crossing of the fitted curves inside the searched range.
    lower, upper : float
        Equal-tailed interval at ``level`` over parameter draws. A draw in which ``leader_after``
        is ahead over the whole range counts as crossing at the range's start; one in which it is
        still behind at the range's end counts as ``inf`` (no crossing in range).
    p_cross : float
        Fraction of draws in which ``leader_after`` is ahead at the end of the range.
    p_inside : float
        Fraction of draws whose curves cross somewhere inside ``within``: the probability that
        the crossing happens in the range asked about (the fitted curves' crossing alone says
        nothing about that).
    leader_before, leader_after : str
        The variant ahead before and after the crossing.
    within : (float, float)
        The compute range searched.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fast = df.assign(reward=rlcurves.sigmoid(df["compute"], 0.55, 2.5, 1500, 0.3))
    >>> cmp = rlcurves.compare({"recipe": df, "fast": fast}, baseline="recipe", n_samples=200)
    >>> cross = cmp.crossover("recipe", "fast")
    >>> print(str(cross).split(" (")[0])
    recipe overtakes fast at C = 4,500 [4,241, 4,711]
    """

    compute: float
    lower: float
    upper: float
    level: float
    p_cross: float
    leader_before: str
    leader_after: str
    within: tuple[float, float]
    p_inside: float = math.nan

    def __float__(self) -> float:
        return float(self.compute)

    def __str__(self) -> str:
        up = "beyond the range" if math.isinf(self.upper) else format_compute(self.upper)
        return (
            f"{self.leader_after} overtakes {self.leader_before} at "
            f"C = {format_compute(self.compute)} "
            f"[{format_compute(self.lower)}, {up}] ({self.level:.0%}; the curves cross in "
            f"[{format_compute(self.within[0])}, {format_compute(self.within[1])}] in "
            f"{self.p_inside:.0%} of draws, {self.leader_after} ahead at its end in "
            f"{self.p_cross:.0%})"
        )


@dataclass(eq=False)
class SharedA:
    """The paper's shared-A refit: every curve refitted with one common ceiling.

    Attributes
    ----------
    A : float
        The shared ceiling (mean of the variants' fitted A).
    fits : dict
        Variant -> SigmoidFit with A held at the shared value.
    table : pandas.DataFrame
        ``variant, A_own, B, B_lower, B_upper, C_mid, delta_B, p_B_higher`` (against the
        baseline, when it is among the variants).
    """

    A: float
    fits: dict[str, SigmoidFit]
    table: pd.DataFrame
    samples: dict[str, pd.DataFrame] = field(repr=False, default_factory=dict)


@dataclass(eq=False, repr=False)
class Comparison:
    """Result of :func:`compare`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per variant: ``variant, A, A_lower, A_upper, B, B_lower, B_upper, C_mid,
        delta_A, delta_B, p_A_higher`` (deltas and probability against the baseline; NaN on
        the baseline's own row).
    fits : dict
        Variant -> SigmoidFit (the pooled fit for several runs).
    samples : dict
        Variant -> draws of ``A, B, C_mid, R0`` behind every interval.
    baseline : str
    level : float
    margin : float
        Margin on A within which ceilings count as equal (the paper's 0.02).
    within : (float, float)
        Compute range in which crossovers are searched (default: from the latest start of the
        variants' fit windows to 10x the largest compute, the range where the fits are not
        extrapolated backwards and a forecast still means something).
    runs : dict
        Variant -> RunsFit for variants given as several seeds. When the variant or the baseline
        has per-run fits of two or more seeds, its ``delta_A``, ``delta_B``, their intervals,
        ``p_A_higher``, ``p_B_higher`` and ``p_sooner`` come from Welch's t on the per-run
        estimates (:func:`rlcurves.runs.welch_difference`; ``basis`` says so); otherwise from
        the draws of one run each (``basis`` "run-level": evaluation noise only, seed-to-seed
        variation is not in the interval).

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fast = df.assign(reward=rlcurves.sigmoid(df["compute"], 0.55, 2.5, 1500, 0.3))
    >>> cmp = rlcurves.compare({"recipe": df, "fast": fast}, baseline="recipe", n_samples=200)
    >>> print(cmp.summary().splitlines()[0])
    [[Comparison]] baseline recipe, 90% intervals from 200 bootstrap draws per variant
    >>> round(float(cmp.p_ahead("recipe", "fast", at=16_000)), 2)
    1.0
    """

    fits: dict[str, SigmoidFit]
    samples: dict[str, pd.DataFrame]
    baseline: str
    level: float
    margin: float
    within: tuple[float, float]
    method: str
    seed: int | None
    n_samples: int
    runs: dict[str, RunsFit] = field(default_factory=dict)
    table: pd.DataFrame = field(init=False)
    _shared: dict = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.table = self._make_table()

    # ---- the table ----------------------------------------------------------------------------
    def _make_table(self) -> pd.DataFrame:
        q_lo, q_hi = tails(self.level)
        base = self.fits[self.baseline]
        sb = self.samples[self.baseline]
        rows = []
        for name, fit in self.fits.items():
            s = self.samples[name]
            a_lo, a_hi = np.quantile(s["A"], [q_lo, q_hi])
            b_lo, b_hi = np.quantile(s["B"], [q_lo, q_hi])
            c_lo, c_hi = np.quantile(s["C_mid"], [q_lo, q_hi])
            reach = reach_compute(s)
            r_lo, r_hi = quantile_with_inf(reach, q_lo), quantile_with_inf(reach, q_hi)
            is_base = name == self.baseline
            basis = ""
            delta_a = math.nan if is_base else fit.A - base.A
            delta_b = math.nan if is_base else fit.B - base.B
            if is_base:
                d_lo = d_hi = p_a = p_b = p_soon = math.nan
            elif (welch := self._welch(name)) is not None:
                a, lb, lc = welch["A"], welch["log_B"], welch["log_C90"]
                delta_a, d_lo, d_hi, p_a = a["mean"], a["lower"], a["upper"], a["p_greater"]
                delta_b = float(
                    np.mean(per_run_values(self._item(name), "B"))
                    - np.mean(per_run_values(self._item(self.baseline), "B"))
                )
                p_b, p_soon = lb["p_greater"], 1.0 - lc["p_greater"]
                basis = (
                    f"seeds: Welch t on {welch['n'][0]} vs {welch['n'][1]} runs (df {a['df']:.1f})"
                )
            else:
                d_lo, d_hi = np.quantile(paired_difference(s["A"], sb["A"]), [q_lo, q_hi])
                p_a = prob_greater(s["A"].to_numpy(), sb["A"].to_numpy())
                p_b = prob_greater(s["B"].to_numpy(), sb["B"].to_numpy())
                p_soon = prob_greater(reach_compute(sb), reach)
                basis = "run-level"
            rows.append(
                {
                    "variant": name,
                    "A": fit.A,
                    "A_lower": a_lo,
                    "A_upper": a_hi,
                    "B": fit.B,
                    "B_lower": b_lo,
                    "B_upper": b_hi,
                    "C_mid": fit.C_mid,
                    "delta_A": delta_a,
                    "delta_B": delta_b,
                    "p_A_higher": p_a,
                    "delta_A_lower": d_lo,
                    "delta_A_upper": d_hi,
                    "p_B_higher": p_b,
                    "C_mid_lower": c_lo,
                    "C_mid_upper": c_hi,
                    "C90": float(reach_compute(fit.params)),
                    "C90_lower": r_lo,
                    "C90_upper": r_hi,
                    "p_sooner": p_soon,
                    "basis": basis,
                }
            )
        return pd.DataFrame(rows, columns=TABLE_COLUMNS)

    def _item(self, name: str):
        return self.runs.get(name, self.fits[name])

    def _welch(self, name: str) -> dict | None:
        """Welch's t of ``name`` against the baseline on per-run estimates, when either has the
        per-run fits of two or more seeds (None otherwise)."""

        def seeds(n: str) -> int:
            rf = self.runs.get(n)
            return len(rf.per_run) if rf is not None else 1

        if max(seeds(name), seeds(self.baseline)) < 2:
            return None
        if any(n in self.runs and not self.runs[n].per_run for n in (name, self.baseline)):
            return None  # fitted with per_run=False: only the draws are there
        v, b = self._item(name), self._item(self.baseline)
        out: dict = {
            p: welch_difference(per_run_values(v, p), per_run_values(b, p), self.level)
            for p in ("A", "log_B", "log_C90")
        }
        out["n"] = (seeds(name), seeds(self.baseline))
        return out

    # ---- pairwise questions -------------------------------------------------------------------
    def _check(self, *names: str) -> None:
        for n in names:
            if n not in self.fits:
                raise RLCurvesError(
                    f"no variant named {n!r}; variants: {list(self.fits)}", variant=n
                )

    def p_ahead(self, a: str, b: str, at: ArrayLike) -> float | np.ndarray:
        """Probability that variant ``a``'s curve is above ``b``'s at compute ``at``.

        Over all pairs of independent draws of the two variants' parameters. This is about the
        expected curves (where each recipe's mean reward will be), not single noisy evaluations.
        """
        self._check(a, b)
        c = np.atleast_1d(np.asarray(at, dtype=float))
        ra, rb = _curves(self.samples[a], c), _curves(self.samples[b], c)
        out = np.array([prob_greater(ra[:, j], rb[:, j]) for j in range(c.size)])
        return float(out[0]) if np.ndim(at) == 0 else out

    def crossover(
        self, a: str, b: str, *, within: tuple[float, float] | None = None
    ) -> Crossover | None:
        """Compute at which the curves of ``a`` and ``b`` cross, with an interval.

        Parameters
        ----------
        a, b : str
            Variant names.
        within : (float, float), optional
            Compute range to search (default: :attr:`within`).

        Returns
        -------
        Crossover or None
            None when the fitted curves do not cross inside the range. When they cross more
            than once (possible when R0 and B both differ), the last crossing is reported: from
            it on, the order stays the same up to the end of the range.
        """
        self._check(a, b)
        lo, hi = within or self.within
        if not 0 < lo < hi:
            raise RLCurvesError(f"within must be (low, high) with 0 < low < high, got {(lo, hi)}")
        fa, fb = self.fits[a], self.fits[b]
        point = last_crossing(fa.params, fb.params, lo, hi)
        if point is None:
            return None
        ahead_at_end = fa.predict(hi) > fb.predict(hi)
        after, before = (a, b) if ahead_at_end else (b, a)
        grid = np.geomspace(lo, hi, 1200)
        sa, sb = _paired(self.samples[after], self.samples[before])
        diff = _curves(sa, grid) - _curves(sb, grid)
        draws = _draw_crossings(diff, grid)
        q_lo, q_hi = tails(self.level)
        return Crossover(
            compute=point,
            lower=quantile_with_inf(draws, q_lo),
            upper=quantile_with_inf(draws, q_hi),
            level=self.level,
            p_cross=float(np.mean(diff[:, -1] > 0)),
            leader_before=before,
            leader_after=after,
            within=(lo, hi),
            p_inside=float(np.mean(np.any(np.diff(np.sign(diff), axis=1) != 0, axis=1))),
        )

    # ---- the paper's shared-A rule ------------------------------------------------------------
    def shared_a(self, variants: list[str] | None = None) -> SharedA:
        """Refit the variants with their mean A and compare B (the paper's rule).

        Parameters
        ----------
        variants : list of str, optional
            Which variants share the ceiling. Default: the baseline and every variant shown to
            have the same ceiling (:meth:`same_ceiling`; the paper applies the rule to ceilings
            that are equal within noise; refitting a clearly lower ceiling to a higher A
            distorts B).

        The intervals and ``p_B_higher`` come from the whole procedure applied to every draw:
        the shared A is the mean of that draw's ceilings, and each variant's B (and C_mid) is
        moved to it along its own A-B trade-off (the linear regression of log B on A over its
        draws, which is the refit with A held fixed to first order), so the uncertainty of the
        mean-A step and the trade-off are carried rather than conditioned away.

        Returns
        -------
        SharedA
        """
        names = self.same_ceiling() if variants is None else list(variants)
        self._check(*names)
        key = tuple(names)
        if key in self._shared:
            return self._shared[key]
        a_shared = float(np.mean([self.fits[n].A for n in names]))
        fits = {n: refit_with_A(self.fits[n], a_shared) for n in names}
        samples = shared_a_draws(
            {n: self.fits[n] for n in names},
            {n: self.samples[n] for n in names},
            fits,
        )
        q_lo, q_hi = tails(self.level)
        base = self.baseline if self.baseline in fits else None
        rows = []
        for n, f in fits.items():
            b_lo, b_hi = np.quantile(samples[n]["B"], [q_lo, q_hi])
            vs_base = base is not None and n != base
            rows.append(
                {
                    "variant": n,
                    "A_own": self.fits[n].A,
                    "B": f.B,
                    "B_lower": b_lo,
                    "B_upper": b_hi,
                    "C_mid": f.C_mid,
                    "delta_B": f.B - fits[base].B if vs_base else math.nan,
                    "p_B_higher": prob_greater(samples[n]["B"].to_numpy(), samples[base]["B"])
                    if vs_base
                    else math.nan,
                }
            )
        result = SharedA(a_shared, fits, pd.DataFrame(rows), samples)
        self._shared[key] = result
        return result

    def same_ceiling(self) -> list[str]:
        """The baseline and the variants shown to share its ceiling: the ``level`` interval of
        ``A_variant - A_baseline`` lies inside ``+-margin`` (two one-sided tests)."""
        return [self.baseline] + [
            n for n in self.fits if n != self.baseline and self._ceiling(n)[0] == "same ceiling"
        ]

    def _ceiling(self, name: str) -> tuple[str, str]:
        """Ceiling verdict of ``name`` against the baseline, and its words."""
        on_bound = [n for n in (name, self.baseline) if a_on_bound(self.fits[n])]
        if on_bound:
            return "not determined", (
                f"ceiling not determined ({', '.join(on_bound)}: A on its bound, the data do "
                "not cap it)"
            )
        row = self.table.set_index("variant").loc[name]
        lo, hi = row["delta_A_lower"], row["delta_A_upper"]
        diff = f"delta A {row['delta_A']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        if -self.margin < lo and hi < self.margin:
            return "same ceiling", f"same ceiling ({diff} inside +-{self.margin:g})"
        if lo > self.margin:
            return "higher", f"higher ceiling ({diff})"
        if hi < -self.margin:
            return "lower", f"lower ceiling ({diff})"
        return "not settled", f"ceiling not settled ({diff}, margin +-{self.margin:g})"

    def loglog(self, *, shared: bool = True, variants: list[str] | None = None) -> pd.DataFrame:
        """The paper's log-log view: ``log F(R)`` against ``log C``, a line of slope B.

        Parameters
        ----------
        shared : bool
            Refit the curves with their mean A first (the paper's practice), so the slopes are
            comparable.
        variants : list of str, optional
            Default: every variant. A variant whose own ceiling is not shown equal to the
            baseline's (:meth:`same_ceiling`) is kept and marked (``same_ceiling`` False), not
            dropped: refitting it at the shared A moves its B, which the reader should know.

        Returns
        -------
        pandas.DataFrame
            Long table ``variant, compute, reward, log_compute, log_F, B, A_own, same_ceiling``
            over each fit's window.
        """
        names = list(self.fits) if variants is None else list(variants)
        self._check(*names)
        fits = self.shared_a(names).fits if shared else {n: self.fits[n] for n in names}
        same = set(self.same_ceiling())
        frames = []
        for name, fit in fits.items():
            df = fit.loglog()
            df.insert(0, "variant", name)
            df["B"] = fit.B
            df["A_own"] = self.fits[name].A
            df["same_ceiling"] = name in same
            frames.append(df)
        return pd.concat(frames, ignore_index=True)

    # ---- words --------------------------------------------------------------------------------
    def verdicts(self) -> pd.DataFrame:
        """Per variant against the baseline: ``variant, ceiling, efficiency, text``.

        ``ceiling``: "same ceiling" (the interval of the difference in A inside +-margin),
        "higher"/"lower" (beyond the margin), "not settled", or "not determined" (an A on its
        bound, a run with no S-shaped rise). ``efficiency`` is about B, a steepness: "higher"
        (steeper), "lower", "not settled", "not determined"; which run reaches 90% of its gain
        sooner is :meth:`reach` (and the text).
        """
        rows = []
        for name in self.fits:
            if name == self.baseline:
                continue
            ceiling, efficiency, text = self._verdict(name)
            rows.append(
                {"variant": name, "ceiling": ceiling, "efficiency": efficiency, "text": text}
            )
        return pd.DataFrame(rows, columns=["variant", "ceiling", "efficiency", "text"])

    def _verdict(self, name: str) -> tuple[str, str, str]:
        undetermined = {
            f"{n}'s {p}" for n in (name, self.baseline) for p in undetermined_shape(self.fits[n])
        }
        if undetermined:
            # a flat or non-monotone run has no S-curve: a step fit (B in the hundreds) would
            # otherwise be compared as if its B meant something
            return (
                "not determined",
                "not determined",
                f"{name}: not compared: {', '.join(sorted(undetermined))} not determined by the "
                "data (no S-shaped rise to fit; see the fit's message and plot the run)",
            )
        t = self.table.set_index("variant")
        row, base = t.loc[name], t.loc[self.baseline]
        q_lo, q_hi = tails(self.level)
        ceiling, ceiling_text = self._ceiling(name)
        basis = (
            "run-level: one run per variant, seed-to-seed variation not included"
            if row["basis"] == "run-level"
            else row["basis"]
        )
        head = (
            f"{name}: A {row['A']:.2f} [{row['A_lower']:.2f}, {row['A_upper']:.2f}] vs "
            f"{base['A']:.2f} [{base['A_lower']:.2f}, {base['A_upper']:.2f}]: {ceiling_text} "
            f"({basis})"
        )
        falling = [n for n in (name, self.baseline) if falls(self.fits[n])]
        if falling:
            # a run that got worse fits a falling curve; its "efficiency" is how fast it fell
            text = (
                head
                + "; "
                + "; ".join(
                    f"{n} falls (A {self.fits[n].A:.2f} below its start R0 {self.fits[n].R0:.2f}), "
                    "so B is not an efficiency"
                    for n in falling
                )
            )
            return ceiling, "not determined", text
        # B from each run's own joint draws: the A-B trade-off stays in them. B is a steepness;
        # only the compute to reach 90% of the gain says which run gets there sooner.
        p_b = row["p_B_higher"]
        b_words = (
            f"B {row['B']:.2f} [{row['B_lower']:.2f}, {row['B_upper']:.2f}] vs {base['B']:.2f}"
        )
        if p_b >= q_hi:
            efficiency, eff_text = "higher", f"steeper ({b_words}, p = {p_b:.2f})"
        elif p_b <= q_lo:
            efficiency, eff_text = "lower", f"shallower ({b_words}, p = {1 - p_b:.2f})"
        else:
            efficiency, eff_text = "not settled", f"steepness not settled ({b_words})"
        p_s = row["p_sooner"]
        reach_words = (
            f"{REACH_FRACTION:.0%} of its gain at C = {format_compute(row['C90'])} "
            f"[{format_compute(row['C90_lower'])}, {_fmt_upper(row['C90_upper'])}] vs "
            f"{format_compute(base['C90'])}; C_mid {format_compute(row['C_mid'])} "
            f"[{format_compute(row['C_mid_lower'])}, {format_compute(row['C_mid_upper'])}] "
            f"vs {format_compute(base['C_mid'])}"
        )
        if p_s >= q_hi:
            reach_text = f"reaches {reach_words}: sooner (p = {p_s:.2f})"
        elif p_s <= q_lo:
            reach_text = f"reaches {reach_words}: later (p = {1 - p_s:.2f})"
        else:
            reach_text = f"reaches {reach_words}: not settled"
        text = f"{head}; {eff_text}; {reach_text}"
        cross = self.crossover(name, self.baseline)
        if cross is not None:
            text += f"; {cross}"
        return ceiling, efficiency, text

    def reach(self) -> pd.DataFrame:
        """Per variant: ``variant, reach, p_sooner``, "sooner"/"later"/"not settled" than the
        baseline in the compute to reach 90% of its gain."""
        q_lo, q_hi = tails(self.level)
        rows = []
        for _, r in self.table.iterrows():
            if r["variant"] == self.baseline:
                continue
            p = r["p_sooner"]
            verdict = "sooner" if p >= q_hi else "later" if p <= q_lo else "not settled"
            rows.append({"variant": r["variant"], "reach": verdict, "p_sooner": p})
        return pd.DataFrame(rows, columns=["variant", "reach", "p_sooner"])

    def summary(self) -> str:
        """The comparison in words, one line per variant against the baseline."""
        lines = [
            f"[[Comparison]] baseline {self.baseline}, {self.level:.0%} intervals from "
            f"{self.n_samples} {self.method} draws per variant"
        ]
        lines += ["    " + t for t in self.verdicts()["text"]]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        from ._html import comparison_html

        return comparison_html(self)

    def __repr__(self) -> str:
        return f"Comparison(variants={list(self.fits)}, baseline={self.baseline!r})"

    def plot(self, ax=None, **kwargs: Any):
        """A and B per variant with intervals (see :func:`rlcurves.plot.plot_comparison`)."""
        from .plot import plot_comparison

        return plot_comparison(self, ax=ax, **kwargs)

    def plot_loglog(self, ax=None, **kwargs: Any):
        """The log-log efficiency view (see :func:`rlcurves.plot.plot_loglog`)."""
        from .plot import plot_loglog

        return plot_loglog(self, ax=ax, **kwargs)

    def plot_curves(self, ax=None, **kwargs: Any):
        """Every variant's data and curve in one figure (see :func:`rlcurves.plot.plot_fits`)."""
        from .plot import plot_fits

        return plot_fits(self.fits, ax=ax, **kwargs)


def undetermined_shape(fit: SigmoidFit) -> list[str]:
    """Which of A and B the data do not determine (infinite standard error): a run with no
    S-shaped rise, fitted as a step."""
    return [p for p in ("A", "B") if not math.isfinite(fit.stderr[p])]


def a_on_bound(fit: SigmoidFit) -> bool:
    """The fitted ceiling of a rising curve sits on its upper bound (e.g. 1 for a pass rate): the
    data do not cap A. (A collapsed run's A on the lower bound 0 is what its data say.)"""
    hi = fit.bounds.A[1]
    return bool(fit.A >= hi - 1e-6 * (1 + abs(fit.A)) and fit.A > fit.R0)


def reach_compute(params, fraction: float = REACH_FRACTION):
    """Compute at which the curve reaches ``fraction`` of its gain: ``C_mid (f/(1-f))^(1/B)``.

    ``params`` is a mapping or a DataFrame of draws (then an array)."""
    b = np.asarray(params["B"], dtype=float)
    c = np.asarray(params["C_mid"], dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        return c * (fraction / (1 - fraction)) ** (1 / b)


def paired_difference(x, y) -> np.ndarray:
    """Draws of X - Y for independent X, Y: draws paired index-wise (the shorter recycled)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = max(x.size, y.size)
    return np.resize(x, n) - np.resize(y, n)


def shared_a_draws(own: dict, samples: dict, refits: dict) -> dict[str, pd.DataFrame]:
    """Draws of the shared-A refits with the whole procedure (mean-A step included) per draw.

    For draw j the shared ceiling is the mean of the variants' draws of A; each variant's log B
    and log C_mid then move to it along that variant's own trade-off (their regression on A over
    its draws, the first-order effect of refitting with A held fixed), centred on the actual
    shared-A refit.
    """
    n = max(len(s) for s in samples.values())
    a = {k: np.resize(samples[k]["A"].to_numpy(dtype=float), n) for k in samples}
    a_star = np.mean(list(a.values()), axis=0)
    a_star_hat = float(np.mean([own[k].A for k in own]))
    out = {}
    for k, s in samples.items():
        cols = {"A": a_star}
        da = a[k] - own[k].A
        var = float(np.var(da))
        for p in ("B", "C_mid"):
            z = np.log(np.resize(s[p].to_numpy(dtype=float), n))
            dz = z - math.log(own[k].params[p])
            slope = float(np.mean(da * dz) / var) if var > 0 else 0.0
            moved = dz + slope * ((a_star - a[k]) - (a_star_hat - own[k].A))
            cols[p] = np.exp(math.log(refits[k].params[p]) + moved)
        cols["R0"] = np.resize(s["R0"].to_numpy(dtype=float), n)
        out[k] = pd.DataFrame({p: cols[p] for p in PARAM_NAMES})
    return out


def _paired(x: pd.DataFrame, y: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = max(len(x), len(y))
    idx_x, idx_y = np.resize(np.arange(len(x)), n), np.resize(np.arange(len(y)), n)
    return x.iloc[idx_x].reset_index(drop=True), y.iloc[idx_y].reset_index(drop=True)


def _fmt_upper(value: float) -> str:
    return "never" if not math.isfinite(value) else format_compute(value)


def falls(fit: SigmoidFit) -> bool:
    """The fitted curve falls (A below R0): a run that got worse, whose B is no efficiency."""
    return fit.A < fit.R0


def compare(
    curves: Mapping[str, Any],
    *,
    baseline: str | None = None,
    level: float = 0.9,
    margin: float = PAPER_MARGIN_A,
    n_samples: int = 1000,
    method: SampleMethod = "bootstrap",
    seed: int | None = 0,
    within: tuple[float, float] | None = None,
    min_compute: float | None = None,
    max_compute: float | None = None,
    r0: float | None = None,
) -> Comparison:
    """Compare recipe variants by ceiling (A) and efficiency (B), with intervals.

    Parameters
    ----------
    curves : mapping
        Variant name -> a :class:`SigmoidFit`, a :class:`~rlcurves.runs.RunsFit` (several
        seeds: its run-bootstrap draws are used), a DataFrame with columns ``compute`` and
        ``reward`` (and ``run`` for several seeds), or a ``(compute, reward)`` pair. Raw data are
        fitted with ``min_compute``, ``max_compute`` and ``r0``.
    baseline : str, optional
        The variant the others are measured against (default: the first).
    level : float
        Interval level of the table and of the verdicts (the draws, and so every probability,
        do not depend on it).
    margin : float
        Equivalence margin on A (the paper's 0.02): "same ceiling" needs the interval of the
        difference inside it, "higher"/"lower" the interval beyond it.
    n_samples, method, seed
        Draws of each variant's parameters: ``"bootstrap"`` (default: the raw AR(1) bootstrap,
        spread scaled by :data:`rlcurves._samples.PARAMETER_INFLATION`, measured in
        ``benchmarks/compare_calibration.py``) or ``"normal"``.
    within : (float, float), optional
        Compute range for crossovers (default: the latest start of the variants' fit windows to
        10x the largest compute).

    Returns
    -------
    Comparison

    Raises
    ------
    RLCurvesError
        Fewer than two variants, a ``baseline`` that is not one of them, or a variant's data
        that cannot be fitted (the message names the variant).

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fast = df.assign(reward=rlcurves.sigmoid(df["compute"], 0.55, 2.5, 1500, 0.3))
    >>> cmp = rlcurves.compare({"recipe": df, "fast": fast}, baseline="recipe", n_samples=200)
    >>> list(cmp.table["variant"])
    ['recipe', 'fast']
    """
    if not isinstance(curves, Mapping) or len(curves) < 2:
        hint = ""
        if isinstance(curves, pd.DataFrame):
            hint = (
                "; for one long table of variants, map each variant to its rows, e.g. "
                "dict(tuple(df.groupby('variant'))) with columns compute and reward"
            )
        raise RLCurvesError(
            "curves must map at least two variant names to fits or data, e.g. "
            f"{{'baseline': fit_a, 'fp32-head': fit_b}}{hint}"
        )
    tails(level)
    check_resamples("n_samples", n_samples)
    names = [str(k) for k in curves]
    if baseline is None:
        baseline = names[0]
    if baseline not in names:
        raise RLCurvesError(f"baseline {baseline!r} is not a variant; variants: {names}")
    fits: dict[str, SigmoidFit] = {}
    samples: dict[str, pd.DataFrame] = {}
    runs: dict[str, RunsFit] = {}
    kw = dict(min_compute=min_compute, max_compute=max_compute, r0=r0)
    for i, (key, value) in enumerate(curves.items()):
        name = str(key)
        item = _as_fit(name, value, kw, n_samples, variant_seed(seed, i))
        if isinstance(item, RunsFit):
            fits[name] = item.pooled
            samples[name] = item.samples
            runs[name] = item
        else:
            fits[name] = item
            samples[name] = parameter_samples(
                item, n_samples, method=method, seed=variant_seed(seed, i)
            )
    if within is None:
        # from where every variant's fit window has begun (a crossing before that is a backward
        # extrapolation of some fit) to 10x the largest compute seen
        starts = [float(f.fit_compute[f.fit_compute > 0].min()) for f in fits.values()]
        ends = [float(f.compute.max()) for f in fits.values()]
        within = (max(starts), 10.0 * max(ends))
    return Comparison(
        fits=fits,
        samples=samples,
        baseline=baseline,
        level=level,
        margin=margin,
        within=within,
        method=method,
        seed=seed,
        n_samples=n_samples,
        runs=runs,
    )


def _as_fit(name: str, value: Any, kw: dict, n_samples: int, seed: int | None):
    from .fit import fit_sigmoid
    from .runs import fit_runs

    if isinstance(value, (SigmoidFit, RunsFit)):
        return value
    if isinstance(value, pd.DataFrame):
        missing = {"compute", "reward"} - set(value.columns)
        if missing:
            raise RLCurvesError(
                f"the data of variant {name!r} lack column(s) {sorted(missing)}; pass a frame "
                "from rlcurves.read_log (columns compute, reward) or a fitted SigmoidFit",
                variant=name,
            )
        if "run" in value.columns and value["run"].nunique() > 1:
            return fit_runs(value, n_boot=n_samples, seed=seed, label=name, **kw)
        return fit_sigmoid("compute", "reward", data=value, label=name, **kw)
    if isinstance(value, tuple) and len(value) == 2:
        return fit_sigmoid(value[0], value[1], label=name, **kw)
    raise RLCurvesError(
        f"variant {name!r}: expected a SigmoidFit, RunsFit, DataFrame or (compute, reward) "
        f"pair, got {type(value).__name__}",
        variant=name,
    )


def variant_seed(seed: int | None, index: int) -> int | None:
    """An independent seed per variant: one shared seed would draw the same resampling noise for
    variants on the same compute grid, correlating their draws and shrinking every interval of a
    difference (a crossover's, a delta's)."""
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def refit_with_A(fit: SigmoidFit, A: float) -> SigmoidFit:
    """Refit ``fit``'s data with the ceiling held at ``A`` (everything else as before)."""
    from .fit import fit_sigmoid

    # The solver needs lower < upper, so A is held in an interval far below any data's
    # resolution rather than at a single value.
    half = 1e-9 * (1 + abs(A))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "A sits on its bound" is the point here
        return fit_sigmoid(
            fit.compute,
            fit.reward,
            sigma=fit.sigma,
            r0=fit.r0_fixed,
            min_compute=fit.min_compute,
            max_compute=fit.max_compute,
            bounds={"A": (A - half, A + half), "R0": fit.bounds.R0},
            absolute_sigma=fit.absolute_sigma,
            label=fit.label,
        )


def last_crossing(pa: Mapping, pb: Mapping, lo: float, hi: float) -> float | None:
    """The largest compute in ``[lo, hi]`` where the two curves are equal (None if none)."""
    grid = np.geomspace(lo, hi, 2000)

    def diff(c):
        return sigmoid(c, *(pa[p] for p in PARAM_NAMES)) - sigmoid(c, *(pb[p] for p in PARAM_NAMES))

    d = diff(grid)
    sign = np.sign(d)
    change = np.flatnonzero(sign[:-1] * sign[1:] < 0)
    if change.size == 0:
        return None
    i = int(change[-1])
    return float(brentq(diff, grid[i], grid[i + 1], xtol=1e-12 * grid[i], rtol=1e-13))


def _curves(samples: pd.DataFrame, compute: np.ndarray) -> np.ndarray:
    cols = [samples[p].to_numpy()[:, None] for p in PARAM_NAMES]
    return sigmoid(compute[None, :], *cols)


def _draw_crossings(diff: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per draw, the compute from which ``diff > 0`` holds to the end of the grid.

    ``diff`` (draws x grid) is leader-after minus leader-before. The crossing is interpolated
    linearly in log compute between grid points; ahead everywhere gives the grid's start, behind
    at the end gives ``inf``.
    """
    ahead = diff > 0
    out = np.full(diff.shape[0], np.inf)
    end_ahead = ahead[:, -1]
    # index of the last grid point where the leader is not ahead, for draws ahead at the end
    not_ahead = ~ahead
    last_behind = np.where(
        not_ahead.any(axis=1), diff.shape[1] - 1 - np.argmax(not_ahead[:, ::-1], axis=1), -1
    )
    always = end_ahead & (last_behind < 0)
    out[always] = grid[0]
    cross = end_ahead & (last_behind >= 0)
    i = last_behind[cross]
    d0, d1 = diff[cross, i], diff[cross, i + 1]
    x0, x1 = np.log(grid[i]), np.log(grid[i + 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d1 != d0, -d0 / (d1 - d0), 0.0)
    out[cross] = np.exp(x0 + np.clip(t, 0, 1) * (x1 - x0))
    return out
