"""JSON lines logs: flat records, verl's file logger, PipelineRL's stats, the recipe's log.jsonl.

Each loader keeps the records as the tool wrote them (no column is chosen, nothing is cleaned);
the only thing set aside is a truncated last line of a crashed writer, counted in
``RawLog.cleaning``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import RLCurvesError
from ._paths import empty_error, run_name_for
from ._raw import RawLog, flatten, frame_from_records
from .columns import VALIDATION_PATTERNS


def read_json_lines(path: Path) -> tuple[list[dict], list[dict]]:
    """Records of a JSONL file, and cleaning entries (a truncated last line is skipped, counted).

    A malformed line elsewhere is an error: it means the file is not JSON lines.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise empty_error(path, "the file is empty")
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
        records = [{"step": r["step"], **flatten(r["data"])} for r in records]
        notes.append("verl file-logger records: metrics taken from each record's 'data' object")
        kwargs["reward_candidates"] = _verl_reward_ranks(records)
        kwargs["duration_candidates"] = ("timing_s/step", "perf/time_per_step")
    else:
        if any(isinstance(v, dict) for r in records for v in r.values()):
            records = [flatten(r) for r in records]
            notes.append("nested objects flattened to 'outer/inner' column names")
    if fmt == "recipe":
        # running totals (tokens_total, samples_total) are 0 before the first step; without
        # them the step-0 evaluation, the run's R0 anchor, is dropped on a token axis
        totals = sorted({k for r in records for k in r if k.endswith("_total")})
        filled = 0
        for r in records:
            if r.get("step") == 0:
                for k in totals:
                    filled += k not in r
                    r.setdefault(k, 0)
        if filled:
            notes.append(f"step-0 records: running totals {totals} set to 0 (before any step)")
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
        raise empty_error(path, "no records could be read")
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
    if {"train", "eval"} & kinds:
        return "recipe", "detected: records carry kind='train'/'eval' (rlcurves recipe log.jsonl)"
    keys = set().union(*(r.keys() for r in head)) if head else set()
    if "trainer_model_version" in keys or "streams/stats" in path.as_posix():
        return "pipelinerl", "detected: 'trainer_model_version' records (PipelineRL stats stream)"
    if "_step" in keys and ({"_runtime", "_timestamp"} & keys):
        return "wandb", "detected: '_step' and '_runtime'/'_timestamp' (W&B history)"
    return "jsonl", "detected: flat JSON lines"
