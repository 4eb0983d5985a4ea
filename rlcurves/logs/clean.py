"""Cleaning one run's records into a curve, every step counted in the report.

Order: rows whose reward cell holds text ("n/a", a typo) are dropped and named; rows without the
reward are dropped (sparse evaluation is normal); among the rest a step
written twice (a resumed run) keeps its later write; then rows whose reward was written as NaN or
inf are dropped; then rows whose compute is a clock glitch (``compute.repair_restarts`` set it
aside); last, rows left without a compute value (those whose compute cell holds text named).
The compute axis itself was repaired before (``compute.repair_restarts``), on every record that
carries it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ._raw import MISSING_TEXT, RawLog


def _entry(step: str, rows: int, detail: str, **extra) -> dict:
    return {"step": step, "rows": int(rows), "detail": detail, **extra}


def _steps_text(values: pd.Series, limit: int = 8) -> str:
    shown = [int(v) if float(v).is_integer() else float(v) for v in values.unique()[:limit]]
    more = "" if values.nunique() <= limit else f" and {values.nunique() - limit} more"
    return f"{shown}{more}"


def _where(frame: pd.DataFrame, step: str | None, texts: pd.Series, limit: int = 8) -> str:
    """Rows named by their step (or their record number in the log) with the text written."""
    named = []
    for position, (index, text) in enumerate(texts.items()):
        if position == limit:
            named.append(f"and {len(texts) - limit} more")
            break
        at = frame.at[index, step] if step is not None else math.nan
        if isinstance(at, (int, float, np.number)) and math.isfinite(at):
            where = f"{step} {int(at) if float(at).is_integer() else float(at):g}"
        else:
            where = f"record {int(index) + 1}"
        named.append(f"{where} ({text!r})")
    return ", ".join(named)


def _text_entry(step_name: str, column: str, what: str, frame, step, texts) -> dict:
    words = texts[~texts.str.lower().isin(MISSING_TEXT)]
    detail = (
        f"records whose {what} {column!r} holds text, not a number: {_where(frame, step, texts)}"
    )
    entry = _entry(step_name, len(texts), detail, column=column, cells=len(texts))
    if len(words):  # a placeholder ("n/a") says what it is; other words are a broken cell
        entry["warning"] = (
            f"{detail}; {len(texts)} row(s) dropped. Fix those cells in the log to keep them."
        )
    return entry


def clean_rows(
    raw: RawLog,
    reward: str,
    step: str | None,
    compute: np.ndarray,
    joined: np.ndarray,
    glitched: np.ndarray | None = None,
    compute_columns: Sequence[str] = (),
) -> tuple[pd.DataFrame, list[dict]]:
    """The kept rows (with ``__compute``) in step order, and the report of what was dropped."""
    frame = raw.frame.copy()
    frame["__compute"] = compute
    frame["__joined"] = joined
    frame["__glitched"] = np.zeros(len(frame), dtype=bool) if glitched is None else glitched
    frame["__reward_text"] = raw.written_text(reward)
    compute_text = np.full(len(frame), None, dtype=object)
    for column in compute_columns:
        text = raw.written_text(column)
        compute_text = np.where(pd.isna(compute_text), text, compute_text)
    frame["__compute_text"] = compute_text
    written_nan = raw.written_nan(reward)
    report: list[dict] = []

    texts = frame["__reward_text"].dropna().astype(str)
    if len(texts):
        report.append(_text_entry("drop_text_reward", reward, "reward", raw.frame, step, texts))
        keep = frame["__reward_text"].isna().to_numpy()
        frame, written_nan = frame[keep], written_nan[keep]

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
    texts = frame.loc[no_compute, "__compute_text"].dropna().astype(str)
    if len(texts):
        column = compute_columns[0]
        report.append(_text_entry("drop_text_compute", column, "compute", raw.frame, step, texts))
        frame = frame[~frame.index.isin(texts.index)]
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
    return frame.drop(columns=["__joined", "__glitched", "__reward_text", "__compute_text"]), report
