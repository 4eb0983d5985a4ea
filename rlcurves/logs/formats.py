"""Loaders: one per log format, each turning a file or run folder into a :class:`RawLog`.

Every loader keeps the records as the tool wrote them (no column is chosen, nothing is cleaned);
the only things a loader sets aside are not records of training at all (a truncated last line of a
crashed writer, TRL's end-of-training summary) and it says so in ``RawLog.cleaning``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..errors import RLCurvesError
from ._raw import RawLog, frame_from_records, parse_text_table
from .columns import VALIDATION_PATTERNS

# Stems too generic to name a run: the folder above names it instead.
GENERIC_STEMS = frozenset(
    {
        "log",
        "logs",
        "metrics",
        "trainer_state",
        "history",
        "stats",
        "0",
        "events",
        "progress",
        "train",
        "results",
        "wandb-history",
        "scalars",
    }
)
# Files a folder of runs is searched for (a .txt log is read when named, not searched for).
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".jsonl", ".json", ".ndjson")
# Side files that tools leave next to their logs: never runs.
SIDECAR_FILES = frozenset(
    {
        "config.json",
        "wandb-metadata.json",
        "wandb-summary.json",
        "adapter_config.json",
        "generation_config.json",
        "tokenizer_config.json",
        "tokenizer.json",
        "vocab.json",
        "special_tokens_map.json",
        "training_args.json",
        "all_results.json",
        "train_results.json",
        "eval_results.json",
        "requirements.json",
    }
)


def run_name_for(path: Path) -> str:
    """The run a file or folder stands for: its name, or its folder's when the name is generic."""
    if path.is_dir():
        return path.resolve().name
    stem = path.name
    for suffix in (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet", ".pq", ".txt"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem in GENERIC_STEMS or "tfevents" in path.name:
        return path.resolve().parent.name
    return stem


def _empty_error(path: Path, what: str) -> RLCurvesError:
    return RLCurvesError(
        f"{path}: {what}. Point read_log at a log with at least one record, or check that the run "
        "wrote its metrics to this file.",
        file=str(path),
        columns=[],
    )


# --- JSON lines ------------------------------------------------------------------------------


def read_json_lines(path: Path) -> tuple[list[dict], list[dict]]:
    """Records of a JSONL file, and cleaning entries (a truncated last line is skipped, counted).

    A malformed line elsewhere is an error: it means the file is not JSON lines.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise _empty_error(path, "the file is empty")
    records: list[dict] = []
    cleaning: list[dict] = []
    for i, (number, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1 and i > 0:
                # A writer killed mid-line leaves a partial last record; every earlier one is whole.
                cleaning.append(
                    {
                        "step": "skip_truncated_line",
                        "rows": 1,
                        "detail": f"line {number} is not complete JSON ({exc.msg}); a writer "
                        "stopped mid-line, so it was skipped",
                    }
                )
                continue
            raise RLCurvesError(
                f"{path}: line {number} is not JSON ({exc.msg}); this file is not JSON lines. "
                "Pass format='csv' (or 'tsv', 'parquet', 'tensorboard') if it is another format.",
                file=str(path),
                line=number,
            ) from exc
        if not isinstance(record, dict):
            raise RLCurvesError(
                f"{path}: line {number} holds a JSON {type(record).__name__}, not an object; "
                "JSON-lines logs must have one object per line.",
                file=str(path),
                line=number,
            )
        records.append(record)
    return records, cleaning


def _flatten(record: dict, prefix: str = "") -> dict:
    flat: dict = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, prefix=f"{name}/"))
        else:
            flat[name] = value
    return flat


def is_verl_record(record: dict) -> bool:
    """verl's file logger writes ``{"step": N, "data": {metric: value}}`` per step."""
    return set(record) == {"step", "data"} and isinstance(record.get("data"), dict)


# verl ranks: validation metrics first, then the training score.
VERL_REWARD_PATTERNS = (*VALIDATION_PATTERNS, re.compile(r"^critic/score/mean$"))


# PipelineRL: the test pass rate first (success is 0/1 per rollout; reward may add penalties).
PIPELINERL_REWARD_RANKS = (
    ("test_success_mean",),
    ("test_reward_mean",),
    ("success_mean",),
    ("reward_mean",),
)


def load_jsonl(path: Path, format_hint: str | None = None) -> RawLog:
    """Flat JSON lines, verl's file logger, the recipe's log.jsonl, PipelineRL's stats, W&B."""
    records, cleaning = read_json_lines(path)
    fmt, how = detect_jsonl_format(records, path)
    if format_hint is not None:
        fmt, how = format_hint, "explicit"
    notes: list[str] = []
    kwargs: dict = {}
    if fmt == "verl":
        bad = [i for i, r in enumerate(records) if not is_verl_record(r)]
        if bad:
            raise RLCurvesError(
                f"{path}: record {bad[0] + 1} is not a verl file-logger record "
                "{'step': N, 'data': {...}}; pass format='jsonl' for flat records.",
                file=str(path),
            )
        records = [{"step": r["step"], **_flatten(r["data"])} for r in records]
        notes.append("verl file-logger records: metrics taken from each record's 'data' object")
        kwargs["reward_candidates"] = _verl_reward_ranks(records)
        kwargs["duration_candidates"] = ("timing_s/step", "perf/time_per_step")
    else:
        if any(isinstance(v, dict) for r in records for v in r.values()):
            records = [_flatten(r) for r in records]
            notes.append("nested objects flattened to 'outer/inner' column names")
    if fmt == "recipe":
        kwargs.update(
            reward_candidates=(("val_pass_rate",),),
            step_candidates=("step",),
            seconds_candidates=("wall_seconds",),
        )
    if fmt == "pipelinerl":
        kwargs.update(
            reward_candidates=PIPELINERL_REWARD_RANKS,
            step_candidates=("trainer_model_version",),
            seconds_candidates=("time_since_start",),
        )
    frame, nan_cells = frame_from_records(records)
    if frame.empty:
        raise _empty_error(path, "no records could be read")
    return RawLog(
        frame=frame,
        format=fmt,
        format_how=how,
        source=str(path),
        run=run_name_for(path),
        nan_cells=nan_cells,
        cleaning=cleaning,
        notes=notes,
        **kwargs,
    )


def _verl_reward_ranks(records: list[dict]) -> tuple[tuple[str, ...], ...]:
    names = list(dict.fromkeys(key for record in records for key in record))
    return tuple(tuple(sorted(n for n in names if p.match(n))) for p in VERL_REWARD_PATTERNS)


def detect_jsonl_format(records: list[dict], path: Path) -> tuple[str, str]:
    """Which tool wrote these JSON records, and what gave it away."""
    head = records[: min(len(records), 50)]
    if head and all(is_verl_record(r) for r in head):
        return "verl", "detected: every record is {'step', 'data'} (verl file logger)"
    kinds = {r.get("kind") for r in head}
    if {"train", "eval"} & kinds and kinds <= {"train", "eval", None}:
        return "recipe", "detected: records carry kind='train'/'eval' (rlcurves recipe log.jsonl)"
    keys = set().union(*(r.keys() for r in head)) if head else set()
    if "trainer_model_version" in keys or "streams/stats" in path.as_posix():
        return "pipelinerl", "detected: 'trainer_model_version' records (PipelineRL stats stream)"
    if "_step" in keys and ({"_runtime", "_timestamp"} & keys):
        return "wandb", "detected: '_step' and '_runtime'/'_timestamp' (W&B history)"
    return "jsonl", "detected: flat JSON lines"


# --- CSV / TSV ---------------------------------------------------------------------------------

_WANDB_PANEL_COLUMN = re.compile(r"^(?P<run>.+) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")


def _separator(path: Path, first_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    if path.suffix.lower() == ".csv":
        return ","
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


def load_table_text(path: Path, format_hint: str | None = None) -> RawLog:
    """CSV or TSV: a generic table, a W&B panel export, or a W&B history saved with to_csv."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        first_line = handle.readline()
    if not first_line.strip():
        raise _empty_error(path, "the file is empty (no header line)")
    sep = "\t" if format_hint == "tsv" else "," if format_hint == "csv" else None
    sep = sep or _separator(path, first_line)
    try:
        text = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError as exc:
        raise _empty_error(path, "the file is empty") from exc
    except pd.errors.ParserError as exc:
        raise RLCurvesError(
            f"{path}: could not be parsed as {'TSV' if sep == chr(9) else 'CSV'} ({exc}). "
            "Pass format= with the right format.",
            file=str(path),
        ) from exc
    text = _drop_saved_index(text)
    frame, nan_cells = parse_text_table(text)
    if frame.empty:
        raise _empty_error(path, f"the table has a header ({list(frame.columns)}) but no rows")
    fmt = "tsv" if sep == "\t" else "csv"
    how = f"detected: {'tab' if sep == chr(9) else 'comma'}-separated table"
    if format_hint in ("wandb-csv", None) and _is_wandb_panel(frame.columns):
        return _wandb_panel_to_long(frame, nan_cells, path, how_hint=format_hint)
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
    return RawLog(frame, fmt, how, str(path), run_name_for(path), nan_cells=nan_cells)


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
    frame: pd.DataFrame, nan_cells: dict, path: Path, how_hint: str | None
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
    parts, nan_parts = [], []
    for run, columns in by_run.items():
        # A row belongs to this run where it wrote a value (or a NaN) in one of its columns.
        written = np.zeros(len(frame), dtype=bool)
        for column, _ in columns:
            written |= frame[column].notna().to_numpy() | nan_cells.get(column, none)
        part = pd.DataFrame({"run": run, x_name: frame[x_name].to_numpy()[written]})
        part_nan = {}
        for column, metric in columns:
            part[metric] = frame[column].to_numpy()[written]
            part_nan[metric] = nan_cells.get(column, none)[written]
        parts.append(part)
        nan_parts.append(part_nan)
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
        nan_cells=_concat_nan_cells(parts, nan_parts),
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
        raise _empty_error(path, f"the table has columns {table.column_names} but no rows")
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


# --- JSON documents: TRL trainer_state.json, W&B history dumps --------------------------------


def load_json(path: Path, format_hint: str | None = None) -> RawLog:
    """A JSON document: TRL's trainer_state.json, or a W&B history (list of records/columns)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise _empty_error(path, "the file is empty")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if _first_line_is_object(text):
            # Many '.json' logs are really JSON lines.
            return load_jsonl(path, None if format_hint in (None, "json") else format_hint)
        raise RLCurvesError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); a file cut short by a "
            "crash? For TRL, read an earlier checkpoint's trainer_state.json.",
            file=str(path),
            line=exc.lineno,
        ) from exc
    if isinstance(document, dict) and "log_history" in document:
        return _trl_state(document, path)
    if format_hint == "trl":
        raise RLCurvesError(
            f"{path}: format='trl' needs a trainer_state.json with a 'log_history' list; this "
            f"JSON {type(document).__name__} has none.",
            file=str(path),
        )
    records = _records_of(document, path)
    frame, nan_cells = frame_from_records(records)
    if frame.empty:
        raise _empty_error(path, "the JSON document holds no records")
    columns = set(frame.columns)
    fmt, how = "json", "detected: JSON list of records"
    if "_step" in columns and {"_runtime", "_timestamp"} & columns:
        fmt, how = "wandb", "detected: JSON records with '_step' and '_runtime' (W&B run.history())"
    if format_hint is not None and format_hint != "json":
        fmt, how = format_hint, "explicit"
    return RawLog(frame, fmt, how, str(path), run_name_for(path), nan_cells=nan_cells)


