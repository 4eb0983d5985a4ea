"""Posterior of the sigmoid's parameters by MCMC (emcee), with diagnostics that can be trusted.

Model: ``reward_i ~ Normal(R(C_i; A, B, C_mid, R0), sigma_i)``.

Noise, three ways (``noise=``):

- ``"fitted"`` (default without sigma, or with relative sigma): ``sigma_i = s * w_i^-1`` with the
  scale ``s`` unknown under the Jeffreys prior ``p(s) ~ 1/s``. ``s`` is integrated out exactly,
  which leaves ``log p(theta | y) = log prior(theta) - n/2 log RSS(theta)``, one dimension fewer
  for the sampler; draws of ``s`` are then taken from its conditional ``RSS(theta) / chi2_n``.
- ``"known"`` (default with ``absolute_sigma=True``): the per-point sigma of the fit.
- ``"binomial"``: known sigma from the evaluation set size, ``sqrt(p (1 - p) / n_eval)`` with ``p``
  the observed pass rate (kept away from 0 and 1 by half an evaluation).

Priors (stated in :attr:`Posterior.priors`, overridable with ``priors={"B": Prior(...)}``): A and
R0 uniform on the fit's bounds ([0, 1] for a pass rate; otherwise a range ten times the data's
spread), B and C_mid log-uniform over the solver's search range (B * span in [0.01, 1000], C_mid
within five spans of the data in log compute), i.e. broad and scale-free.

Sampling: ``n_ensembles`` independent emcee ensembles, each vectorized across its walkers
(``vectorize=True``), in (A, log B, log C_mid[, R0]). They run in blocks until every ensemble has
N > 50 integrated autocorrelation times after burn-in and the effective sample size reaches
``target_ess`` (the smaller of the bulk and tail ESS) for every parameter and the split
rank-normalized R-hat is below ``max_rhat``, or ``max_steps`` is reached, in which case
``converged`` is False and ``message`` and a warning say so. Each ensemble starts in its own ball
around a point three standard errors out (over-dispersed starts), so R-hat can fail. A walker left
stuck far below its ensemble (tens of nats under the median walker, on a plateau of the posterior
it cannot leave) is put back onto a walker of its own ensemble at the end of a block, and the steps
until then count as burn-in. The checks read the draws a quarter of tau apart.

The log posterior is compiled (:func:`rlcurves._kernels.log_posterior`) for priors of the class
:class:`Prior`; a subclass with its own ``log_density`` is evaluated in numpy (:class:`_LogProb`,
also the reference the tests hold the kernel to).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from . import _kernels as K
from .errors import NotConvergedWarning, RLCurvesError
from .model import PARAM_NAMES, fraction_of_gain, log_compute
from .model import sigmoid as sigmoid_curve
from .solver import theta_box

if TYPE_CHECKING:
    from .result import SigmoidFit

Noise = Literal["fitted", "known", "binomial"]


@dataclass(frozen=True)
class Prior:
    """A prior on one parameter: ``kind`` in uniform, loguniform, normal, lognormal.

    ``low, high`` bound the uniform kinds; ``mu, sd`` set the normal kinds (lognormal: of the
    log). Any kind may also carry ``low``/``high`` as a hard support.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=1500)
    >>> prior = rlcurves.Prior("normal", mu=0.6, sd=0.05)  # a belief about the ceiling A
    >>> post = fit.posterior(priors={"A": prior}, seed=0, progress=False, target_ess=400)
    >>> post.priors["A"]
    Prior(kind='normal', low=-inf, high=inf, mu=0.6, sd=0.05)
    """

    kind: Literal["uniform", "loguniform", "normal", "lognormal"]
    low: float = -math.inf
    high: float = math.inf
    mu: float = 0.0
    sd: float = 1.0

    def log_density(self, value: np.ndarray) -> np.ndarray:
        """Log density in the natural parameter (up to a constant); -inf outside the support."""
        v = np.asarray(value, dtype=float)
        inside = (v >= self.low) & (v <= self.high)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.kind == "uniform":
                out = np.zeros_like(v)
            elif self.kind == "loguniform":
                out = -np.log(v)
            elif self.kind == "normal":
                out = -0.5 * ((v - self.mu) / self.sd) ** 2
            elif self.kind == "lognormal":
                out = -0.5 * ((np.log(v) - self.mu) / self.sd) ** 2 - np.log(v)
            else:  # pragma: no cover - validated in __post_init__
                raise AssertionError(self.kind)
        return np.where(inside & np.isfinite(out), out, -np.inf)

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "loguniform", "normal", "lognormal"):
            raise RLCurvesError(
                f"unknown prior kind {self.kind!r}; use uniform, loguniform, normal or lognormal"
            )
        if self.kind in ("uniform", "loguniform") and not (
            math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high
        ):
            raise RLCurvesError(
                f"a {self.kind} prior needs finite low < high, got ({self.low}, {self.high})"
            )
        if self.kind == "loguniform" and self.low <= 0:
            raise RLCurvesError(f"a loguniform prior needs low > 0, got {self.low}")

    def describe(self) -> str:
        if self.kind in ("uniform", "loguniform"):
            return f"{self.kind}({self.low:g}, {self.high:g})"
        support = (
            ""
            if math.isinf(self.low) and math.isinf(self.high)
            else (f" on [{self.low:g}, {self.high:g}]")
        )
        return f"{self.kind}(mu={self.mu:g}, sd={self.sd:g}){support}"


def default_priors(fit: SigmoidFit) -> dict[str, Prior]:
    """The default priors for ``fit`` (see the module docstring)."""
    y = fit.fit_reward
    spread = max(float(np.ptp(y)), 1e-12)

    def linear_prior(bounds):
        lo, hi = bounds
        lo = lo if math.isfinite(lo) else float(y.min()) - 10 * spread
        hi = hi if math.isfinite(hi) else float(y.max()) + 10 * spread
        return Prior("uniform", lo, hi)

    x = log_compute(fit.fit_compute)
    lo, hi, _ = theta_box(x[None])
    priors = {
        "A": linear_prior(fit.bounds.A),
        "B": Prior("loguniform", math.exp(lo[0, 0]), math.exp(hi[0, 0])),
        "C_mid": Prior("loguniform", math.exp(lo[0, 1]), math.exp(hi[0, 1])),
    }
    if fit.r0_fixed is None:
        priors["R0"] = linear_prior(fit.bounds.R0)
    return priors


@dataclass(eq=False)
class Posterior:
    """Posterior draws of the sigmoid's parameters and their diagnostics.

    Attributes
    ----------
    samples : pandas.DataFrame
        Draws after burn-in, all ensembles pooled, columns ``A, B, C_mid, R0``.
    noise : numpy.ndarray
        Draws of the noise scale (``s`` for fitted noise; 1 for known sigma), one per sample.
    tau : dict
        Integrated autocorrelation time (steps) per parameter, the largest over ensembles.
    ess : dict
        Effective sample size per parameter: the smaller of ArviZ's bulk and tail ESS (without
        arviz, emcee's ``draws / tau``), computed on the draws ``thin`` steps apart.
    acceptance_fraction : float
        Mean acceptance fraction over all walkers.
    rhat : dict
        Split rank-normalized R-hat per parameter over every walker's chain, the ensembles
        started over-dispersed (ArviZ's ``rhat``, matched by :func:`split_rank_rhat`).
    converged : bool
        True when every ensemble ran more than 50 tau after burn-in, ``ess`` (the smaller of the
        bulk and tail ESS) reached the target and every R-hat is below ``max_rhat``.
    message : str
        The convergence verdict in words.
    priors : dict
        The priors used, by parameter.
    thin : int
        The diagnostics (``tau``, ``ess``, ``rhat``) were computed on every ``thin``-th step
        after burn-in: a quarter of tau, which keeps all but ~0.5% of the effective samples and
        makes each convergence check cost the same at any chain length. ``samples`` and
        ``chains`` hold every step.

    Examples
    --------
    >>> df = rlcurves.datasets.load_example("simulated_scalerl_8b")  # columns compute, reward
    >>> fit = rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=1500)
    >>> post = fit.posterior(seed=0, progress=False, target_ess=400)
    >>> post.converged
    True
    >>> ci = post.ci(0.9).set_index("parameter")
    >>> bool(ci.loc["A", "lower"] < fit.A < ci.loc["A", "upper"])
    True
    """

    samples: pd.DataFrame
    noise: np.ndarray
    tau: dict[str, float]
    ess: dict[str, float]
    acceptance_fraction: float
    rhat: dict[str, float]
    converged: bool
    message: str
    priors: dict[str, Prior]
    estimate: dict[str, float]
    noise_model: str
    n_steps: int
    burn: int
    n_walkers: int
    n_ensembles: int
    bounds: tuple[float, float] = (-math.inf, math.inf)
    n_eval: int | None = None
    chains: np.ndarray | None = field(default=None, repr=False)
    known_sd: float = math.nan
    thin: int = 1

    def ci(self, level: float = 0.9) -> pd.DataFrame:
        """Equal-tailed credible intervals: ``parameter, estimate, lower, upper``.

        ``estimate`` is the posterior median.
        """
        from .bootstrap import _tails

        lo_q, hi_q = _tails(level)
        rows = []
        for name in PARAM_NAMES:
            v = self.samples[name].to_numpy()
            lo, med, hi = np.quantile(v, [lo_q, 0.5, hi_q])
            rows.append({"parameter": name, "estimate": med, "lower": lo, "upper": hi})
        return pd.DataFrame(rows)

    def curves(self, compute: ArrayLike) -> np.ndarray:
        """The curve of every draw at ``compute``: shape ``(n_samples, len(compute))``."""
        c = np.atleast_1d(np.asarray(compute, dtype=float))
        cols = [self.samples[p].to_numpy()[:, None] for p in PARAM_NAMES]
        return sigmoid_curve(c[None, :], *cols)

    def predict_interval(
        self, compute: ArrayLike, level: float = 0.9, *, prediction: bool = False, seed=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Credible interval of the expected curve at ``compute`` (or of a new evaluation).

        With ``prediction`` each draw's curve gets Gaussian noise: the drawn noise scale for
        fitted noise, the binomial sd of the drawn curve for ``noise="binomial"``, and the fit's
        median sigma for known sigma. Clipped to the metric's range.
        """
        from .bootstrap import _shape_like, band

        curves = self.curves(compute)
        if prediction:
            rng = np.random.default_rng(seed)
            if self.noise_model == "binomial":
                p = np.clip(curves, 0.5 / self.n_eval, 1 - 0.5 / self.n_eval)
                sd = np.sqrt(p * (1 - p) / self.n_eval)
            elif self.noise_model == "known":
                sd = self.known_sd
            else:
                sd = self.noise[:, None] * self.known_sd
            curves = curves + rng.standard_normal(curves.shape) * sd
        lo, hi = band(curves, level, self.bounds)
        return _shape_like(lo, compute), _shape_like(hi, compute)

    def diagnostics(self) -> pd.DataFrame:
        """Per parameter: tau, ess, rhat; with acceptance, steps and verdict in ``attrs``."""
        names = list(self.tau)
        df = pd.DataFrame(
            {
                "parameter": names,
                "tau": [self.tau[n] for n in names],
                "ess": [self.ess[n] for n in names],
                "rhat": [self.rhat[n] for n in names],
            }
        )
        df.attrs.update(
            acceptance_fraction=self.acceptance_fraction,
            n_steps=self.n_steps,
            burn=self.burn,
            converged=self.converged,
            message=self.message,
        )
        return df

    def to_arviz(self):
        """The chains as ArviZ InferenceData (needs the optional ``arviz`` package).

        Each ensemble's walkers become chains (ArviZ's own R-hat over them is then the
        over-optimistic walker R-hat: use :attr:`rhat`, which compares ensembles).
        """
        try:
            import arviz as az
        except ImportError as err:  # optional dependency
            raise RLCurvesError(
                "to_arviz needs the optional package arviz: pip install arviz"
            ) from err
        if self.chains is None:
            raise RLCurvesError("this Posterior kept no chains (keep_chains=False)")
        # chains: (ensembles, steps, walkers, dim) -> (chain, draw) per parameter
        e, t, w, d = self.chains.shape
        flat = self.chains.transpose(0, 2, 1, 3).reshape(e * w, t, d)
        names = list(self.tau)
        data = {}
        for i, name in enumerate(names):
            data[name] = np.exp(flat[..., i]) if name in ("B", "C_mid") else flat[..., i]
        return az.from_dict(posterior=data)

    def __repr__(self) -> str:
        ess = ", ".join(f"{k}={v:.0f}" for k, v in self.ess.items())
        state = "converged" if self.converged else "NOT converged"
        return (
            f"Posterior({len(self.samples)} draws, ESS {ess}, acceptance "
            f"{self.acceptance_fraction:.2f}, {state})"
        )


