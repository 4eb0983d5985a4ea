"""read_log / read_logs: paths in, canonical (compute, reward[, run]) frames out."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataRepairWarning, RLCurvesError
from ._paths import TABLE_SUFFIXES
from ._raw import RawLog
from .clean import clean_rows
from .columns import (
    DURATION_NAMES,
    SECONDS_NAMES,
    STEP_NAMES,
    choose_reward,
    choose_step,
    norm,
)
from .compute import derive_compute, repair_restarts
from .locate import check_format, discover, load, run_folder_kind
from .wandb_live import WANDB_PREFIX, load_wandb_run

CANONICAL = ("compute", "reward", "run")
EXAMPLE_PREFIX = "example:"  # "example:NAME" reads a bundled example (rlcurves.datasets)
PathLike = str | os.PathLike


def _split_runs(raw: RawLog, column: str) -> list[RawLog]:
    """One RawLog per value of a column that names runs (a long table of several runs)."""
    parts = []
    for name, rows in raw.frame.groupby(column, sort=False).indices.items():
        frame = raw.frame.iloc[rows].reset_index(drop=True)
        nan_cells = {k: v[rows] for k, v in raw.nan_cells.items()}
        text_cells = {k: v[rows] for k, v in raw.text_cells.items()}
        part = RawLog(
            **{
                **raw.__dict__,
                "frame": frame,
                "nan_cells": nan_cells,
                "text_cells": text_cells,
                "run": str(name),
            }
        )
        part.notes = [*raw.notes, f"rows of run {name!r} (column {column!r})"]
        parts.append(part)
    return parts


def _curve(
    raw: RawLog,
    *,
    compute: str | None,
    reward: str | None,
    gpus: float | None,
    gpu_hours_per_step: float | None,
) -> tuple[pd.DataFrame, dict]:
    """One run's canonical frame (compute, reward, originals) and its attrs."""
    reward_column, reward_how = choose_reward(raw, reward)
    step = choose_step(raw)
    axis = derive_compute(raw, step, compute, gpus, gpu_hours_per_step)
    steps = raw.frame[step].to_numpy(dtype=float) if step is not None else None
    repaired, restarts = repair_restarts(axis.values, steps, raw.source, repr(axis.columns[0]))
    glitched = restarts.pop("glitched_records")
    joined = ~np.isfinite(axis.values) & np.isfinite(repaired)
    rows, report = clean_rows(
        raw, reward_column, step, repaired, joined, glitched, compute_columns=axis.columns[:1]
    )
    glitch_entry = next((e for e in report if e["step"] == "drop_compute_glitch"), None)
    if restarts["glitches"] and glitch_entry is not None:
        glitch_entry["glitches"] = restarts["glitches"]
        glitch_entry["detail"] = _glitch_text(restarts["glitches"], axis.columns[0])
        glitch_entry["warning"] = (
            f"{raw.source}: {glitch_entry['detail']}; {glitch_entry['rows']} row(s) dropped. "
            "Fix those values in the log, or pass compute= another column."
        )
    if restarts["restarts"]:
        report.insert(
            0,
            {
                "step": "repair_compute_restart",
                "rows": restarts["rows"],
                "detail": f"compute went backwards {restarts['restarts']} time(s) (a restarted "
                f"clock) at {[r['where'] for r in restarts['at']]}; each later segment offset "
                "by the compute just before the drop",
                "restarts": restarts["at"],
            },
        )
    report = [*raw.cleaning, *report]
    if rows.empty:
        dropped = {e["step"]: e["rows"] for e in report if e["rows"]}
        raise RLCurvesError(
            f"{raw.source}: no usable rows: of {len(raw.frame)} records none has both a finite "
            f"{reward_column!r} and a compute value (dropped: {dropped}). Pass reward= a metric "
            f"that is logged (columns found: {[str(c) for c in raw.frame.columns]}).",
            file=raw.source,
            columns=[str(c) for c in raw.frame.columns],
            dropped=dropped,
        )
    out = pd.DataFrame(
        {
            "compute": rows["__compute"].to_numpy(dtype=float),
            "reward": rows[reward_column].to_numpy(dtype=float),
        }
    )
    renamed = {}
    for name in rows.columns:
        if name == "__compute":
            continue
        if name in CANONICAL:
            if name == "run" or _same(rows[name], out[name] if name in out else None):
                # the canonical column carries it (the run name, or the very same values)
                continue
            renamed[name] = f"{name}_original"
        out[renamed.get(name, name)] = rows[name].to_numpy()
    attrs = {
        "source": raw.source,
        "format": raw.format,
        "format_how": raw.format_how,
        "run": raw.run,
        "reward": {"column": reward_column, "how": reward_how},
        "compute": {"how": axis.how, "unit": axis.unit, "columns": axis.columns, **axis.settings},
        "compute_unit": axis.unit,
        "step": step,
        "columns": [str(c) for c in raw.frame.columns],
        "rows_read": len(raw.frame),
        "rows_kept": len(out),
        "cleaning": report,
        "notes": raw.notes,
        "renamed": renamed,
        "meta": raw.meta,
    }
    return out, attrs


