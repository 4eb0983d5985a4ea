"""MCMC posterior: agreement with the asymptotic covariance, diagnostics (tau, ESS, R-hat across
ensembles), the "not long enough" verdict, noise models, priors, the block move and ArviZ export."""

import warnings

import numpy as np
import pandas as pd
import pytest

from rlcurves import NotConvergedWarning, RLCurvesError, fit_sigmoid, sigmoid
from rlcurves.bayes import BlockDEMove, Posterior, Prior, split_rank_rhat
from rlcurves.forecast import forecast

TRUTH = dict(A=0.61, B=1.92, C_mid=2542.0, R0=0.30)


@pytest.fixture(scope="module")
def curve():
    rng = np.random.default_rng(0)
    c = np.linspace(160, 16000, 100)
    y = sigmoid(c, **TRUTH) + rng.normal(0, 0.01, c.size)
    return c, y


@pytest.fixture(scope="module")
def fit(curve):
    return fit_sigmoid(*curve)


@pytest.fixture(scope="module")
def post(fit):
    return fit.posterior(seed=1, progress=False)


def test_posterior_matches_the_asymptotic_covariance(fit, post):
    # Flat priors, noise integrated out, a well-determined curve: the posterior is close to a
    # multivariate t around the optimum with the least-squares covariance (variance inflated by
    # dof / (dof - 2) ~ 1.02). With ESS > 2000 a posterior sd is known to ~2%; 10% covers the
    # curvature left in B and C_mid.
    assert isinstance(post, Posterior)
    for name in ("A", "B", "C_mid", "R0"):
        assert post.samples[name].std() == pytest.approx(fit.stderr[name], rel=0.10), name
        assert post.samples[name].median() == pytest.approx(
            fit.params[name], abs=0.2 * fit.stderr[name]
        )
    ci = post.ci(0.9)
    assert list(ci.columns) == ["parameter", "estimate", "lower", "upper"]
    assert (ci.lower < ci.estimate).all() and (ci.estimate < ci.upper).all()
    # the noise scale's draws centre on the residual sd
    assert np.median(post.noise) == pytest.approx(fit.noise_sd, rel=0.05)


def test_diagnostics_say_the_chains_are_long_enough(post):
    assert post.converged and post.message.startswith("converged")
    assert min(post.ess.values()) >= 2000
    assert max(post.rhat.values()) < 1.01
    assert (post.n_steps - post.burn) > 50 * max(post.tau.values())
    assert 0.1 < post.acceptance_fraction < 0.7
    diag = post.diagnostics()
    assert list(diag.parameter) == ["A", "B", "C_mid", "R0"] and diag.attrs["converged"]
    # ESS is ArviZ's bulk/tail ESS over the walker chains (thinned by a quarter of tau, as the
    # checks see them), never more than emcee's draws / tau
    import arviz as az

    assert 1 <= post.thin <= max(1, min(post.tau.values()) / 4 + 1)
    chains = post.to_arviz().posterior["A"].to_numpy()[:, :: post.thin]
    expected = min(float(az.ess(chains, method="bulk")), float(az.ess(chains, method="tail")))
    assert post.ess["A"] == pytest.approx(min(expected, len(post.samples) / post.tau["A"]))
    assert post.rhat["A"] == pytest.approx(float(az.rhat(chains, method="rank")), abs=1e-10)


def test_short_run_is_reported_as_not_converged(fit):
    with pytest.warns(NotConvergedWarning, match="NOT converged"):
        short = fit.posterior(seed=0, progress=False, max_steps=100, block_steps=100)
    assert not short.converged and "raise max_steps" in short.message


