"""The loaders' common product: the records of one run as written, before any choice or cleaning."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# Text cells that mean "nothing was written here" (a missing value, not a NaN reward).
MISSING_TEXT = frozenset({"", "null", "none", "na", "n/a", "<na>"})


@dataclass
class RawLog:
    """The records of one run, one row per record in write order.

    Attributes
    ----------
    frame : DataFrame
        One row per written record, columns as the tool named them.
    format : str
        The format name (``"csv"``, ``"verl"``, ...).
    format_how : str
        Why this format: ``"explicit"`` or what detection saw.
    source : str
        The path that was read.
    run : str or None
        The run name the layout suggests (folder or file name).
    nan_cells : dict
        Column -> boolean mask of cells *written* as NaN. A NaN elsewhere in ``frame`` means
        nothing was written there; the cleaning report counts the two apart.
    reward_candidates : tuple of tuples of str
        Format-specific reward columns in ranks, best rank first, tried ahead of the generic
        ranks; detection refuses to choose between two present columns of one rank.
    step_candidates, seconds_candidates, duration_candidates : tuple of str
        Format-specific column names to prefer, best first, ahead of the generic lists.
    run_column : str or None
        A column that splits this table into several runs (a W&B panel CSV of several runs).
    cleaning : list of dict
        Things the loader itself set aside (a truncated last line, a summary record).
    notes : list of str
        How the loader shaped the records (flattening, joins), for ``attrs``.
    meta : dict
        Side information kept for the user (``config.yaml``, a TRL summary record).
    """

    frame: pd.DataFrame
    format: str
    format_how: str
    source: str
    run: str | None = None
    nan_cells: dict[str, np.ndarray] = field(default_factory=dict)
    reward_candidates: tuple[tuple[str, ...], ...] = ()
    step_candidates: tuple[str, ...] = ()
    seconds_candidates: tuple[str, ...] = ()
    duration_candidates: tuple[str, ...] = ()
    run_column: str | None = None
    cleaning: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def written_nan(self, column: str) -> np.ndarray:
        """Mask of rows whose ``column`` was written as NaN (all False when none were)."""
        mask = self.nan_cells.get(column)
        if mask is None:
            return np.zeros(len(self.frame), dtype=bool)
        return mask


# Non-finite numbers some JSON writers emit as strings (JSON itself has no NaN or Infinity).
NONFINITE_TEXT = {
    "nan": math.nan,
    "-nan": math.nan,
    "+nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}


def frame_from_records(records: Iterable[Mapping]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """A frame from dict records, remembering which cells were written as NaN.

    ``None`` (JSON ``null``) and absent keys are missing; a float NaN (or a "NaN" string) is a
    written NaN. Columns holding only numbers (and "NaN"/"Infinity" strings) become float.
    """
    records = list(records)
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    nan_rows: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        for key, value in record.items():
            if isinstance(value, str):
                value = NONFINITE_TEXT.get(value.strip().lower(), value)
            if isinstance(value, float) and math.isnan(value):
                nan_rows.setdefault(key, []).append(i)
    nan_cells = {}
    for key, rows in nan_rows.items():
        mask = np.zeros(len(records), dtype=bool)
        mask[rows] = True
        nan_cells[key] = mask
    return numeric_columns(frame), nan_cells


def _as_number(value: object) -> object:
    if isinstance(value, str):
        return NONFINITE_TEXT.get(value.strip().lower(), value)
    return value


def numeric_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Turn object columns that hold only numbers (and missing values) into float columns."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if column.dtype != object and not pd.api.types.is_string_dtype(column.dtype):
            continue
        present = column.notna()
        if not present.any():
            continue
        values = [_as_number(v) for v in column[present]]
        if not all(
            isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in values
        ):
            continue
        converted = np.full(len(column), np.nan)
        converted[present.to_numpy()] = np.asarray(values, dtype=float)
        out[name] = converted
    return out


def parse_text_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Convert a table read as text (every cell a string or NA) into numbers where possible.

    A column becomes float when every written cell parses as a number (``nan``, ``inf`` and
    ``Infinity`` included); cells in :data:`MISSING_TEXT` are missing; cells that parse to NaN
    are recorded as written NaNs.
    """
    out = frame.copy()
    nan_cells: dict[str, np.ndarray] = {}
    for name in out.columns:
        text = out[name].astype("string").str.strip()
        missing = text.isna() | text.str.lower().isin(MISSING_TEXT)
        written = text.where(~missing)
        numbers = pd.to_numeric(written, errors="coerce")
        lowered = written.str.lower()
        written_nan = (~missing) & lowered.isin({"nan", "-nan", "+nan"})
        parsed_ok = missing | numbers.notna() | written_nan
        if bool(parsed_ok.all()) and bool((~missing).any()):
            out[name] = numbers.astype(float)
            if bool(written_nan.any()):
                nan_cells[name] = written_nan.to_numpy(dtype=bool)
        else:
            out[name] = written.astype(object).where(~missing, None)
    return out, nan_cells


def flatten(record: dict, prefix: str = "") -> dict:
    flat: dict = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, prefix=f"{name}/"))
        else:
            flat[name] = value
    return flat


def concat_nan_cells(parts: list[pd.DataFrame], nan_parts: list[dict]) -> dict[str, np.ndarray]:
    names = {n for cells in nan_parts for n in cells}
    out = {}
    for name in names:
        out[name] = np.concatenate(
            [
                cells.get(name, np.zeros(len(part), dtype=bool))
                for part, cells in zip(parts, nan_parts, strict=False)
            ]
        )
    return out
