# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Intervals: bootstrap, profile likelihood, MCMC, and what calibration means
#
# The paper gives A a seed-based margin of +- 0.02 and calls B's error "hard to estimate".
# rlcurves offers three ways to put an interval on the parameters and on a forecast:
#
# - **bootstrap** (`fit.bootstrap`): refit on resampled data. `kind="residual"` reshuffles the
#   residuals; `kind="calibrated"` (the default of `forecast`) simulates AR(1) noise, because
#   neighbouring checkpoints share the policy's luck, and widens the spread by a factor
#   calibrated on simulated runs.
# - **profile likelihood** (`fit.profile`): for each value of a parameter, refit the others and
#   keep the values whose fit is not significantly worse. Asymmetric where the data are.
# - **MCMC** (`fit.posterior`): emcee draws from the posterior under stated priors, with
#   convergence diagnostics.
#
# **The data are SIMULATED** (the bundled example, drawn from the paper's 8B parameters A = 0.610,
# B = 1.92, C_mid = 2542 GPU-hours, R0 = 0.30), so every interval can be checked against the
# truth. As the paper does, R0 is fixed, here to the first evaluation.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import rlcurves
from rlcurves.forecast import forecast

TRUE = {"A": 0.610, "B": 1.92, "C_mid": 2542.0, "R0": 0.30}  # the simulation's parameters
run = rlcurves.datasets.load_example("simulated_scalerl_8b")
r0 = float(run["reward"].iloc[0])
fit = rlcurves.fit_sigmoid("compute", "reward", data=run, min_compute=1500, max_compute=8000, r0=r0)
print(fit.summary())

# %% [markdown]
# ## Parameter intervals, four ways
#
# The first column is the textbook one: estimate +- 1.645 standard errors from the fit's
# covariance (symmetric by construction).

# %%
level = 0.9
boot_res = fit.bootstrap(400, kind="residual", seed=0, progress=False).ci(level)
boot_cal = fit.bootstrap(400, kind="calibrated", seed=0, progress=False).ci(level)
prof = fit.profile(level=level).ci()
post = fit.posterior(seed=0, progress=False)
print(post.message)
mcmc = post.ci(level)


def as_text(ci, name):
    row = ci.set_index("parameter").loc[name]
    fmt = "{:,.0f}" if name == "C_mid" else "{:.3f}"
    return f"[{fmt.format(row['lower'])}, {fmt.format(row['upper'])}]"


rows = []
for name in ("A", "B", "C_mid"):
    est, se = fit.params[name], fit.stderr[name]
    normal = pd.DataFrame(
        {"parameter": [name], "lower": [est - 1.645 * se], "upper": [est + 1.645 * se]}
    )
    rows.append(
        {
            "parameter": name,
            "truth": TRUE[name],
            "estimate": est,
            "normal +-1.645 se": as_text(normal, name),
            "bootstrap residual": as_text(boot_res, name),
            "bootstrap calibrated": as_text(boot_cal, name),
            "profile": as_text(prof, name),
            "MCMC": as_text(mcmc, name),
        }
    )
pd.DataFrame(rows).set_index("parameter")

# %% [markdown]
# The five broadly agree and all hold the true A and B; they differ in shape and width, and the
# narrowest barely hold (or miss) the true C_mid. The profile and MCMC intervals are asymmetric:
# A can run higher more easily than lower, because a higher ceiling reached more slowly still
# fits the first half. The residual bootstrap is among the narrowest; the calibrated one is wider
# on purpose, for the reason shown at the end of this notebook.
#
# ## Forecast intervals at 2x and 4x the fitted budget
#
# The same three engines through `forecast(fit, at, method=...)`:

