"""How compute values and axes print: thousands separators for GPU-hours, digits for tiny or huge
axes, and the unit the data's ``attrs`` carry (never a unit the data did not say)."""

from __future__ import annotations

import math
from typing import Any

AS_LOGGED = " (as logged)"


def format_compute(value: float, unit: str | None = None) -> str:
    """``2,542`` for GPU-hours in the usual range; ``0.121`` or ``3.2e+21`` for CPU-demo or FLOPs
    axes (where ``,.0f`` would print 0 or 22 digits); ``inf`` as is. With ``unit``, the unit's
    short name follows: ``2,542 GPU-hours``, ``1.2e+06 tokens_total``."""
    value = float(value)
    if not math.isfinite(value):
        text = str(value)
    else:
        text = f"{value:,.0f}" if value == 0 or 100 <= abs(value) < 1e7 else f"{value:.3g}"
    name = unit_name(unit)
    return f"{text} {name}" if name else text


def unit_name(unit: str | None) -> str:
    """The unit as a word: ``"GPU-hours"``, ``"FLOPs"``, or the column for an axis used as logged
    (``"tokens_total (as logged)"`` -> ``"tokens_total"``); ``""`` when unknown."""
    if not unit:
        return ""
    unit = str(unit)
    return unit[: -len(AS_LOGGED)] if unit.endswith(AS_LOGGED) else unit


def compute_label(unit: str | None) -> str:
    """Axis label: ``compute (GPU-hours)``, ``compute: tokens_total (as logged)``, ``compute``."""
    if not unit:
        return "compute"
    if str(unit).endswith(AS_LOGGED):
        return f"compute: {unit_name(unit)} (as logged)"
    return f"compute ({unit})"


def units_of(data: Any, compute: Any, reward: Any) -> dict:
    """``{"compute": unit, "reward": column}`` from a frame's ``attrs`` (read_log, load_example),
    or from the column names a fit was given; keys left out when nothing says."""
    attrs = getattr(data, "attrs", None) or {}
    out: dict = {}
    unit = attrs.get("compute_unit")
    if unit:
        out["compute"] = str(unit)
    elif isinstance(compute, str) and compute != "compute":
        out["compute"] = f"{compute}{AS_LOGGED}"
    how = attrs.get("reward")
    if isinstance(how, dict) and isinstance(how.get("column"), str):
        out["reward"] = how["column"]
    elif isinstance(how, dict) and how and all(isinstance(v, dict) for v in how.values()):
        columns = {v.get("column") for v in how.values()}
        if len(columns) == 1:
            out["reward"] = str(columns.pop())
    elif isinstance(reward, str) and reward != "reward":
        out["reward"] = reward
    return out
