"""A user task for the trainer tests (``task: tests/data/digit_task.py:DigitTask``).

A random-initialised model gets a varied reward on it from the first step: 1 for a completion
that contains a digit, 0 otherwise, scored with or without EOS (``score_truncated``), so a few
RL steps carry signal and move the weights.
"""

from recipe.tasks import Prompt, Task


class DigitTask(Task):
    score_truncated = True

    def __init__(self, cfg):
        words = ["apple", "river", "stone", "cloud", "maple", "ocean", "tiger", "lemon"]
        prompts = [Prompt(f"Write a number after {w}.", "any digit") for w in words]
        self.train, self.val = prompts[:6], prompts[6:] + prompts[:2]
        self.val = self.val[: cfg.val_prompts]

    def train_prompts(self):
        return self.train

    def val_prompts(self):
        return self.val

    def reward(self, prompt, completion):
        return float(any(ch.isdigit() for ch in completion))
