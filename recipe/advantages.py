"""Advantages: group baseline, normalization, zero-variance filtering.

Rewards and group ids are 1-D tensors over the completions of a batch; ``group_ids`` says which
prompt each completion answers. Standard deviations are population ones (divide by n).
"""

from __future__ import annotations

import torch

ADV_NORMS = ("batch", "prompt", "none")
STD_EPS = 1e-6


def _group_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    _, index = torch.unique(group_ids, return_inverse=True)
    return index, int(index.max()) + 1 if index.numel() else 0


def group_mean(values: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Each element's group mean, broadcast back to the elements."""
    index, n = _group_index(group_ids)
    values = values.double()
    sums = torch.zeros(n, dtype=values.dtype).index_add(0, index, values)
    counts = torch.zeros(n, dtype=values.dtype).index_add(0, index, torch.ones_like(values))
    return (sums / counts)[index]


def advantages(rewards: torch.Tensor, group_ids: torch.Tensor, norm: str = "batch") -> torch.Tensor:
    """A_i = r_i - mean(r over i's group), then normalized.

    Parameters
    ----------
    rewards, group_ids : torch.Tensor
        1-D, one entry per completion.
    norm : {"batch", "prompt", "none"}
        ``batch`` (ScaleRL): divide by the std of all advantages in the batch. ``prompt`` (GRPO):
        divide by the std of the group's rewards. ``none`` (Dr. GRPO): centered only. A zero std
        leaves the (all-zero) centered values unchanged.

    Returns
    -------
    torch.Tensor
        float32 advantages, same shape as ``rewards``.
    """
    r = rewards.double()
    centered = r - group_mean(r, group_ids)
    if norm == "none":
        out = centered
    elif norm == "batch":
        out = centered / (centered.pow(2).mean().sqrt() + STD_EPS)
    elif norm == "prompt":
        group_std = group_mean(centered.pow(2), group_ids).sqrt()
        out = centered / (group_std + STD_EPS)
    else:
        raise ValueError(f"adv_norm must be one of {ADV_NORMS}, got {norm!r}")
    return out.float()


def zero_variance_keep(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Boolean mask: True for completions whose prompt's rewards are not all equal.

    Prompts whose completions all got the same reward carry no signal under a group baseline;
    ScaleRL drops them from the loss (it does not resample to refill the batch).
    """
    r = rewards.double()
    index, n = _group_index(group_ids)
    lo = torch.full((n,), float("inf"), dtype=r.dtype).scatter_reduce(0, index, r, "amin")
    hi = torch.full((n,), float("-inf"), dtype=r.dtype).scatter_reduce(0, index, r, "amax")
    return (hi > lo)[index]
