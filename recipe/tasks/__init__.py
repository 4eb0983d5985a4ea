"""Tasks as a plug-in: prompts for training and validation, and a reward of a completion.

A task is any object with three methods (see :class:`Task`)::

    train_prompts() -> list[Prompt]      # the training pool (indexed by the prompt pool)
    val_prompts() -> list[Prompt]        # the held-out set (iid with the pool)
    reward(prompt: Prompt, completion: str) -> float

``completion`` is the decoded text of a completion that ended with one of the model's EOS
tokens (EOS itself and special tokens removed); a completion that hit the length limit without
EOS scores 0 without calling ``reward``, unless the task sets ``score_truncated = True``.
Two methods are optional (the :class:`Task` base class has both, returning None)::

    prompt_class(prompt: Prompt) -> str | None                # validation per class
    warmup_examples(n: int, seed: int) -> list[Prompt] | None  # the built model's warm-up

With ``prompt_class``, every evaluation row also holds ``val_pass_rate/<class>`` for each class
present in the validation set (``val_pass_rate`` stays the mean over all prompts). With
``warmup_examples``, the supervised warm-up of the built model (``init: null``) trains on these
examples (answers from ``Prompt.answer``) instead of the addition task's carry-free problems.
Built in (config key ``task``):

- ``addition``: the CPU demo's 3-digit addition (:mod:`recipe.tasks.addition`);
- ``addition_lsb``: the same problems, answers fixed-width least-significant digit first
  (``"347+086="`` -> ``"3340"``), validation per carry class (:mod:`recipe.tasks.addition_lsb`);
- ``addition_chain``: a long completion: the next ``chain_terms`` terms of the Fibonacci-style
  chain two ``digits``-digit numbers start (mod ``10**digits``, every number least-significant
  digit first with its carries written between the digits), a scratchpad of
  ``chain_terms x 2 x digits`` tokens whose last term is the answer
  (:mod:`recipe.tasks.addition_chain`);
- ``gsm8k``: grade-school math in the GSM8K format from a local JSONL or Parquet file
  (:mod:`recipe.tasks.math`).

A user task is one Python file or importable module named ``module:Class`` or
``path/to/file.py:Class``; the class is called with the run's :class:`~recipe.config.Config`
(read what you need from it: ``seed``, ``task_data``, ``val_prompts``...)::

    # my_task.py                              task: my_task.py:Palindromes
    from recipe.tasks import Prompt, Task

    class Palindromes(Task):
        def __init__(self, cfg):
            words = ["level", "rotor", "kayak"]
            self.train = [Prompt(f"Reverse: {w}", w[::-1]) for w in words]
        def train_prompts(self): return self.train
        def val_prompts(self): return self.train
        def reward(self, prompt, completion): return float(completion.strip() == prompt.answer)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """One problem: the text the model sees (the user turn) and the reference answer."""

    text: str
    answer: str


class Task:
    """Base class of tasks (subclassing is optional: any object with these methods works)."""

    #: also score completions that hit the length limit without EOS (default: they score 0)
    score_truncated: bool = False

    def train_prompts(self) -> list[Prompt]:
        raise NotImplementedError

    def val_prompts(self) -> list[Prompt]:
        raise NotImplementedError

    def reward(self, prompt: Prompt, completion: str) -> float:
        raise NotImplementedError

    def prompt_class(self, prompt: Prompt) -> str | None:
        """The class of a prompt for the per-class validation columns (``val_pass_rate/<class>``,
        so a short name without spaces); None: no class (the default, no extra columns)."""
        return None

    def warmup_examples(self, n: int, seed: int) -> list[Prompt] | None:
        """``n`` supervised examples for the built model's warm-up, seeded by ``seed`` (never
        validation prompts); None: the addition task's warm-up (:func:`recipe.model.warm_up`)."""
        return None


class TaskError(ValueError):
    """A task that cannot be loaded or that returned unusable prompts; the message says why."""


def _import_target(spec: str) -> Any:
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise TaskError(
            f"task {spec!r} is not built in (addition, addition_lsb, addition_chain, gsm8k) and "
            "not 'module:Class' or 'path/to/file.py:Class'"
        )
    path = Path(module_name)
    try:
        if module_name.endswith(".py") or path.is_file():
            if not path.is_file():
                raise TaskError(f"task file {module_name!r} does not exist")
            unique = f"recipe_user_task_{abs(hash(str(path.resolve())))}"
            mod_spec = importlib.util.spec_from_file_location(unique, path)
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[unique] = module
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except TaskError:
        raise
    except Exception as err:
        raise TaskError(f"task {spec!r}: importing {module_name!r} failed: {err!r}") from err
    if not hasattr(module, attr):
        raise TaskError(f"task {spec!r}: {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def load_task(cfg) -> Task:
    """The task named by ``cfg.task`` (built in, or a user's ``module:Class``)."""
    if cfg.task == "addition":
        from recipe.tasks.addition import AdditionTask

        task = AdditionTask(cfg.digits, cfg.train_prompts, cfg.val_prompts, cfg.seed)
    elif cfg.task == "addition_lsb":
        from recipe.tasks.addition_lsb import AdditionLSBTask, mix_weights

        task = AdditionLSBTask(
            cfg.digits, cfg.train_prompts, cfg.val_prompts, cfg.seed,
            class_weights=mix_weights(cfg.warmup_mix, cfg.digits),
        )  # fmt: skip
    elif cfg.task == "addition_chain":
        from recipe.tasks.addition_chain import AdditionChainTask

        task = AdditionChainTask(
            cfg.digits, cfg.chain_terms, cfg.train_prompts, cfg.val_prompts, cfg.seed
        )
    elif cfg.task == "gsm8k":
        from recipe.tasks.math import MathTask

        task = MathTask(cfg.task_data, cfg.task_val_data, n_val=cfg.val_prompts, seed=cfg.seed)
    else:
        task = _import_target(cfg.task)(cfg)
    for name in ("train_prompts", "val_prompts", "reward"):
        if not callable(getattr(task, name, None)):
            raise TaskError(f"task {cfg.task!r} has no method {name}() (see recipe/tasks)")
    for split in ("train_prompts", "val_prompts"):
        prompts = getattr(task, split)()
        if not prompts or not all(isinstance(p, Prompt) for p in prompts):
            raise TaskError(
                f"task {cfg.task!r}: {split}() must return a non-empty list of recipe.tasks.Prompt"
            )
    return task
