"""The CPU demo's task: n-digit addition with leading zeros, an exact verifier, a seeded split.

A prompt reads ``"347+086="`` and the answer is the plain decimal sum ``"433"`` (no leading
zeros), followed by the end-of-sequence token. Reward mapping: 1 for an exact answer followed by
EOS, 0 otherwise (a completion that hits the length limit without EOS scores 0 and never reaches
:meth:`AdditionTask.reward`). The paper uses +-1, which is ``2 r - 1``; with ``adv_norm`` = batch
or prompt the advantages are identical under either mapping, with ``adv_norm`` = none the
paper's scale is twice ours. The validation pass rate is the mean 0/1 reward, a number in [0, 1].

The training pool and the validation set are disjoint slices of one seeded permutation of all
``10**digits x 10**digits`` problems, so they are iid draws from the same distribution (the
bundled runs depend on this split: it is unchanged). Validation is also reported per carry class
(``carries_0`` ... ``carries_<digits>``, as :mod:`recipe.tasks.addition_lsb` does), which shows
where this format's barrier lies: the sums that carry out of the top column.

This module is the addition task's one home: the problems, the verifier and the split here are
also what :mod:`recipe.tasks.addition_lsb` and the built model's warm-up (:mod:`recipe.model`)
use. ``recipe.task``, their former module, re-exports them with a DeprecationWarning.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recipe.tasks import Prompt, Task


@dataclass(frozen=True)
class Problem:
    """One addition problem: ``a + b``, shown with ``digits`` digits each."""

    a: int
    b: int
    digits: int

    @property
    def prompt(self) -> str:
        return f"{self.a:0{self.digits}d}+{self.b:0{self.digits}d}="

    @property
    def answer(self) -> str:
        return str(self.a + self.b)


def has_carry(a: int, b: int, digits: int) -> bool:
    """True when adding ``a`` and ``b`` column by column produces any carry."""
    for _ in range(digits):
        if a % 10 + b % 10 >= 10:
            return True
        a, b = a // 10, b // 10
    return False


def reward(completion_text: str, answer: str, finished: bool) -> float:
    """0/1 verifier: 1.0 when the completion is exactly the answer and ended with EOS.

    Parameters
    ----------
    completion_text : str
        Decoded completion without the EOS token.
    answer : str
        Expected answer, e.g. ``"433"``.
    finished : bool
        Whether the completion emitted EOS (False when it was truncated).
    """
    return 1.0 if finished and completion_text == answer else 0.0


def split_problems(
    digits: int, n_train: int, n_val: int, seed: int
) -> tuple[list[Problem], list[Problem]]:
    """A seeded, disjoint, iid split of all problems into a training pool and a validation set.

    Parameters
    ----------
    digits : int
        Digits per operand.
    n_train, n_val : int
        Sizes of the training pool and the held-out validation set.
    seed : int
        Seed of the permutation; the same seed always gives the same split.
    """
    space = 10 ** (2 * digits)
    if n_train + n_val > space:
        raise ValueError(
            f"n_train + n_val = {n_train + n_val} exceeds the {space} distinct {digits}-digit "
            "problems; lower train_prompts or val_prompts"
        )
    gen = torch.Generator().manual_seed(seed)
    # randperm over 10**6 items is cheap; larger spaces draw with replacement-free rejection.
    if space <= 10**7:
        codes = torch.randperm(space, generator=gen)[: n_train + n_val].tolist()
    else:
        seen: dict[int, None] = {}
        while len(seen) < n_train + n_val:
            for c in torch.randint(0, space, (n_train + n_val,), generator=gen).tolist():
                seen.setdefault(c, None)
        codes = list(seen)[: n_train + n_val]
    base = 10**digits
    problems = [Problem(c // base, c % base, digits) for c in codes]
    return problems[n_val:], problems[:n_val]


def easy_problems(digits: int, n: int, seed: int) -> list[Problem]:
    """Carry-free problems: the easier sub-distribution used for the supervised warm-up.

    They teach the answer format and column-wise addition but not carrying (about 17% of
    3-digit problems are carry-free); the warm-up mixes in a share of full problems so that
    carries are uncertain rather than never seen (see :mod:`recipe.model`).
    """
    gen = torch.Generator().manual_seed(seed)
    out: list[Problem] = []
    while len(out) < n:
        # digit pairs drawn uniformly among the 55 carry-free pairs per column
        pairs = [(x, y) for x in range(10) for y in range(10) if x + y < 10]
        idx = torch.randint(0, len(pairs), (n, digits), generator=gen).tolist()
        for row in idx:
            a = sum(pairs[k][0] * 10**i for i, k in enumerate(row))
            b = sum(pairs[k][1] * 10**i for i, k in enumerate(row))
            out.append(Problem(a, b, digits))
    return out[:n]


def parse_prompt(text: str) -> tuple[int, int, int]:
    """``"347+086="`` -> (347, 86, 3): the operands and the digits per operand."""
    left, sep, rest = text.partition("+")
    right = rest.removesuffix("=")
    if not sep or not rest.endswith("=") or not (left.isdigit() and right.isdigit()):
        raise ValueError(f"not an addition prompt of the form '347+086=': {text!r}")
    return int(left), int(right), len(left)


def carries(a: int, b: int, digits: int) -> int:
    """How many of the ``digits`` columns carry into the next one (a carry taken in counts:
    ``950 + 050`` carries in the tens and in the hundreds, so 2)."""
    count, carry = 0, 0
    for _ in range(digits):
        carry = int(a % 10 + b % 10 + carry >= 10)
        count += carry
        a, b = a // 10, b // 10
    return count


class AdditionTask(Task):
    """``digits``-digit addition; seeded disjoint train/validation split of all problems."""

    def __init__(self, digits: int, n_train: int, n_val: int, seed: int) -> None:
        self.problems = split_problems(digits, n_train, n_val, seed)

    def train_prompts(self) -> list[Prompt]:
        return [Prompt(p.prompt, p.answer) for p in self.problems[0]]

    def val_prompts(self) -> list[Prompt]:
        return [Prompt(p.prompt, p.answer) for p in self.problems[1]]

    def reward(self, prompt: Prompt, completion: str) -> float:
        return reward(completion, prompt.answer, finished=True)

    def prompt_class(self, prompt: Prompt) -> str:
        """``carries_<k>``: how many columns of the problem carry."""
        return f"carries_{carries(*parse_prompt(prompt.text))}"
