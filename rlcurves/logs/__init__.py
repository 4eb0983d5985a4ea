"""Readers for real training logs: any tool's log in, a clean compute/reward curve out.

``read_log(path)`` reads CSV/TSV, Parquet, JSON lines (flat, verl's file logger, PipelineRL's stats
streams, the recipe's ``log.jsonl``), JSON (TRL's ``trainer_state.json``, W&B history dumps), W&B
panel CSV exports and TensorBoard event files, derives the compute axis in GPU-hours (or keeps
FLOPs), cleans resumed runs and sparse evaluations, and says in ``attrs`` what it chose and did.
"""

from .locate import FORMATS
from .reader import read_log, read_logs
from .report import describe_log
from .wandb_live import read_wandb_run

__all__ = ["FORMATS", "describe_log", "read_log", "read_logs", "read_wandb_run"]
