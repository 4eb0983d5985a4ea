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

# %%

# %% [markdown]
# # 02 · Compare recipe variants: ceiling, efficiency, crossover
#
# The ScaleRL paper's leave-one-out study reverts one recipe choice at a time and asks two
# questions of each variant: does it change the **ceiling A**, and does it change the
# **efficiency B**? Its "bitter lesson": a choice that looks better at a fixed early budget often
# has the lower ceiling, so compare fitted curves, not rewards at one budget.
#
# This notebook does the same with **REAL runs** of the reference trainer in `recipe/` that ship
# with rlcurves: three-digit addition, a 0.8M-parameter Llama, the CPU demo config, 600 steps
# each, one ScaleRL choice reverted per run (`scripts/run_leave_one_out.sh` regenerates them).
# The last section turns to SIMULATED paper-scale runs, to show what a decisive comparison looks
# like.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

import rlcurves
from rlcurves.datasets import list_examples, load_example

names = list_examples(group="recipe_loo")
pd.DataFrame(
    {
        "run": names,
        "what": [load_example(n).attrs["description"].split("600 steps, ")[1] for n in names],
    }
).style.hide(axis="index")

# %% [markdown]
# ## First: which compute axis?
#
# The trainer logs `gpu_hours` as wall-clock hours x devices, what a GPU cluster bills. These runs
# were made on a shared 2-core machine, in different sessions, two at a time, so machine load
# stretches each run's axis differently. Two of the runs show how much that matters: at this
# config `fp32_head=false` and `positive_threshold=null` switch nothing (the model is float32, and
# 600 x 32 prompts is less than the one epoch after which no-positive resampling starts acting;
# the trainer now warns about both). Their evaluations equal the recipe's **exactly**, evaluation
# for evaluation; only their clocks differ.

# %%
controls = ["recipe_loo_scalerl", "recipe_loo_fp32_head", "recipe_loo_no_positive"]
rows = []
for name in controls:
    wall = load_example(name)
    tokens = load_example(name, compute="tokens_total")
    for axis, df in (("wall-clock hours", wall), ("generated tokens", tokens)):
        fit = rlcurves.fit_sigmoid("compute", "reward", data=df)
        rows.append({"run": name, "axis": axis, "A": fit.A, "B": fit.B, "C_mid": fit.C_mid})
same = load_example(controls[0])["reward"].to_numpy()
print(
    "identical evaluations:",
    all(np.array_equal(load_example(n)["reward"].to_numpy(), same) for n in controls),
)
axes_table = pd.DataFrame(rows).pivot(index="run", columns="axis", values=["A", "B"])
axes_table.round(3)

# %%
spread = axes_table.max() - axes_table.min()
Markdown(
    "Three identical learning curves, and on the wall-clock axis their fits disagree by "
    f"{spread[('A', 'wall-clock hours')]:.2f} on A and {spread[('B', 'wall-clock hours')]:.1f} "
    "on B: as much as many real recipe differences. On the generated-token axis, which load "
    "cannot stretch, they agree "
    + (
        "exactly."
        if spread.xs("generated tokens", level=1).max() == 0
        else f"to within {spread.xs('generated tokens', level=1).max():.0e}."
    )
)

# %% [markdown]
# The token axis is immune to load. A uniform slow-down would change only C_mid (A and
# B do not depend on the unit of compute); uneven load bends the curve, and that reaches A and B.
#
# **Lesson for your own runs:** compare variants on an axis that measures work (GPU-hours on
# dedicated hardware, FLOPs, tokens), not on wall-clock time from a shared machine. The rest of
# this notebook uses generated tokens: `load_example(name, compute="tokens_total")`, or
# `rlcurves.read_log(path, compute="tokens_total")` on your own logs.


# %%
def short(name):
    return name.removeprefix("recipe_loo_")


runs = {short(n): load_example(n, compute="tokens_total") for n in names}
with warnings.catch_warnings():
    # some variants do not trace an S-curve; their fits say so in .message, shown below
    warnings.simplefilter("ignore", rlcurves.IdentifiabilityWarning)
    fits = {
        k: rlcurves.fit_sigmoid("compute", "reward", data=df, label=k) for k, df in runs.items()
    }
pd.DataFrame(
    {
        k: {"A": f.A, "B": f.B, "C_mid": f.C_mid, "R0": f.R0, "note": f.message}
        for k, f in fits.items()
    }
).T.style.format(precision=3)

