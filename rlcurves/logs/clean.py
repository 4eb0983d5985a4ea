"""Cleaning one run's records into a curve, every step counted in the report.

Order: rows without the reward are dropped (sparse evaluation is normal); among the rest a step
written twice (a resumed run) keeps its later write; then rows whose reward was written as NaN or
inf are dropped; then rows whose compute is a clock glitch (``compute.repair_restarts`` set it
aside); last, rows left without a compute value. The compute axis itself was repaired
before (``compute.repair_restarts``), on every record that carries it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._raw import RawLog


def _entry(step: str, rows: int, detail: str, **extra) -> dict:
    return {"step": step, "rows": int(rows), "detail": detail, **extra}


def _steps_text(values: pd.Series, limit: int = 8) -> str:
    shown = [int(v) if float(v).is_integer() else float(v) for v in values.unique()[:limit]]
    more = "" if values.nunique() <= limit else f" and {values.nunique() - limit} more"
    return f"{shown}{more}"


def clean_rows(
    raw: RawLog,
    reward: str,
    step: str | None,
    compute: np.ndarray,
    joined: np.ndarray,
    glitched: np.ndarray | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """The kept rows (with ``__compute``) in step order, and the report of what was dropped."""
    frame = raw.frame.copy()
    frame["__compute"] = compute
    frame["__joined"] = joined
    frame["__glitched"] = np.zeros(len(frame), dtype=bool) if glitched is None else glitched
    written_nan = raw.written_nan(reward)
    report: list[dict] = []

    missing = frame[reward].isna().to_numpy() & ~written_nan
    report.append(
        _entry(
            "drop_missing_reward",
            missing.sum(),
            f"records without a {reward!r} value (other metrics' records, or steps between "
            "evaluations)",
        )
    )
    frame = frame[~missing]

    if step is not None:
        duplicated = frame[step].duplicated(keep="last") & frame[step].notna()
        steps = frame.loc[duplicated, step]
        detail = (
            f"steps written more than once (a resumed run); the later write kept: steps "
            f"{_steps_text(steps)}"
            if len(steps)
            else "no step was written twice"
        )
        report.append(_entry("dedupe_steps", duplicated.sum(), detail, key=step))
        frame = frame[~duplicated.to_numpy()]
    else:
        report.append(
            _entry(
                "dedupe_steps", 0, "no step column, so duplicate steps were not checked", key=None
            )
        )

    values = frame[reward].to_numpy(dtype=float)
    nan = np.isnan(values)
    inf = np.isinf(values)
    report.append(
        _entry(
            "drop_nonfinite_reward",
            (nan | inf).sum(),
            f"{int(nan.sum())} NaN and {int(inf.sum())} infinite {reward!r} values",
            nan=int(nan.sum()),
            inf=int(inf.sum()),
        )
    )
    frame = frame[~(nan | inf)]

    glitch = frame["__glitched"].to_numpy(dtype=bool)
    if glitch.any():
        report.append(
            _entry(
                "drop_compute_glitch",
                glitch.sum(),
                "reward records whose compute is out of line with its neighbours (a glitch)",
            )
        )
    frame = frame[~glitch]

    no_compute = ~np.isfinite(frame["__compute"].to_numpy(dtype=float))
    report.append(
        _entry(
            "drop_missing_compute",
            no_compute.sum(),
            "reward records with no compute value (none of their own, none at the same step)",
        )
    )
    frame = frame[~no_compute]
    n_joined = int(frame["__joined"].sum())
    if n_joined:
        report.append(
            _entry(
                "join_compute_same_step",
                n_joined,
                "reward records without compute of their own took the compute of the record "
                "written at the same step",
            )
        )
    if step is not None:
        frame = frame.sort_values(step, kind="stable")
    return frame.drop(columns=["__joined", "__glitched"]), report
