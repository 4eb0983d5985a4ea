"""TensorBoard event files, read with TensorBoard's own event-file loader.

Why TensorBoard's ``EventFileLoader`` and not ``tbparse`` or ``EventAccumulator``: it is part of the
``tensorboard`` package itself (maintained with every TensorBoard release; ``tbparse`` is a thin
wrapper over the same classes that adds a dependency), it reads every event (``EventAccumulator``
keeps a 10,000-point reservoir sample per tag unless told otherwise) and it reads one file at a
time, so a resumed run's duplicate steps and restarted clock stay visible to the cleaning report
instead of being purged silently. It needs only ``tensorboard`` (no TensorFlow):
``pip install tensorboard`` (or ``pip install rlcurves[logs]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import RLCurvesError
from ._paths import run_name_for
from ._raw import RawLog


def is_event_file(path: Path) -> bool:
    """TensorBoard names its files ``events.out.tfevents.<time>.<host>...``."""
    return path.is_file() and "tfevents" in path.name


def event_files(folder: Path) -> list[Path]:
    """Event files directly in ``folder`` (a run's own files; sub-folders are other runs)."""
    return sorted(p for p in folder.iterdir() if is_event_file(p))


def _loader():
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise RLCurvesError(
            "reading TensorBoard event files needs the 'tensorboard' package, which is not "
            "installed: pip install tensorboard (or pip install 'rlcurves[logs]'); or export the "
            "scalars to CSV from TensorBoard and read that.",
            missing="tensorboard",
        ) from exc
    return EventFileLoader, tensor_util


def _scalar_events(path: Path) -> tuple[float | None, list[tuple[float, int, str, float]]]:
    """(file start wall time, [(wall_time, step, tag, value)]) of one event file.

    Scalars come as ``simple_value`` (PyTorch, TF1) or as rank-0 tensors of the 'scalars' plugin
    (TF2); the plugin is named only in a tag's first event, so it is remembered per tag.
    """
    EventFileLoader, tensor_util = _loader()
    start = None
    rows: list[tuple[float, int, str, float]] = []
    plugin_of_tag: dict[str, str] = {}
    try:
        for event in EventFileLoader(str(path)).Load():
            if start is None:
                start = event.wall_time
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
                    plugin_of_tag[value.tag] = value.metadata.plugin_data.plugin_name
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = float(value.simple_value)
                elif kind == "tensor" and plugin_of_tag.get(value.tag) == "scalars":
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1:
                        continue
                    number = float(array.reshape(()))
                else:
                    continue  # histograms, images, text: not curves
                rows.append((event.wall_time, int(event.step), value.tag, number))
    except Exception as exc:  # corrupt record, wrong file type
        if isinstance(exc, RLCurvesError):
            raise
        raise RLCurvesError(
            f"{path}: could not be read as a TensorBoard event file ({exc}).",
            file=str(path),
        ) from exc
    return start, rows


def load_tensorboard(path: Path, format_hint: str | None = None) -> RawLog:
    """All scalar tags of one run (an event file, or a folder of them) as one row per step.

    Each event file is a process's writing; a resumed run adds a file. Rows keep file order
    (files sorted by start time), so a step written again after a restart appears twice and the
    cleaning keeps the later write. ``elapsed_seconds`` is the wall time since the writing file
    was opened: a restarted clock, which the compute axis repairs like any other (so neither the
    downtime between files nor the work lost since the last checkpoint is counted). Files that
    overlap in time are concurrent writers of one process (a separate eval writer, say): their
    ``elapsed_seconds`` is then counted from the first file's opening. ``wall_time`` (Unix
    seconds of the step's last event) is kept as written.
    """
    files = [path] if path.is_file() else event_files(path)
    if not files:
        raise RLCurvesError(
            f"{path}: no TensorBoard event files (events.out.tfevents.*) in this folder.",
            file=str(path),
        )
    loaded = []
    for file in files:
        start, rows = _scalar_events(file)
        if rows:
            loaded.append((start if start is not None else rows[0][0], file, rows))
    if not loaded:
        raise RLCurvesError(
            f"{path}: the event files hold no scalar summaries (only graphs, histograms or "
            "images). Log the reward with add_scalar / tf.summary.scalar.",
            file=str(path),
            columns=[],
        )
    loaded.sort(key=lambda item: item[0])
    ends = [max(r[0] for r in rows) for _, _, rows in loaded]
    concurrent = any(loaded[i + 1][0] < ends[i] for i in range(len(loaded) - 1))
    parts = []
    for index, (start, _file, rows) in enumerate(loaded):
        long = pd.DataFrame(rows, columns=["wall_time", "step", "tag", "value"])
        # Within one file a tag written twice at a step keeps its last value (the later write).
        wide = long.pivot_table(
            index="step", columns="tag", values="value", aggfunc="last", dropna=False
        )
        wall = long.groupby("step")["wall_time"].max()
        wide.columns = [str(c) for c in wide.columns]
        wide = wide.reset_index()
        wide["wall_time"] = wall.reindex(wide["step"]).to_numpy()
        origin = loaded[0][0] if concurrent else start
        wide["elapsed_seconds"] = wide["wall_time"] - origin
        wide["event_file"] = index
        # pivot_table turns a written NaN and "not written" alike into NaN: rebuild which is which.
        written_nan = long[np.isnan(long["value"])]
        parts.append((wide, written_nan))
    frame = pd.concat([w for w, _ in parts], ignore_index=True)
    nan_cells: dict[str, np.ndarray] = {}
    row0 = 0
    for wide, written_nan in parts:
        for tag, steps in written_nan.groupby("tag")["step"]:
            mask = nan_cells.setdefault(str(tag), np.zeros(len(frame), dtype=bool))
            hits = np.flatnonzero(wide["step"].isin(set(steps)).to_numpy()) + row0
            mask[hits] = True
        row0 += len(wide)
    how = (
        "explicit" if format_hint else "detected: TensorBoard event file(s) (events.out.tfevents.*)"
    )
    clock = (
        "files overlap in time (concurrent writers): elapsed_seconds counts from the first "
        "file's opening"
        if concurrent
        else "elapsed_seconds counts from each file's opening (a restart restarts it)"
    )
    notes = [f"{len(loaded)} event file(s) read with tensorboard's EventFileLoader; {clock}"]
    return RawLog(
        frame,
        "tensorboard",
        how,
        str(path),
        run_name_for(path),
        nan_cells=nan_cells,
        step_candidates=("step",),
        seconds_candidates=("elapsed_seconds",),
        notes=notes,
        meta={"event_files": [str(f) for _, f, _ in loaded]},
    )
