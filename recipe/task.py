"""Deprecated: the addition task's problems, verifier and split are in :mod:`recipe.tasks.addition`.

``from recipe.task import split_problems`` (and ``Problem``, ``reward``, ``has_carry``,
``easy_problems``) keeps working, with a DeprecationWarning; import from
``recipe.tasks.addition`` instead. Configs are unaffected (``task: addition`` names the task).
"""

from __future__ import annotations

import warnings

from recipe.tasks.addition import Problem, easy_problems, has_carry, reward, split_problems

__all__ = ["Problem", "easy_problems", "has_carry", "reward", "split_problems"]

warnings.warn(
    "recipe.task is deprecated: import Problem, reward, split_problems, has_carry and "
    "easy_problems from recipe.tasks.addition",
    DeprecationWarning,
    stacklevel=2,
)