class _LogProb:
    """Vectorized log posterior over walkers, in (A, log B, log C_mid[, R0]), in numpy.

    The reference for :class:`_CompiledLogProb` (the tests pin the two together) and the log
    posterior of priors the kernel cannot express (a subclass of :class:`Prior` with its own
    ``log_density``). :meth:`natural` and :meth:`rss` also turn the draws into the reported ones.
    """

    def __init__(self, fit: SigmoidFit, priors: Mapping[str, Prior], noise: str, n_eval):
        self.x = log_compute(fit.fit_compute)[None, :]
        self.y = fit.fit_reward[None, :]
        self.r0 = fit.r0_fixed
        self.noise = noise
        if noise == "fitted":
            w = np.ones(fit.n) if fit.sigma is None else 1.0 / fit.fit_sigma
        elif noise == "known":
            w = 1.0 / fit.fit_sigma
        else:
            p = np.clip(fit.fit_reward, 0.5 / n_eval, 1 - 0.5 / n_eval)
            w = 1.0 / np.sqrt(p * (1 - p) / n_eval)
        self.w2 = (w * w)[None, :]
        self.n = fit.n
        self.priors = priors
        self.names = ["A", "B", "C_mid"] + (["R0"] if self.r0 is None else [])

    def natural(self, z: np.ndarray) -> dict[str, np.ndarray]:
        out = {"A": z[:, 0], "B": np.exp(z[:, 1]), "C_mid": np.exp(z[:, 2])}
        out["R0"] = z[:, 3] if self.r0 is None else np.full(z.shape[0], self.r0)
        return out

    def rss(self, p: dict[str, np.ndarray]) -> np.ndarray:
        s = fraction_of_gain(self.x, p["B"][:, None], np.log(p["C_mid"])[:, None])
        r = self.y - p["R0"][:, None] - (p["A"] - p["R0"])[:, None] * s
        return np.sum(self.w2 * r * r, axis=1)

    def draw_rss(self, z: np.ndarray, log_post: np.ndarray | None = None) -> np.ndarray:
        """The weighted RSS of every draw ``z`` (k, d) (``log_post``, its log posterior, is
        used by the compiled subclass)."""
        return self.rss(self.natural(z))

    def __call__(self, z: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(z)
        p = self.natural(z)
        lp = np.zeros(z.shape[0])
        for name in self.names:
            lp += self.priors[name].log_density(p[name])
        # sampling log B and log C_mid: the Jacobian of the change of variables
        lp += z[:, 1] + z[:, 2]
        ok = np.isfinite(lp)
        out = np.full(z.shape[0], -np.inf)
        if ok.any():
            rss = self.rss({k: v[ok] for k, v in p.items()})
            like = -0.5 * self.n * np.log(rss) if self.noise == "fitted" else -0.5 * rss
            out[ok] = lp[ok] + like
        return np.where(np.isfinite(out), out, -np.inf)


_PRIOR_CODES = {"uniform": 0, "loguniform": 1, "normal": 2, "lognormal": 3}


class _CompiledLogProb(_LogProb):
    """The same log posterior as :class:`_LogProb`, evaluated by the compiled kernel
    :func:`rlcurves._kernels.log_posterior` (one loop over walkers and points, no temporaries).

    Only for priors of the class :class:`Prior` itself, whose densities the kernel encodes by
    kind; see :func:`_log_prob`.
    """

    def __init__(self, fit: SigmoidFit, priors: Mapping[str, Prior], noise: str, n_eval):
        super().__init__(fit, priors, noise, n_eval)
        order = [priors.get(name) for name in PARAM_NAMES]  # R0 absent when it is fixed
        self._kinds = np.array([_PRIOR_CODES[p.kind] if p else 0 for p in order], dtype=np.int64)
        self._lows = np.array([p.low if p else -math.inf for p in order])
        self._highs = np.array([p.high if p else math.inf for p in order])
        self._mus = np.array([p.mu if p else 0.0 for p in order])
        self._sds = np.array([p.sd if p else 1.0 for p in order])
        self._x = np.ascontiguousarray(self.x[0])
        self._y = np.ascontiguousarray(self.y[0])
        self._w2 = np.ascontiguousarray(self.w2[0])
        self._args = (
            self._x, self._y, self._w2, self.r0 is not None,
            0.0 if self.r0 is None else float(self.r0), self._kinds, self._lows, self._highs,
            self._mus, self._sds, self.noise == "fitted",
        )  # fmt: skip

    def kernel_args(self) -> tuple:
        """The arguments of :func:`rlcurves._kernels.log_posterior` after the walkers."""
        return self._args

    def __call__(self, z: np.ndarray) -> np.ndarray:
        z = np.ascontiguousarray(np.atleast_2d(z), dtype=float)
        out = np.empty(z.shape[0])
        K.log_posterior(z, *self._args, out)
        return out

    def draw_rss(self, z: np.ndarray, log_post: np.ndarray | None = None) -> np.ndarray:
        z = np.ascontiguousarray(z, dtype=float)
        out = np.empty(z.shape[0])
        r0 = 0.0 if self.r0 is None else float(self.r0)
        if log_post is not None and self.noise == "fitted":
            # the sampler kept every draw's log posterior: the RSS follows from it and the
            # prior alone (a pass over the points for a million draws was a tenth of a run)
            K.rss_from_log_posterior(
                z, np.ascontiguousarray(log_post, dtype=float), self.n, self.r0 is not None, r0,
                self._kinds, self._lows, self._highs, self._mus, self._sds, out,
            )  # fmt: skip
            return out
        K.walker_rss(z, self._x, self._y, self._w2, self.r0 is not None, r0, out)
        return out


def _log_prob(fit: SigmoidFit, priors: Mapping[str, Prior], noise: str, n_eval) -> _LogProb:
    """The compiled log posterior, or the numpy one where a prior has its own ``log_density``
    (a subclass of :class:`Prior`), which the kernel cannot call."""
    custom = any(type(p).log_density is not Prior.log_density for p in priors.values())
    cls = _LogProb if custom else _CompiledLogProb
    return cls(fit, priors, noise, n_eval)


def _gelman_rubin(chains: list[np.ndarray]) -> np.ndarray:
    """Classical R-hat across chains; each entry (draws, dim). Kept for reference: it has one
    degree of freedom between two ensembles and no power against chains that differ in spread
    or tails, so :func:`split_rank_rhat` is what the posterior reports."""
    means = np.array([c.mean(axis=0) for c in chains])
    within = np.mean([c.var(axis=0, ddof=1) for c in chains], axis=0)
    n = min(c.shape[0] for c in chains)
    between_over_n = means.var(axis=0, ddof=1)
    var_hat = (n - 1) / n * within + between_over_n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(var_hat / within)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of the flattened ``x``, ties given the mean of their ranks.

    ``scipy.stats.rankdata(x, axis=None)`` exactly (the ranks are integers and halves), by an
    unstable sort: the mean over a run of ties does not depend on their order, and scipy's
    stable merge sort was a third of a posterior's convergence checks.
    """
    flat = x.ravel()
    order = np.argsort(flat)
    ordered = flat[order]
    starts = np.empty(flat.size, dtype=bool)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    group = np.cumsum(starts) - 1
    edges = np.append(np.flatnonzero(starts), flat.size)
    ranks = np.empty(flat.size)
    ranks[order] = (0.5 * (edges[:-1] + edges[1:] - 1) + 1)[group]
    return ranks.reshape(x.shape)


def _rank_normalize(x: np.ndarray) -> np.ndarray:
    """Normal scores of the pooled ranks (Blom's offset), shaped like ``x`` (chains, draws)."""
    from scipy.special import ndtri

    return ndtri((_average_ranks(x) - 0.375) / (x.size + 0.25))


def _basic_rhat(x: np.ndarray) -> float:
    n = x.shape[1]
    within = np.mean(np.var(x, axis=1, ddof=1))
    var_hat = (n - 1) / n * within + np.var(np.mean(x, axis=1), ddof=1)
    return float(np.sqrt(var_hat / within)) if within > 0 else math.inf


def split_rank_rhat(x: ArrayLike) -> float:
    """Split, rank-normalized R-hat (Vehtari et al. 2021; ArviZ's ``rhat(method="rank")``).

    ``x`` is (chains, draws). Each chain is split in halves (a trend within a chain shows), the
    pooled draws are replaced by their normal scores (heavy tails cannot hide), and the larger of
    the bulk R-hat and the R-hat of the folded draws ``|x - median|`` (chains that differ in
    spread) is returned.
    """
    x = np.asarray(x, dtype=float)
    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)
    if not np.all(np.isfinite(split)) or np.ptp(split) == 0:
        return math.nan
    bulk = _basic_rhat(_rank_normalize(split))
    folded = np.abs(split - np.median(split))
    tail = _basic_rhat(_rank_normalize(folded))
    return max(bulk, tail)


def ess_bulk_tail(x: np.ndarray) -> tuple[float, float]:
    """Bulk and tail effective sample sizes of (chains, draws), ArviZ's (needs arviz)."""
    import arviz as az

    return float(az.ess(x, method="bulk")), float(az.ess(x, method="tail"))


def posterior(
    fit: SigmoidFit,
    *,
    seed: int | None = None,
    progress: bool = True,
    noise: Noise | None = None,
    n_eval: int | None = None,
    priors: Mapping[str, Prior] | None = None,
    n_walkers: int = 32,
    n_ensembles: int = 4,
    target_ess: float = 2000.0,
    min_tau_multiple: float = 50.0,
    block_steps: int = 250,
    max_steps: int = 20000,
    keep_chains: bool = True,
    max_rhat: float = 1.01,
) -> Posterior:
    """Sample the posterior of ``fit``'s parameters with emcee.

    Parameters
    ----------
    fit : SigmoidFit
        Supplies the data, the window, fixed R0, bounds and the starting point.
    seed : int, optional
        Seed: the same seed gives the same draws.
    progress : bool
        A progress bar over sampling blocks.
    noise : {"fitted", "known", "binomial"}, optional
        Noise model (see the module docstring). Default: "known" when the fit used absolute
        sigma, otherwise "fitted".
    n_eval : int, optional
        Evaluations behind each pass rate (prompts x generations, e.g. 16000) for "binomial".
    priors : dict of Prior, optional
        Overrides of :func:`default_priors` by parameter name.
    n_walkers, n_ensembles : int
        Walkers per ensemble and independent ensembles (at least 2, for R-hat).
    target_ess : float
        Effective sample size wanted for every parameter.
    min_tau_multiple : float
        Steps after burn-in required, in autocorrelation times (50 is emcee's advice).
    block_steps, max_steps : int
        Steps per block between convergence checks, and the most steps per ensemble.
    keep_chains : bool
        Keep the raw chains (for :meth:`Posterior.to_arviz`).
    max_rhat : float
        ``converged`` also needs the split rank-normalized R-hat of every parameter below this
        (Vehtari et al. 2021 advise 1.01).

    Returns
    -------
    Posterior
    """
    if noise is None:
        noise = "known" if fit.sigma is not None and fit.absolute_sigma else "fitted"
    if noise not in ("fitted", "known", "binomial"):
        raise RLCurvesError(f"noise must be 'fitted', 'known' or 'binomial', got {noise!r}")
    if noise == "known" and fit.sigma is None:
        raise RLCurvesError(
            "noise='known' needs per-point sigma: fit with sigma=... (and absolute_sigma=True), "
            "or use noise='binomial' with n_eval=, or noise='fitted'"
        )
    if noise == "binomial" and (n_eval is None or n_eval < 1):
        raise RLCurvesError(
            "noise='binomial' needs n_eval= (evaluations per point, e.g. 1000 prompts x 16 = 16000)"
        )
    if n_ensembles < 2:
        raise RLCurvesError(f"n_ensembles must be >= 2 for R-hat, got {n_ensembles}")
    free = ["A", "B", "C_mid"] + (["R0"] if fit.r0_fixed is None else [])
    ndim = len(free)
    if n_walkers < 2 * ndim:
        raise RLCurvesError(f"n_walkers must be >= {2 * ndim} (twice the parameters)")
    all_priors = default_priors(fit)
    unknown = set(priors or {}) - set(all_priors)
    if unknown:
        raise RLCurvesError(f"priors given for {sorted(unknown)}; free parameters are {free}")
    all_priors.update(priors or {})
    log_prob = _log_prob(fit, {k: all_priors[k] for k in free}, noise, n_eval)
    rng = np.random.default_rng(seed)
    center = np.array(
        [fit.A, math.log(fit.B), math.log(fit.C_mid)] + ([fit.R0] if fit.r0_fixed is None else [])
    )
    spread = _start_spread(fit, center)
    # over-dispersed starts: every ensemble begins in its own small ball around a point drawn
    # with three standard errors of spread, so ensembles that have not mixed disagree (R-hat)
    # instead of agreeing by construction
    start = np.concatenate(
        [_ensemble_start(rng, center, spread, n_walkers, log_prob) for _ in range(n_ensembles)]
    )
    # One emcee ensemble holds every ensemble as a block of walkers; the move below only ever
    # pairs walkers of the same block, so the ensembles stay independent (R-hat across them is
    # meaningful) while each step is one vectorized log-probability call for all of them.
    sampler = _Sampler(
        log_prob,
        n_walkers * n_ensembles,
        ndim,
        [
            (BlockDEMove(n_ensembles, log_prob=log_prob), 0.9),
            (BlockDEMove(n_ensembles, gamma0=1.0, log_prob=log_prob), 0.1),
        ],
        np.random.RandomState(int(rng.integers(2**31))),
    )
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_steps, desc="posterior (emcee)", leave=False, unit="step")
    steps, verdict, state, last_reset, thin = 0, None, start, 0, 1
    while steps < max_steps:
        n_block = min(block_steps, max_steps - steps)
        state = sampler.run_mcmc(state, n_block)
        steps += n_block
        if bar is not None:
            bar.update(n_block)
        if steps < max_steps and _reset_stuck(state, n_ensembles, rng):
            # the chains jump here: what came before is burn-in, and there is nothing to check
            last_reset = steps
            continue
        blocks = _split(sampler.get_chain(), n_ensembles)
        verdict = _check(
            blocks, steps, target_ess, min_tau_multiple, n_walkers, max_rhat, last_reset, thin,
            final=steps >= max_steps,
        )  # fmt: skip
        if verdict["done"]:
            break
        thin = _thin_for(verdict["tau"])
    if bar is not None:
        bar.close()
    burn = verdict["burn"]
    chains = [b[burn:] for b in _split(sampler.get_chain(), n_ensembles)]  # (steps, walkers, dim)
    pooled = np.concatenate([c.reshape(-1, ndim) for c in chains])
    natural = log_prob.natural(pooled)
    samples = pd.DataFrame({name: natural[name] for name in PARAM_NAMES})
    if noise == "fitted":
        log_post = np.split(sampler.get_log_prob(), n_ensembles, axis=1)  # as the chains
        rss = log_prob.draw_rss(pooled, np.concatenate([b[burn:].ravel() for b in log_post]))
        noise_draws = np.sqrt(rss / rng.chisquare(fit.n, size=rss.size))
    else:
        noise_draws = np.ones(len(samples))
    rhat, ess_bulk, ess_tail = verdict["rhat"], verdict["ess_bulk"], verdict["ess_tail"]
    tau = verdict["tau"]
    ess = {name: float(min(ess_bulk[i], ess_tail[i])) for i, name in enumerate(free)}
    acceptance = float(np.mean(sampler.acceptance_fraction))
    converged = bool(verdict["done"])
    if converged:
        message = (
            f"converged: {steps - burn} steps after burn-in = "
            f"{(steps - burn) / tau.max():.0f} autocorrelation times (> {min_tau_multiple:g}), "
            f"min bulk/tail ESS {min(ess.values()):.0f}, max split rank R-hat "
            f"{np.nanmax(rhat):.3f} (< {max_rhat:g})"
        )
    else:
        message = (
            f"NOT converged: after {steps} steps the chains hold "
            f"{(steps - burn) / tau.max():.1f} autocorrelation times (need > "
            f"{min_tau_multiple:g}), min bulk/tail ESS {min(ess.values()):.0f} (need "
            f"{target_ess:g}), max split rank R-hat {np.nanmax(rhat):.3f} (need < {max_rhat:g}); "
            "raise max_steps"
        )
        warnings.warn(message, NotConvergedWarning, stacklevel=2)
    from .bootstrap import metric_range

    w = np.ones(fit.n) if fit.sigma is None else fit.fit_sigma
    return Posterior(
        samples=samples,
        noise=noise_draws,
        tau={name: float(tau[i]) for i, name in enumerate(free)},
        ess=ess,
        acceptance_fraction=acceptance,
        rhat={name: float(rhat[i]) for i, name in enumerate(free)},
        converged=converged,
        message=message,
        priors={name: all_priors[name] for name in free},
        estimate=dict(fit.params),
        noise_model=noise,
        n_steps=steps,
        burn=burn,
        n_walkers=n_walkers,
        n_ensembles=n_ensembles,
        bounds=metric_range(fit),
        n_eval=n_eval,
        chains=np.stack(chains) if keep_chains else None,
        known_sd=float(np.median(w)),
        thin=int(verdict["thin"]),
    )


