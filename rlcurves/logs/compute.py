"""The compute axis: GPU-hours (or FLOPs) per record, and the repair of clocks that restarted.

Sources, in the order detection tries them when no argument says otherwise:

1. ``gpu_hours_per_step=`` given: the step column times it.
2. ``gpus=`` given: an elapsed-seconds column (W&B ``_runtime``, PipelineRL ``time_since_start``,
   the recipe's ``wall_seconds``, TensorBoard wall time) times ``gpus / 3600``; else verl's
   per-step durations (``timing_s/step``) summed over steps, times ``gpus / 3600``.
3. Neither: a GPU-hours column; else a FLOPs column, kept in FLOPs (``unit`` says so).

``compute=`` names the column outright and wins over all of these; ``gpus``/``gpu_hours_per_step``
then say how to turn it into GPU-hours. Without them a named column is GPU-hours when its name
says so, FLOPs when its name has "flops", and otherwise (tokens, samples) used as logged with
its unit recorded as ``"<column> (as logged)"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import RLCurvesError
from ._raw import RawLog
from .columns import (
    DURATION_NAMES,
    FLOPS_NAMES,
    GPU_HOURS_NAMES,
    SECONDS_NAMES,
    find,
    flops_hint,
    norm,
    seconds_hint,
)

# More restarts than this share of records means the column is not a cumulative axis at all.
MAX_RESTART_SHARE = 0.1


@dataclass
class ComputeAxis:
    """Compute per record of a :class:`RawLog` (NaN where the record has none), before repair."""

    values: np.ndarray
    unit: str
    how: str
    columns: list[str]
    settings: dict = field(default_factory=dict)


def _positive(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise RLCurvesError(f"{name} must be a number, got {value!r}.", argument=name) from exc
    if not math.isfinite(number) or number <= 0:
        raise RLCurvesError(f"{name} must be a positive number, got {value!r}.", argument=name)
    return number


def _column_values(raw: RawLog, column: str) -> np.ndarray:
    series = raw.frame[column]
    # a few text cells ("n/a", a typo) among numbers: read as numbers, those rows dropped and
    # named in the cleaning report
    if not (pd.api.types.is_numeric_dtype(series) or raw.as_numbers(column)):
        raise RLCurvesError(
            f"{raw.source}: compute column {column!r} holds no numbers (dtype {series.dtype}). "
            f"Pass compute= a numeric column; columns found: {list(map(str, raw.frame.columns))}.",
            file=raw.source,
            column=column,
            columns=[str(c) for c in raw.frame.columns],
        )
    return raw.frame[column].to_numpy(dtype=float)


def derive_compute(
    raw: RawLog,
    step: str | None,
    compute: str | None,
    gpus: float | None,
    gpu_hours_per_step: float | None,
) -> ComputeAxis:
    """Compute per record, from the arguments if given, else from what the columns offer."""
    gpus = _positive(gpus, "gpus")
    per_step = _positive(gpu_hours_per_step, "gpu_hours_per_step")
    columns = [str(c) for c in raw.frame.columns]
    if gpus is not None and per_step is not None:
        raise RLCurvesError(
            "pass either gpus= (with an elapsed-time column) or gpu_hours_per_step= (with a step "
            "column), not both: they are two ways to make the same axis.",
            gpus=gpus,
            gpu_hours_per_step=per_step,
        )
    settings = {"gpus": gpus, "gpu_hours_per_step": per_step}
    if compute is not None:
        return _explicit(raw, compute, gpus, per_step, settings)
    if per_step is not None:
        if step is None:
            raise RLCurvesError(
                f"{raw.source}: gpu_hours_per_step= needs a step column, and none was found among "
                f"{columns}. Pass compute='<column counting steps>' with it.",
                file=raw.source,
                columns=columns,
            )
        values = _column_values(raw, step) * per_step
        how = f"step column {step!r} x gpu_hours_per_step={per_step:g}"
        return ComputeAxis(values, "GPU-hours", how, [step], settings)
    if gpus is not None:
        seconds = find(raw.frame, [*raw.seconds_candidates, *SECONDS_NAMES])
        if seconds:
            values = _column_values(raw, seconds[0]) * gpus / 3600.0
            how = f"elapsed seconds {seconds[0]!r} x gpus={gpus:g} / 3600"
            return ComputeAxis(values, "GPU-hours", how, [seconds[0]], settings)
        durations = find(raw.frame, [*raw.duration_candidates, *DURATION_NAMES])
        if durations:
            return _summed_durations(raw, step, durations[0], gpus, settings)
        raise RLCurvesError(
            f"{raw.source}: gpus= needs an elapsed-time column (one of {list(SECONDS_NAMES)}) or "
            f"per-step durations ({list(DURATION_NAMES)}); columns found: {columns}. Pass "
            "compute='<seconds column>' with gpus=, or gpu_hours_per_step= instead.",
            file=raw.source,
            columns=columns,
        )
    gpu_hours = find(raw.frame, GPU_HOURS_NAMES)
    if gpu_hours:
        how = f"GPU-hours column {gpu_hours[0]!r}"
        return ComputeAxis(
            _column_values(raw, gpu_hours[0]), "GPU-hours", how, gpu_hours[:1], settings
        )
    flops = find(raw.frame, FLOPS_NAMES)
    if flops:
        how = f"FLOPs column {flops[0]!r} (kept in FLOPs)"
        return ComputeAxis(_column_values(raw, flops[0]), "FLOPs", how, flops[:1], settings)
    raise _no_compute(raw, step)


def _explicit(raw, compute, gpus, per_step, settings) -> ComputeAxis:
    columns = [str(c) for c in raw.frame.columns]
    if compute not in raw.frame.columns:
        raise RLCurvesError(
            f"{raw.source}: no column {compute!r} for compute; columns found: {columns}. "
            "Pass compute='<one of these>'.",
            file=raw.source,
            column=compute,
            columns=columns,
        )
    values = _column_values(raw, compute)
    if per_step is not None:
        how = f"column {compute!r} (explicit) x gpu_hours_per_step={per_step:g}"
        return ComputeAxis(values * per_step, "GPU-hours", how, [compute], settings)
    if gpus is not None:
        how = f"seconds column {compute!r} (explicit) x gpus={gpus:g} / 3600"
        return ComputeAxis(values * gpus / 3600.0, "GPU-hours", how, [compute], settings)
    if flops_hint(compute):
        return ComputeAxis(
            values, "FLOPs", f"FLOPs column {compute!r} (explicit)", [compute], settings
        )
    if seconds_hint(compute):
        raise RLCurvesError(
            f"{raw.source}: compute column {compute!r} reads as seconds; pass gpus=<number of "
            "GPUs> to turn seconds into GPU-hours (or name a GPU-hours column).",
            file=raw.source,
            column=compute,
            columns=columns,
        )
    if norm(compute) in {norm(n) for n in GPU_HOURS_NAMES} or "gpu_hour" in norm(compute):
        how = f"GPU-hours column {compute!r} (explicit)"
        return ComputeAxis(values, "GPU-hours", how, [compute], settings)
    # A column of another unit (tokens, samples, ...): used as logged, its unit named as such.
    unit = f"{compute} (as logged)"
    how = f"column {compute!r} (explicit), unit not GPU-hours: used as logged"
    return ComputeAxis(values, unit, how, [compute], settings)


def _summed_durations(raw, step, column, gpus, settings) -> ComputeAxis:
    """verl logs each step's duration; elapsed time at step s is the sum over steps <= s."""
    if step is None:
        raise RLCurvesError(
            f"{raw.source}: per-step durations {column!r} need a step column to be summed; none "
            "found. Pass compute='<elapsed seconds column>' with gpus=.",
            file=raw.source,
            columns=[str(c) for c in raw.frame.columns],
        )
    durations = pd.DataFrame({"step": raw.frame[step], "d": _column_values(raw, column)})
    durations = durations.dropna().drop_duplicates("step", keep="last").sort_values("step")
    elapsed = pd.Series(durations["d"].cumsum().to_numpy(), index=durations["step"].to_numpy())
    values = raw.frame[step].map(elapsed).to_numpy(dtype=float) * gpus / 3600.0
    how = (
        f"per-step durations {column!r} summed over steps (later write kept per step) "
        f"x gpus={gpus:g} / 3600"
    )
    return ComputeAxis(values, "GPU-hours", how, [column, step], settings)


