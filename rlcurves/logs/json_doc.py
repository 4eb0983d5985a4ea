"""JSON documents: TRL's trainer_state.json and W&B history dumps (records or columns)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import RLCurvesError
from ._paths import empty_error, run_name_for
from ._raw import RawLog, flatten, frame_from_records
from .jsonl import load_jsonl


def load_json(path: Path, format_hint: str | None = None) -> RawLog:
    """A JSON document: TRL's trainer_state.json, or a W&B history (list of records/columns)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise empty_error(path, "the file is empty")
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
        raise empty_error(path, "the JSON document holds no records")
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
        return [flatten(r) for r in document]
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
        raise empty_error(path, "trainer_state.json has an empty log_history")
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
        raise empty_error(path, "log_history has only the end-of-training summary")
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