class _Sampler:
    """emcee's ``EnsembleSampler`` loop for moves that evaluate the log posterior themselves.

    Per step, as ``EnsembleSampler.sample``: a move drawn by its weight from the sampler's
    random state (which the move also draws from), its proposal, and the step saved to an emcee
    :class:`~emcee.backends.Backend` (chain, log posterior, acceptance). Without emcee's per-step
    bookkeeping (a copy of the random state's 2.5 kB at every step, among others, which cost a
    tenth of a posterior): the same seed gives the chain emcee's sampler gives.
    """

    def __init__(self, log_prob, n_total: int, ndim: int, moves, random: np.random.RandomState):
        from emcee.backends import Backend
        from emcee.model import Model

        self.log_prob = log_prob
        self.moves = [move for move, _ in moves]
        weights = np.atleast_1d([weight for _, weight in moves]).astype(float)
        self.weights = weights / np.sum(weights)  # as emcee normalizes them
        self.model = Model(log_prob, None, map, random)
        self.random = random
        self.backend = Backend()
        self.backend.reset(n_total, ndim)

    def run_mcmc(self, state, n_steps: int):
        """``n_steps`` steps from ``state`` (walker coordinates, or the last step's state)."""
        from emcee.state import State

        if not isinstance(state, State):
            coords = np.array(state, dtype=float)
            state = State(coords, log_prob=np.asarray(self.log_prob(coords), dtype=float))
            if np.any(np.isnan(state.log_prob)):
                raise RLCurvesError("the log posterior is NaN at the walkers' start")
        self.backend.grow(n_steps, None)
        for _ in range(n_steps):
            move = self.moves[self.random.choice(len(self.moves), p=self.weights)]
            state, accepted = move.propose(self.model, state)
            self.backend.save_step(state, accepted)
        return state

    def get_chain(self) -> np.ndarray:
        return self.backend.get_chain()

    def get_log_prob(self) -> np.ndarray:
        return self.backend.get_log_prob()

    @property
    def acceptance_fraction(self) -> np.ndarray:
        return self.backend.accepted / float(self.backend.iteration)


