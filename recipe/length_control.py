"""Length control as ScaleRL has it: a forced interruption at a random point in a token range.

With ``interrupt_range: [lo, hi]`` every completion that is still running after ``p`` tokens,
``p`` drawn uniformly from ``lo..hi`` per completion, gets the interruption text (the paper's:
"Okay, time is up. Let me stop thinking and formulate a final answer now. </think>") appended
as forced tokens, and generation continues from there up to ``max_new_tokens`` in all, so the
model answers within its budget. Forced tokens are context, not actions: they are marked in
:attr:`~recipe.generate.Completion.forced` and left out of the loss and of the log-prob
comparisons.

It wraps any generator in two phases: sample up to ``hi`` tokens, cut each completion that had
not ended by its own ``p`` at ``p`` (the same distribution as stopping it at ``p``: tokens after
``p`` are discarded, never looked at), then continue each cut one as a new request whose prompt
is prompt + first ``p`` tokens + the text. The price is up to ``hi - lo`` discarded tokens per
interrupted completion. Works for the torch sampler, the offline vLLM engine and the async one
(``submit``: the second phase is submitted when the first resolves, nothing blocks).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import torch

from recipe.generate import Completion


class InterruptingGenerator:
    """A generator with forced interruptions (see the module docstring); same interface.

    Parameters
    ----------
    inner
        The generator to wrap.
    text_ids : sequence of int
        The interruption text, tokenized (without special tokens added).
    lo, hi : int
        The interruption point is drawn uniformly from ``lo..hi`` (inclusive) per completion.
    seed : int
        Seed of the interruption points.
    """

    def __init__(self, inner, text_ids: Sequence[int], lo: int, hi: int, seed: int) -> None:
        self.inner = inner
        self.text_ids = list(text_ids)
        self.lo, self.hi = lo, hi
        self.points = random.Random(seed)
        self.lock = threading.Lock()  # the pipeline's producer and the evaluator both draw
        if hasattr(inner, "submit"):
            self.submit = self._submit

    # delegated state (checkpointed sampler rng, policy version, push records)
    @property
    def version(self) -> int:
        return self.inner.version

    @property
    def rng(self):
        return getattr(self.inner, "rng", None)

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        self.inner.push_weights(state_dict, version)

    def close(self) -> None:
        self.inner.close()

    # ---------------------------------------------------------------- the two phases
    def _cut(self, prompt, first: Completion, budget: int):
        """(kept completion, None) or (first part, continuation prompt, its budget)."""
        with self.lock:
            p = self.points.randint(self.lo, self.hi)
        if len(first.tokens) <= p and not first.truncated:
            return first, None  # ended on its own before the interruption point
        head = Completion(first.tokens[:p], first.logprobs[:p], first.versions[:p], True,
                          kv_version=first.kv_version)  # fmt: skip
        rest = budget - p - len(self.text_ids)
        return head, (list(prompt) + head.tokens + self.text_ids, rest)

    def _join(self, head: Completion, tail: Completion, rest: int) -> Completion:
        tail_tokens = tail.tokens[:rest]
        cut = len(tail.tokens) > rest
        version = tail.versions[0] if tail.versions else head.versions[-1]
        n = len(self.text_ids)
        p = len(head.tokens)
        return Completion(
            tokens=head.tokens + self.text_ids + tail_tokens,
            logprobs=head.logprobs + [0.0] * n + tail.logprobs[:rest],
            versions=head.versions + [version] * n + tail.versions[:rest],
            truncated=tail.truncated or cut,
            forced=(p, p + n),
            kv_version=min(
                (v for v in (head.kv_version, tail.kv_version) if v is not None), default=None
            ),
        )

    def _check_budget(self, max_new_tokens: int) -> None:
        if self.hi + len(self.text_ids) >= max_new_tokens:
            raise ValueError(
                f"interrupt_range hi ({self.hi}) + the interruption text ({len(self.text_ids)} "
                f"tokens) leaves no room to answer within max_new_tokens={max_new_tokens}"
            )

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        self._check_budget(max_new_tokens)
        groups = self.inner.generate(prompts, n, max_new_tokens=self.hi, temperature=temperature)
        cuts = [
            [self._cut(p, c, max_new_tokens) for c in g]
            for p, g in zip(prompts, groups, strict=True)
        ]
        todo = [(i, j) for i, g in enumerate(cuts) for j, (_, cont) in enumerate(g) if cont]
        if todo:
            conts = [cuts[i][j][1] for i, j in todo]
            longest = max(rest for _, rest in conts)
            tails = self.inner.generate(
                [c for c, _ in conts], 1, max_new_tokens=longest, temperature=temperature
            )
            for (i, j), (_, rest), tail in zip(todo, conts, tails, strict=True):
                cuts[i][j] = (self._join(cuts[i][j][0], tail[0], rest), None)
        return [[c for c, _ in g] for g in cuts]

    def _submit(
        self, prompt: Sequence[int], n: int, *, max_new_tokens: int, temperature: float = 1.0
    ) -> Future:
        """Async form: the continuations are submitted when the first phase resolves."""
        self._check_budget(max_new_tokens)
        outer: Future = Future()
        first = self.inner.submit(prompt, n, max_new_tokens=self.hi, temperature=temperature)

        def phase_two(done: Future) -> None:
            try:
                cuts = [self._cut(prompt, c, max_new_tokens) for c in done.result()]
                waiting = [j for j, (_, cont) in enumerate(cuts) if cont]
                if not waiting:
                    outer.set_result([c for c, _ in cuts])
                    return
                left = [len(waiting)]
                lock = threading.Lock()

                def joined(j: int, tail_future: Future) -> None:
                    try:
                        head, (_, rest) = cuts[j]
                        cuts[j] = (self._join(head, tail_future.result()[0], rest), None)
                        with lock:
                            left[0] -= 1
                            last = left[0] == 0
                        if last:
                            outer.set_result([c for c, _ in cuts])
                    except BaseException as err:
                        if not outer.done():
                            outer.set_exception(err)

                for j in waiting:
                    cont, rest = cuts[j][1]
                    tail = self.inner.submit(cont, 1, max_new_tokens=rest, temperature=temperature)
                    tail.add_done_callback(lambda f, j=j: joined(j, f))
            except BaseException as err:
                if not outer.done():
                    outer.set_exception(err)

        first.add_done_callback(phase_two)
        return outer