def _first_line_is_object(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def _records_of(document: object, path: Path) -> list[dict]:
    if isinstance(document, list) and all(isinstance(r, dict) for r in document):
        return [_flatten(r) for r in document]
    if isinstance(document, dict):
        if {"columns", "data"} <= set(document) and isinstance(document["data"], list):
            return [dict(zip(document["columns"], row, strict=False)) for row in document["data"]]
        values = list(document.values())
        if values and all(isinstance(v, dict) for v in values):
            # pandas' to_json default (orient='columns'): {column: {row: value}}.
            rows = sorted({k for v in values for k in v}, key=_row_key)
            return [{c: document[c][r] for c in document if r in document[c]} for r in rows]
        if values and all(isinstance(v, list) for v in values):
            length = max(len(v) for v in values)
            return [{c: v[i] for c, v in document.items() if i < len(v)} for i in range(length)]
    raise RLCurvesError(
        f"{path}: a JSON {type(document).__name__} that is neither a list of records, a table of "
        "columns, nor a TRL trainer_state.json (no 'log_history'). Export the run's history as "
        "records (run.history().to_json(orient='records')) or pass a CSV.",
        file=str(path),
    )


def _row_key(key: str) -> tuple:
    return (0, int(key)) if str(key).lstrip("-").isdigit() else (1, str(key))


def _trl_state(document: dict, path: Path) -> RawLog:
    """TRL / transformers ``trainer_state.json``: its ``log_history`` holds one entry per log call.

    The final entry with ``train_runtime`` is the end-of-training summary, not a step's metrics:
    it is set aside (counted) and kept in ``meta``.
    """
    history = document["log_history"]
    if not isinstance(history, list) or not history:
        raise _empty_error(path, "trainer_state.json has an empty log_history")
    summaries = [r for r in history if isinstance(r, dict) and "train_runtime" in r]
    records = [r for r in history if isinstance(r, dict) and "train_runtime" not in r]
    cleaning = []
    if summaries:
        cleaning.append(
            {
                "step": "drop_summary_record",
                "rows": len(summaries),
                "detail": "TRL's end-of-training summary (train_runtime, total_flos) is not a "
                "step's metrics; kept in attrs['meta']['trl_summary']",
            }
        )
    frame, nan_cells = frame_from_records(records)
    if frame.empty:
        raise _empty_error(path, "log_history has only the end-of-training summary")
    meta = {
        k: v for k, v in document.items() if k != "log_history" and not isinstance(v, (dict, list))
    }
    if summaries:
        meta["trl_summary"] = summaries[-1]
    return RawLog(
        frame,
        "trl",
        "detected: JSON object with 'log_history' (TRL trainer_state.json)",
        str(path),
        _trl_run_name(path),
        nan_cells=nan_cells,
        reward_candidates=(("eval_reward",), ("reward",)),
        step_candidates=("step",),
        cleaning=cleaning,
        meta=meta,
    )


def _trl_run_name(path: Path) -> str:
    """TRL writes OUTPUT/checkpoint-N/trainer_state.json: the run is OUTPUT."""
    if path.parent.name.startswith("checkpoint-"):
        return path.resolve().parent.parent.name
    return run_name_for(path)


# --- Run folders -------------------------------------------------------------------------------


def trl_state_file(folder: Path) -> Path | None:
    """The trainer_state.json of a TRL output folder: its own, else the latest checkpoint's."""
    own = folder / "trainer_state.json"
    if own.is_file():
        return own
    checkpoints = []
    for state in folder.glob("checkpoint-*/trainer_state.json"):
        suffix = state.parent.name.split("-", 1)[1]
        if suffix.isdigit():
            checkpoints.append((int(suffix), state))
    return max(checkpoints)[1] if checkpoints else None


def pipelinerl_stream_files(folder: Path) -> list[Path]:
    """PipelineRL's file streams: EXP/streams/<topic>/<instance>/<partition>/<shard>.jsonl."""
    files = []
    for topic in ("stats", "stats_test"):
        files.extend(sorted((folder / "streams" / topic).glob("*/*/*.jsonl")))
    return files


def load_pipelinerl_folder(folder: Path) -> RawLog:
    """Train stats and test stats of a PipelineRL experiment, one table in write order per stream.

    Test records carry no ``time_since_start``; the compute axis then takes it from the train
    record of the same ``trainer_model_version`` (reported by the cleaning step that joins).
    """
    files = pipelinerl_stream_files(folder)
    parts, nan_parts, cleaning = [], [], []
    for file in files:
        records, skipped = read_json_lines(file)
        cleaning.extend(skipped)
        frame, nan_cells = frame_from_records(records)
        frame.insert(0, "stream", file.relative_to(folder / "streams").parts[0])
        parts.append(frame)
        nan_parts.append(nan_cells)
    frame = pd.concat(parts, ignore_index=True)
    nan_cells = _concat_nan_cells(parts, nan_parts)
    return RawLog(
        frame,
        "pipelinerl",
        "detected: streams/stats*/ JSONL files (PipelineRL stats streams)",
        str(folder),
        folder.resolve().name,
        nan_cells=nan_cells,
        reward_candidates=PIPELINERL_REWARD_RANKS,
        step_candidates=("trainer_model_version",),
        seconds_candidates=("time_since_start",),
        cleaning=cleaning,
        notes=[f"streams read: {[str(f.relative_to(folder)) for f in files]}"],
    )


def _concat_nan_cells(parts: list[pd.DataFrame], nan_parts: list[dict]) -> dict[str, np.ndarray]:
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


def load_recipe_folder(folder: Path) -> RawLog:
    """The recipe trainer's run folder: ``log.jsonl`` plus ``config.yaml`` (kept in meta)."""
    raw = load_jsonl(folder / "log.jsonl", format_hint="recipe")
    raw.format_how = "detected: folder with log.jsonl (rlcurves recipe run)"
    raw.source = str(folder)
    raw.run = folder.resolve().name
    config = folder / "config.yaml"
    if config.is_file():
        try:
            raw.meta["config"] = yaml.safe_load(config.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            # The curve does not depend on it: keep reading, say why it is missing.
            raw.notes.append(f"config.yaml not read: {exc}")
    return raw


def load_recipe_file(path: Path, format_hint: str | None = None) -> RawLog:
    if path.name == "log.jsonl" and path.parent.is_dir():
        raw = load_recipe_folder(path.parent)
        raw.source = str(path)
        return raw
    return load_jsonl(path, format_hint="recipe")


LOADERS: dict[str, Callable[..., RawLog]] = {
    "csv": load_table_text,
    "tsv": load_table_text,
    "wandb-csv": load_table_text,
    "parquet": load_parquet,
    "jsonl": load_jsonl,
    "verl": load_jsonl,
    "pipelinerl": load_jsonl,
    "recipe": load_recipe_file,
    "json": load_json,
    "trl": load_json,
}
