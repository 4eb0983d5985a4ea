"""Shared pieces of the trainer tests: a tiny run's config and its log."""

import json
from pathlib import Path

from recipe import config as C


def read_log(path):
    """The records of a run's log.jsonl."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def tiny_cfg(init, **extra):
    """A run of a few steps on a tiny warmed-up model (``init``): seconds on one CPU thread."""
    values = {
        "init": str(init), "train_prompts": 300, "val_prompts": 16, "val_samples_per_prompt": 2,
        "steps": 8, "prompts_per_step": 4, "generations": 4, "eval_every": 4,
        "checkpoint_every": 2, "threads": 1, "zero_variance_filter": False,
    }  # fmt: skip
    values.update(extra)
    return C.from_dict(values)