# %%
at = [16_000.0, 32_000.0]
forecasts = {
    "bootstrap (calibrated)": forecast(fit, at, n=400, seed=0, progress=False),
    "profile": forecast(fit, at, method="profile"),
    "MCMC": forecast(fit, at, method="mcmc", seed=0, progress=False),
}
truth_at = rlcurves.sigmoid(np.array(at), **TRUE)
pd.concat(
    {name: fc.to_frame().set_index("at") for name, fc in forecasts.items()}, names=["method"]
).round(4)

# %%
fig, ax = plt.subplots(figsize=(6.4, 4.0))
for k, (name, fc) in enumerate(forecasts.items()):
    x = np.arange(len(at)) + (k - 1) * 0.18
    ax.errorbar(
        x,
        fc.mean,
        yerr=[fc.mean - fc.lower, fc.upper - fc.mean],
        fmt="o",
        capsize=4,
        label=name,
    )
ax.hlines(
    truth_at,
    np.arange(len(at)) - 0.3,
    np.arange(len(at)) + 0.3,
    color="k",
    lw=1.5,
    label="true curve (simulation)",
)
ax.set_xticks(
    np.arange(len(at)), [f"C = {c:,.0f}\n({c / 8000:.0f}x the fitted budget)" for c in at]
)
ax.set_xlim(-0.5, len(at) - 0.5)
ax.set_ylabel("forecast pass rate (90% interval)")
ax.set_title("SIMULATED run fit to 8k GPU-h: three interval engines", fontsize=10)
ax.legend(fontsize=8, loc="upper left")
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# Each bar is one engine's 90% interval for the expected pass rate; the black tick is the truth.
# All three contain it here, with the calibrated bootstrap the widest. One run cannot tell which
# width is right. That takes many runs.
#
# ## What calibration means
#
# A 90% interval is **calibrated** if, over many runs, it contains the truth 90% of the time.
# Narrow intervals that miss a third of the time are overconfident, whatever they look like on one
# run. The check needs the truth, so it needs simulation: draw many SIMULATED runs from the same
# parameters and noise model as the bundled example, fit each on its first half, forecast the
# full budget, and count how often each method's interval holds the true value.
#
# The experiment below is small (60 runs, a few seconds each method) and seeded. With 60 runs a
# coverage estimate has a standard error of about 0.05, so read only differences of 0.1 or more.
# The project's full study (200 runs per parameter set of the paper, MCMC included) is
# `python -m benchmarks.calibration`.


# %%
def simulate_run(seed, budget=16_000.0, every=200.0):
    """A SIMULATED run with the bundled example's noise model (mean@16 + AR(1) drift)."""
    rng = np.random.default_rng(seed)
    compute = np.arange(0.0, budget + 1, every)
    mean = rlcurves.sigmoid(np.maximum(compute, 1e-9), **TRUE)
    drift = np.zeros(compute.size)
    for i in range(1, compute.size):
        drift[i] = 0.9 * drift[i - 1] + np.sqrt(1 - 0.9**2) * 0.006 * rng.standard_normal()
    p = np.clip(mean + drift, 1e-3, 1 - 1e-3)
    difficulty = rng.beta(2 * p[:, None], 2 * (1 - p[:, None]), (compute.size, 1000))
    return compute, rng.binomial(16, difficulty).mean(axis=1) / 16


methods = {
    "bootstrap residual": {"method": "bootstrap", "kind": "residual", "n": 200},
    "bootstrap calibrated": {"method": "bootstrap", "n": 200},
    "profile": {"method": "profile"},
}
truth_16k = rlcurves.sigmoid(16_000.0, **TRUE)
records = []
for seed in range(60):
    compute, reward = simulate_run(seed=1000 + seed)
    with warnings.catch_warnings():
        # some half-runs identify a parameter poorly and warn; the interval should show it
        warnings.simplefilter("ignore")
        half_fit = rlcurves.fit_sigmoid(
            compute, reward, min_compute=1500, max_compute=8000, r0=float(reward[0])
        )
        for name, kw in methods.items():
            fc = forecast(half_fit, 16_000.0, level=0.9, seed=seed, progress=False, **kw)
            records.append(
                {
                    "method": name,
                    "covered": fc.lower <= truth_16k <= fc.upper,
                    "width": fc.upper - fc.lower,
                }
            )
