"""Which loader reads a path: format names, run folders, and the runs under a folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import RLCurvesError
from ._paths import FORMATS, SIDECAR_FILES, TABLE_SUFFIXES
from ._raw import RawLog
from .folders import (
    load_pipelinerl_folder,
    load_recipe_file,
    load_recipe_folder,
    pipelinerl_stream_files,
    trl_state_file,
)
from .json_doc import load_json
from .jsonl import load_jsonl
from .tables import load_parquet, load_table_text
from .tensorboard import event_files, is_event_file, load_tensorboard

# Format name -> loader(path, format_hint) for a file given with an explicit format.
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


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise RLCurvesError(
            f"unknown format {format!r}; pass format= one of {list(FORMATS)}.",
            format=format,
            formats=list(FORMATS),
        )


def run_folder_kind(folder: Path) -> str | None:
    """The format of a folder that is one run by itself, or None."""
    if (folder / "log.jsonl").is_file():
        return "recipe"
    if trl_state_file(folder) is not None:
        return "trl"
    if pipelinerl_stream_files(folder):
        return "pipelinerl"
    if event_files(folder):
        return "tensorboard"
    return None


def discover(folder: Path) -> list[Path]:
    """Runs under a folder: run folders (not descended into) and log files, depth first."""
    found: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            found.extend([child] if run_folder_kind(child) else discover(child))
        elif child.suffix.lower() in TABLE_SUFFIXES and child.name not in SIDECAR_FILES:
            found.append(child)
    return found


def load(path: Path, format: str) -> RawLog:
    """One run's records from a file or a run folder."""
    if path.is_dir():
        kind = run_folder_kind(path) if format == "auto" else format
        if kind == "recipe":
            raw = load_recipe_folder(path)
            return raw
        if kind == "trl":
            state = trl_state_file(path)
            if state is None:
                raise RLCurvesError(
                    f"{path}: no trainer_state.json here or in checkpoint-*/.", file=str(path)
                )
            raw = load_json(state)
            raw.run = path.resolve().name
            return raw
        if kind == "pipelinerl":
            if not pipelinerl_stream_files(path):
                raise RLCurvesError(
                    f"{path}: no streams/stats*/*/*/*.jsonl files here.", file=str(path)
                )
            return load_pipelinerl_folder(path)
        if kind == "tensorboard":
            return load_tensorboard(path, None if format == "auto" else format)
        raise RLCurvesError(
            f"{path}: a folder that is not one run by itself (no log.jsonl, trainer_state.json, "
            "streams/stats or event files), and format={format!r} cannot read a folder.",
            file=str(path),
        )
    if format == "tensorboard" or (format == "auto" and is_event_file(path)):
        return load_tensorboard(path, None if format == "auto" else format)
    if format != "auto" and format not in ("wandb",):
        return LOADERS[format](path, format)
    hint = None if format == "auto" else format
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return load_parquet(path, hint)
    if suffix in (".csv", ".tsv", ".txt"):
        return load_table_text(path, hint)
    if suffix in (".jsonl", ".ndjson"):
        if path.name == "log.jsonl" and hint is None:
            raw = load_jsonl(path)
            if raw.format == "recipe":
                return load_recipe_file(path)
            return raw
        return load_jsonl(path, hint)
    if suffix == ".json":
        return load_json(path, hint)
    raise RLCurvesError(
        f"{path}: cannot tell the log format from the file name; pass format= one of "
        f"{list(FORMATS[1:])}.",
        file=str(path),
        formats=list(FORMATS[1:]),
    )
