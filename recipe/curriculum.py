"""The training prompt pool: epoch-wise shuffled sampling and no-positive-resampling.

After each step the pool records every prompt's pass rate at that appearance (the mean reward of
its completions); a prompt whose pass rate reaches ``positive_threshold`` (ScaleRL: 0.9) is retired
and never appears in a later epoch. ``positive_threshold=None`` switches this off. The paper calls
it the "historical" pass rate without saying over which window; we use the latest appearance.
Each epoch visits the non-retired prompts in an order fixed by (seed, epoch), so the pool's whole
state is a few integers and two tensors that a checkpoint saves.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from recipe.config import ConfigError


class PromptPool:
    """Indices 0..size-1 of the training prompts, sampled without replacement within an epoch.

    Parameters
    ----------
    size : int
        Number of training prompts.
    seed : int
        Seed of the per-epoch shuffles.
    positive_threshold : float or None
        Retire prompts whose latest pass rate is >= this; None keeps every prompt.
    warn_below : int, optional
        Warn once when retirement leaves fewer prompts than this: training then cycles through
        the hardest few (in the CPU demo, validation fell from 0.93 to 0.31 within 40 steps of
        about ten batches' worth being left, before the pool ran out). The trainer passes the
        smaller of ten batches and a tenth of the pool, so a pool small from the start does
        not warn.
    """

    def __init__(
        self,
        size: int,
        seed: int,
        positive_threshold: float | None = 0.9,
        warn_below: int | None = None,
    ) -> None:
        self.size = size
        self.seed = seed
        self.positive_threshold = positive_threshold
        self.warn_below = warn_below
        self._warned = False
        self.retired = torch.zeros(size, dtype=torch.bool)
        self.last_pass_rate = torch.full((size,), float("nan"))
        self.epoch = 0
        self.order: list[int] = self._shuffle()
        self.cursor = 0

    def _shuffle(self) -> list[int]:
        active = (~self.retired).nonzero().squeeze(1)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return active[torch.randperm(len(active), generator=gen)].tolist()

    @property
    def pool_size(self) -> int:
        """Prompts still eligible (not retired)."""
        return int((~self.retired).sum())

    def next_batch(self, n: int) -> list[int]:
        """The next ``n`` prompt indices; starts a new epoch (reshuffled) when one runs out."""
        if self.pool_size == 0:
            raise self._exhausted()
        batch: list[int] = []
        while len(batch) < n:
            if self.cursor >= len(self.order):
                self.epoch += 1
                self.order, self.cursor = self._shuffle(), 0
                if not self.order:
                    raise self._exhausted()
            idx = self.order[self.cursor]
            self.cursor += 1
            if not self.retired[idx]:
                batch.append(idx)
        return batch

    def _exhausted(self) -> ConfigError:
        """The run cannot go on: a config error, since only a new run's config can change it."""
        return ConfigError(
            f"every one of the {self.size} training prompts is retired (no-positive resampling: "
            f"pass rate >= positive_threshold = {self.positive_threshold}), so there is nothing "
            "left to train on. The log and the last checkpoint are kept; neither key may change "
            "on --resume, so train further in a new --out with a higher positive_threshold, "
            "positive_threshold=null (off) or more train_prompts"
        )

    def update(self, indices: Sequence[int], pass_rates: Sequence[float]) -> None:
        """Record the pass rates of a step's prompts and retire the ones at the threshold."""
        for i, p in zip(indices, pass_rates, strict=True):
            self.last_pass_rate[i] = p
            if self.positive_threshold is not None and p >= self.positive_threshold:
                self.retired[i] = True
        left = self.pool_size
        if self.warn_below is not None and left < self.warn_below and not self._warned:
            self._warned = True
            warnings.warn(
                f"only {left} of {self.size} training prompts are left: no-positive resampling "
                f"retired the rest (pass rate >= {self.positive_threshold}), so training now "
                "cycles through the hardest few, which can collapse validation; raise "
                "train_prompts or positive_threshold (null turns retirement off), or stop the run",
                UserWarning,
                stacklevel=2,
            )

    def state_dict(self) -> dict:
        return {
            "retired": self.retired.clone(),
            "last_pass_rate": self.last_pass_rate.clone(),
            "epoch": self.epoch,
            "order": torch.tensor(self.order, dtype=torch.long),
            "cursor": self.cursor,
        }

    def load_state_dict(self, state: dict) -> None:
        self.retired = state["retired"].clone()
        self.last_pass_rate = state["last_pass_rate"].clone()
        self.epoch = int(state["epoch"])
        self.order = state["order"].tolist()
        self.cursor = int(state["cursor"])
