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


def list_examples() -> list[str]:
    """Names of the bundled example runs."""
    return sorted(_EXAMPLES)


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
    )
    return df