def _glitch_text(glitches: list[dict], column: str) -> str:
    parts = [
        f"{', '.join(g['where'])} ({g['kind']}: {[round(v, 6) for v in g['values']]})"
        for g in glitches
    ]
    return (
        f"compute column {column!r} is out of line at " + "; ".join(parts) + ": a clock glitch, "
        "not a restart (the counter came back to its old trajectory), so those rows' compute is "
        "unknown and they were dropped"
    )


def _same(original: pd.Series, canonical: pd.Series | None) -> bool:
    if canonical is None or not pd.api.types.is_numeric_dtype(original):
        return False
    return bool(
        np.array_equal(original.to_numpy(dtype=float), canonical.to_numpy(), equal_nan=True)
    )


def _check_column_names(**given: object) -> None:
    """``compute=``, ``reward=`` and ``run=`` are column names (str), or lists of them where a
    list is taken (``reward``, ``run``): anything else (``reward=3``) is said here, not as a
    TypeError deep in the reader."""
    for key, value in given.items():
        if value is None or isinstance(value, str):
            continue
        if key != "compute" and isinstance(value, (list, tuple)):
            if all(isinstance(v, str) for v in value):
                continue
        takes = "a column name" + ("" if key == "compute" else " or a list of them")
        raise RLCurvesError(f"{key}= takes {takes} (str), got {value!r}", **{key: value})


def _warn_if_a_column_was_meant(raw: RawLog, name: str, stacklevel: int) -> None:
    """``run=`` that names no column is the run's name; when it is a near miss of a column that
    holds several values (``'sed'`` for ``'seed'``), the runs in that column would be read as one
    without a word: say so."""
    import difflib

    from .columns import FLOPS_NAMES, GPU_HOURS_NAMES

    axes = {norm(n) for n in (*STEP_NAMES, *GPU_HOURS_NAMES, *FLOPS_NAMES, *SECONDS_NAMES)}
    frame = raw.frame
    columns = [  # what could hold run names: repeated values, not a step, clock or compute axis
        str(c) for c in frame.columns
        if norm(c) not in axes and 1 < frame[c].nunique() <= len(frame) // 2
    ]  # fmt: skip
    close = difflib.get_close_matches(name, columns, n=1, cutoff=0.75)
    if close:
        warnings.warn(
            f"{raw.source}: run={name!r} names no column, so the file is read as one run named "
            f"{name!r}; its column {close[0]!r} holds {raw.frame[close[0]].nunique()} values: "
            f"pass run={close[0]!r} to read one run per value.",
            UserWarning,
            stacklevel=stacklevel,
        )


def _check_paths(paths: Sequence[PathLike]) -> list[Path | str]:
    out: list[Path | str] = []
    for item in paths:
        if isinstance(item, str) and item.startswith(WANDB_PREFIX):
            out.append(item)
            continue
        if isinstance(item, str) and item.startswith(EXAMPLE_PREFIX):
            from ..datasets import example_path

            out.append(example_path(item[len(EXAMPLE_PREFIX) :]))
            continue
        if not isinstance(item, (str, os.PathLike)):  # Path(None) was a TypeError
            raise RLCurvesError(
                f"a log path must be a file or folder name (a str or pathlib.Path), got "
                f"{type(item).__name__} {item!r}"
            )
        path = Path(item).expanduser()
        if not path.exists():
            raise RLCurvesError(f"{path}: no such file or folder.", file=str(path))
        out.append(path)
    return out