def _no_compute(raw: RawLog, step: str | None) -> RLCurvesError:
    columns = [str(c) for c in raw.frame.columns]
    ways = []
    seconds = find(raw.frame, [*raw.seconds_candidates, *SECONDS_NAMES])
    durations = find(raw.frame, [*raw.duration_candidates, *DURATION_NAMES])
    if seconds or durations:
        ways.append(f"gpus=<number of GPUs> to use elapsed time {(seconds or durations)[0]!r}")
    if step is not None:
        ways.append(f"gpu_hours_per_step=<GPU-hours per step> to use step column {step!r}")
    summary = raw.meta.get("trl_summary") or {}
    if "train_runtime" in summary and summary.get("step"):
        ways.append(
            f"(TRL's summary says train_runtime={summary['train_runtime']:g}s over "
            f"{summary['step']} steps: {summary['train_runtime'] / 3600 / summary['step']:.4g} "
            "hours per step, times your GPU count)"
        )
    ways.append("compute='<column>' naming a GPU-hours or FLOPs column")
    return RLCurvesError(
        f"{raw.source}: no compute axis found (no GPU-hours or FLOPs column) among columns "
        f"{columns}. Pass " + "; or ".join(ways) + ".",
        file=raw.source,
        columns=columns,
    )


def repair_restarts(
    values: np.ndarray, steps: np.ndarray | None, source: str, column_label: str
) -> tuple[np.ndarray, dict]:
    """Offset the segments of a compute axis whose clock restarted; set clock glitches aside.

    The axis is read in step order (later write kept per step) or, without a step column, in
    write order. Where it drops, one of two things happened, told apart by what follows:

    - a **restart** (a new process whose clock starts again): the counter falls back and then
      *continues* from there, step by step. The rest is shifted up by the value just before the
      drop. (A step counter that repeats, a run resumed from a checkpoint, is the later write
      kept per step, before this.)
    - a **glitch** (a few records whose clock is out of line: two values swapped, a stray
      value): the counter falls, and within :data:`GLITCH_ROWS` records jumps back to where it
      was (or it fell back by no more than a few steps' worth, not to near its start); or a few
      records jumped far above the trajectory the next one continues. Those records' compute is
      unknown, so they get none (NaN; ``read_log`` drops them and warns, naming them): shifting
      every later row by a glitch would silently corrupt the rest of the axis.

    "A few steps' worth" is measured in the run's typical increment (median increase per step).
    Records with no compute of their own take the repaired compute of another record at the
    same step (counted as ``joined``). Refuses (RLCurvesError) when drops are so frequent that
    the column is not cumulative. A restart shows only as a drop: a restarted clock whose first
    value already exceeds the last value before the restart goes unseen.

    Returns
    -------
    repaired : ndarray
        Compute per record (NaN where none can be given).
    report : dict
        ``{"restarts", "rows", "at", "joined", "glitches"}``; ``glitches`` is a list of
        ``{"where": [...], "values": [...], "kind"}``, one per glitch.
    """
    values = np.asarray(values, dtype=float)
    n = len(values)
    has = np.isfinite(values)
    order = np.flatnonzero(has)
    if steps is not None:
        table = pd.DataFrame({"row": order, "step": steps[order]})
        table = (
            table.dropna().drop_duplicates("step", keep="last").sort_values("step", kind="stable")
        )
        order = table["row"].to_numpy()
    series = values[order]
    drops = np.flatnonzero(np.diff(series) < 0) + 1
    limit = max(2, int(MAX_RESTART_SHARE * len(series)))
    if len(drops) > limit:
        where = [_where(steps, order[i]) for i in drops[:5]]
        raise RLCurvesError(
            f"{source}: compute {column_label} goes backwards at {len(drops)} of {len(series)} "
            f"records (first at {where}); restarts are rare, so this is not a cumulative axis (a "
            "per-step duration or a rate?) and cannot be repaired by offsetting. Pass compute= a "
            "cumulative column, or gpu_hours_per_step= to use the step count.",
            file=source,
            column=column_label,
            drops=len(drops),
        )
    position = (
        steps[order].astype(float) if steps is not None else np.arange(len(series), dtype=float)
    )
    glitch, restart_at, glitches = _classify_drops(series, position)
    report = {"restarts": len(restart_at), "rows": 0, "at": [], "joined": 0, "glitches": []}
    for kind, rows in glitches:
        report["glitches"].append(
            {
                "kind": kind,
                "where": [_where(steps, order[k]) for k in rows],
                "values": [float(series[k]) for k in rows],
            }
        )
    offsets = np.zeros(len(series))
    offset = 0.0
    last = None
    starts = set(restart_at)
    for i in range(len(series)):
        if glitch[i]:
            continue
        if i in starts and last is not None:
            before = series[last] + offsets[last]
            report["at"].append(
                {
                    "where": _where(steps, order[i]),
                    "before": float(before),
                    "after": float(series[i]),
                }
            )
            offset = before
        offsets[i] = offset
        last = i
    repaired_sorted = np.where(glitch, np.nan, series + offsets)
    report["rows"] = int(np.count_nonzero(offsets[~glitch]))
    repaired = np.full(n, np.nan)
    report["glitched_records"] = np.zeros(n, dtype=bool)
    if steps is None:
        repaired[order] = repaired_sorted
        report["glitched_records"][order[glitch]] = True
        return repaired, report
    sorted_steps = steps[order]
    all_steps = np.asarray(steps, dtype=float)
    known = np.isfinite(all_steps)
    pos = np.searchsorted(sorted_steps, all_steps[known], side="right") - 1
    offset_rows = np.where(pos >= 0, offsets[np.clip(pos, 0, None)], 0.0)
    own = values[known] + offset_rows
    # every record at a glitched step is set aside with it (its clock is the glitched one)
    at_glitch = np.isin(all_steps[known], sorted_steps[glitch])
    own[at_glitch] = np.nan
    report["glitched_records"][np.flatnonzero(known)[at_glitch]] = True
    at_step = pd.Series(repaired_sorted, index=sorted_steps)
    same_step = pd.Series(all_steps[known]).map(at_step).to_numpy(dtype=float)
    joined = ~np.isfinite(own) & np.isfinite(same_step) & ~at_glitch
    report["joined"] = int(joined.sum())
    repaired[known] = np.where(np.isfinite(own), own, same_step)
    return repaired, report