def _split(chain: np.ndarray, n_ensembles: int) -> list[np.ndarray]:
    """Chain ``(steps, ensembles * walkers, dim)`` -> a ``(steps, walkers, dim)`` per ensemble."""
    return np.split(chain, n_ensembles, axis=1)


def integrated_time(chain: np.ndarray, c: float = 5.0) -> np.ndarray:
    """Integrated autocorrelation time per parameter of ``chain`` (steps, walkers, dim).

    emcee's estimator (``emcee.autocorr.integrated_time(chain, c, tol=0)``: the autocorrelation
    averaged over walkers, summed up to Sokal's automatic window ``M >= c tau``), with every
    walker and parameter in one FFT instead of one call each (walkers x parameters x ensembles
    calls per check were a third of a posterior's time).
    """
    x = np.asarray(chain, dtype=float)
    n_t = x.shape[0]
    n_fft = 2 * (1 << max(0, (n_t - 1).bit_length()))  # emcee's 2 * next power of two
    f = np.fft.rfft(x - x.mean(axis=0), n=n_fft, axis=0)
    acf = np.fft.irfft(f * np.conjugate(f), n=n_fft, axis=0)[:n_t]
    with np.errstate(invalid="ignore", divide="ignore"):
        acf = (acf / acf[0]).mean(axis=1)  # (steps, dim)
    taus = 2.0 * np.cumsum(acf, axis=0) - 1.0
    out = np.empty(x.shape[2])
    for d in range(x.shape[2]):
        inside = np.arange(n_t) < c * taus[:, d]
        out[d] = taus[np.argmin(inside) if inside.any() else n_t - 1, d]
    return out