def read_log(
    path: PathLike | Sequence[PathLike],
    *,
    format: str = "auto",
    compute: str | None = None,
    reward: str | Sequence[str] | None = None,
    run: str | None = None,
    gpus: float | None = None,
    gpu_hours_per_step: float | None = None,
) -> pd.DataFrame:
    """Read a training log (or a folder of runs) into a clean compute/reward curve.

    Parameters
    ----------
    path : str, Path or list of them
        A log file (CSV/TSV, Parquet, JSON lines, JSON, TensorBoard event file), a run folder
        (the recipe's run folder with ``log.jsonl``, a TRL output folder, a PipelineRL experiment,
        a TensorBoard run folder), a folder of runs (one run per file or sub-folder), or a live
        W&B run as ``"wandb:entity/project/run_id"`` (needs the ``wandb`` package and a login),
        or a bundled example as ``"example:NAME"`` (:func:`rlcurves.datasets.list_examples`).
    format : str
        ``"auto"`` (detect), or one of ``csv tsv parquet jsonl json verl wandb wandb-csv
        tensorboard trl pipelinerl recipe``.
    compute : str, optional
        Column holding the compute axis. A GPU-hours column as is; a FLOPs column (name with
        "flops") kept in FLOPs; with ``gpus`` a seconds column; with ``gpu_hours_per_step`` a
        step-counting column; any other column (tokens, samples) as logged, its unit recorded
        as ``"<column> (as logged)"``. Default: detected (see ``attrs["compute"]["how"]``).
    reward : str, list of str or "*", optional
        Column holding the metric to fit. Default: detected, preferring validation metrics.
        Several columns (a wide table: ``Step, 14b, 8b, 4b``), or ``"*"`` for every numeric
        column but the compute and step ones: one run per column, named after it, in a long
        frame with a ``run`` column (``"<run>/<column>"`` when several logs are read).
    run : str, optional
        Name of the run (default: the folder or file name). If it names a column of the log,
        that column splits a long table into runs instead.
    gpus : float, optional
        Number of GPUs: compute = elapsed seconds x gpus / 3600.
    gpu_hours_per_step : float, optional
        GPU-hours per training step: compute = step x gpu_hours_per_step.

    Returns
    -------
    DataFrame
        Columns ``compute``, ``reward`` (and ``run`` when there are several runs or ``run`` was
        given), then the log's own columns (one named compute/reward/run that is not the source
        of the canonical one is kept as ``<name>_original``). Rows in step order. ``attrs``
        holds ``source``, ``format``, ``format_how``, ``reward`` and ``compute`` (column and how
        chosen), ``compute_unit`` ("GPU-hours", "FLOPs" or "<column> (as logged)"),
        ``cleaning`` (a list of ``{"step", "rows", "detail"}``: what was dropped or repaired,
        with counts), ``notes``, ``meta`` (side information such as the recipe's config) and
        ``runs`` (these attrs per run). :func:`describe_log` prints them readably.

    Raises
    ------
    RLCurvesError
        Unknown format, empty file, missing or ambiguous column, no usable rows; the message
        names the file, the columns found and what to pass instead.

    Examples
    --------
    >>> df = rlcurves.read_log("example:recipe_loo_scalerl")  # or a folder, a file, "wandb:..."
    >>> list(df.columns[:3]), df.attrs["format"]
    (['compute', 'reward', 'kind'], 'recipe')
    """
    check_format(format)
    if isinstance(path, (str, os.PathLike)):
        paths = [path]
    else:
        try:
            paths = list(path)
        except TypeError:  # list(None) was the TypeError
            raise RLCurvesError(
                "path must be a log file or folder (a str or pathlib.Path), or a list of them; "
                f"got {type(path).__name__} {path!r}"
            ) from None
    return read_logs(
        paths,
        format=format,
        compute=compute,
        reward=reward,
        run=run,
        gpus=gpus,
        gpu_hours_per_step=gpu_hours_per_step,
        _stacklevel=3,
    )


