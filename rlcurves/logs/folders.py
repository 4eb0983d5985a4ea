"""Run folders: a TRL output folder, a PipelineRL experiment, the recipe's run folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from ._raw import RawLog, concat_nan_cells, frame_from_records
from .jsonl import PIPELINERL_REWARD_RANKS, load_jsonl, read_json_lines


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
    nan_cells = concat_nan_cells(parts, nan_parts)
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
