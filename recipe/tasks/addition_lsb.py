"""Addition with the answer least-significant digit first, fixed width: a format small models learn.

The prompt is the old task's (``"347+086="``, :mod:`recipe.tasks.addition`); the answer is the sum
padded to ``digits + 1`` digits and written backwards: 347 + 86 = 433 -> ``"0433"`` -> ``"3340"``,
and 999 + 999 = 1998 -> ``"8991"``. Why: a causal model writing the most significant digit first
must know every carry before its first token (the old task: the warm-up model solved 0% of the
4-digit sums, and zero-variance filtering dropped them from RL's first step); written backwards,
each digit depends only on its own column and the carry out of the digit just written, and every
answer has the same length, so a 4-digit sum is no longer a different output shape.

Reward: 1 for exactly the answer followed by EOS, 0 otherwise. The train/validation split is the
old task's (:func:`recipe.tasks.addition.split_problems`, same seed, same problems), so the two
tasks' validation sets are the same problems and their pass rates are comparable problem by problem.

Validation is also reported per class (:meth:`AdditionLSBTask.prompt_class`): the number of
columns that carry, ``carries_0`` ... ``carries_<digits>``, since those are what the model must
learn one by one. :meth:`AdditionLSBTask.warmup_examples` supplies the supervised warm-up in this
format, drawn from the training pool with a chosen share per carry class.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from recipe.tasks import Prompt, Task
from recipe.tasks.addition import carries, parse_prompt, split_problems


def lsb_answer(a: int, b: int, digits: int) -> str:
    """``a + b`` zero-padded to ``digits + 1`` digits, least-significant digit first."""
    return f"{a + b:0{digits + 1}d}"[::-1]


def mix_weights(mix: float, digits: int) -> list[float]:
    """Warm-up class shares from the config's ``warmup_mix``: a share ``mix`` of problems that
    carry (equal shares of 1 .. ``digits`` carries), the rest carry-free, as the old task's
    warm-up mixes ``mix`` full problems into carry-free ones. Why carry-free first: with equal
    shares of all four classes, seed 1 stayed at 0.09 for 1000 warm-up steps (the tens digit at
    chance, 0.11); with 4:1:1:1 (``mix`` = 3/7) it left that plateau near step 550."""
    return [1.0 - mix] + [mix / digits] * digits


class AdditionLSBTask(Task):
    """``digits``-digit addition, answers fixed-width and least-significant digit first.

    Parameters
    ----------
    digits : int
        Digits per operand.
    n_train, n_val : int
        Sizes of the training pool and the validation set (the old task's split).
    seed : int
        Seed of the split (:func:`recipe.tasks.addition.split_problems`).
    class_weights : sequence of float, optional
        Share of each carry class (0 .. ``digits`` carries) in the warm-up examples; default
        equal shares (:data:`WARMUP_CLASS_WEIGHTS` for 3 digits).
    """

    def __init__(
        self,
        digits: int,
        n_train: int,
        n_val: int,
        seed: int,
        class_weights: Sequence[float] | None = None,
    ) -> None:
        self.digits = digits
        train, val = split_problems(digits, n_train, n_val, seed)
        self.train = [Prompt(p.prompt, lsb_answer(p.a, p.b, digits)) for p in train]
        self.val = [Prompt(p.prompt, lsb_answer(p.a, p.b, digits)) for p in val]
        weights = [1.0] * (digits + 1) if class_weights is None else list(class_weights)
        if len(weights) != digits + 1 or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(
                f"class_weights needs {digits + 1} non-negative shares (0 .. {digits} carries) "
                f"with a positive sum, got {weights!r}"
            )
        self.class_weights = weights

    def train_prompts(self) -> list[Prompt]:
        return self.train

    def val_prompts(self) -> list[Prompt]:
        return self.val

    def reward(self, prompt: Prompt, completion: str) -> float:
        # completions that ended without EOS never get here (recipe.train.score)
        return 1.0 if completion == prompt.answer else 0.0

    def carry_class(self, prompt: Prompt) -> int:
        """The number of columns of ``prompt`` that carry (0 .. ``digits``)."""
        return carries(*parse_prompt(prompt.text))

    def prompt_class(self, prompt: Prompt) -> str:
        return f"carries_{self.carry_class(prompt)}"

    def warmup_examples(self, n: int, seed: int) -> list[Prompt]:
        """``n`` supervised examples drawn (with replacement) from the training pool, each
        carry class with its share of ``class_weights``; seeded, never a validation problem."""
        by_class: list[list[Prompt]] = [[] for _ in range(self.digits + 1)]
        for p in self.train:
            by_class[self.carry_class(p)].append(p)
        weights = torch.tensor(
            [w if by_class[k] else 0.0 for k, w in enumerate(self.class_weights)],
            dtype=torch.float64,
        )
        if weights.sum() <= 0:
            raise ValueError("the training pool holds no problem of any weighted carry class")
        gen = torch.Generator().manual_seed(seed)
        classes = torch.multinomial(weights, n, replacement=True, generator=gen).tolist()
        picks = torch.rand(n, generator=gen, dtype=torch.float64).tolist()
        return [by_class[k][int(u * len(by_class[k]))] for k, u in zip(classes, picks, strict=True)]