def read_logs(
    paths: PathLike | Sequence[PathLike],
    *,
    format: str = "auto",
    compute: str | None = None,
    reward: str | Sequence[str] | None = None,
    run: str | Sequence[str] | None = None,
    gpus: float | None = None,
    gpu_hours_per_step: float | None = None,
    _stacklevel: int = 2,
) -> pd.DataFrame:
    """Several logs (files, run folders, folders of runs) into one frame with a ``run`` column.

    Same arguments as :func:`read_log`, applied to every run (``paths`` a list of them, or one
    path); ``run`` may be a list with one name per path. Runs must share a compute unit (all
    GPU-hours or all FLOPs).

    Raises
    ------
    RLCurvesError
        No paths, a path that is neither a log nor a folder of logs, ``run=`` names that do
        not match the paths, or any error :func:`read_log` raises for one of them.

    Examples
    --------
    >>> seeds = ["example:recipe_cpu_demo_seed0", "example:recipe_cpu_demo_seed1"]
    >>> df = rlcurves.read_logs(seeds)  # one frame, a run column
    >>> sorted(df["run"].unique())
    ['recipe_cpu_demo_seed0', 'recipe_cpu_demo_seed1']
    """
    check_format(format)
    _check_column_names(compute=compute, reward=reward, run=run)
    if isinstance(paths, (str, os.PathLike)):  # one path, not its characters ('l: no such file')
        paths = [paths]
    if not paths:
        raise RLCurvesError("no paths given: pass at least one log file or folder.")
    checked = _check_paths(paths)  # W&B run paths ('wandb:entity/project/id') pass as str
    names: list[str | None]
    if run is None or isinstance(run, str):
        names = [run] * len(checked)
    else:
        names = list(run)
        if len(names) != len(checked):
            raise RLCurvesError(
                f"run= has {len(names)} names for {len(checked)} paths; give one name per path.",
                runs=names,
            )
    raws: list[RawLog] = []
    for path, name in zip(checked, names, strict=False):
        if isinstance(path, str):
            loaded = [load_wandb_run(path)]
        elif path.is_dir() and run_folder_kind(path) is None:
            found = discover(path)
            if not found:
                raise RLCurvesError(
                    f"{path}: no logs found in this folder (looked for files ending in "
                    f"{list(TABLE_SUFFIXES)}, run folders with log.jsonl, trainer_state.json "
                    "or streams/stats, and TensorBoard event files).",
                    file=str(path),
                )
            loaded = [load(p, format) for p in found]
            if name is not None:
                raise RLCurvesError(
                    f"{path}: run={name!r} names one run, but this folder holds {len(found)}; the "
                    "runs are named after their files and folders.",
                    file=str(path),
                )
        else:
            loaded = [load(path, format)]
        for raw in loaded:
            if raw.run_column is None and "run" in raw.frame.columns:
                raw.run_column = "run"  # a long table: one run per value of its 'run' column
            several = raw.run_column is not None and raw.frame[raw.run_column].nunique() > 1
            if name is not None and name in raw.frame.columns:
                raws.extend(_split_runs(raw, name))
            elif raw.run_column is not None:
                if name is not None and several:
                    raise RLCurvesError(
                        f"{raw.source}: run={name!r} names one run, but this file holds several "
                        f"(column {raw.run_column!r}); leave run= out to read them all.",
                        file=raw.source,
                    )
                raws.extend(_split_runs(raw, raw.run_column))
            else:
                if name is not None:
                    _warn_if_a_column_was_meant(raw, name, _stacklevel + 1)
                    raw.run = name
                raws.append(raw)
    _unique_run_names(raws)
    several = reward == "*" or (reward is not None and not isinstance(reward, str))
    if several:
        raws, rewards = _one_run_per_column(raws, reward, compute, gpus, gpu_hours_per_step)
    else:
        rewards = [reward] * len(raws)
    curves = [
        _curve(raw, compute=compute, reward=col, gpus=gpus, gpu_hours_per_step=gpu_hours_per_step)
        for raw, col in zip(raws, rewards, strict=True)
    ]
    with_run_column = several or len(curves) > 1 or any(n is not None for n in names)
    for _, attrs in curves:  # repairs of data that could not be trusted: the user's line
        for entry in attrs["cleaning"]:
            if "warning" in entry:
                warnings.warn(entry.pop("warning"), DataRepairWarning, stacklevel=_stacklevel)
    return _assemble(curves, with_run_column)


