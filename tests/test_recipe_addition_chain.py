"""The addition-chain task (issue 30): long completions whose length is a config knob."""

from __future__ import annotations

import itertools

import pytest

from recipe import config as C
from recipe.tasks import Prompt, load_task
from recipe.tasks.addition import split_problems
from recipe.tasks.addition_chain import (
    AdditionChainTask,
    answer_tokens,
    chain,
    chain_answer,
    chain_prompt,
    scratch,
)


def test_hand_worked_chain():
    # 347, 86 -> 433 (347+86), 519 (86+433), 952 (433+519), 471 (519+952 = 1471 mod 1000)
    assert chain(347, 86, 4, 3) == [433, 519, 952, 471]
    # every number least-significant digit first, the carry into each column before its digit
    assert scratch(347, 86, 3) == "31314"  # 7+6 = 13: 3 carry 1; 4+8+1 = 13: 3 carry 1; 3+0+1
    assert scratch(519, 952, 3) == "11704"  # 9+2 = 11: 1 c1; 1+5+1 = 7 c0; 5+9 = 14: 4 (1471)
    assert scratch(999, 1, 3) == "01010"  # 1000 mod 1000, a carry into every column
    assert scratch(347, None, 3) == "70403"  # a given number: not a sum, no carries
    assert chain_prompt(347, 86, 3) == "70403+60800="
    assert chain_answer(347, 86, 4, 3) == "31314+90115+21509+11704"
    assert chain_answer(0, 0, 3, 2) == "000+000+000"
    assert chain_answer(5, 7, 1, 1) == "2"  # one term of one digit: addition mod 10
    # against an independent definition: the Fibonacci numbers from (a, b) = (F0, F1) = (0, 1),
    # and each field's digits read back as the term
    fib = [0, 1]
    while len(fib) < 32:
        fib.append(fib[-1] + fib[-2])
    assert chain(0, 1, 30, 4) == [f % 10**4 for f in fib[2:32]]
    fields = chain_answer(0, 1, 30, 4).split("+")
    assert [int(f[::2][::-1]) for f in fields] == [f % 10**4 for f in fib[2:32]]
    # and each written carry against column arithmetic: carry into column j of x + y
    for f, (x, y) in zip(fields, itertools.pairwise(fib), strict=False):
        for j in range(1, 4):
            low = 10**j
            assert int(f[2 * j - 1]) == int(x % low + y % low >= low)


def test_reward_checks_the_format_and_the_last_term():
    task = AdditionChainTask(3, 4, 10, 10, seed=0)
    p = Prompt("70403+60800=", "31314+90115+21509+11704")
    assert task.reward(p, "31314+90115+21509+11704") == 1.0
    # the scratchpad is not checked digit by digit: a wrong middle term, or a wrong carry in the
    # last one, with the right last term still answers the question
    assert task.reward(p, "31314+90115+00000+11704") == 1.0
    assert task.reward(p, "31314+90115+21509+10714") == 1.0
    for wrong in (
        "31314+90115+21509+11705",  # wrong answer (471 -> 571)
        "31314+90115+21509",  # too few terms (a prefix)
        "31314+90115+21509+11704+31314",  # too many
        "174",  # the answer alone, no scratchpad
        "31314+90115+21509+1704",  # a field of the wrong width
        "31314+90115+21509+117040",
        "31314+90115+21509+11=04",  # not digits
        "31314+90115+21509+11704+",
        "",
    ):
        assert task.reward(p, wrong) == 0.0, wrong


def test_answer_length_scales_with_chain_terms():
    from recipe.model import build_tokenizer

    tok = build_tokenizer()
    for digits, terms in ((3, 1), (3, 4), (2, 14), (3, 10), (4, 12)):
        task = AdditionChainTask(digits, terms, 50, 20, seed=1)
        for p in task.train_prompts() + task.val_prompts():
            ids = tok(p.answer, add_special_tokens=False)["input_ids"]
            assert len(ids) + 1 == answer_tokens(terms, digits) == terms * 2 * digits
            assert len(p.text) == 4 * digits  # the prompt does not grow
            assert task.reward(p, p.answer) == 1.0
    # one term is addition mod 10**digits of the same pairs
    one, long = AdditionChainTask(3, 1, 50, 20, seed=1), AdditionChainTask(3, 16, 50, 20, seed=1)
    assert [p.text for p in one.val_prompts()] == [p.text for p in long.val_prompts()]
    assert all(q.answer.startswith(p.answer + "+") for p, q in
               zip(one.val_prompts(), long.val_prompts(), strict=True))  # fmt: skip