def test_same_seed_same_draws(fit):
    kw = dict(progress=False, max_steps=60, block_steps=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        a, b = fit.posterior(seed=5, **kw), fit.posterior(seed=5, **kw)
    pd.testing.assert_frame_equal(a.samples, b.samples)


def test_known_and_binomial_noise(curve):
    c, y = curve
    known = fit_sigmoid(c, y, sigma=np.full(c.size, 0.01), absolute_sigma=True)
    small = dict(progress=False, n_ensembles=2)  # two ensembles: still > 2,000 ESS, half the cost
    p = known.posterior(seed=2, **small)
    assert p.noise_model == "known" and np.all(p.noise == 1)
    for name in ("A", "B", "C_mid"):
        assert p.samples[name].std() == pytest.approx(known.stderr[name], rel=0.10), name
    # binomial sd of 16,000 evaluations at p ~ 0.5 is 0.004, far below the 0.01 noise here:
    # the posterior must be much narrower than with the noise fitted
    plain = fit_sigmoid(c, y)
    binom = plain.posterior(seed=2, noise="binomial", n_eval=16000, **small)
    assert binom.samples["A"].std() < 0.6 * plain.stderr["A"]
    lo, hi = binom.predict_interval([16000.0], 0.9, prediction=True, seed=0)
    assert 0 <= lo[0] < hi[0] <= 1
    with pytest.raises(RLCurvesError, match="n_eval"):
        plain.posterior(noise="binomial", progress=False)
    with pytest.raises(RLCurvesError, match="per-point sigma"):
        plain.posterior(noise="known", progress=False)


def test_priors_are_stated_and_overridable(fit, post):
    assert post.priors["A"] == Prior("uniform", 0.0, 1.0)  # a pass rate
    assert post.priors["B"].kind == "loguniform" and post.priors["C_mid"].kind == "loguniform"
    # a tight prior on B (mean 1.5, sd 0.02) overrides the data's B ~ 2.0
    tight = fit.posterior(
        seed=3,
        progress=False,
        n_ensembles=2,
        priors={"B": Prior("lognormal", mu=np.log(1.5), sd=0.02)},
    )
    assert tight.samples["B"].median() == pytest.approx(1.5, rel=0.05)
    with pytest.raises(RLCurvesError, match="unknown prior kind"):
        Prior("cauchy")
    with pytest.raises(RLCurvesError, match="priors given for"):
        fit.posterior(priors={"D": Prior("uniform", 0, 1)}, progress=False)


def test_split_rank_rhat_matches_arviz_and_flags_chains_that_have_not_mixed():
    import arviz as az

    rng = np.random.default_rng(0)
    mixed = rng.normal(0, 1, (4, 2000))
    # same mean, one chain four times wider: the classical R-hat (means only) misses it
    wide = np.concatenate([rng.normal(0, 1, (3, 2000)), rng.normal(0, 4, (1, 2000))])
    # every chain drifts (a trend within chains, the same in all): only splitting sees it
    drift = rng.normal(0, 1, (4, 2000)) + np.linspace(-3, 3, 2000)
    for x in (mixed, wide, drift):
        assert split_rank_rhat(x) == pytest.approx(float(az.rhat(x, method="rank")), rel=1e-9)
    assert split_rank_rhat(mixed) < 1.01
    assert split_rank_rhat(wide) > 1.05 and split_rank_rhat(drift) > 1.1


def test_regression_two_modes_are_not_converged():
    """All ensembles used to start in one ball of 0.1 SE, and R-hat was not part of converged:
    a posterior with two separated modes passed. Ensembles started over-dispersed land in both
    modes, which the block move cannot cross, and the verdict says not converged."""
    rng = np.random.default_rng(3)
    c = np.linspace(100, 16000, 60)
    y = sigmoid(c, **TRUTH) + rng.normal(0, 0.01, c.size)
    fit = fit_sigmoid(c, y)
    # a bimodal prior on B (two narrow lognormals a factor 2 apart, as a prior override)

    class TwoModes(Prior):
        def log_density(self, value):
            v = np.asarray(value, dtype=float)
            a = -0.5 * ((np.log(v) - np.log(1.3)) / 0.03) ** 2
            b = -0.5 * ((np.log(v) - np.log(2.6)) / 0.03) ** 2
            return np.logaddexp(a, b) - np.log(v)

    with pytest.warns(NotConvergedWarning, match="R-hat"):
        post = fit.posterior(
            seed=0,
            progress=False,
            n_ensembles=4,
            max_steps=1500,
            priors={"B": TwoModes("lognormal", mu=0.0, sd=1.0)},
        )
    assert not post.converged and max(post.rhat.values()) > 1.05


def test_block_move_never_mixes_ensembles():
    # A target with two equal modes, at 0 and 100; block 0 starts in one, block 1 in the other.
    # A DE move with gamma = 1 that paired walkers across blocks would jump walkers between the
    # modes (x + (x_other_mode - x_this_mode) lands in the other mode, and is accepted); built
    # from differences within each block it never does.
    class Model:
        random = np.random.RandomState(0)

        @staticmethod
        def compute_log_prob_fn(q):
            d0 = -0.5 * np.sum(q**2, axis=1)
            d1 = -0.5 * np.sum((q - 100) ** 2, axis=1)
            return np.logaddexp(d0, d1), None

    from emcee.state import State

    rng = np.random.default_rng(1)
    coords = np.concatenate([rng.normal(0, 1, (8, 2)), rng.normal(100, 1, (8, 2))])
    state = State(coords.copy(), log_prob=Model.compute_log_prob_fn(coords)[0])
    move = BlockDEMove(2, gamma0=1.0)
    n_accepted = 0
    for _ in range(200):
        state, accepted = move.propose(Model, state)
        n_accepted += accepted.sum()
    assert np.all(np.abs(state.coords[:8]) < 10) and np.all(np.abs(state.coords[8:] - 100) < 10)
    assert n_accepted > 100  # the walkers did move


def test_forecast_with_mcmc(fit):
    fc = forecast(fit, [8000.0, 32000.0], method="mcmc", seed=0, progress=False, n_ensembles=2)
    assert fc.method == "mcmc" and fc.samples.shape[1] == 2
    assert np.all(fc.lower < fc.mean) and np.all(fc.mean < fc.upper)
    assert np.all(fc.prediction_lower < fc.lower) and np.all(fc.prediction_upper <= 1)
    assert fc.info["diagnostics"].attrs["converged"]


def test_arviz_export(post):
    import arviz as az  # a dev dependency: the test fails, rather than skips, without it

    idata = post.to_arviz()
    assert isinstance(idata, az.InferenceData)
    assert set(idata.posterior.data_vars) == {"A", "B", "C_mid", "R0"}
    assert idata.posterior["B"].mean() == pytest.approx(post.samples["B"].mean(), rel=1e-6)


def _readme_fit():
    from rlcurves.datasets import load_example

    df = load_example("simulated_scalerl_8b")
    return fit_sigmoid("compute", "reward", data=df, min_compute=1500, max_compute=8000)


def test_regression_walkers_stuck_on_a_plateau_are_moved_back():
    """The README's posterior (a half-budget fit) ran to max_steps = 20,000 and never converged:
    during burn-in two walkers of one over-dispersed ensemble wandered onto a plateau (C_mid far
    outside the data, B small) 60 nats below the mode, where the differences of the other walkers
    are far too small to bring them back. They stayed there for the whole run, and R-hat and ESS
    never passed. Now such walkers are put back onto walkers of their own ensemble and the steps
    before are burn-in: after 1,000 steps every walker is where the posterior's mass is."""
    from rlcurves.bayes import _log_prob, _stuck_gap, default_priors

    fit = _readme_fit()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        post = fit.posterior(seed=0, progress=False, max_steps=1000)
    log_prob = _log_prob(fit, default_priors(fit), "fitted", None)
    last = post.chains[:, -1]  # (ensembles, walkers, dim)
    gap = _stuck_gap(last.shape[-1])
    for walkers in last:
        lp = log_prob(walkers)
        assert np.all(lp > np.median(lp) - gap), np.sort(lp)[:3]
    assert post.burn >= 250  # the first block, where the stuck walkers were moved, is burn-in


def test_reset_moves_only_stuck_walkers_within_their_ensemble():
    from emcee.state import State

    from rlcurves.bayes import _reset_stuck

    rng = np.random.default_rng(0)
    coords = np.concatenate([rng.normal(0, 1, (8, 2)), rng.normal(100, 1, (8, 2))])
    lp = -0.5 * np.sum((coords - np.repeat([0.0, 100.0], 8)[:, None]) ** 2, axis=1)
    coords[3], lp[3] = [30.0, 30.0], -900.0  # stuck far out in ensemble 0
    lp[12] -= 5.0  # a walker of ensemble 1 in the posterior's tail: not stuck
    before = coords.copy()
    state = State(coords, log_prob=lp)
    assert _reset_stuck(state, 2, rng)
    moved = np.flatnonzero(np.any(state.coords != before, axis=1))
    assert list(moved) == [3]
    assert any(np.array_equal(state.coords[3], before[j]) for j in range(8) if j != 3)
    assert np.isfinite(state.log_prob[3]) and state.log_prob[3] > -10
    assert not _reset_stuck(state, 2, rng)  # nothing left to move


def test_regression_convergence_checks_do_not_reread_the_whole_chain(fit, monkeypatch):
    """Every convergence check ran ArviZ's ESS and the rank R-hat on every step of every walker,
    so a check cost grew with the chain and the checks of a 20,000-step run took 90% of its 500
    s. The checks now read the draws a quarter of tau apart: their size stays bounded by the
    number of autocorrelation times in the chain, not its length."""
    from rlcurves import bayes

    sizes = []
    real = bayes.ess_bulk_tail

    def counting(x):
        sizes.append(x.shape)
        return real(x)

    monkeypatch.setattr(bayes, "ess_bulk_tail", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        post = fit.posterior(seed=0, progress=False, n_ensembles=2, max_steps=1250, target_ess=1e9)
    # tau ~ 13 steps here: a quarter of it apart, the last check read one draw in three or four
    assert post.n_steps == 1250 and post.thin >= max(2, int(min(post.tau.values()) // 4) - 1)
    chains, draws = sizes[-1]
    assert chains == post.n_walkers * post.n_ensembles
    assert draws == len(range(post.burn, post.n_steps, post.thin))


@pytest.mark.parametrize("noise", ["fitted", "known", "binomial"])
@pytest.mark.parametrize("fixed_r0", [False, True])
def test_compiled_log_posterior_matches_numpy(curve, noise, fixed_r0):
    from rlcurves.bayes import _CompiledLogProb, _log_prob, _LogProb, default_priors

    c, y = curve
    kw = dict(sigma=np.full(c.size, 0.01), absolute_sigma=True) if noise == "known" else {}
    if fixed_r0:
        kw["r0"] = 0.3
    fit = fit_sigmoid(c, y, **kw)
    priors = default_priors(fit)
    # every prior kind, with hard supports that walkers below fall outside of
    priors["A"] = Prior("normal", low=0.55, high=0.7, mu=0.6, sd=0.05)
    priors["B"] = Prior("lognormal", low=1.0, high=4.0, mu=np.log(2.0), sd=0.3)
    if not fixed_r0:
        priors["R0"] = Prior("uniform", 0.0, 0.6)
    n_eval = 16000 if noise == "binomial" else None
    compiled, reference = (cls(fit, priors, noise, n_eval) for cls in (_CompiledLogProb, _LogProb))
    assert type(_log_prob(fit, priors, noise, n_eval)) is _CompiledLogProb
    rng = np.random.default_rng(4)
    center = np.array([fit.A, np.log(fit.B), np.log(fit.C_mid), fit.R0])[: 3 if fixed_r0 else 4]
    z = center + rng.normal(0, 0.15, (400, center.size))
    got, expected = compiled(z), reference(z)
    outside = ~np.isfinite(expected)
    assert 0 < outside.sum() < len(z)
    np.testing.assert_array_equal(got[outside], -np.inf)
    np.testing.assert_allclose(got[~outside], expected[~outside], rtol=1e-12, atol=0)


def test_a_prior_with_its_own_density_uses_the_numpy_log_posterior(fit):
    from rlcurves.bayes import _log_prob, _LogProb, default_priors

    class Bumpy(Prior):
        def log_density(self, value):
            return super().log_density(value) + np.sin(np.asarray(value, dtype=float))

    priors = default_priors(fit)
    priors["A"] = Bumpy("uniform", 0.0, 1.0)
    assert type(_log_prob(fit, priors, "fitted", None)) is _LogProb


def test_integrated_time_is_emcees_estimator():
    import emcee

    from rlcurves.bayes import integrated_time

    rng = np.random.default_rng(2)
    for n in (257, 1000):
        # AR(1) walkers of two autocorrelations, and one constant-ish parameter
        e = rng.normal(size=(n, 16, 3))
        x = np.empty_like(e)
        x[0] = e[0]
        for t in range(1, n):
            x[t] = np.array([0.9, 0.5, 0.0]) * x[t - 1] + e[t]
        expected = emcee.autocorr.integrated_time(x, tol=0, quiet=True)
        np.testing.assert_allclose(integrated_time(x), expected, rtol=1e-10)


def test_skipping_rhat_and_arviz_ess_until_they_can_matter_changes_nothing(fit, monkeypatch):
    # R-hat and ArviZ's ESS are computed only once the chain is long enough and emcee's count
    # reaches the target: the same seed must give the same steps, draws and verdict as a run that
    # computes them at every check
    from rlcurves import bayes

    kw = dict(seed=6, progress=False, n_ensembles=2)
    lazy = fit.posterior(**kw)
    real = bayes._check
    monkeypatch.setattr(bayes, "_check", lambda *a, **k: real(*a, **{**k, "final": True}))
    eager = fit.posterior(**kw)
    assert lazy.converged and eager.converged and lazy.n_steps == eager.n_steps
    pd.testing.assert_frame_equal(lazy.samples, eager.samples)
    assert lazy.rhat == eager.rhat and lazy.ess == eager.ess


def test_regression_average_ranks_are_scipys_rankdata_with_ties():
    """The posterior's rank normalization ranks by an unstable sort: the same ranks as scipy's
    rankdata (ties averaged), on MCMC-like draws that repeat values (rejected steps)."""
    from scipy.stats import rankdata

    from rlcurves.bayes import _average_ranks

    rng = np.random.default_rng(4)
    x = rng.normal(size=(64, 301))
    x[:, 1::2] = x[:, :-1:2]  # every other draw repeats the one before it
    x[3, :10] = x[7, 5]  # a long run of ties across chains
    for a in (x, np.abs(x - np.median(x)), np.round(x, 1), np.zeros((2, 3))):
        np.testing.assert_array_equal(_average_ranks(a), rankdata(a, axis=None).reshape(a.shape))


def test_regression_the_compiled_move_and_loop_give_emcees_chain(fit):
    """The block move's compiled half-steps (proposal, log posterior, acceptance in one call) and
    the posterior's own step loop give, seed for seed, the chain emcee's EnsembleSampler gives
    with the move in numpy: the same draws, log posteriors and acceptances, bit for bit."""
    import emcee

    from rlcurves import bayes

    priors = bayes.default_priors(fit)
    log_prob = bayes._log_prob(fit, priors, "fitted", None)
    assert isinstance(log_prob, bayes._CompiledLogProb)

    def in_numpy(z):  # the same values, through the move's numpy path
        return log_prob(z)

    rng = np.random.default_rng(2)
    center = np.array([fit.A, np.log(fit.B), np.log(fit.C_mid), fit.R0])
    start = center + 1e-3 * rng.normal(size=(3 * 16, 4))
    moves = [(0.9, {}), (0.1, {"gamma0": 1.0})]
    ours = bayes._Sampler(
        log_prob, 48, 4, [(BlockDEMove(3, log_prob=log_prob, **kw), p) for p, kw in moves],
        np.random.RandomState(7),
    )  # fmt: skip
    state = ours.run_mcmc(start, 120)
    ours.run_mcmc(state, 80)
    theirs = emcee.EnsembleSampler(
        48, 4, in_numpy, vectorize=True,
        moves=[(BlockDEMove(3, log_prob=in_numpy, **kw), p) for p, kw in moves],
    )  # fmt: skip
    theirs.random_state = np.random.RandomState(7).get_state()
    state = theirs.run_mcmc(start, 120, progress=False)
    theirs.run_mcmc(state, 80, progress=False)
    np.testing.assert_array_equal(ours.get_chain(), theirs.get_chain())
    np.testing.assert_array_equal(ours.get_log_prob(), theirs.get_log_prob())
    np.testing.assert_array_equal(ours.acceptance_fraction, theirs.acceptance_fraction)
    assert 0.1 < ours.acceptance_fraction.mean() < 0.9