def _one_run_per_column(
    raws: list[RawLog],
    reward: str | Sequence[str],
    compute: str | None,
    gpus: float | None,
    gpu_hours_per_step: float | None,
) -> tuple[list[RawLog], list[str]]:
    """A wide table (one reward column per model or variant) as one run per column: the run is
    named after the column (``"<run>/<column>"`` when several logs are read)."""
    out: list[RawLog] = []
    columns_out: list[str] = []
    for raw in raws:
        if reward == "*":
            columns = _numeric_reward_columns(raw, compute, gpus, gpu_hours_per_step)
            if not columns:
                raise RLCurvesError(
                    f"{raw.source}: reward='*' found no numeric column besides the compute and "
                    f"step columns; columns found: {[str(c) for c in raw.frame.columns]}.",
                    file=raw.source,
                )
        else:
            columns = [str(c) for c in reward]
            if not columns:
                raise RLCurvesError("reward= is an empty list; name at least one column.")
        for column in columns:
            name = column if len(raws) == 1 else f"{raw.run}/{column}"
            part = RawLog(**{**raw.__dict__, "run": name})
            part.notes = [*raw.notes, f"column {column!r} of a wide table"]
            out.append(part)
            columns_out.append(column)
    return out, columns_out


def _numeric_reward_columns(raw, compute, gpus, gpu_hours_per_step) -> list[str]:
    step = choose_step(raw)
    axis = derive_compute(raw, step, compute, gpus, gpu_hours_per_step)
    skip = {norm(c) for c in [*axis.columns, step, raw.run_column] if c is not None}
    skip |= {norm(c) for c in (*STEP_NAMES, *SECONDS_NAMES, *DURATION_NAMES, "_timestamp")}
    found = []
    for column in raw.frame.columns:
        name = str(column)
        if norm(name) in skip or name.endswith(("__MIN", "__MAX")):
            continue
        values = raw.frame[column]
        numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        if numeric and values.notna().any():
            found.append(name)
    return found


def _unique_run_names(raws: list[RawLog]) -> None:
    counts: dict[str, int] = {}
    for raw in raws:
        counts[str(raw.run)] = counts.get(str(raw.run), 0) + 1
    for raw in raws:
        if counts[str(raw.run)] > 1:
            # Two runs with one name (log.jsonl in two folders of the same name): use the path.
            raw.run = f"{raw.run} ({raw.source})"


def _assemble(curves: list[tuple[pd.DataFrame, dict]], with_run_column: bool) -> pd.DataFrame:
    units = {attrs["compute_unit"] for _, attrs in curves}
    if len(units) > 1:
        by_unit = {attrs["run"]: attrs["compute_unit"] for _, attrs in curves}
        raise RLCurvesError(
            f"the runs' compute axes are in different units ({by_unit}); pass compute=, gpus= or "
            "gpu_hours_per_step= so that every run is in GPU-hours, or read them separately.",
            units=by_unit,
        )
    frames = []
    for frame, attrs in curves:
        if with_run_column:
            frame = frame.copy()
            frame.insert(2, "run", attrs["run"])
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    runs = {attrs["run"]: attrs for _, attrs in curves}
    if len(curves) == 1:
        attrs = dict(curves[0][1])
    else:
        formats = {a["format"] for _, a in curves}
        attrs = {
            "source": [a["source"] for _, a in curves],
            "format": formats.pop() if len(formats) == 1 else sorted(formats),
            "compute_unit": units.pop(),
            "compute": {a["run"]: a["compute"] for _, a in curves},
            "reward": {a["run"]: a["reward"] for _, a in curves},
            "cleaning": [{**e, "run": a["run"]} for _, a in curves for e in a["cleaning"]],
            "rows_read": sum(a["rows_read"] for _, a in curves),
            "rows_kept": len(out),
        }
    attrs["runs"] = runs
    out.attrs = attrs
    return out