def _thin_for(tau: np.ndarray) -> int:
    """Thinning for the convergence checks: a quarter of the smallest autocorrelation time.

    Draws a quarter of tau apart keep all but ~0.5% of the chain's effective samples (an AR(1)
    chain thinned by k = tau / 4 keeps (1 - r^k) / (1 + r^k) / k of them per draw with
    r = exp(-1 / tau), against 1 / (2 tau)), and a check then costs the same at every chain
    length: unthinned, each check re-read the whole chain, and the checks of a 20,000-step run
    took 90% of its time.
    """
    finite = tau[np.isfinite(tau)]
    return max(1, int(np.min(finite) // 4)) if finite.size else 1


def _check(
    blocks,
    steps,
    target_ess,
    multiple,
    n_walkers,
    max_rhat=1.01,
    min_burn=0,
    thin=1,
    burn=None,
    final=True,
) -> dict[str, Any]:
    """Autocorrelation time after burn-in, R-hat and ESS, and whether the chains are long enough.

    tau is estimated per ensemble (the mean over its walkers' autocorrelation, emcee's estimator)
    and the largest over ensembles is used; burn-in is two of those times (at least 50 steps, and
    at least ``min_burn``, the last step at which stuck walkers were moved), unless ``burn`` is
    given. R-hat is the split rank-normalized one over every walker's chain (the over-dispersed
    ensembles make disagreement between them visible); ESS is the smaller of the bulk and tail
    ESS (ArviZ's, over walker chains), capped by the steps after burn-in over tau times the
    number of ensembles times the walkers (emcee's count). Every estimate is taken on the draws
    ``thin`` steps apart (see :func:`_thin_for`); tau is in steps either way. Unless ``final``,
    R-hat and ArviZ's ESS (rank-normalizing every draw: the costly part) are only computed once
    the chains hold enough autocorrelation times and emcee's count reaches the target, R-hat
    parameter by parameter until one fails, and ArviZ's ESS only once every R-hat passes, since
    ``done`` is False before that whatever they are (an R-hat not computed is NaN, the ESS
    emcee's count).
    """

    def tau_of(chain):
        return thin * integrated_time(chain[::thin])

    if burn is None:
        tau0 = np.max([tau_of(b) for b in blocks], axis=0)
        burn = int(min(steps // 2, max(2 * np.nanmax(tau0), 50)))
        burn = max(burn, int(min_burn))
    kept = steps - burn
    dim = blocks[0].shape[2]
    if kept < 2:  # (only with block_steps=1 right after stuck walkers were moved)
        nan = np.full(dim, math.nan)
        return dict(tau=nan, burn=burn, done=False, rhat=nan, ess_bulk=np.zeros(dim),
                    ess_tail=np.zeros(dim), thin=thin)  # fmt: skip
    tau = np.max([tau_of(b[burn:]) for b in blocks], axis=0)
    ess_emcee = kept * n_walkers * len(blocks) / tau
    long_enough = bool(np.all(np.isfinite(tau)) and kept > multiple * np.max(tau))
    if not final and not (long_enough and np.min(ess_emcee) >= target_ess):
        return dict(tau=tau, burn=burn, done=False, rhat=np.full(dim, math.nan),
                    ess_bulk=ess_emcee, ess_tail=ess_emcee, thin=thin)  # fmt: skip
    walkers = np.concatenate([b[burn::thin] for b in blocks], axis=1)  # (kept, chains, dim)
    rhat = np.full(dim, math.nan)
    for i in range(dim):
        rhat[i] = split_rank_rhat(walkers[:, :, i].T)
        if not final and not rhat[i] < max_rhat:
            # not done whatever the other parameters' R-hat and the ESS are: those (ranking
            # every draw again) wait for a check that R-hat passes (R-hat, not the ESS, is what
            # holds a posterior back here); they stay NaN and emcee's count
            return dict(tau=tau, burn=burn, done=False, rhat=rhat, ess_bulk=ess_emcee,
                        ess_tail=ess_emcee, thin=thin)  # fmt: skip
    try:
        bt = np.array([ess_bulk_tail(walkers[:, :, i].T) for i in range(dim)])
        ess_bulk = np.minimum(bt[:, 0], ess_emcee)
        ess_tail = np.minimum(bt[:, 1], ess_emcee)
    except ImportError:  # arviz is optional: emcee's count for both
        ess_bulk = ess_tail = ess_emcee
    ess = np.minimum(ess_bulk, ess_tail)
    done = bool(long_enough and np.min(ess) >= target_ess and np.all(rhat < max_rhat))
    return {
        "tau": tau,
        "burn": burn,
        "done": done,
        "rhat": rhat,
        "ess_bulk": ess_bulk,
        "ess_tail": ess_tail,
        "thin": thin,
    }


def _stuck_gap(ndim: int) -> float:
    """How far (in log density) below its ensemble's median walker a walker is called stuck.

    In a Gaussian posterior of ``ndim`` dimensions ``2 (log p_max - log p)`` is chi-square with
    ``ndim`` degrees of freedom; a draw sits this far below the median with probability < 1e-9.
    """
    from scipy.stats import chi2

    return 0.5 * (chi2.isf(1e-9, ndim) - chi2.median(ndim))


def _reset_stuck(state, n_ensembles: int, rng: np.random.Generator) -> bool:
    """Move stuck walkers onto other walkers of their own ensemble; True if any moved.

    A walker that wanders off during burn-in onto a plateau of the posterior (here: C_mid far
    outside the data with B small, tens of nats below the mode) is only ever offered moves built
    from the other walkers' differences, which are tiny on the plateau's scale: it stays there
    for tens of thousands of steps, the ensemble never passes its R-hat and ESS checks, and the
    run ends at ``max_steps`` (the README's posterior took 20,000 steps). Copying a walker of
    the same ensemble (the ensembles stay independent) puts it back; the caller counts every
    step up to the reset as burn-in. A real second mode holds walkers of similar density, which
    are not touched.
    """
    coords, lp = state.coords, state.log_prob
    n_total, ndim = coords.shape
    per = n_total // n_ensembles
    gap = _stuck_gap(ndim)
    moved = False
    for e in range(n_ensembles):
        rows = np.arange(e * per, (e + 1) * per)
        block_lp = lp[rows]
        finite = block_lp[np.isfinite(block_lp)]
        if finite.size < 2:
            continue
        stuck = ~(block_lp >= np.median(finite) - gap)
        if stuck.any():
            donors = rng.choice(rows[~stuck], size=int(stuck.sum()))
            coords[rows[stuck]] = coords[donors]
            lp[rows[stuck]] = lp[donors]
            moved = True
    return moved


class BlockDEMove:
    """Differential-evolution move (ter Braak 2006; Nelson et al. 2013) within blocks of walkers.

    The walkers form ``n_blocks`` independent ensembles of equal size; each half of every block is
    updated from differences of two walkers of the other half of the same block, so no
    information crosses between blocks. ``gamma0`` defaults to ``2.38 / sqrt(2 ndim)``; a move with
    ``gamma0=1`` now and then lets walkers jump between modes. ``log_prob``, a vectorized log
    density ``(n, d) -> (n,)`` returning floats (``-inf`` outside the support), is called
    directly if given: emcee's own wrapper checks every walker's value in Python, which cost
    more than the compiled log posterior itself.
    """

    def __init__(
        self,
        n_blocks: int,
        gamma0: float | None = None,
        sigma: float = 1e-5,
        log_prob=None,
    ):
        self.n_blocks = n_blocks
        self.gamma0 = gamma0
        self.sigma = sigma
        self.log_prob = log_prob

    def tune(self, state, accepted):  # emcee's Move interface
        pass

    def propose(self, model, state):
        from emcee.state import State

        coords, log_prob = state.coords, state.log_prob
        n_total, ndim = coords.shape
        per = n_total // self.n_blocks
        half = per // 2
        g0 = self.gamma0 if self.gamma0 is not None else 2.38 / math.sqrt(2 * ndim)
        random = model.random
        offsets = (np.arange(self.n_blocks) * per)[:, None]
        order = np.argsort(random.rand(self.n_blocks, per), axis=1) + offsets
        accepted = np.zeros(n_total, dtype=bool)
        compiled = isinstance(self.log_prob, _CompiledLogProb)
        for s_idx, c_idx in (
            (order[:, :half], order[:, half:]),
            (order[:, half:], order[:, :half]),
        ):
            n_s, n_c = s_idx.shape[1], c_idx.shape[1]
            i1 = random.randint(0, n_c, size=s_idx.shape)
            i2 = random.randint(0, n_c - 1, size=s_idx.shape)
            i2 = i2 + (i2 >= i1)
            if compiled:
                # the same random numbers, drawn in the same order; the proposal, the log
                # posterior and the acceptance in one compiled call (a step's two dozen numpy
                # calls on arrays of a hundred numbers cost more than the posterior itself)
                noise = random.randn(self.n_blocks, n_s)  # the numbers of (n_blocks, n_s, 1)
                log_u = np.log(random.rand(s_idx.size))
                lp = self.log_prob
                K.de_half_step(
                    coords, log_prob, np.ascontiguousarray(s_idx), np.ascontiguousarray(c_idx),
                    i1, i2, noise, log_u, g0, self.sigma, accepted, *lp.kernel_args(),
                )  # fmt: skip
                continue
            rows = np.arange(self.n_blocks)[:, None]
            diff = coords[c_idx[rows, i1]] - coords[c_idx[rows, i2]]
            gamma = g0 * (1.0 + self.sigma * random.randn(self.n_blocks, n_s, 1))
            s_flat = s_idx.ravel()
            q = coords[s_flat] + (gamma * diff).reshape(-1, ndim)
            if self.log_prob is not None:
                new_lp = self.log_prob(q)
            else:
                new_lp, _ = model.compute_log_prob_fn(q)
            accept = new_lp - log_prob[s_flat] > np.log(random.rand(s_flat.size))
            take = s_flat[accept]
            coords[take] = q[accept]
            log_prob[take] = new_lp[accept]
            accepted[take] = True
        return State(coords, log_prob=log_prob, random_state=state.random_state), accepted


def _start_spread(fit: SigmoidFit, center: np.ndarray) -> np.ndarray:
    """Per-coordinate start spread from the fit's standard errors (a tenth of them)."""
    se = fit.stderr
    raw = [se["A"], se["B"] / fit.B, se["C_mid"] / fit.C_mid]
    if fit.r0_fixed is None:
        raw.append(se["R0"])
    out = []
    for value, c in zip(raw, center, strict=True):
        ok = math.isfinite(value) and value > 0
        out.append(0.1 * min(value, 0.5 * (1 + abs(c))) if ok else 1e-3 * (1 + abs(c)))
    return np.array(out)


def _ensemble_start(rng, center, spread, n_walkers, log_prob) -> np.ndarray:
    """Walkers of one ensemble around its own over-dispersed point (30 start spreads, i.e. three
    standard errors, out); around the optimum where no ball fits inside the prior there."""
    point = _dispersed_center(rng, center, 30.0 * spread, log_prob)
    try:
        return _initial_walkers(rng, point, spread, n_walkers, log_prob)
    except RLCurvesError:
        return _initial_walkers(rng, center, spread, n_walkers, log_prob)


def _dispersed_center(rng, center, scale, log_prob) -> np.ndarray:
    """A start point for one ensemble, drawn around the optimum with ``scale`` and pulled back
    toward it until it lies inside the prior's support."""
    point = center + scale * rng.standard_normal(center.size)
    for _ in range(60):
        if np.isfinite(log_prob(point[None])[0]):
            return point
        point = center + 0.5 * (point - center)
    return center.copy()


def _initial_walkers(rng, center, spread, n_walkers, log_prob) -> np.ndarray:
    """A small ball around the fit's optimum, redrawn where a walker falls outside the prior."""
    start = center + spread * rng.standard_normal((n_walkers, center.size))
    for _ in range(100):
        bad = ~np.isfinite(log_prob(start))
        if not bad.any():
            return start
        # mirror through the optimum, then shrink toward it: the optimum may sit on a bound
        # (A = 1, R0 = 0), where only the deviations pointing inside are in the support
        flip = -1.0 if _ % 2 == 0 else 0.5
        start[bad] = center + flip * (start[bad] - center)
    raise RLCurvesError("could not place the walkers inside the prior support around the fit")
