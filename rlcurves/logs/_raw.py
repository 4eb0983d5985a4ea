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
    text_cells : dict
        Column -> object array of the text written where a number was expected (a placeholder
        such as ``"n/a"``, or any other word), None elsewhere: those cells are missing in
        ``frame`` once the column is read as numbers (:meth:`as_numbers`), and the cleaning
        report names the rows it drops for them.
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
    text_cells: dict[str, np.ndarray] = field(default_factory=dict)
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

    def written_text(self, column: str) -> np.ndarray:
        """The text written in ``column`` where a number was expected (None elsewhere)."""
        text = self.text_cells.get(column)
        if text is None:
            return np.full(len(self.frame), None, dtype=object)
        return text

    def as_numbers(self, column: str, *, min_share: float = 0.0) -> bool:
        """Read a column that holds numbers and some text as numbers, in place.

        Its text cells become missing values of ``frame`` and are recorded in ``text_cells``
        (the cleaning report names the rows). Done only when at least one written cell, and at
        least ``min_share`` of them, are numbers; returns whether the column is numeric now.
        """
        series = self.frame[column]
        if pd.api.types.is_bool_dtype(series):
            return False
        if pd.api.types.is_numeric_dtype(series):
            return True
        values = np.full(len(series), np.nan)
        text = self.written_text(column).copy()
        written_nan = self.written_nan(column).copy()
        numbers = words = 0
        for i, cell in enumerate(series.to_numpy(dtype=object)):
            if cell is None or (isinstance(cell, float) and math.isnan(cell)):
                continue
            number = _number_or_none(cell)
            if number is None:
                text[i] = str(cell)
                words += 1
                continue
            values[i] = number
            numbers += 1
            written_nan[i] |= math.isnan(number)
        if numbers == 0 or numbers < min_share * (numbers + words):
            return False
        self.frame[column] = values
        self.text_cells[column] = text
        if written_nan.any():
            self.nan_cells[column] = written_nan
        return True


def _number_or_none(cell: object) -> float | None:
    """A cell as a float (numbers, numeric text, "NaN"/"Infinity"), None if it is text."""
    if isinstance(cell, (bool, np.bool_)):
        return None
    if isinstance(cell, (int, float, np.number)):
        return float(cell)
    if isinstance(cell, str):
        word = cell.strip()
        if word.lower() in NONFINITE_TEXT:
            return NONFINITE_TEXT[word.lower()]
        try:
            return float(word)
        except ValueError:
            return None
    return None


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


def parse_text_table(
    frame: pd.DataFrame,
) -> tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Convert a table read as text (every cell a string or NA) into numbers where possible.

    A column becomes float when every written cell parses as a number (``nan``, ``inf`` and
    ``Infinity`` included); cells in :data:`MISSING_TEXT` are missing; cells that parse to NaN
    are recorded as written NaNs. Returns the frame, the written NaNs and the placeholders
    written (``"n/a"``, ``"null"``...: :attr:`RawLog.text_cells`), each by column.
    """
    out = frame.copy()
    nan_cells: dict[str, np.ndarray] = {}
    text_cells: dict[str, np.ndarray] = {}
    for name in out.columns:
        text = out[name].astype("string").str.strip()
        missing = text.isna() | text.str.lower().isin(MISSING_TEXT)
        placeholder = (missing & text.notna() & (text != "")).to_numpy(dtype=bool)
        if placeholder.any():
            words = np.full(len(text), None, dtype=object)
            words[placeholder] = text[placeholder].to_numpy(dtype=object)
            text_cells[name] = words
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
    return out, nan_cells, text_cells


def flatten(record: dict, prefix: str = "") -> dict:
    flat: dict = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, prefix=f"{name}/"))
        else:
            flat[name] = value
    return flat


def concat_nan_cells(
    parts: list[pd.DataFrame], nan_parts: list[dict], *, fill: object = False
) -> dict[str, np.ndarray]:
    """Per-column cell masks (or text) of frames stacked in order; ``fill`` where a part has
    none (False for masks, None for :attr:`RawLog.text_cells`)."""
    names = {n for cells in nan_parts for n in cells}
    dtype = bool if fill is False else object
    out = {}
    for name in names:
        out[name] = np.concatenate(
            [
                cells.get(name, np.full(len(part), fill, dtype=dtype))
                for part, cells in zip(parts, nan_parts, strict=False)
            ]
        )
    return out
