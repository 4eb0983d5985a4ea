"""An addition chain with a scratchpad of carries: long completions whose length is a config knob.

The prompt holds two ``digits``-digit numbers ``a`` and ``b``; the completion writes the next
``terms`` terms of the Fibonacci-style chain they start, each the sum of the two before it,
modulo ``10**digits``: ``f1 = a + b``, ``f2 = b + f1``, ``f3 = f1 + f2``, ... Every number is
written in one scratchpad layout, least-significant digit first with the carry that each column
passed to the next between them: ``d0 c1 d1 c2 d2`` for three digits (``2 * digits - 1``
characters; the two given numbers were not summed, so their carries are 0), numbers separated
by ``+``. With ``digits=3``, ``a = 347``, ``b = 86`` and ``terms=3``::

    prompt      "70403+60800="                 (347 and 086, carries 0)
    completion  "31314+90115+21509"  + EOS     (433: 7+6 = 13 -> 3 carry 1, 4+8+1 = 13 ->
                                                3 carry 1, 3+0+1 -> 4; then 519 and 952)

Why this task (issue 30): the study of PipelineRL against PPO-off-policy needs completions long
enough that generating a batch costs as much as training on it or more, as in reasoning RL.
Here the answer is ``terms * 2 * digits`` tokens with EOS, so ``terms`` slides one study from
a 6-token answer (``terms=1``: one addition mod ``10**digits``) to 60 tokens and beyond, while
the prompt stays ``4 * digits`` characters. Why this layout: written so, every character of a
term is a sum of characters at fixed distances behind it (the same column of the two previous
terms, ``2 * digits`` and ``4 * digits`` back) and of the carry written just before it, and a
carry is decided by the same two digits as the digit before it; the same local rule repeats
along the whole completion. Without the written carries the tiny model of the CPU study sat at
the carry-free part of the rule (mean loss 0.81 per token, the units digits right, the others
not) for 400 warm-up steps (2 digits, 17 terms).

Reward (verifiable, 0/1): 1 when the completion ended with EOS (else the trainer scores 0
without calling :meth:`AdditionChainTask.reward`), is ``terms`` fields of ``2 * digits - 1``
digits separated by ``+``, and the digits of its last field are the chain's last term. The
earlier terms and all carries are the scratchpad: not checked one by one, but a wrong one almost
surely makes the last term wrong (an error carries into every later term from its column up).
One shortcut passes by chance: the units digits form their own chain mod 10, which needs no
carries and is learned first, so a model with the units right and the higher digits guessed
passes about ``10**-(digits - 1)`` of the time (0.1 at 2 digits: the warm-ups of the study sat
near 0.09 for 200-500 steps; seed 0 then crept past the 0.15 target (0.16 at step 500), while
for seeds 1 and 2 the carries came in within one probe interval of 50 steps, from 0.09 to 0.78
and 0.62: the seeds start RL from different heights).

Data: the pairs ``(a, b)`` are :func:`recipe.tasks.addition.split_problems`'s seeded, disjoint,
iid split of all ``10**(2 * digits)`` pairs, so training pool and validation set come from one
distribution.
(A chain is a recurrence, so the later terms of a validation chain may also occur in some
training chain: what is learned is the rule.)
"""

from __future__ import annotations

import torch

from recipe.tasks import Prompt, Task
from recipe.tasks.addition import split_problems


def chain(a: int, b: int, terms: int, digits: int) -> list[int]:
    """The ``terms`` terms after ``a, b``: each the sum of the two before, mod ``10**digits``."""
    mod, out = 10**digits, []
    for _ in range(terms):
        a, b = b, (a + b) % mod
        out.append(b)
    return out


def scratch(x: int, y: int | None, digits: int) -> str:
    """The layout of ``(x + y) mod 10**digits``: its digits least-significant first, each but the
    first preceded by the carry into its column; ``y=None``: ``x`` itself, carries 0.

    >>> scratch(347, 86, 3)   # 433 with carries 1 (into the tens) and 1 (into the hundreds)
    '31314'
    >>> scratch(86, None, 3)
    '60800'
    """
    out, carry = [], 0
    for j in range(digits):
        xd, yd = x // 10**j % 10, (0 if y is None else y // 10**j % 10)
        if j:
            out.append(str(carry))
        out.append(str((xd + yd + carry) % 10))
        carry = (xd + yd + carry) // 10
    return "".join(out)


def chain_prompt(a: int, b: int, digits: int) -> str:
    """The prompt text of the pair: ``"70403+60800="`` for 347, 86 at 3 digits."""
    return f"{scratch(a, None, digits)}+{scratch(b, None, digits)}="


def chain_answer(a: int, b: int, terms: int, digits: int) -> str:
    """The reference completion (without EOS): each term in the scratchpad layout of the sum of
    the two before it, joined by ``+``."""
    values = [a, b, *chain(a, b, terms, digits)]
    return "+".join(scratch(values[k], values[k + 1], digits) for k in range(terms))


def answer_tokens(terms: int, digits: int) -> int:
    """Tokens of a correct completion with the character tokenizer, EOS included."""
    return terms * 2 * digits


def last_term(field: str) -> str:
    """The digits of one scratchpad field (its even positions), least-significant first."""
    return field[::2]


class AdditionChainTask(Task):
    """The addition chain: ``terms`` terms of ``digits`` digits after the prompt's two numbers.

    Parameters
    ----------
    digits : int
        Digits of every number (the chain runs modulo ``10**digits``).
    terms : int
        Terms the completion writes (config key ``chain_terms``); the answer is
        ``terms * 2 * digits`` tokens long with EOS.
    n_train, n_val : int
        Sizes of the training pool and the validation set.
    seed : int
        Seed of the split (:func:`recipe.tasks.addition.split_problems`).
    """

    def __init__(self, digits: int, terms: int, n_train: int, n_val: int, seed: int) -> None:
        if digits < 1 or terms < 1:
            raise ValueError(
                f"the addition chain needs digits >= 1 and chain_terms >= 1, got digits={digits}, "
                f"chain_terms={terms}"
            )
        self.digits, self.terms = digits, terms
        train, val = split_problems(digits, n_train, n_val, seed)
        self.train = [self._prompt(p.a, p.b) for p in train]
        self.val = [self._prompt(p.a, p.b) for p in val]

    def _prompt(self, a: int, b: int) -> Prompt:
        return Prompt(chain_prompt(a, b, self.digits), chain_answer(a, b, self.terms, self.digits))

    def train_prompts(self) -> list[Prompt]:
        return self.train

    def val_prompts(self) -> list[Prompt]:
        return self.val

    def reward(self, prompt: Prompt, completion: str) -> float:
        """1.0 for ``terms`` fields of ``2 * digits - 1`` digits joined by ``+`` whose last holds
        the chain's last term, else 0.0 (completions without EOS never get here: the trainer)."""
        fields = completion.split("+")
        width = 2 * self.digits - 1
        well_formed = len(fields) == self.terms and all(
            len(f) == width and f.isdigit() for f in fields
        )
        answer = last_term(prompt.answer[-width:])
        return 1.0 if well_formed and last_term(fields[-1]) == answer else 0.0

    def warmup_examples(self, n: int, seed: int) -> list[Prompt]:
        """``n`` supervised examples drawn uniformly (with replacement) from the training pool,
        seeded by ``seed``; never a validation pair."""
        gen = torch.Generator().manual_seed(seed)
        picks = torch.randint(0, len(self.train), (n,), generator=gen).tolist()
        return [self.train[i] for i in picks]
