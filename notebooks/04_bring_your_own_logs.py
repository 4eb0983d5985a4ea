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
# # 04 · Bring your own logs: W&B, TensorBoard, JSONL
#
# `rlcurves.read_log(path)` turns a training log into the canonical curve: a `compute` column in
# GPU-hours, a `reward` column (the validation metric), then the log's own columns. It detects the
# format, picks the reward and the compute axis, cleans what real runs leave behind (sparse
# evaluations, NaNs, restarts, steps written twice) and records every choice in `df.attrs`;
# `describe_log(df)` prints that account.
#
# **The logs here are SIMULATED**: the small fixtures of the test suite (`tests/data/logs/`, see its
# README), written in each tool's record shape with made-up numbers. Every file encodes the same
# run: 200 steps of 90 s on 8 GPUs (0.2 GPU-hours per step), a validation reward every 10 steps on
# a ScaleRL curve (A = 0.7, B = 1.5, C_mid = 12 GPU-hours, R0 = 0.1) plus seeded noise. The
# quirks each tool really produces are planted, so each reader must recover the same curve.

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

import rlcurves
from rlcurves.plot import plot_forecast

pd.set_option("display.max_colwidth", 200)

LOGS = Path("../tests/data/logs")  # relative to this notebook's folder
sorted(p.name for p in LOGS.iterdir())

# %% [markdown]
# ## A W&B export
#
# The common way out of W&B is `run.history()` (or `scan_history()`) saved to a file. W&B logs
# wall time (`_runtime`, seconds), not compute, so `read_log` asks how many GPUs the run used:

# %%
wandb_csv = LOGS / "wandb" / "history_export.csv"
try:
    rlcurves.read_log(wandb_csv)
except rlcurves.RLCurvesError as err:
    print(err)

# %%
run = rlcurves.read_log(wandb_csv, gpus=8)
print(rlcurves.describe_log(run))
run.head()

# %% [markdown]
# `gpus=8` made compute = `_runtime` x 8 / 3600 GPU-hours. Of 200 records (one per step) the 20
# that carry `eval/reward` are kept: `eval/reward` was preferred over `train/reward` because
# validation metrics rank first. To fit something else, name it: `reward="train/reward"`. If
# your logger writes a step counter but no clock, `gpu_hours_per_step=` is the alternative, and
# `compute="<column>"` names a GPU-hours or FLOPs column outright.
#
# The same history saved as JSON reads the same way; a live run can be read directly with
# `read_log("wandb:entity/project/run_id", gpus=8)` (needs `wandb` and a login; not run here, this
# notebook stays offline).

# %%
rlcurves.read_log(LOGS / "wandb" / "history.json", gpus=8)[["compute", "reward"]].equals(
    run[["compute", "reward"]]
)

# %% [markdown]
# A line-plot panel exported to CSV holds several runs side by side (`<run> - <metric>` columns).
# Its x axis is the step, so the compute comes from `gpu_hours_per_step`, and a `run` column
# says which rows belong to which run:

# %%
panel = rlcurves.read_log(LOGS / "wandb" / "panel_eval_reward.csv", gpu_hours_per_step=0.2)
panel.groupby("run")["compute"].agg(["size", "min", "max"])

# %% [markdown]
# ## TensorBoard, with a crash and a resume
#
# A run folder with two event files: the job died after step 120, resumed from the step-100
# checkpoint in a new file, and wrote steps 101-120 again. The elapsed-time clock restarted with
# the new file. The cleaning report says what was repaired:

# %%
tb = rlcurves.read_log(LOGS / "tensorboard" / "grpo_run", gpus=8)
print(rlcurves.describe_log(tb))

# %%
pd.DataFrame(tb.attrs["runs"]["grpo_run"]["cleaning"])[["step", "rows", "detail"]]

# %% [markdown]
# Three repairs: the restarted clock is stitched (each later segment offset by the compute before
# the drop), records without an evaluation are dropped, and the twice-written evaluation steps keep
# the later write (the run that survived).
#
# ## JSONL and everything else
#
# Flat JSON lines, where evaluations are their own records at the same step as training records:

# %%
jl = rlcurves.read_log(LOGS / "jsonl" / "run_a.jsonl")
print(rlcurves.describe_log(jl))

# %% [markdown]
# No `gpus=` here: the log has a `gpu_hours` column, which is used as is.
#
# ## The same curve from every format
#
# Every fixture encodes the same run, so every reader should give the same fit as the plain
# reference table:

