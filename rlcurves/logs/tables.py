"""Tables: CSV/TSV (plain, W&B panel exports, W&B histories saved with to_csv) and Parquet."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import RLCurvesError
from ._paths import empty_error, run_name_for
from ._raw import RawLog, concat_nan_cells, parse_text_table

_WANDB_PANEL_COLUMN = re.compile(r"^(?P<run>.+) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")


def _separator(path: Path, first_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    if "," not in first_line and first_line.count(";") > first_line.count("\t"):
        return ";"  # a spreadsheet's CSV where the decimal mark is a comma
    if path.suffix.lower() == ".csv":
        return ","
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


_SEPARATOR_NAMES = {",": "comma", "\t": "tab", ";": "semicolon"}
_DECIMAL_COMMA = re.compile(r"^\s*([-+]?\d*),(\d+(?:[eE][-+]?\d+)?)\s*$")


def load_table_text(path: Path, format_hint: str | None = None) -> RawLog:
    """CSV or TSV: a generic table, a W&B panel export, or a W&B history saved with to_csv."""
    # Leading lines starting with '#' are a provenance header (as in rlcurves' bundled examples),
    # skipped; a '#' elsewhere is data, so pandas' comment= (which cuts lines anywhere) is not used.
    n_comment_lines = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        first_line = handle.readline()
        while first_line.startswith("#"):
            n_comment_lines += 1
            first_line = handle.readline()
    if not first_line.strip():
        raise empty_error(path, "the file is empty (no header line)")
    sep = "\t" if format_hint == "tsv" else "," if format_hint == "csv" else None
    sep = sep or _separator(path, first_line)
    try:
        text = pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            skiprows=n_comment_lines,
        )
    except pd.errors.EmptyDataError as exc:
        raise empty_error(path, "the file is empty") from exc
    except UnicodeDecodeError as exc:
        raise RLCurvesError(
            f"{path}: is not a text table (byte {exc.start} is not UTF-8: {exc.reason}). A "
            "binary log needs its format= ('parquet', 'tensorboard'), or save the table as "
            "UTF-8 CSV.",
            file=str(path),
        ) from exc
    except pd.errors.ParserError as exc:
        raise RLCurvesError(
            f"{path}: could not be parsed as a {_SEPARATOR_NAMES[sep]}-separated table ({exc}). "
            "Pass format= with the right format.",
            file=str(path),
        ) from exc
    text = _drop_saved_index(text)
    if sep == ";":  # a spreadsheet's decimal commas: 0,35 is 0.35 where commas separate nothing
        text = text.apply(lambda col: col.str.replace(_DECIMAL_COMMA, r"\1.\2", regex=True))
    frame, nan_cells, text_cells = parse_text_table(text)
    if frame.empty:
        raise empty_error(path, f"the table has a header ({list(frame.columns)}) but no rows")
    fmt = "tsv" if sep == "\t" else "csv"
    how = f"detected: {_SEPARATOR_NAMES[sep]}-separated table"
    if sep == ";":
        how += " (a decimal comma read as a point)"
    if format_hint in ("wandb-csv", None) and _is_wandb_panel(frame.columns):
        return _wandb_panel_to_long(frame, nan_cells, text_cells, path, how_hint=format_hint)
    if format_hint == "wandb-csv":
        raise RLCurvesError(
            f"{path}: format='wandb-csv' expects a W&B panel export (first column the x axis, then "
            f"'<run> - <metric>' with __MIN/__MAX columns); columns found: {list(frame.columns)}. "
            "Pass format='csv' for a plain table.",
            file=str(path),
            columns=[str(c) for c in frame.columns],
        )
    columns = set(frame.columns)
    if format_hint == "wandb" or (
        format_hint is None and "_step" in columns and {"_runtime", "_timestamp"} & columns
    ):
        fmt, how = "wandb", "detected: '_step' and '_runtime'/'_timestamp' columns (W&B history)"
    if format_hint is not None:
        fmt, how = format_hint, "explicit"
    return RawLog(
        frame,
        fmt,
        how,
        str(path),
        run_name_for(path),
        nan_cells=nan_cells,
        text_cells=text_cells,
    )


def _drop_saved_index(text: pd.DataFrame) -> pd.DataFrame:
    """DataFrame.to_csv writes the index as an unnamed first column: it is not a metric."""
    first = text.columns[0] if len(text.columns) else None
    if first is not None and (first == "" or str(first).startswith("Unnamed: 0")):
        return text.drop(columns=[first])
    return text


def _is_wandb_panel(columns: pd.Index) -> bool:
    names = [str(c) for c in columns[1:]]
    return (
        bool(names)
        and all(_WANDB_PANEL_COLUMN.match(n) for n in names)
        and any(n.endswith(("__MIN", "__MAX")) for n in names)
    )


def _wandb_panel_to_long(
    frame: pd.DataFrame, nan_cells: dict, text_cells: dict, path: Path, how_hint: str | None
) -> RawLog:
    """A W&B chart export: first column the x axis, then '<run> - <metric>[__MIN|__MAX]'.

    Reshaped to one row per (run, x) where the run wrote something, with a 'run' column.
    """
    x_name = str(frame.columns[0])
    by_run: dict[str, list[tuple[str, str]]] = {}
    for column in frame.columns[1:]:
        match = _WANDB_PANEL_COLUMN.match(str(column))
        assert match is not None
        metric = match["metric"] + (match["agg"] or "")
        by_run.setdefault(match["run"], []).append((str(column), metric))
    metrics = list(dict.fromkeys(m for columns in by_run.values() for _, m in columns))
    none = np.zeros(len(frame), dtype=bool)
    no_text = np.full(len(frame), None, dtype=object)
    parts, nan_parts, text_parts = [], [], []
    for run, columns in by_run.items():
        # A row belongs to this run where it wrote a value (or a NaN) in one of its columns.
        written = np.zeros(len(frame), dtype=bool)
        for column, _ in columns:
            written |= frame[column].notna().to_numpy() | nan_cells.get(column, none)
            written |= pd.notna(text_cells.get(column, no_text))
        part = pd.DataFrame({"run": run, x_name: frame[x_name].to_numpy()[written]})
        part_nan, part_text = {}, {}
        for column, metric in columns:
            part[metric] = frame[column].to_numpy()[written]
            part_nan[metric] = nan_cells.get(column, none)[written]
            if column in text_cells:
                part_text[metric] = text_cells[column][written]
        parts.append(part)
        nan_parts.append(part_nan)
        text_parts.append(part_text)
    long = pd.concat(parts, ignore_index=True)[["run", x_name, *metrics]]
    notes = [f"W&B panel export: x axis {x_name!r}, {len(by_run)} run(s): {sorted(by_run)}"]
    for metric in metrics:
        low, high = long.get(f"{metric}__MIN"), long.get(f"{metric}__MAX")
        if low is not None and high is not None:
            bucketed = int(
                (low.to_numpy() != high.to_numpy()).sum() - (low.isna() & high.isna()).sum()
            )
            if bucketed:
                # W&B draws a bucket's mean when a panel has more points than it shows.
                notes.append(
                    f"{metric!r}: __MIN != __MAX at {bucketed} rows, so those values are W&B "
                    "bucket means; export the full history (run.history / scan_history) for "
                    "the exact curve"
                )
    if len(by_run) == 1:
        long = long.drop(columns="run")  # the run's name is the RawLog's run
    how = (
        "explicit"
        if how_hint
        else "detected: '<run> - <metric>' and __MIN/__MAX columns (W&B panel CSV)"
    )
    return RawLog(
        long,
        "wandb-csv",
        how,
        str(path),
        next(iter(by_run)) if len(by_run) == 1 else run_name_for(path),
        nan_cells=concat_nan_cells(parts, nan_parts),
        text_cells=concat_nan_cells(parts, text_parts, fill=None),
        step_candidates=(x_name,),
        run_column="run" if len(by_run) > 1 else None,
        notes=notes,
        meta={"wandb_runs": sorted(by_run)},
    )


# --- Parquet -----------------------------------------------------------------------------------


def load_parquet(path: Path, format_hint: str | None = None) -> RawLog:
    """A Parquet table; nulls are missing, float NaNs are written NaNs."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise RLCurvesError(
            f"{path}: could not be read as Parquet ({exc}). Pass format= with the right format.",
            file=str(path),
        ) from exc
    if table.num_rows == 0:
        raise empty_error(path, f"the table has columns {table.column_names} but no rows")
    nan_cells = {}
    for name in table.column_names:
        column = table[name]
        if column.type in (_pa_float(16), _pa_float(32), _pa_float(64)):
            mask = pc.fill_null(pc.is_nan(column), False).to_numpy(zero_copy_only=False)
            if mask.any():
                nan_cells[name] = mask.astype(bool)
    frame = table.to_pandas()
    columns = set(frame.columns)
    fmt, how = "parquet", "detected: Parquet file"
    if "_step" in columns and {"_runtime", "_timestamp"} & columns:
        fmt, how = "wandb", "detected: Parquet with '_step' and '_runtime' (W&B history)"
    if format_hint is not None:
        fmt, how = format_hint, "explicit"
    return RawLog(frame, fmt, how, str(path), run_name_for(path), nan_cells=nan_cells)


def _pa_float(bits: int):
    import pyarrow as pa

    return {16: pa.float16(), 32: pa.float32(), 64: pa.float64()}[bits]
