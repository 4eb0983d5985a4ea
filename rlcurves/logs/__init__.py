"""Readers for real training logs: any tool's log in, a clean compute/reward curve out.

``read_log(path)`` reads CSV/TSV, Parquet, JSON lines (flat, verl's file logger, PipelineRL's stats
streams, the recipe's ``log.jsonl``), JSON (TRL's ``trainer_state.json``, W&B history dumps), W&B
panel CSV exports and TensorBoard event files, derives the compute axis in GPU-hours (or keeps
FLOPs), cleans resumed runs and sparse evaluations, and says in ``attrs`` what it chose and did.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._paths import FORMATS

# the readers load pandas: imported on first use (PEP 562), so the command line's parser does not
_LAZY = {
    "read_log": ".reader",
    "read_logs": ".reader",
    "describe_log": ".report",
    "read_wandb_run": ".wandb_live",
}

if TYPE_CHECKING:
    from .reader import read_log, read_logs
    from .report import describe_log
    from .wandb_live import read_wandb_run


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rlcurves.logs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["FORMATS", "describe_log", "read_log", "read_logs", "read_wandb_run"]