# %%
sources = {
    "reference.csv": (LOGS / "reference.csv", {}),
    "W&B history export": (wandb_csv, {"gpus": 8}),
    "W&B history JSON": (LOGS / "wandb" / "history.json", {"gpus": 8}),
    "TensorBoard (resumed)": (LOGS / "tensorboard" / "grpo_run", {"gpus": 8}),
    "JSONL": (LOGS / "jsonl" / "run_a.jsonl", {}),
    "TSV (nan, inf)": (LOGS / "tsv" / "run_a.tsv", {}),
    "verl file logger": (LOGS / "verl" / "gsm8k_grpo.jsonl", {"gpus": 8}),
    "TRL trainer_state": (LOGS / "trl" / "qwen-grpo", {"gpu_hours_per_step": 0.2}),
    "PipelineRL streams": (LOGS / "pipelinerl" / "exp_math", {"gpus": 8}),
    "rlcurves recipe": (LOGS / "recipe" / "cispo_small", {}),
}
rows = []
for name, (path, kw) in sources.items():
    df = rlcurves.read_log(path, **kw)
    fit = rlcurves.fit_sigmoid("compute", "reward", data=df)
    rows.append(
        {
            "source": name,
            "format": df.attrs["runs"][next(iter(df.attrs["runs"]))]["format"],
            "points": len(df),
            "A": fit.A,
            "B": fit.B,
            "C_mid": fit.C_mid,
            "R0": fit.R0,
        }
    )
table = pd.DataFrame(rows).set_index("source")
table.round(4)

# %%
spread = table[["A", "B", "C_mid", "R0"]].max() - table[["A", "B", "C_mid", "R0"]].min()
Markdown(
    f"One row of numbers, {len(table)} formats: across them A differs by at most "
    f"{spread['A']:.1e} and C_mid by {spread['C_mid']:.1e} GPU-hours. (The fitted "
    f"A = {table['A'].iloc[0]:.3f} and C_mid = {table['C_mid'].iloc[0]:.1f} are the fit of this "
    "noisy sample; the curve it was drawn from has A = 0.7, C_mid = 12.)"
)

# %% [markdown]
# ## Wide tables and clock glitches
#
# A table with one reward column per model (a spreadsheet, a W&B panel export) reads as one run
# per column with `reward=[...]` (or `reward="*"` for every numeric column but compute and step),
# ready for `compare` or `plot_fits`. And a compute value out of line, such as two swapped
# entries, is not taken for a restarted clock: the rows are dropped with a warning that names them.

# %%
wide = rlcurves.read_log(LOGS / "wide" / "models.csv", reward="*")
print(wide.groupby("run")["reward"].agg(["size", "max"]))
wide_fits = {
    name: rlcurves.fit_sigmoid("compute", "reward", data=part, label=name)
    for name, part in wide.groupby("run", sort=False)
}
rlcurves.plot_fits(wide_fits)
plt.show()
glitched = rlcurves.read_log(LOGS / "glitch" / "swapped_pair.csv")  # warns, naming the rows
print(rlcurves.describe_log(glitched))

# %% [markdown]
# ## The compute axis
#
# The unit of `compute` is whatever `gpus=` makes it. Double the GPUs and every compute value
# doubles; the fitted C_mid doubles with it, while A and B, which do not depend on the unit, stay
# put. So comparing runs in GPU-hours is fair only if `gpus=` is right for each of them.

# %%
for gpus in (8, 16):
    f = rlcurves.fit_sigmoid(
        "compute", "reward", data=rlcurves.read_log(LOGS / "tensorboard" / "grpo_run", gpus=gpus)
    )
    print(f"gpus={gpus:>2}: A = {f.A:.4f}, B = {f.B:.4f}, C_mid = {f.C_mid:.2f} GPU-hours")

# %% [markdown]
# A uniform change of unit is harmless; an uneven one is not. Wall-clock time on a shared machine
# runs slower whenever something else runs, which bends the curve and reaches A and B (notebook 02
# measures it on identical runs). Any logged column can be the compute axis instead: `compute=`
# names it. Here a REAL run of the reference trainer that ships with rlcurves, read on its count
# of generated tokens, which load cannot stretch:

# %%
real_run = Path(rlcurves.__file__).parent / "data" / "runs" / "recipe_cpu_demo_seed0"
by_tokens = rlcurves.read_log(real_run, compute="tokens_total")
print(rlcurves.describe_log(by_tokens))

# %% [markdown]
# ## Then fit and forecast
#
# From here on a read log is like the bundled example of notebook 01. The TensorBoard run, fitted
# on its first half (20 GPU-hours) and forecast to twice that:

# %%
half = rlcurves.fit_sigmoid(
    "compute", "reward", data=tb, max_compute=tb["compute"].max() / 2, label="first half"
)
print(half.summary())
fig = plot_forecast(half, seed=0)
fig.axes[0].set_title(
    "SIMULATED TensorBoard log: first half fitted, second half held out", fontsize=10
)
plt.show()

# %%
Markdown(
    f"{half.n} evaluations that stop before the curve bends leave the ceiling open "
    f"(A = {half.A:.2f} +- {half.stderr['A']:.2f} in the summary), yet the forecast at twice the "
    "fitted compute is already useful: the held-out second half follows the dashed curve. More "
    "frequent evaluations and a longer fitted prefix narrow it (notebooks 01 and 03)."
)
