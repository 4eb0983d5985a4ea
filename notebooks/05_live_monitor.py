# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · The live monitor: forecasts and advice while the run is going
#
# `rlcurves.Monitor` takes a run's evaluations as they arrive, refits after each one and says
# where the run will land at its budget, whether it will beat a baseline, and what to do:
# *too early to tell*, *continue*, *on track*, *unlikely to beat the baseline*, *peaked*. The
# advice comes from `rlcurves.decide`, with thresholds measured by replaying finished real runs
# (`python -m benchmarks.monitor_replay`): a curve its data leave open is forecast from the
# shapes of the corpus's runs, so advice starts once 8 evaluations and 10% of the budget are in
# (`require_identified=` waits for a fit that determines the ceiling instead), and a stop advice
# is given only once it has held on two consecutive refits.
#
# The runs here are REAL: two runs of the reference trainer's leave-one-out study, bundled with
# rlcurves, on the generated-tokens axis (load-free). We replay them evaluation by evaluation,
# as if they were running.

# %%
import matplotlib.pyplot as plt
import pandas as pd

import rlcurves
from rlcurves.datasets import load_example

AXIS = "tokens_total"
baseline = load_example("recipe_loo_scalerl", compute=AXIS)  # the ScaleRL recipe, finished
budget = float(baseline["compute"].max())
print(f"budget: {budget:,.0f} generated tokens")

# %% [markdown]
# ## A worse run: PipelineRL-8 against the recipe
#
# One report per evaluation. Watch the advice column: it waits for 8 evaluations and 10% of the
# budget (the measured "too early" fraction), then says what the numbers say. `pending` is a stop
# advice waiting for the next refit to confirm it.

# %%
run = load_example("recipe_loo_pipeline_rl", compute=AXIS)
monitor = rlcurves.Monitor(budget, baseline=baseline, n_samples=200, label="pipeline_rl")
rows = []
for c, r in zip(run["compute"], run["reward"], strict=True):
    rep = monitor.update(c, r)
    rows.append(
        {
            "evals": rep.n_points,
            "fraction": round(rep.fraction, 2),
            "forecast": rep.mean,
            "lower": rep.lower,
            "upper": rep.upper,
            "p_beat": rep.p_beat,
            "advice": rep.advice,
            "pending": rep.pending,
        }
    )
pd.DataFrame(rows).round(3)

# %% [markdown]
# This run's rise is almost a step (B poorly identified). A first "unlikely" only becomes advice
# when the next refit, at least 3.5% of the budget later, says it too (the monitor's hysteresis;
# `watch --once` carries it across calls through its JSON-lines report).
#
# The last report, as Jupyter shows it (`MonitorReport._repr_html_`), with its figure:

# %%
rep  # noqa: B018 (the cell shows it)

# %% [markdown]
# ## A better run: the recipe against PipelineRL-8
#
# The same replay the other way round: "on track" once the numbers say so.

# %%
monitor = rlcurves.Monitor(budget, baseline=run, n_samples=200, label="scalerl")
advice = [
    monitor.update(c, r).advice
    for c, r in zip(baseline["compute"], baseline["reward"], strict=True)
]
pd.Series(advice).value_counts()

# %%
fig = monitor.report().plot()
plt.show()

# %% [markdown]
# ## In a trainer, on the command line, in a report
#
# - `rlcurves watch LOG --budget X --baseline BASE` follows a growing log and keeps
#   `rlcurves_monitor.png` and `rlcurves_monitor.jsonl` next to it.
# - `rlcurves.integrations.transformers.ForecastCallback(trainer, metric="eval_reward", ...)`
#   logs `forecast/*` through a `transformers.Trainer` (and so TRL's trainers) and can stop on
#   the advice (`stop_when="unlikely"`).
# - `rlcurves report RUN [RUN ...] -o report.html` writes one self-contained HTML page.
