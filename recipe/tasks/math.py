"""Grade-school math in the GSM8K format, read from a local JSONL or Parquet file.

Each row has a ``question`` and an ``answer`` whose final line is ``#### <number>`` (the GSM8K
layout; the worked solution above it is ignored). A completion is correct when its final answer
(the number after its last ``####``, or else inside its last ``\\boxed{...}``) equals the
reference within a relative tolerance of 1e-6 (so ``72``, ``72.0``, ``$72`` and ``72.`` all
match 72, ``1,200`` matches 1200, ``3/4`` matches 0.75). Nothing is downloaded: point
``task_data`` at a file you have.
"""

from __future__ import annotations

import json
import math
import random
import re
from fractions import Fraction
from pathlib import Path

from recipe.tasks import Prompt, Task, TaskError

INSTRUCTION = 'Solve the problem. Give the final answer as a number after "####".'
TOLERANCE = 1e-6
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a ``.jsonl`` (one JSON object per line) or ``.parquet`` file."""
    path = Path(path)
    if path.is_dir():
        raise TaskError(f"task data {str(path)!r} is a folder; name a .jsonl or .parquet file")
    if not path.is_file():
        raise TaskError(f"task data file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise TaskError(
                f"task data {str(path)!r}: reading Parquet needs pyarrow (pip install pyarrow); "
                "or give a .jsonl file"
            ) from None
        try:
            return pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow's ArrowInvalid, OSError
            raise TaskError(f"task data {str(path)!r} cannot be read as Parquet: {err}") from None
    if path.suffix in (".jsonl", ".json"):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise TaskError(
                f"task data {str(path)!r} is not UTF-8 text ({err}); a .jsonl file holds one "
                "JSON object per line"
            ) from None
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise TaskError(f"{path}:{n}: not a JSON object ({err})") from None
        return rows
    raise TaskError(f"task data {str(path)!r}: expected a .jsonl or .parquet file")


def parse_number(text: str) -> float | None:
    """The first number in ``text`` ("$1,200." -> 1200.0, "3/4" -> 0.75), or None."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    raw = match.group().replace(",", "")
    try:
        return float(Fraction(raw)) if "/" in raw else float(raw)
    except (ValueError, ZeroDivisionError):
        return None


def final_answer(completion: str) -> float | None:
    """The number after the last ``####``, else inside the last ``\\boxed{}``, else None."""
    if "####" in completion:
        return parse_number(completion.rsplit("####", 1)[1])
    boxed = completion.rfind("\\boxed{")
    if boxed >= 0:
        inner = completion[boxed + len("\\boxed{") :]
        return parse_number(inner.split("}", 1)[0])
    return None


def same_number(a: float | None, b: float | None, tol: float = TOLERANCE) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def to_prompts(rows: list[dict], source: str) -> list[Prompt]:
    prompts = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise TaskError(
                f"{source}: row {n} is a JSON {type(row).__name__}, not an object; write one "
                '{"question": ..., "answer": "... #### <number>"} object per line (JSON Lines, '
                "not one JSON array)"
            )
        q, a = row.get("question"), row.get("answer")
        if not isinstance(q, str) or not isinstance(a, str) or "####" not in a:
            raise TaskError(
                f"{source}: row {n} needs a 'question' string and an 'answer' string ending in "
                f"'#### <number>' (the GSM8K format), got keys {sorted(row)}"
            )
        ref = a.rsplit("####", 1)[1].strip()
        if parse_number(ref) is None:
            raise TaskError(f"{source}: row {n}: no number after '####' in {a[-40:]!r}")
        prompts.append(Prompt(f"{q.strip()}\n{INSTRUCTION}", ref))
    return prompts


class MathTask(Task):
    """GSM8K-format problems; validation from its own file or held out from the training file."""

    def __init__(
        self, path: str | Path, val_path: str | Path | None = None, *, n_val: int, seed: int
    ) -> None:
        train = to_prompts(read_rows(path), str(path))
        if val_path is not None:
            self.val = to_prompts(read_rows(val_path), str(val_path))[:n_val]
            self.train = train
        else:
            if n_val >= len(train):
                raise TaskError(
                    f"{path} has {len(train)} problems; holding out val_prompts={n_val} leaves "
                    "none to train on (lower val_prompts or give task_val_data)"
                )
            order = list(range(len(train)))
            random.Random(seed).shuffle(order)
            self.val = [train[i] for i in order[:n_val]]
            self.train = [train[i] for i in order[n_val:]]

    def train_prompts(self) -> list[Prompt]:
        return self.train

    def val_prompts(self) -> list[Prompt]:
        return self.val

    def reward(self, prompt: Prompt, completion: str) -> float:
        return float(same_number(final_answer(completion), parse_number(prompt.answer)))
