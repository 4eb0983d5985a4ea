"""Runs bundled with rlcurves: example runs, and the corpus of real public RL runs.

Each example has the columns ``compute`` (GPU-hours) and ``reward`` (validation pass rate), the
original columns, and ``attrs`` saying where it came from. Examples whose name starts with
``simulated`` are NOT real training runs: they are drawn from the ScaleRL paper's parameters with
realistic evaluation noise, and say so in ``attrs["description"]``.

The **corpus** (:func:`list_corpus`, :func:`load_corpus`, :func:`describe_corpus`) is the set of
finished public RL-for-LLM runs the forecasts are calibrated and checked on, grouped in families
(one model x one task x one code base), each file with its source in its header.

Examples
--------
>>> "simulated_scalerl_8b" in rlcurves.datasets.list_examples()
True
>>> df = rlcurves.datasets.load_example("recipe_loo_scalerl", compute="tokens_total")
>>> df.attrs["compute"]["unit"], df.attrs["simulated"]
('tokens_total (as logged)', False)
>>> int(rlcurves.datasets.list_corpus()["family"].nunique()) >= 5
True
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import pandas as pd

from .errors import RLCurvesError

_EXAMPLES = {
    "simulated_scalerl_8b": (
        "simulated_scalerl_8b.csv",
        "gpu_hours",
        "val_pass_rate",
        "SIMULATED (not a real run): ScaleRL 8B parameters (A=0.610, B=1.92, C_mid=2542 GPU-h, "
        "R0=0.30 assumed) with binomial mean@16 evaluation noise and AR(1) drift; "
        "see scripts/make_simulated_example.py",
    ),
}


# Real runs of the reference trainer (recipe/), read with read_log from rlcurves/data/runs/NAME/.
_RUNS = {
    "recipe_cpu_demo_seed0": (
        "REAL run of the reference trainer: python -m recipe.train --config "
        "recipe/configs/cpu_demo.yaml --set seed=0 (3-digit addition, 0.8M-parameter Llama, full "
        "ScaleRL recipe, synchronous, torch sampler, 1000 steps); compute = wall-clock hours on a "
        "shared 2-core CPU x 1 device, so machine load stretches the axis"
    ),
    "recipe_cpu_demo_seed1": (
        "REAL run of the reference trainer, as recipe_cpu_demo_seed0 with --set seed=1"
    ),
}


# Leave-one-out runs of the reference trainer: the CPU demo recipe for 600 steps with one ScaleRL
# choice reverted each, and a batch-size pair around the recipe's 32 prompts per step
# (scripts/run_leave_one_out.sh), two at a time on one 2-core machine.
_LOO = {
    "recipe_loo_scalerl": "the full ScaleRL recipe (baseline)",
    "recipe_loo_dapo": "loss=dapo (DAPO's clipped ratio instead of CISPO)",
    "recipe_loo_aggregation": "aggregation=sample (sample-level instead of prompt-level)",
    "recipe_loo_adv_norm": "adv_norm=prompt (per-prompt instead of batch-level std)",
    "recipe_loo_zero_variance": "zero_variance_filter=false (all-equal-reward prompts kept)",
    "recipe_loo_ppo_off_policy": "mode=ppo-off-policy (PPO-off-policy-8 instead of synchronous)",
    "recipe_loo_pipeline_rl": "mode=pipeline (PipelineRL-8 instead of synchronous)",
    "recipe_loo_batch_16": "prompts_per_step=16 (half the recipe's batch)",
    "recipe_loo_batch_64": "prompts_per_step=64 (twice the recipe's batch)",
    "recipe_loo_fp32_head": (
        "fp32_head=false, INERT here: the demo's model is float32, so this run repeats "
        "recipe_loo_scalerl token for token and differs only in timing (a null control for the "
        "wall-clock axis); the real FP32-head pair is recipe_loo_bf16 vs "
        "recipe_loo_bf16_no_fp32_head"
    ),
    "recipe_loo_no_positive": (
        "positive_threshold=null, INERT here: 600 x 32 prompts is less than one epoch of 20,000, "
        "and no-positive resampling acts from the second, so this run repeats recipe_loo_scalerl "
        "token for token (a null control for the wall-clock axis); the real pair is "
        "recipe_loo_pool_2000 vs recipe_loo_pool_2000_no_positive"
    ),
    "recipe_loo_bf16": "dtype=bfloat16 (bfloat16 body, FP32 head: baseline of the FP32-head pair)",
    "recipe_loo_bf16_no_fp32_head": "dtype=bfloat16 fp32_head=false (bfloat16 head too)",
    "recipe_loo_pool_2000": (
        "train_prompts=2000 (about 10 epochs; baseline of the no-positive-resampling pair)"
    ),
    "recipe_loo_pool_2000_no_positive": "train_prompts=2000 positive_threshold=null",
}
_RUNS.update(
    {
        name: (
            "REAL leave-one-out run of the reference trainer: recipe/configs/cpu_demo.yaml, "
            f"600 steps, {what}; scripts/run_leave_one_out.sh. Compute = wall-clock hours x 1 "
            "device on a shared 2-core CPU (compute='tokens_total' gives a load-free axis)"
        )
        for name, what in _LOO.items()
    }
)
# The paired-seed study on the task the tiny model can climb (issue 19): recipe/configs/
# study_lsb.yaml under PPO-off-policy-4 (so the importance ratio leaves 1), 200 steps, seeds 0-2;
# a cell's runs of one seed share warm-up, prompt order and sampler seed with its baseline
# cell's (scripts/run_study.sh). Cell -> (what it changes, the cell it differs from by one switch).
_STUDY = {
    "ppo4_cispo": ("mode=ppo-off-policy max_lag=4 (CISPO, the ScaleRL loss; lr 3e-4)", None),
    "ppo4_dapo": ("mode=ppo-off-policy max_lag=4 loss=dapo (DAPO's clipped ratio)", "ppo4_cispo"),
    "ppo4_cispo_lr1e4": (
        "mode=ppo-off-policy max_lag=4 lr=1e-4 steps=400 (CISPO; 200 steps resumed to 400)",
        "ppo4_cispo",
    ),
    "ppo4_dapo_lr1e4": (
        "mode=ppo-off-policy max_lag=4 lr=1e-4 loss=dapo steps=400 (DAPO; 200 steps resumed "
        "to 400)",
        "ppo4_cispo_lr1e4",
    ),
    "pipe4_dapo": (
        "mode=pipeline max_lag=4 loss=dapo (PipelineRL-4, the sampler in its own process)",
        "ppo4_dapo",
    ),
    "ppo4_dapo_b16": (
        "mode=ppo-off-policy max_lag=4 loss=dapo prompts_per_step=16 steps=400 (half the "
        "batch, the same generated tokens)",
        "ppo4_dapo",
    ),
    "pipe4_cispo_lr1e4": (
        "mode=pipeline max_lag=4 lr=1e-4 steps=400 (PipelineRL-4 with CISPO, the ScaleRL pair)",
        "ppo4_cispo_lr1e4",
    ),
}
STUDY_SEEDS = (0, 1, 2)
_STUDY_RUNS = {
    f"recipe_study_{cell}_s{seed}": (cell, seed) for cell in _STUDY for seed in STUDY_SEEDS
}
_RUNS.update(
    {
        name: (
            "REAL run of the reference trainer's paired-seed study: recipe/configs/"
            f"study_lsb.yaml --set seed={seed} steps=200, then {_STUDY[cell][0]}; "
            "scripts/run_study.sh. Compute = wall-clock hours x 1 device on a shared 2-core CPU "
            "(compute='tokens_total' gives a load-free axis)"
        )
        for name, (cell, seed) in _STUDY_RUNS.items()
    }
)
# The long-completion study (issue 30): the addition chain (recipe/configs/study_long.yaml), vLLM's
# CPU build as the generator, sync / PPO-off-policy-8 / PipelineRL-8 per seed from one warm-up and
# prompt order (scripts/run_study.sh with STUDY=long). Cell -> (what it changes, its baseline).
_LONG = {
    "sync": ("mode=sync (the synchronous loop: the reference)", None),
    "ppo8": ("mode=ppo-off-policy max_lag=8 (PPO-off-policy-8)", "sync"),
    "pipe8": ("mode=pipeline max_lag=8 (PipelineRL-8, vLLM's async engine)", "ppo8"),
}
LONG_SEEDS = (0, 1, 2)
_LONG_RUNS = {f"recipe_long_{cell}_s{seed}": (cell, seed) for cell in _LONG for seed in LONG_SEEDS}
_RUNS.update(
    {
        name: (
            "REAL run of the reference trainer's long-completion study: recipe/configs/"
            f"study_long.yaml --set seed={seed}, then {_LONG[cell][0]}; addition chain, "
            "completions of about 56 tokens, vLLM CPU generator; scripts/run_study.sh with "
            "STUDY=long. Compute = "
            "wall-clock hours x 2 devices (trainer and generator, charged in every mode) on a "
            "shared 2-core CPU: machine load stretches it (the log's load_average column; "
            "compute='tokens_total' gives a load-free axis)"
        )
        for name, (cell, seed) in _LONG_RUNS.items()
    }
)
# The new CPU demo (answers least-significant digit first), two seeds
_RUNS.update(
    {
        f"recipe_lsb_demo_seed{seed}": (
            "REAL run of the reference trainer: python -m recipe.train --config "
            f"recipe/configs/cpu_demo_lsb.yaml --set seed={seed}, resumed to steps=1100 (seed 0 "
            "stopped at 1082: every training prompt retired) (3-digit addition, answers "
            "fixed-width least-significant digit first, per-carry-class validation columns, "
            "0.8M-parameter Llama, full ScaleRL recipe, synchronous); compute = wall-clock "
            "hours on a shared 2-core CPU x 1 device"
        )
        for seed in (0, 1)
    }
)

# The run each leave-one-out run differs from by one switch (attrs["baseline"]); None for the
# recipe itself and for the two inert runs, which differ from it in nothing but their clocks.
_LOO_BASELINE = {
    "recipe_loo_scalerl": None,
    "recipe_loo_fp32_head": None,
    "recipe_loo_no_positive": None,
    "recipe_loo_bf16_no_fp32_head": "recipe_loo_bf16",
    "recipe_loo_pool_2000_no_positive": "recipe_loo_pool_2000",
}


def _baseline(name: str) -> str | None:
    if name in _LOO:
        return _LOO_BASELINE.get(name, "recipe_loo_scalerl")
    if name in _STUDY_RUNS:  # paired: the baseline cell's run of the same seed
        cell, seed = _STUDY_RUNS[name]
        base = _STUDY[cell][1]
        return None if base is None else f"recipe_study_{base}_s{seed}"
    if name in _LONG_RUNS:
        cell, seed = _LONG_RUNS[name]
        base = _LONG[cell][1]
        return None if base is None else f"recipe_long_{base}_s{seed}"
    if name == "recipe_lsb_demo_seed1":
        return "recipe_lsb_demo_seed0"  # a replicate
    return "recipe_cpu_demo_seed0" if name == "recipe_cpu_demo_seed1" else None  # a replicate


def list_examples(group: str | None = None) -> list[str]:
    """Names of the bundled example runs (``simulated_*`` are simulated, ``recipe_*`` real).

    Parameters
    ----------
    group : str, optional
        Only the runs of one family, comparable with each other on one compute axis:
        ``"simulated"``, ``"recipe_cpu_demo"`` (two seeds, 1000 steps), ``"recipe_loo"`` (the
        leave-one-out study, 600 steps each; ``attrs["baseline"]`` names the run each one
        differs from), ``"recipe_lsb_demo"`` (the new CPU demo, two seeds) or
        ``"recipe_study"`` (the paired-seed study: ``attrs["cell"]`` and ``attrs["seed"]``;
        a run's baseline is the baseline cell's run of its seed) or ``"recipe_long"`` (the
        long-completion study of the trainer modes, paired the same way); a run's family is
        ``attrs["group"]``.
    """
    names = sorted([*_EXAMPLES, *_RUNS])
    return [n for n in names if group is None or _group(n) == group]


def _group(name: str) -> str:
    if name in _EXAMPLES:
        return "simulated"
    if name in _STUDY_RUNS:
        return "recipe_study"
    if name in _LONG_RUNS:
        return "recipe_long"
    if name.startswith("recipe_lsb_demo"):
        return "recipe_lsb_demo"
    return "recipe_loo" if name in _LOO else "recipe_cpu_demo"


def load_example(name: str, compute: str | None = None) -> pd.DataFrame:
    """Load a bundled example run.

    Parameters
    ----------
    name : str
        One of :func:`list_examples`.
    compute : str, optional
        Column to use as the compute axis instead of the GPU-hours column. For the real runs,
        ``"tokens_total"`` (generated tokens so far) is an axis that machine load cannot stretch;
        the wall-clock one can (see ``recipe_loo_fp32_head``).

    Returns
    -------
    pandas.DataFrame
        Columns ``compute``, ``reward`` plus the file's own columns; ``attrs`` has ``source``,
        ``description``, ``compute_unit``, ``simulated``, ``group`` and, for a leave-one-out
        run, ``baseline``: the run it differs from by one switch or its seed (None for the
        recipe itself and for runs whose switch could not act).
    """
    if name in _RUNS:
        return _load_run(name, compute)
    if name not in _EXAMPLES:
        raise RLCurvesError(f"no example named {name!r}; available: {list_examples()}")
    filename, compute_col, reward_col, description = _EXAMPLES[name]
    with resources.files("rlcurves.data").joinpath(filename).open("r") as fh:
        df = pd.read_csv(fh, comment="#")
    if compute is not None and compute not in df.columns:
        raise RLCurvesError(
            f"example {name!r} has no column {compute!r} for compute; its columns: "
            f"{list(df.columns)}"
        )
    unit = "GPU-hours" if compute in (None, compute_col) else f"{compute} (as logged)"
    df.insert(0, "reward", df[reward_col].astype(float))
    df.insert(0, "compute", df[compute or compute_col].astype(float))
    df.attrs.update(
        source=f"rlcurves/data/{filename}",
        description=description,
        compute_unit=unit,
        reward={"column": reward_col, "how": "the example's reward column"},
        simulated=name.startswith("simulated"),
        name=name,
        group=_group(name),
        baseline=None,
    )
    return df


def example_path(name: str) -> Path:
    """The file or run folder of a bundled example, for :func:`rlcurves.read_log` or the CLI
    (``rlcurves fit example:NAME``; ``read_log("example:NAME")``)."""
    if name in _RUNS:
        target = resources.files("rlcurves.data").joinpath("runs", name)
    elif name in _EXAMPLES:
        target = resources.files("rlcurves.data").joinpath(_EXAMPLES[name][0])
    else:
        raise RLCurvesError(
            f"no example named {name!r}; available: {list_examples()} (`rlcurves examples` "
            "lists them)",
            name=name,
        )
    return Path(str(target))


def describe_examples() -> pd.DataFrame:
    """One row per bundled example: ``name, group, baseline, description``."""
    rows = []
    for name in list_examples():
        description = _EXAMPLES[name][3] if name in _EXAMPLES else _RUNS[name]
        rows.append(
            {
                "name": name,
                "group": _group(name),
                "baseline": _baseline(name),
                "description": description,
            }
        )
    return pd.DataFrame(rows)


def _load_run(name: str, compute: str | None) -> pd.DataFrame:
    from .logs import read_log

    folder = resources.files("rlcurves.data").joinpath("runs", name)
    with resources.as_file(folder) as path:
        df = read_log(path, compute=compute)
    df.attrs.update(
        description=_RUNS[name],
        compute_unit=df.attrs["compute"]["unit"],
        simulated=False,
        name=name,
        group=_group(name),
        baseline=_baseline(name),
    )
    for runs in (_STUDY_RUNS, _LONG_RUNS):  # the paired-seed studies: which cell, which seed
        if name in runs:
            df.attrs.update(cell=runs[name][0], seed=runs[name][1])
    return df


# ---- the corpus of real public runs --------------------------------------------------------

_CORPUS_REGISTRY = "corpus.json"
#: Fewest evaluations a corpus run may have (shorter runs are left out of the files).
MIN_CORPUS_POINTS = 12


@functools.lru_cache(maxsize=1)
def _registry() -> dict:
    with resources.files("rlcurves.data").joinpath(_CORPUS_REGISTRY).open("r") as fh:
        return json.load(fh)["families"]


def _check_family(family: str | None) -> list[str]:
    families = list(_registry())
    if family is None:
        return families
    if family not in families:
        raise RLCurvesError(
            f"no corpus family {family!r}; the families are {families} (family=None reads them "
            "all; rlcurves.datasets.describe_corpus() says what each holds)"
        )
    return [family]


@functools.lru_cache(maxsize=1)
def _corpus_table() -> tuple[pd.DataFrame, dict[tuple[str, str], str]]:
    """Every corpus run's evaluations (family, run, x, metric) and the file of each run. A run
    that two files of a family both hold is read from the first (the gsm8k budget file repeats
    one run of the sweep file)."""
    frames, files = [], {}
    for family, spec in _registry().items():
        for entry in spec["files"]:
            path = resources.files("rlcurves.data").joinpath("curves", entry["file"])
            with path.open("r") as fh:
                df = pd.read_csv(fh, comment="#")
            for run, g in df.groupby("run", sort=True):
                if (family, str(run)) in files:
                    continue
                files[(family, str(run))] = entry["file"]
                g = g.sort_values(entry["x"], kind="stable")
                frames.append(
                    pd.DataFrame(
                        {
                            "family": family,
                            "run": str(run),
                            "x": g[entry["x"]].to_numpy(float),
                            "metric": g[entry["metric"]].to_numpy(float),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True), files


def load_corpus(family: str | None = None) -> pd.DataFrame:
    """The corpus's evaluations in long format: one row per evaluation of a run.

    Columns ``family``, ``run`` (unique within its family), ``x`` (the run's compute axis as
    logged: its unit is ``list_corpus()``'s ``x_unit``, a training step for every family today)
    and ``metric`` (the value as logged: a pass rate or accuracy in [0, 1]; ``metric_kind`` in
    :func:`list_corpus` says whether it is a validation metric or the training reward). Families
    come in the registry's order (``rlcurves/data/corpus.json``), runs in name order within each
    file, each run's rows by increasing ``x``. For one run as a ``compute``/``reward`` frame::

        df = load_corpus("math")
        run = df[df["run"] == "lr3e-5"].rename(columns={"x": "compute", "metric": "reward"})

    Parameters
    ----------
    family : str, optional
        One family (``list_corpus()["family"].unique()``); default every family.
    """
    families = _check_family(family)
    table, _ = _corpus_table()
    out = table[table["family"].isin(families)].reset_index(drop=True)
    return out.copy()


def list_corpus(family: str | None = None) -> pd.DataFrame:
    """One row per corpus run: what it is, where it came from and how long it ran.

    Columns: ``family``; ``run``; ``source`` (the public repository and commit it was taken
    from); ``file`` (the bundled file under ``rlcurves/data/curves/``, whose header states the
    provenance in full); ``metric`` (what was measured); ``metric_kind`` (``"validation"``, or
    ``"training reward"`` where the source logged nothing else); ``x_unit``; ``n`` (evaluations);
    ``budget`` (the run's last ``x``: where it stopped); ``sweep`` (the sweeps the run belongs to,
    ``"family/sweep"`` joined by ``"; "``, or None: a sweep is a set of runs of one setup that
    differ in one knob, the kind :class:`rlcurves.Race` is for).

    Parameters
    ----------
    family : str, optional
        One family; default every family.
    """
    families = _check_family(family)
    table, files = _corpus_table()
    stats = table.groupby(["family", "run"], sort=False)["x"].agg(["size", "max"])
    rows = []
    for (fam, run), st in stats.iterrows():
        if fam not in families:
            continue
        spec = _registry()[fam]
        sweeps = [f"{fam}/{name}" for name, sw in spec["sweeps"].items() if run in sw["runs"]]
        rows.append(
            {
                "family": fam,
                "run": run,
                "source": spec["source"],
                "file": files[(fam, run)],
                "metric": spec["metric"],
                "metric_kind": spec["metric_kind"],
                "x_unit": spec["x_unit"],
                "n": int(st["size"]),
                "budget": float(st["max"]),
                "sweep": "; ".join(sweeps) or None,
            }
        )
    return pd.DataFrame(rows)


def describe_corpus() -> pd.DataFrame:
    """One row per corpus family: ``family, model, task, code_base, metric, metric_kind, x_unit,
    runs, sweeps`` (each sweep's name and its number of runs), ``knobs`` (what the sweeps vary),
    ``evaluations`` (fewest-most per run) and ``source``."""
    runs = list_corpus()
    rows = []
    for fam, spec in _registry().items():
        mine = runs[runs["family"] == fam]
        sweeps = spec["sweeps"].values()
        rows.append(
            {
                "family": fam,
                "model": spec["model"],
                "task": spec["task"],
                "code_base": spec["code_base"],
                "metric": spec["metric"],
                "metric_kind": spec["metric_kind"],
                "x_unit": spec["x_unit"],
                "runs": len(mine),
                "sweeps": ", ".join(f"{n} ({len(sw['runs'])})" for n, sw in spec["sweeps"].items()),
                "knobs": "; ".join(dict.fromkeys(sw["knob"] for sw in sweeps)),
                "evaluations": f"{mine['n'].min()}-{mine['n'].max()}",
                "source": spec["source"],
            }
        )
    return pd.DataFrame(rows)
