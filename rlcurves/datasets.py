"""Example runs bundled with rlcurves, as DataFrames in read_log's canonical form.

Each example has the columns ``compute`` (GPU-hours) and ``reward`` (validation pass rate), the
original columns, and ``attrs`` saying where it came from. Examples whose name starts with
``simulated`` are NOT real training runs: they are drawn from the ScaleRL paper's parameters with
realistic evaluation noise, and say so in ``attrs["description"]``.
"""

from __future__ import annotations

from importlib import resources

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
# choice reverted each (scripts/run_leave_one_out.sh), two at a time on one 2-core machine.
_LOO = {
    "recipe_loo_scalerl": "the full ScaleRL recipe (baseline)",
    "recipe_loo_dapo": "loss=dapo (DAPO's clipped ratio instead of CISPO)",
    "recipe_loo_aggregation": "aggregation=sample (sample-level instead of prompt-level)",
    "recipe_loo_adv_norm": "adv_norm=prompt (per-prompt instead of batch-level std)",
    "recipe_loo_fp32_head": "fp32_head=false (LM head in the model's dtype)",
    "recipe_loo_no_positive": "positive_threshold=null (no no-positive-resampling)",
}
_RUNS.update(
    {
        name: (
            "REAL leave-one-out run of the reference trainer: recipe/configs/cpu_demo.yaml, "
            f"600 steps, {what}; scripts/run_leave_one_out.sh. Compute = wall-clock hours x 1 "
            "device on a shared 2-core CPU"
        )
        for name, what in _LOO.items()
    }
)


def list_examples(group: str | None = None) -> list[str]:
    """Names of the bundled example runs (``simulated_*`` are simulated, ``recipe_*`` real).

    Parameters
    ----------
    group : str, optional
        Only the runs of one family, comparable with each other on one compute axis:
        ``"simulated"``, ``"recipe_cpu_demo"`` (two seeds, 1000 steps) or ``"recipe_loo"`` (the
        leave-one-out variants, 600 steps); a run's family is ``attrs["group"]``.
    """
    names = sorted([*_EXAMPLES, *_RUNS])
    return [n for n in names if group is None or _group(n) == group]


def _group(name: str) -> str:
    if name in _EXAMPLES:
        return "simulated"
    return "recipe_loo" if name in _LOO else "recipe_cpu_demo"


def load_example(name: str) -> pd.DataFrame:
    """Load a bundled example run.

    Parameters
    ----------
    name : str
        One of :func:`list_examples`.

    Returns
    -------
    pandas.DataFrame
        Columns ``compute``, ``reward`` plus the file's own columns; ``attrs`` has ``source``,
        ``description``, ``compute_unit`` and ``simulated``.
    """
    if name in _RUNS:
        return _load_run(name)
    if name not in _EXAMPLES:
        raise RLCurvesError(f"no example named {name!r}; available: {list_examples()}")
    filename, compute_col, reward_col, description = _EXAMPLES[name]
    with resources.files("rlcurves.data").joinpath(filename).open("r") as fh:
        df = pd.read_csv(fh, comment="#")
    df.insert(0, "reward", df[reward_col].astype(float))
    df.insert(0, "compute", df[compute_col].astype(float))
    df.attrs.update(
        source=f"rlcurves/data/{filename}",
        description=description,
        compute_unit="GPU-hours",
        simulated=name.startswith("simulated"),
        name=name,
        group=_group(name),
    )
    return df


def _load_run(name: str) -> pd.DataFrame:
    from .logs import read_log

    folder = resources.files("rlcurves.data").joinpath("runs", name)
    with resources.as_file(folder) as path:
        df = read_log(path)
    df.attrs.update(
        description=_RUNS[name],
        compute_unit="GPU-hours",
        simulated=False,
        name=name,
        group=_group(name),
    )
    return df
