"""Live W&B runs through the ``wandb`` package, for users who have it (never required)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import RLCurvesError
from ._raw import RawLog, frame_from_records


def read_wandb_run(
    run_path: str,
    *,
    keys: Sequence[str] | None = None,
    compute: str | None = None,
    reward: str | None = None,
    gpus: float | None = None,
    gpu_hours_per_step: float | None = None,
    api: object | None = None,
) -> pd.DataFrame:
    """Read a W&B run's full history (``run.scan_history()``, unsampled) into a curve.

    Parameters
    ----------
    run_path : str
        ``"entity/project/run_id"``.
    keys : list of str, optional
        Metrics to fetch (W&B then returns only rows that have all of them); default all.
    compute, reward, gpus, gpu_hours_per_step
        As in :func:`rlcurves.read_log`; ``_runtime`` with ``gpus=`` is the usual compute axis.
    api : object, optional
        A ``wandb.Api()`` instance (default: a new one, using the user's W&B login).

    Returns
    -------
    DataFrame
        As :func:`rlcurves.read_log`, ``attrs["format"] == "wandb-api"``.

    Raises
    ------
    RLCurvesError
        ``wandb`` is not installed (and no ``api`` was passed), or the run's history is
        empty for the keys asked.

    Examples
    --------
    >>> class Run:  # stands in for wandb.Api().run(path): the same two members
    ...     name, config = "my-run", {}
    ...     def scan_history(self, keys=None):
    ...         return [{"_step": s, "_runtime": 360.0 * s, "eval/reward": 0.2 + 0.004 * s}
    ...                 for s in range(0, 101, 10)]
    ...
    >>> class Api:
    ...     def run(self, path):
    ...         return Run()
    ...
    >>> df = rlcurves.read_wandb_run("me/rl/abc123", reward="eval/reward", gpus=8, api=Api())
    >>> df.attrs["format"], len(df)
    ('wandb-api', 11)
    """
    from .reader import _assemble, _curve

    raw = load_wandb_run(run_path, keys=keys, api=api)
    curve = _curve(
        raw, compute=compute, reward=reward, gpus=gpus, gpu_hours_per_step=gpu_hours_per_step
    )
    return _assemble([curve], with_run_column=False)


WANDB_PREFIX = "wandb:"


def load_wandb_run(run_path: str, keys: Sequence[str] | None = None, api: object | None = None):
    """A W&B run's full history as a :class:`RawLog` (``run_path`` may start with 'wandb:')."""
    if api is None:
        try:
            import wandb
        except ImportError as exc:
            raise RLCurvesError(
                "reading a live W&B run needs the 'wandb' package: pip install wandb (and "
                "wandb login); or export the run's history to CSV/JSON and use read_log.",
                missing="wandb",
            ) from exc
        api = wandb.Api()
    run_path = run_path.removeprefix(WANDB_PREFIX).lstrip("/")
    run = api.run(run_path)
    history = run.scan_history(keys=list(keys)) if keys is not None else run.scan_history()
    records = [dict(row) for row in history]
    if not records:
        raise RLCurvesError(
            f"W&B run {run_path}: the history is empty"
            + (f" for keys {list(keys)}" if keys else "")
            + ". Check the run path and the metric names.",
            file=run_path,
            columns=[],
        )
    frame, nan_cells = frame_from_records(records)
    return RawLog(
        frame,
        "wandb-api",
        "explicit: W&B API run.scan_history()",
        f"wandb:{run_path}",
        str(getattr(run, "name", None) or run_path.rsplit("/", 1)[-1]),
        nan_cells=nan_cells,
        meta={"wandb_config": dict(getattr(run, "config", {}) or {})},
    )