coverage = (
    pd.DataFrame(records)
    .groupby("method", sort=False)
    .agg(coverage=("covered", "mean"), median_width=("width", "median"), runs=("covered", "size"))
)
coverage["std_error"] = np.sqrt(
    coverage["coverage"] * (1 - coverage["coverage"]) / coverage["runs"]
)
coverage.round(3)

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.6))
y = np.arange(len(coverage))
ax.errorbar(coverage["coverage"], y, xerr=1.96 * coverage["std_error"], fmt="o", capsize=4)
ax.axvline(0.9, color="k", ls="--", lw=1, label="nominal 90%")
ax.set_yticks(y, coverage.index)
ax.set_xlim(0.4, 1.0)
ax.invert_yaxis()
ax.set_xlabel("share of 60 SIMULATED runs whose 90% interval held the truth")
ax.set_title("coverage of the forecast at 2x the fitted budget (+- 1.96 s.e.)", fontsize=10)
ax.legend(fontsize=8, loc="lower left")
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# The residual bootstrap and the profile treat the ~30 residuals of one half-run as independent
# noise, but evaluations of neighbouring checkpoints drift together. So they under-cover: their
# "90%" intervals hold the truth noticeably less often. The calibrated bootstrap simulates the
# drift and widens its spread by a factor fitted on other simulations, and comes within about one
# standard error of its nominal level (the project's 200-run study agrees). That is what
# "calibrated" means here: the stated level is the level you get, at the price of wider intervals.
# The factor was fitted on simulations like these; on real runs the backtest of notebook 01, over
# many finished runs, is the test.

# %% [markdown]
# ## What one run's interval leaves out: a second seed
#
# Every interval above describes the evaluation noise of ONE run. A second seed of the same
# config is a different run: its initialisation, its sampled completions and its prompt order
# differ. The bundled REAL runs `recipe_cpu_demo_seed0` and `recipe_cpu_demo_seed1` are such a
# pair (1,000 steps each of the reference trainer's CPU demo; compute in generated tokens, see
# notebook 02 for why).

# %%
seeds = {
    f"seed {s}": rlcurves.fit_sigmoid(
        "compute",
        "reward",
        data=rlcurves.datasets.load_example(f"recipe_cpu_demo_seed{s}", compute="tokens_total"),
        label=f"seed {s}",
    )
    for s in (0, 1)
}
seed_table = rlcurves.compare(seeds, n_samples=400, seed=0).table
seed_table[["variant", "A", "A_lower", "A_upper", "B", "B_lower", "B_upper"]].round(3)

# %%
from IPython.display import Markdown  # noqa: E402  (the prose below is computed)

s0, s1 = (seed_table.set_index("variant").loc[f"seed {s}"] for s in (0, 1))
holds = s0["A_lower"] <= s1["A"] <= s0["A_upper"]
Markdown(
    f"Seed 0's 90% interval for A, [{s0['A_lower']:.3f}, {s0['A_upper']:.3f}], "
    + ("contains" if holds else "does not contain")
    + f" seed 1's estimate {s1['A']:.3f}, although the two runs differ only in their seed "
    f"(seed 1's own interval: [{s1['A_lower']:.3f}, {s1['A_upper']:.3f}]). The two estimates "
    f"differ by {abs(s0['A'] - s1['A']):.3f}; the paper puts the seed-to-seed spread of A at "
    "about +-0.015 at 8B."
)

# %% [markdown]
# For a budget decision, run two or three seeds of the recipe you will bet on and
# pool them (`rlcurves.fit_runs`, whose run bootstrap resamples whole runs), or at least treat one
# run's interval as a lower bound on the uncertainty.
