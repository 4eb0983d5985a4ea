"""The CPU demo's task as a :class:`~recipe.tasks.Task`: 3-digit addition, exact 0/1 reward.

The prompts, the split and the verifier are those of :mod:`recipe.task` (unchanged, so the
bundled runs stay reproducible): reward 1 when the completion is exactly the sum and ended with
EOS (a completion without EOS never reaches :meth:`reward`). Validation is also reported per
carry class (``carries_0`` ... ``carries_<digits>``, as :mod:`recipe.tasks.addition_lsb` does),
which shows where this format's barrier lies: the sums that carry out of the top column.
"""

from __future__ import annotations

from recipe.task import reward, split_problems
from recipe.tasks import Prompt, Task
from recipe.tasks.addition_lsb import carries, parse_prompt


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
