"""The addition task: format, verifier, split."""

import pytest

from recipe.tasks.addition import Problem, easy_problems, has_carry, reward, split_problems


def test_prompt_and_answer_format():
    p = Problem(347, 86, 3)
    assert p.prompt == "347+086="
    assert p.answer == "433"
    assert Problem(999, 999, 3).answer == "1998"


def test_reward_exact_match_with_eos_only():
    assert reward("433", "433", finished=True) == 1.0
    assert reward("433", "433", finished=False) == 0.0
    assert reward("0433", "433", finished=True) == 0.0
    assert reward("43", "433", finished=True) == 0.0


def test_has_carry():
    assert not has_carry(123, 456, 3)
    assert has_carry(5, 5, 3)
    assert has_carry(500, 500, 3)


def test_split_is_seeded_disjoint_and_sized():
    train, val = split_problems(3, 300, 100, seed=4)
    again, val2 = split_problems(3, 300, 100, seed=4)
    assert (train, val) == (again, val2)
    assert len(train) == 300 and len(val) == 100
    keys = {(p.a, p.b) for p in train}
    assert len(keys) == 300 and not keys & {(p.a, p.b) for p in val}
    assert split_problems(3, 300, 100, seed=5)[1] != val


def test_easy_problems_never_carry():
    probs = easy_problems(3, 500, seed=0)
    assert not any(has_carry(p.a, p.b, 3) for p in probs)
    assert len({(p.a, p.b) for p in probs}) > 400


def test_the_old_module_still_imports_with_a_deprecation_warning():
    import importlib
    import sys

    import recipe.tasks.addition as home

    sys.modules.pop("recipe.task", None)
    with pytest.warns(DeprecationWarning, match=r"recipe\.tasks\.addition"):
        old = importlib.import_module("recipe.task")
    assert (old.split_problems, old.Problem, old.reward) == (
        home.split_problems,
        home.Problem,
        home.reward,
    )
