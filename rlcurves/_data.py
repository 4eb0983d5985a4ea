"""Validation at the edge: turn what a user passed into clean float arrays, or say what is wrong."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

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


def check_seed(seed: object, *, allow_none: bool = True) -> int | None:
    """``seed`` itself when it is a non-negative integer (or None, where ``allow_none``); else an
    RLCurvesError naming ``seed=`` (numpy's own error names no keyword)."""
    if (seed is None and allow_none) or (isinstance(seed, (int, np.integer)) and seed >= 0):
        return seed  # type: ignore[return-value]
    takes = "a non-negative integer or None" if allow_none else "a non-negative integer"
    raise RLCurvesError(f"seed= takes {takes}, got {seed!r}", seed=seed)


def check_numbers(**settings: object) -> None:
    """Each keyword given (not None) a real number, or an RLCurvesError naming it: a setting given
    as text or as a list fails here, in its keyword's words, instead of in a comparison."""
    for name, value in settings.items():
        if value is not None and not isinstance(value, numbers.Real):
            raise RLCurvesError(f"{name}= must be a number, got {value!r}", **{name: value})


#: The keywords of :func:`rlcurves.fit_sigmoid` that a ``fit_kws=`` dict may set (not the data,
#: which the caller passes, nor the label).
FIT_KEYWORDS = ("r0", "min_compute", "max_compute", "sigma", "method", "bounds", "absolute_sigma",
                "options", "loss", "f_scale")  # fmt: skip


def is_bound(value: object) -> bool:
    """Whether ``value`` can bound the fit window: one number, not NaN (text is not one)."""
    if isinstance(value, (str, bytes)) or np.ndim(value) != 0:
        return False
    try:
        return not math.isnan(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def check_fit_kws(fit_kws: object, allowed: Sequence[str] = FIT_KEYWORDS) -> dict:
    """``fit_kws`` as a dict, checked when it is given: a key that ``rlcurves.fit_sigmoid`` does
    not take is an RLCurvesError now, not a TypeError at the first fit."""
    if fit_kws is None:
        return {}
    if not isinstance(fit_kws, Mapping):
        raise RLCurvesError(
            "fit_kws= must be a dict of rlcurves.fit_sigmoid keywords (e.g. {'r0': 0.1}), got "
            f"{type(fit_kws).__name__}"
        )
    unknown = sorted(str(k) for k in fit_kws if k not in allowed)
    if unknown:
        raise RLCurvesError(
            f"fit_kws= holds {unknown}, which the fit does not take; its keywords are "
            f"{list(allowed)}",
            unknown=unknown,
        )
    for name in ("min_compute", "max_compute"):
        value = fit_kws.get(name)
        if value is not None and not is_bound(value):  # else "no fit yet" at every refit
            raise RLCurvesError(
                f"{name}= must be a compute value (a number) or None, got {value!r}",
                **{name: value},
            )
    r0 = fit_kws.get("r0")
    if r0 is not None and not (is_bound(r0) and math.isfinite(float(r0))):
        raise RLCurvesError(f"r0= must be a finite number or None, got {r0!r}", r0=r0)
    return dict(fit_kws)


def check_resamples(name: str, value: object) -> None:
    """An RLCurvesError naming the keyword ``name`` unless ``value`` is an integer >= 2 (the
    bootstrap's own check names its ``n``, which callers spell ``n_samples`` or ``n_boot``)."""
    if not isinstance(value, (int, np.integer)) or value < 2:
        raise RLCurvesError(f"{name}= must be an integer >= 2 resamples, got {value!r}")
