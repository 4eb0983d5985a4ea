"""Where runs are: which files a folder of runs holds, and what a file or folder's run is named."""

from __future__ import annotations

from pathlib import Path

from ..errors import RLCurvesError

# The formats read_log reads ("auto": detected); here, not beside the loaders, so that the command
# line's parser lists them without loading pandas.
FORMATS = (
    "auto",
    "csv",
    "tsv",
    "parquet",
    "jsonl",
    "json",
    "verl",
    "wandb",
    "wandb-csv",
    "tensorboard",
    "trl",
    "pipelinerl",
    "recipe",
)
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


def empty_error(path: Path, what: str) -> RLCurvesError:
    return RLCurvesError(
        f"{path}: {what}. Point read_log at a log with at least one record, or check that the run "
        "wrote its metrics to this file.",
        file=str(path),
        columns=[],
    )
