"""The prompt pool: epochs, no-positive-resampling, checkpointable state."""

import warnings

import pytest

from recipe.curriculum import PromptPool


def test_each_epoch_visits_every_prompt_once():
    pool = PromptPool(10, seed=0, positive_threshold=None)
    draws = pool.next_batch(4) + pool.next_batch(4) + pool.next_batch(4)
    assert sorted(draws[:10]) == list(range(10))
    assert pool.epoch == 1


def test_prompts_at_threshold_leave_for_good():
    pool = PromptPool(6, seed=1, positive_threshold=0.9)
    first = pool.next_batch(6)
    pool.update(first[:2], [0.9, 1.0])  # reaches the threshold: retired
    pool.update(first[2:], [0.875, 0.5, 0.0, 0.2])  # below: kept
    assert pool.pool_size == 4
    later = pool.next_batch(4) + pool.next_batch(4) + pool.next_batch(4)
    assert set(later) == set(first[2:])
    # a retired prompt stays retired even if a later update were lower
    pool.update(first[:1], [0.0])
    assert pool.pool_size == 4


def test_threshold_off_keeps_everything():
    pool = PromptPool(4, seed=0, positive_threshold=None)
    pool.update([0, 1, 2, 3], [1.0] * 4)
    assert pool.pool_size == 4
    assert sorted(pool.next_batch(4)) == [0, 1, 2, 3]


def test_state_round_trip_continues_identically():
    a = PromptPool(50, seed=3, positive_threshold=0.9)
    a.next_batch(7)
    a.update([1, 2], [1.0, 0.3])
    b = PromptPool(50, seed=3, positive_threshold=0.9)
    b.load_state_dict(a.state_dict())
    assert [a.next_batch(9) for _ in range(8)] == [b.next_batch(9) for _ in range(8)]


def test_different_epochs_shuffle_differently():
    pool = PromptPool(30, seed=0, positive_threshold=None)
    assert pool.next_batch(30) != pool.next_batch(30)


def test_regression_a_pool_running_out_warns_once_before_it_is_empty():
    """The CPU demo's seed 0 retired nearly all 20,000 prompts and collapsed on the last few
    before the pool ran out: the pool warns when fewer than ``warn_below`` are left."""
    pool = PromptPool(10, seed=0, positive_threshold=0.9, warn_below=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pool.update([0, 1, 2, 3, 4, 5], [1.0] * 6)  # 4 left: not below 4
    with pytest.warns(UserWarning, match=r"only 3 of 10 training prompts are left.*train_prompts"):
        pool.update([6], [0.95])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        pool.update([7], [1.0])
    assert pool.pool_size == 2


def test_regression_a_pool_with_every_prompt_retired_says_what_to_change():
    """Every prompt retired raised RuntimeError("...; lower positive_threshold"): the wrong way
    (a lower threshold retires more), reported by the CLI as a generator failure to fix with
    --resume, where positive_threshold may not change. It is a ConfigError saying what to do."""
    from recipe.config import ConfigError

    pool = PromptPool(4, seed=0, positive_threshold=0.5)
    pool.update(pool.next_batch(4), [1.0, 0.5, 0.75, 1.0])
    with pytest.raises(ConfigError) as err:
        pool.next_batch(2)
    text = str(err.value)
    assert "every one of the 4 training prompts is retired" in text
    assert "positive_threshold = 0.5" in text
    for fix in ("new --out", "higher positive_threshold", "=null", "more train_prompts"):
        assert fix in text