# A clock glitch spans at most this many records; a jump back of more than JUMP typical
# increments at once ends one; a fall of at most JITTER increments (not to within NEAR_ZERO
# increments of the start, where a restarted clock begins) is one.
GLITCH_ROWS = 3
JUMP = 5.0
JITTER = 3.0
NEAR_ZERO = 3.0


def _classify_drops(
    series: np.ndarray, position: np.ndarray
) -> tuple[np.ndarray, list[int], list[tuple[str, list[int]]]]:
    """(glitch mask, positions where a restarted clock begins, [(kind, glitched positions)])."""
    m = len(series)
    glitch = np.zeros(m, dtype=bool)
    restarts: list[int] = []
    glitches: list[tuple[str, list[int]]] = []
    d, g = np.diff(series), np.diff(position)
    ok = (d > 0) & (g > 0)
    rate = float(np.median(d[ok] / g[ok])) if ok.any() else math.nan
    if not math.isfinite(rate) or rate <= 0:
        drops = [int(i) for i in np.flatnonzero(d < 0) + 1]
        return glitch, drops, glitches  # nothing to measure a glitch against: restarts

    def expected(a: int, b: int) -> float:
        return rate * max(float(position[b] - position[a]), 1e-300)

    kept = [0]  # positions kept since the current segment began (its clock)
    start = float(series[0])
    i = 1
    while i < m:
        last = kept[-1]
        before = series[last]
        if series[i] >= before:
            kept.append(i)
            i += 1
            continue
        # (a) falls, then within a few records jumps back to where it was: those records
        window = range(i + 1, min(i + 1 + GLITCH_ROWS, m))
        ret = next((k for k in window if series[k] >= before), None)
        if ret is not None and series[ret] - series[ret - 1] > JUMP * expected(ret - 1, ret):
            glitch[i:ret] = True
            glitches.append(("fell and jumped back", list(range(i, ret))))
            i = ret
            continue
        # (b) the last few kept records jumped far above the line the next one continues
        spike = None
        for back in range(1, min(GLITCH_ROWS, len(kept) - 1) + 1):
            first, prior = kept[-back], kept[-back - 1]
            if series[i] >= series[prior] and series[first] - series[prior] > JUMP * expected(
                prior, first
            ):
                spike = back
                break
        if spike is not None:
            rows = kept[-spike:]
            glitch[rows] = True
            glitches.append(("jumped out of line", rows))
            del kept[-spike:]
            continue  # compare record i again, with the record before the spike
        # (c) fell back by a step or two's worth (two values swapped), not to near the start
        fell = before - series[i]
        near_start = series[i] <= max(start, 0.0) + NEAR_ZERO * expected(last, i)
        if fell <= JITTER * expected(last, i) and not near_start and len(kept) > 1:
            glitch[[last, i]] = True
            glitches.append(("out of order", [last, i]))
            kept.pop()
            i += 1
            continue
        # (d) falls back and continues from there: a restarted clock
        restarts.append(i)
        kept = [i]
        i += 1
    return glitch, restarts, glitches


def _where(steps: np.ndarray | None, row: int) -> str:
    if steps is None:
        return f"record {row + 1}"
    value = steps[row]
    return f"step {int(value) if float(value).is_integer() else value}"
