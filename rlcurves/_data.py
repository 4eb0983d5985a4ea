"""Validation at the edge: turn what a user passed into clean float arrays, or say what is wrong."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .errors import RLCurvesError


def _column(data: pd.DataFrame, name: object, role: str) -> np.ndarray:
    if not isinstance(name, str):
        raise RLCurvesError(
            f"with data= given, {role}= must be a column name (a string), got "
            f"{type(name).__name__}; "
            f"available columns: {list(data.columns)}",
            role=role,
        )
    if name not in data.columns:
        raise RLCurvesError(
            f"column {name!r} (for {role}) is not in the DataFrame; available columns: "
            f"{list(data.columns)}. Pass {role}='<one of these>'.",
            column=name,
            columns=list(data.columns),
        )
    return data[name].to_numpy()


def as_float_array(values: object, role: str) -> np.ndarray:
    """A 1-D float array, or an RLCurvesError naming ``role``."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise RLCurvesError(
            f"{role} must be numbers; could not convert to float ({exc}). "
            "Check the column for text such as 'nan' strings or units.",
            role=role,
        ) from exc
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1:
        raise RLCurvesError(
            f"{role} must be one-dimensional, got shape {arr.shape}; for several curves use "
            "rlcurves.fit_sigmoid_batch or a DataFrame with a 'run' column.",
            role=role,
            shape=arr.shape,
        )
    return arr


def resolve_xy(
    compute: object, reward: object, data: pd.DataFrame | None, sigma: object = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Resolve compute/reward/sigma (arrays, or column names of ``data``) to checked arrays.

    Raises
    ------
    RLCurvesError
        On missing columns, non-numeric values, NaN/inf, negative compute, mismatched lengths, or
        non-positive sigma.
    """
    if data is not None:
        if not isinstance(data, pd.DataFrame):
            raise RLCurvesError(
                f"data= must be a pandas DataFrame, got {type(data).__name__}; or pass arrays "
                "as compute= and reward= without data=."
            )
        compute = _column(data, compute, "compute")
        reward = _column(data, reward, "reward")
        if isinstance(sigma, str):
            sigma = _column(data, sigma, "sigma")
    c = as_float_array(compute, "compute")
    r = as_float_array(reward, "reward")
    if c.shape != r.shape:
        raise RLCurvesError(
            f"compute and reward have different lengths ({c.size} and {r.size}); pass one reward "
            "per compute value.",
            n_compute=c.size,
            n_reward=r.size,
        )
    for arr, role in ((c, "compute"), (r, "reward")):
        bad = ~np.isfinite(arr)
        if bad.any():
            where = np.flatnonzero(bad)
            raise RLCurvesError(
                f"{role} has {bad.sum()} NaN or infinite value(s) (at positions "
                f"{where[:5].tolist()}{' ...' if where.size > 5 else ''}); drop those rows first "
                "(e.g. df.dropna(subset=[...])), or read the log with rlcurves.read_log, which "
                "cleans and reports them.",
                role=role,
                positions=where.tolist(),
            )
    if (c < 0).any():
        where = np.flatnonzero(c < 0)
        raise RLCurvesError(
            f"compute must be >= 0 (0 means the start); found {where.size} negative value(s), "
            f"e.g. {c[where[0]]:g} at position {where[0]}. Shift or fix the compute axis.",
            positions=where.tolist(),
        )
    s = None
    if sigma is not None:
        s = np.broadcast_to(as_float_array(sigma, "sigma"), c.shape).astype(float)
        if not np.all(np.isfinite(s) & (s > 0)):
            raise RLCurvesError(
                "sigma must be finite and > 0 at every point (it is a standard deviation); "
                f"found min {np.nanmin(s):g}. Drop points with zero uncertainty or floor sigma.",
            )
    return c, r, s


def as_name_list(values: Sequence[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)
