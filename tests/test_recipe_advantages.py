"""Advantages and zero-variance filtering against hand-computed values."""

import math

import pytest
import torch

from recipe.advantages import advantages, zero_variance_keep

REWARDS = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
GROUPS = torch.tensor([3, 3, 3, 3, 9, 9, 9, 9])
CENTERED = [0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5]


def test_none_is_group_centered():
    assert advantages(REWARDS, GROUPS, "none").tolist() == pytest.approx(CENTERED)


def test_batch_normalization_uses_std_of_all_advantages():
    std = math.sqrt(sum(c * c for c in CENTERED) / 8)  # = sqrt(1.75 / 8)
    out = advantages(REWARDS, GROUPS, "batch")
    assert out.tolist() == pytest.approx([c / std for c in CENTERED], rel=1e-5)


def test_prompt_normalization_uses_group_std():
    s0 = math.sqrt(0.75 / 4)
    expected = [0.75 / s0, *[-0.25 / s0] * 3, 1, 1, -1, -1]
    assert advantages(REWARDS, GROUPS, "prompt").tolist() == pytest.approx(expected, rel=1e-5)


def test_reward_mapping_does_not_matter_with_normalization():
    pm1 = 2 * REWARDS - 1  # the paper's +-1 rewards
    for norm in ("batch", "prompt"):
        assert torch.allclose(advantages(pm1, GROUPS, norm), advantages(REWARDS, GROUPS, norm))
    assert torch.allclose(advantages(pm1, GROUPS, "none"), 2 * advantages(REWARDS, GROUPS, "none"))


def test_zero_variance_groups_give_zero_advantage_not_nan():
    out = advantages(torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([0, 0, 1, 1]), "prompt")
    assert out.tolist() == [0, 0, 0, 0]
    out = advantages(torch.tensor([1.0, 1.0]), torch.tensor([0, 0]), "batch")
    assert out.tolist() == [0, 0]


def test_zero_variance_keep():
    rewards = torch.tensor([1.0, 1, 0, 0, 0, 0, 1, 0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2, 2])
    assert zero_variance_keep(rewards, groups).tolist() == [False] * 4 + [True] * 4


def test_unknown_norm():
    with pytest.raises(ValueError, match="adv_norm"):
        advantages(REWARDS, GROUPS, "group")