def test_split_is_seeded_disjoint_and_the_addition_tasks():
    a, b = AdditionChainTask(3, 8, 500, 100, seed=3), AdditionChainTask(3, 8, 500, 100, seed=3)
    assert a.train_prompts() == b.train_prompts() and a.val_prompts() == b.val_prompts()
    c = AdditionChainTask(3, 8, 500, 100, seed=4)
    assert a.val_prompts() != c.val_prompts()
    assert not {p.text for p in a.train_prompts()} & {p.text for p in a.val_prompts()}
    train, val = split_problems(3, 500, 100, seed=3)  # the same pairs as the addition tasks
    assert [p.text for p in a.val_prompts()] == [chain_prompt(q.a, q.b, 3) for q in val]
    assert [p.text for p in a.train_prompts()] == [chain_prompt(q.a, q.b, 3) for q in train]


def test_warmup_examples_are_seeded_training_prompts():
    task = AdditionChainTask(3, 8, 400, 50, seed=0)
    ex = task.warmup_examples(1000, seed=5)
    assert len(ex) == 1000 and ex == task.warmup_examples(1000, seed=5)
    assert ex != task.warmup_examples(1000, seed=6)
    assert set(ex) <= set(task.train_prompts()) and not set(ex) & set(task.val_prompts())
    assert len(set(ex)) > 300  # uniform over the 400 (expected distinct: 400 (1 - e^-2.5) = 367)


def test_built_in_name_and_config_checks():
    cfg = C.from_dict({
        "task": "addition_chain", "chain_terms": 5, "max_new_tokens": 30, "train_prompts": 100,
        "val_prompts": 10,
    })  # fmt: skip
    task = load_task(cfg)  # init: null is allowed: the built model knows these characters
    assert isinstance(task, AdditionChainTask) and task.terms == 5
    assert task.val_prompts() == AdditionChainTask(3, 5, 100, 10, seed=0).val_prompts()
    with pytest.raises(C.ConfigError, match=r"max_new_tokens.*at least .* = 30"):
        C.from_dict({"task": "addition_chain", "chain_terms": 5, "max_new_tokens": 29})
    with pytest.raises(C.ConfigError, match="chain_terms"):
        C.from_dict({"task": "addition_chain", "chain_terms": 0})
    with pytest.raises(ValueError, match="chain_terms >= 1"):
        AdditionChainTask(3, 0, 10, 10, seed=0)


def test_built_model_holds_the_long_completion(tmp_path, monkeypatch):
    """The built model's positions cover prompt + completion (vLLM refuses longer), and the
    warm-up probes sample the whole answer: the old limit (digits + 2 = 4 tokens) would score
    every sample 0, so the warm-up target would never be reached."""
    import torch

    import recipe.model as M

    limits = []
    rates = M._task_pass_rates

    def spy(model, tokenizer, prompts, task, max_new_tokens, seed, n=8):
        limits.append(max_new_tokens)
        return rates(model, tokenizer, prompts[:4], task, max_new_tokens, seed, n=2)

    monkeypatch.setattr(M, "_task_pass_rates", spy)
    torch.set_num_threads(1)
    task = AdditionChainTask(2, 9, 300, 10, seed=0)
    out = M.warm_up(
        tmp_path / "w", digits=2, n_layer=1, hidden=32, heads=4, intermediate=64, batch=16,
        steps=2, target=0.5, probe_every=1, seed=0, task=task, max_new_tokens=36,
        max_positions=84,
    )  # fmt: skip
    model, _ = M.load_policy(out)
    assert model.config.max_position_embeddings == 84
    assert limits == [36, 36, 36]  # the two probes and the final rate: the run's limit
