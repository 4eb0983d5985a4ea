"""Length control: forced interruption at a random point in [lo, hi] with the paper's text."""

from __future__ import annotations

from concurrent.futures import Future

import recipe_helpers
import torch

from recipe import train as T
from recipe.config import INTERRUPT_TEXT
from recipe.generate import Completion
from recipe.length_control import InterruptingGenerator

TEXT = [90, 91, 92]  # the interruption text, tokenized
EOS = 2


class Scripted:
    """Completions of a fixed length (tokens 10, 11, ...), EOS-terminated when ``ends``."""

    def __init__(self, length, ends):
        self.length, self.ends, self.version, self.calls = length, ends, 0, []

    def _one(self, prompt, max_new_tokens):
        toks = list(range(10, 10 + self.length))[:max_new_tokens]
        done = self.ends and len(toks) < max_new_tokens
        toks = [*toks, EOS] if done else toks
        return Completion(toks, [-0.1] * len(toks), [self.version] * len(toks), not done)

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
        self.calls.append((len(prompts), n, max_new_tokens))
        return [[self._one(p, max_new_tokens) for _ in range(n)] for p in prompts]


class AsyncScripted(Scripted):
    def submit(self, prompt, n, *, max_new_tokens, temperature=1.0):
        f = Future()
        f.set_result(self.generate([prompt], n, max_new_tokens=max_new_tokens)[0])
        return f


def test_long_completions_get_the_text_at_a_point_in_range_and_continue():
    gen = InterruptingGenerator(Scripted(length=50, ends=True), TEXT, lo=4, hi=8, seed=0)
    out = gen.generate([[1, 2], [3]], 20, max_new_tokens=30)
    points = set()
    for g in out:
        for c in g:
            start, end = c.forced
            assert 4 <= start <= 8 and end - start == len(TEXT)
            assert c.tokens[start:end] == TEXT and c.tokens[:start] == list(range(10, 10 + start))
            assert len(c.tokens) <= 30 and len(c.tokens) == len(c.logprobs) == len(c.versions)
            assert c.logprobs[start:end] == [0.0] * len(TEXT)  # placeholders, never in the loss
            assert c.truncated  # the scripted answer is too long for the rest of the budget
            points.add(start)
    assert points == set(range(4, 9))  # uniform over lo..hi: 40 draws hit all five


def test_short_completions_are_untouched_and_answers_fit_the_budget():
    gen = InterruptingGenerator(Scripted(length=3, ends=True), TEXT, lo=4, hi=8, seed=0)
    out = gen.generate([[1]], 5, max_new_tokens=30)
    assert all(c.forced is None and c.tokens == [10, 11, 12, EOS] for c in out[0])
    assert gen.inner.calls == [(1, 5, 8)]  # one phase only: nobody ran past its point
    # an answer that fits: phase two ends with EOS inside max_new_tokens
    gen = InterruptingGenerator(Scripted(length=10, ends=True), TEXT, lo=4, hi=4, seed=0)
    c = gen.generate([[1]], 1, max_new_tokens=30)[0][0]
    assert c.forced == (4, 7) and c.tokens[-1] == EOS and not c.truncated


def test_async_submit_chains_the_second_phase():
    sync = InterruptingGenerator(Scripted(length=50, ends=True), TEXT, lo=4, hi=8, seed=3)
    asyn = InterruptingGenerator(AsyncScripted(length=50, ends=True), TEXT, lo=4, hi=8, seed=3)
    assert not hasattr(sync, "submit") and hasattr(asyn, "submit")
    a = sync.generate([[1]], 6, max_new_tokens=30)[0]
    b = asyn.submit([1], 6, max_new_tokens=30).result(timeout=10)
    assert a == b


def test_interruption_in_a_training_run(tmp_path):
    folder = recipe_helpers.build_hf_folder("llama", tmp_path / "model")
    cfg = recipe_helpers.hf_cfg(folder, max_new_tokens=120, interrupt_range=[3, 6])
    tok_text = T.setup(cfg, tmp_path / "x").tokenizer(INTERRUPT_TEXT, add_special_tokens=False)
    assert len(tok_text["input_ids"]) == len(INTERRUPT_TEXT)  # character tokenizer
    T.run(cfg, tmp_path / "run")
    train = [
        r for r in recipe_helpers.read_log(tmp_path / "run" / "log.jsonl") if r["kind"] == "train"
    ]
    assert all(0 < r["interrupted_fraction"] <= 1 for r in train)
    assert any(r["updated"] for r in train)
    # forced tokens are out of the loss and out of the mismatch: their generator log-prob is a
    # 0.0 placeholder, so including them would show a gap of several nats here
    assert all(r["fresh_logprob_mismatch"] < 1e-4 for r in train)
    assert all(abs(r["rho_mean"] - 1) < 1e-4 for r in train)


def test_loss_mask_drops_the_forced_span():
    c = Completion([5, 6, 90, 91, 7], [0.0] * 5, [0] * 5, False, forced=(2, 4))
    assert T.loss_mask(c) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert torch.tensor(T.loss_mask(Completion([1], [0.0], [0], True))).sum() == 1


def test_entropy_leaves_the_forced_tokens_out():
    # regression: the forced tokens' log-probs (0: they were not sampled) were averaged in,
    # pulling the entropy estimate toward 0 as length control got more frequent
    free = Completion([1, 2], [-1.0, -3.0], [0, 0], False)
    forced = Completion([1, 90, 91, 2], [-2.0, 0.0, 0.0, -2.0], [0] * 4, False, forced=(1, 3))
    assert T.entropy([free, forced]) == (1.0 + 3.0 + 2.0 + 2.0) / 4
    assert T.entropy([free]) == 2.0  # no length control: the plain mean of -log pi
    # a queued vLLM request whose KV may be older than its tokens counts as mixed
    assert Completion([1], [-1.0], [5], False, kv_version=4).mixed
    assert not Completion([1], [-1.0], [5], False, kv_version=5).mixed