# %%
single = [
    "dapo", "aggregation", "adv_norm", "zero_variance",
    "ppo_off_policy", "pipeline_rl", "batch_16", "batch_64",
]  # fmt: skip
fig, axes = plt.subplots(2, 4, figsize=(12, 5.2), sharex=True, sharey=True)
grid = np.linspace(1, 2.8e6, 300)
for ax, name in zip(axes.flat, single, strict=True):
    base, run = runs["scalerl"], runs[name]
    ax.scatter(base["compute"], base["reward"], s=6, color="0.6")
    ax.plot(grid, fits["scalerl"].predict(grid), color="0.6", lw=1.2, label="recipe")
    ax.scatter(run["compute"], run["reward"], s=8, color="C3")
    ax.plot(grid, fits[name].predict(grid), color="C3", lw=1.6, label=name)
    ax.set_title(name, fontsize=9)
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("generated tokens")
for ax in axes[:, 0]:
    ax.set_ylabel("validation pass rate")
fig.suptitle("REAL leave-one-out runs (red) against the recipe (grey), 600 steps each", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The comparison table
#
# `compare` fits nothing new; it draws each variant's parameters (bootstrap refits) and reads
# every interval, difference and probability from the same draws. `p_A_higher` is the probability
# that the variant's ceiling is above the baseline's.

# %%
cmp = rlcurves.compare({k: fits[k] for k in ["scalerl", *single]}, baseline="scalerl",
                       n_samples=400, seed=0)  # fmt: skip
cmp.table.round(3)

# %%
print(cmp.summary())

# %% [markdown]
# Every variant's curve in one figure, one colour each (`Comparison.plot_curves`, or
# `rlcurves.plot_fits(fits)` for any fits):

# %%
fig = cmp.plot_curves()
plt.show()

# %%
p_pipeline = float(1 - cmp.table.set_index("variant").loc["pipeline_rl", "p_A_higher"])
noise = np.median([fits[k].noise_sd for k in ["scalerl", *single]])
Markdown(
    f"PipelineRL's ceiling is lower than the recipe's with probability {p_pipeline:.2f} in "
    "these draws; a 90% two-sided verdict needs 0.95. One run per variant with 500 validation "
    f"prompts x 4 samples leaves about {noise:.3f} of noise on every evaluation (the fits' median "
    "residual sd)."
)

# %% [markdown]
# What one run per variant at this scale can and cannot say:
#
# - **PPO-off-policy-8 and PipelineRL-8 learned far less per token** at the demo's learning
#   rate: eight policy versions of staleness on a 0.8M-parameter model that moves fast per step.
#   PPO-off-policy's evaluations wander around the start, so no S-curve exists to fit: `compare`
#   says "not compared" rather than rank a step function. PipelineRL's ceiling is not settled: the
#   interval of its difference in A runs from far below the recipe's to above it. The token axis
#   charges asynchronous and synchronous tokens alike, so it cannot show what PipelineRL is for
#   (no idle generator or trainer, more tokens per GPU-hour); that gain needs dedicated devices to
#   measure.
# - **Everything else is not settled against the recipe**: for DAPO's loss, prompt-level adv
#   std, no zero-variance filter and batch 64 the interval of the difference in A spans more than
#   the paper's +-0.02 margin, so `compare` shows neither a difference nor the same ceiling, and
#   their Bs' intervals overlap. Sample-level aggregation and batch 16 have not settled by 600
#   steps (batch 16 has seen half the tokens), so their A intervals run up to the bound of 1: more
#   compute, not a better fit, would decide them.
#
# With the evaluation noise printed above, the paper could tell 0.02 apart on A only with 1,000
# prompts x 16 samples, runs of 16k GPU-hours, and its seed-to-seed check.
#
# ## The paper's shared-A rule and the log-log view
#
# A and B trade off in a fit: the same points are described nearly as well by a higher ceiling
# reached more slowly. So the paper compares B only between variants whose A agree within 0.02
# (its seed-to-seed margin), after refitting each with their mean A. `shared_a()` does that for the
# variants within the margin of the baseline.

# %%
shared = cmp.shared_a()
print(f"shared A = {shared.A:.3f}")
shared.table.round(3)

# %% [markdown]
# With A fixed the curve becomes a straight line, $\log F(R) = B \log C$ with
# $F(R) = C_{mid}^B / ((A - R_0)/(R - R_0) - 1)$: each variant's points should fall on a line whose
# **slope is its B**; a steeper line reaches the shared ceiling with less compute. Points far from
# their line at the top are evaluations near A, where F blows up and noise dominates.

# %%
fig = cmp.plot_loglog()  # the axis label names the data's unit (generated tokens here)
plt.show()

# %% [markdown]
# `plot()` puts every variant in the (B, A) plane with its intervals; the grey band is the
# baseline's A +- 0.02. A variant whose A or B the data do not determine is left out and named.

# %%
fig = cmp.plot()
plt.show()

# %% [markdown]
# ## The two choices that need their own baseline
#
# The FP32 head only differs from the rest of the model in a bfloat16 model, and no-positive
# resampling only acts once prompts come round again. So these two choices were run as pairs on
# their own baseline: a bfloat16 model with and without the FP32 head, and a 2,000-prompt pool
# (about ten epochs in 600 steps) with and without no-positive resampling.

# %%
pairs = {
    "FP32 head (bfloat16 body)": ("bf16", "bf16_no_fp32_head"),
    "no-positive resampling (2,000 prompts)": ("pool_2000", "pool_2000_no_positive"),
}
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, (title, (on, off)) in zip(axes, pairs.items(), strict=True):
    for name, color in ((on, "C0"), (off, "C3")):
        df = runs[name]
        ax.scatter(df["compute"], df["reward"], s=8, color=color)
        ax.plot(grid, fits[name].predict(grid), color=color, lw=1.6, label=name)
    ax.set(title=title, xlabel="generated tokens")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("validation pass rate")
fig.tight_layout()
plt.show()
for title, (on, off) in pairs.items():
    print(title)
    print(rlcurves.compare({on: fits[on], off: fits[off]}, n_samples=400, seed=0).summary(), "\n")

# %%
ends = {k: runs[k]["reward"].tail(4).mean() for k in ("bf16", "bf16_no_fp32_head")}
Markdown(
    "Neither pair reproduces the paper's sign. **FP32 head:** the two bfloat16 runs end within "
    f"noise of each other ({ends['bf16']:.2f} and {ends['bf16_no_fp32_head']:.2f} over their last "
    "four evaluations; compare their A and B intervals above)."
)

# %% [markdown]
# **FP32 head**, continued: both still climb at 600 steps. The
# FP32 head exists to make the generator's token probabilities match the trainer's. Here both sides
# are the same torch code on the same weights, so the mismatch it fixes stays small either way
# (`fresh_logprob_mismatch` in the trainer's log, usually 0, in both runs). The paper's
# 0.52 -> 0.61 on A comes from an inference engine whose kernels differ from the trainer's; to
# measure it, run this pair with `generator=vllm` on a GPU.
#

# %%
pool, kept = runs["pool_2000"], runs["pool_2000_no_positive"]
peak = pool.loc[pool["reward"].idxmax()]
floor = pool[(pool["step"] > peak["step"]) & (pool["reward"] < 0.005)].iloc[0]
Markdown(
    "**No-positive resampling.** The pool of 2,000 prompts came round ten times. Resampling "
    "retired a third of it as solved (pass rate >= 0.9); the training reward on the hard "
    "remainder fell to zero, and validation with it, from "
    f"{peak['reward']:.2f} at step {peak['step']:.0f} to {floor['reward']:.2f} at step "
    f"{floor['step']:.0f}. Without resampling the same run ended at "
    f"{kept['reward'].tail(4).mean():.2f} (mean of its last four evaluations). `compare` calls "
    "the collapsed curve what it is, a fall whose B is not an efficiency. The paper retires "
    "prompts from a pool that is large for its number of steps; on a small pool, watch "
    "`pool_size` and `train_reward` in the trainer's log."
)

# %% [markdown]
# ## What a decisive comparison looks like: SIMULATED at paper scale
#
# At paper scale the differences are large enough to decide. The runs below are **SIMULATED** from
# the paper's fitted batch-size runs (Khatri et al., 2025: batch 512 A = 0.605, B = 1.77,
# C_mid = 2818 GPU-hours; batch 2048 A = 0.645, B = 1.70, C_mid = 10909; R0 = 0.30 assumed),
# with the bundled simulated example's noise model: binomial mean@16 over 1,000 prompts of spread
# difficulty plus a slow AR(1) drift of the run.

# %%
R0 = 0.30


def simulate_run(A, B, C_mid, *, budget=16_000.0, every=200.0, seed=0):
    """One SIMULATED run: the ScaleRL curve plus evaluation noise (as the bundled example)."""
    rng = np.random.default_rng(seed)
    compute = np.arange(0.0, budget + 1, every)
    mean = rlcurves.sigmoid(np.maximum(compute, 1e-9), A, B, C_mid, R0)
    drift = np.zeros(compute.size)  # checkpoints close in time share the policy's luck
    for i in range(1, compute.size):
        drift[i] = 0.9 * drift[i - 1] + np.sqrt(1 - 0.9**2) * 0.006 * rng.standard_normal()
    p = np.clip(mean + drift, 1e-3, 1 - 1e-3)
    difficulty = rng.beta(2 * p[:, None], 2 * (1 - p[:, None]), (compute.size, 1000))
    reward = rng.binomial(16, difficulty).mean(axis=1) / 16
    return pd.DataFrame({"compute": compute, "reward": reward})


# %% [markdown]
# ### The bitter lesson: fast early, lower ceiling
#
# The paper's batch-size runs are the clearest case: batch 512 climbs much faster, batch 2048
# reaches a higher ceiling. Two SIMULATED runs of 32k GPU-hours, evaluated every 400 GPU-hours:

# %%
batch = {"batch-512": (0.605, 1.77, 2818.0), "batch-2048": (0.645, 1.70, 10909.0)}
batch_runs = {
    name: simulate_run(*p, budget=32_000.0, every=400.0, seed=10 + i)
    for i, (name, p) in enumerate(batch.items())
}
batch_fits = {
    name: rlcurves.fit_sigmoid("compute", "reward", data=df, min_compute=1500, label=name)
    for name, df in batch_runs.items()
}
batch_cmp = rlcurves.compare(batch_fits, baseline="batch-512", n_samples=400, seed=0)
batch_cmp.table.round(3)

# %% [markdown]
# `p_ahead(a, b, at)` is the probability that a's expected curve is above b's at compute `at`,
# and `crossover` where the fitted curves cross, with an interval over the same draws.

# %%
for at in (8_000, 32_000, 100_000):
    p = batch_cmp.p_ahead("batch-2048", "batch-512", at)
    print(f"P(batch-2048 ahead at {at:>7,} GPU-h) = {p:.2f}")
cross = batch_cmp.crossover("batch-2048", "batch-512")
print(cross)
c = np.geomspace(5e3, 1e6, 20_000)  # the true curves: known only because they are simulated
ahead = rlcurves.sigmoid(c, *batch["batch-2048"], R0) > rlcurves.sigmoid(c, *batch["batch-512"], R0)
true_cross = c[np.argmax(ahead)]
print(f"true crossing of the simulated curves: {true_cross:,.0f} GPU-h")

# %%
fig, ax = plt.subplots(figsize=(6.4, 4.2))
fitted, beyond = np.geomspace(1500, 32_000, 200), np.geomspace(32_000, 100_000, 100)
for (name, df), color in zip(batch_runs.items(), ["C3", "C4"], strict=True):
    fit = batch_fits[name]
    ax.scatter(df["compute"], df["reward"], s=8, alpha=0.5, color=color)
    ax.plot(fitted, fit.predict(fitted), color=color, lw=2, label=f"{name}: A = {fit.A:.3f}")
    ax.plot(beyond, fit.predict(beyond), color=color, lw=2, ls="--")
ax.axvline(32_000, color="0.4", lw=0.8, ls=":")
ax.set_xlim(1000, 100_000)
ax.axvline(float(cross), color="0.2", lw=1, ls="--", label=f"fitted crossover {cross.compute:,.0f}")
ax.set(xlabel="compute (GPU-hours)", ylabel="validation pass rate", xscale="log")
ax.set_title("SIMULATED batch sizes: data to 32k GPU-h, extrapolated (dashed)", fontsize=10)
ax.legend(fontsize=8, loc="lower right")
ax.grid(alpha=0.3)
plt.show()

# %%
Markdown(
    "At 8k GPU-hours batch 512 leads with probability "
    f"{1 - batch_cmp.p_ahead('batch-2048', 'batch-512', 8_000):.2f}; a study that stopped there "
    "would pick it. The fits say batch 2048 has the higher ceiling and overtakes it around "
    f"{float(cross):,.0f} GPU-hours (the simulated curves cross at {true_cross:,.0f}), leading at "
    f"100k with probability {batch_cmp.p_ahead('batch-2048', 'batch-512', 100_000):.2f}."
)

# %% [markdown]
# Read with care: Its fitted A overshoots the simulated
# 0.645: the run stops at three times its C_mid, still climbing, where the ceiling is least
# determined (the interval is correspondingly wide). The crossover of two nearly parallel curves
# is the least stable number here: near the crossing the curves differ by less than the
# noise of one evaluation, and the interval reflects the evaluation noise of one run each, not the
# seed-to-seed variation the paper puts at +- 0.015 on A. Decide on A and B; treat the crossover
# as a rough location.
