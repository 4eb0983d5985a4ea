"""Tokenizer, model folder, FP32 head, trainer log-probs and the torch generator."""

import copy
import json
import math

import pytest
import torch

from recipe.forward import completion_logprobs, head_logits
from recipe.generate import TorchGenerator
from recipe.model import build_model, build_tokenizer, load_policy, save_policy


def token_logprobs(logits, tokens, temperature):
    """Reference: log-softmax over the full vocabulary, then the token's entry."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), None


PROMPTS = [[1, 7, 8, 9, 14, 4, 5, 6, 15], [1, 5, 5, 5, 14, 6, 6, 6, 15]]


@pytest.fixture(scope="module")
def tiny():
    tok = build_tokenizer()
    model = build_model(len(tok), n_layer=2, hidden=32, heads=4, intermediate=64, seed=0)
    return model.eval(), tok


def test_tokenizer_is_character_level_with_bos(tiny, tmp_path):
    _, tok = tiny
    assert len(tok) == 16
    ids = tok("347+086=")["input_ids"]
    assert ids[0] == tok.bos_token_id and len(ids) == 9
    assert tok.decode(tok("433", add_special_tokens=False)["input_ids"]) == "433"
    assert tok.eos_token_id != tok.pad_token_id != tok.bos_token_id


def test_model_folder_is_a_plain_hf_folder(tiny, tmp_path):
    model, tok = tiny
    save_policy(model, tok, tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [
        "LlamaForCausalLM"
    ]
    loaded, tok2 = load_policy(tmp_path)
    assert tok2("12+3=")["input_ids"] == tok("12+3=")["input_ids"]
    for name, p in model.state_dict().items():
        assert torch.equal(p, loaded.state_dict()[name])


def test_trainer_logprobs_match_a_plain_forward_and_ignore_left_padding(tiny):
    model, _ = tiny
    prompt, comp = PROMPTS[0], [5, 6, 7, 2]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + comp])).logits[0].double()
        ref = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1].gather(
            1, torch.tensor(comp).unsqueeze(1)
        )
        # a shorter second prompt forces left padding of the first row's neighbour
        logp, mask = completion_logprobs(
            model, [prompt, prompt[3:]], [comp, comp[:2]], fp32_head=True, temperature=1.0,
            pad_id=0, chunk=3,
        )  # fmt: skip
    assert torch.allclose(logp[0].double(), ref.squeeze(1), atol=1e-5)
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert (logp[1, 2:] == 0).all()  # padding holds 0, not a log-prob


def test_fp32_head_under_bf16():
    torch.manual_seed(0)
    tok = build_tokenizer()
    model = build_model(len(tok), n_layer=1, hidden=64, heads=4, intermediate=64, seed=1)
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 1.0)  # logits of a trained model's size (|z| ~ 10)
    hidden = torch.randn(64, 64).to(torch.bfloat16)
    exact = hidden.double() @ model.lm_head.weight.double().T

    fp32 = head_logits(model, hidden, fp32_head=True)
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)
    bf16 = head_logits(bf16_model, hidden, fp32_head=False)
    assert fp32.dtype == torch.float32 and bf16.dtype == torch.bfloat16
    err32 = (fp32.double() - exact).abs().max().item()
    err16 = (bf16.double() - exact).abs().max().item()
    assert err32 < 1e-4 < 1e-2 < err16

    # the error reaches the log-probabilities, hence the importance ratio rho
    tokens = torch.randint(0, 16, (64,))
    lp32, _ = token_logprobs(fp32, tokens, 1.0)
    lp16, _ = token_logprobs(bf16, tokens, 1.0)
    exact_lp = torch.log_softmax(exact, -1).gather(1, tokens.unsqueeze(1)).squeeze(1)
    assert (lp32.double() - exact_lp).abs().max() < 1e-4
    assert (lp16.double() - exact_lp).abs().max() > 1e-2


def test_fp32_head_reduces_logprob_error_of_a_bf16_model(tiny):
    model, _ = tiny
    model = copy.deepcopy(model)
    with torch.no_grad():
        model.lm_head.weight.mul_(20)
    comps = [[5, 6, 7, 2], [4, 4, 4, 2]]
    kw = {"temperature": 1.0, "pad_id": 0}
    with torch.no_grad():
        ref, _ = completion_logprobs(model, PROMPTS, comps, fp32_head=True, **kw)
        # bf16 body by autocast over the FP32 master weights, head with or without FP32
        low, _ = completion_logprobs(model, PROMPTS, comps, fp32_head=False, dtype="bfloat16", **kw)
        high, _ = completion_logprobs(model, PROMPTS, comps, fp32_head=True, dtype="bfloat16", **kw)
    assert (high - ref).abs().mean() < (low - ref).abs().mean()


def _gen(model, seed=0):
    return TorchGenerator(model, eos_ids=[2], pad_id=0, fp32_head=True, seed=seed)


def test_generator_logprobs_equal_trainer_logprobs(tiny):
    model, _ = tiny
    out = _gen(model).generate(PROMPTS, 4, max_new_tokens=6, temperature=0.7)
    assert len(out) == 2 and all(len(g) == 4 for g in out)
    flat = [c for g in out for c in g]
    with torch.no_grad():
        logp, _ = completion_logprobs(
            model, [p for p in PROMPTS for _ in range(4)], [c.tokens for c in flat],
            fp32_head=True, temperature=0.7, pad_id=0,
        )  # fmt: skip
    for i, c in enumerate(flat):
        assert len(c.tokens) == len(c.logprobs) == len(c.versions) >= 1
        assert torch.allclose(logp[i, : len(c.tokens)], torch.tensor(c.logprobs), atol=1e-5)
        # EOS ends a completion; without it the completion is truncated at the limit
        assert c.truncated == (2 not in c.tokens)
        assert c.truncated == (len(c.tokens) == 6) or c.tokens[-1] == 2
        assert 2 not in c.tokens[:-1]


def test_generator_samples_from_the_softmax(tiny):
    model, _ = tiny
    n = 4000
    out = _gen(model, seed=5).generate([PROMPTS[0]], n, max_new_tokens=1)
    with torch.no_grad():
        logits = model(torch.tensor([PROMPTS[0]])).logits[0, -1].double()
    probs = torch.softmax(logits, -1)
    counts = torch.bincount(torch.tensor([c.tokens[0] for c in out[0]]), minlength=16).double()
    # every frequency within 4.5 binomial standard deviations (fixed seed, 16 cells)
    sd = (n * probs * (1 - probs)).sqrt()
    assert ((counts - n * probs).abs() <= 4.5 * sd + 1).all()


def test_generator_versions_weights_and_seed(tiny):
    model, _ = tiny
    gen = _gen(model, seed=3)
    a = gen.generate(PROMPTS, 3, max_new_tokens=4)
    assert all(v == 0 for g in a for c in g for v in c.versions)
    assert _gen(model, seed=3).generate(PROMPTS, 3, max_new_tokens=4) == a

    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.lm_head.weight.zero_()
        changed.lm_head.weight[:, 2] = 0  # all logits equal: uniform sampling
    gen.push_weights(changed.state_dict(), version=7)
    b = gen.generate(PROMPTS, 3, max_new_tokens=4)
    assert all(v == 7 for g in b for c in g for v in c.versions)
    assert all(c.logprobs[0] == pytest.approx(-math.log(16)) for g in b for c in g)
    # the generator holds a copy: the trainer's model is untouched by the push
    assert model.lm_head.weight.abs().sum() > 0


def test_warm_up_is_seeded_and_deterministic(tmp_path):
    from safetensors.torch import load_file

    from recipe.model import warm_up
    from recipe.tasks.addition import split_problems

    pool, _ = split_problems(3, 200, 10, seed=0)
    kw = {"n_layer": 1, "hidden": 32, "heads": 4, "intermediate": 64, "steps": 5, "batch": 16}
    a = load_file(warm_up(tmp_path / "a", mix=0.25, pool=pool, seed=3, **kw) / "model.safetensors")
    b = load_file(warm_up(tmp_path / "b", mix=0.25, pool=pool, seed=3, **kw) / "model.safetensors")
    c = load_file(warm_up(tmp_path / "c", mix=0.25, pool=pool, seed=4, **kw) / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    assert not (tmp_path / "a.tmp").exists()


def test_warm_up_target_stops_at_the_first_probe_that_reaches_it(tmp_path):
    from safetensors.torch import load_file

    from recipe.model import warm_up
    from recipe.tasks.addition import split_problems

    pool, _ = split_problems(3, 300, 10, seed=0)
    kw = {"n_layer": 1, "hidden": 32, "heads": 4, "intermediate": 64, "batch": 16, "mix": 0.25}
    early = warm_up(tmp_path / "e", steps=10, target=0.0, probe_every=2, pool=pool, **kw)
    two = warm_up(tmp_path / "t", steps=2, pool=pool, **kw)
    ten = warm_up(tmp_path / "f", steps=10, target=1.0, probe_every=2, pool=pool, **kw)
    a, b, c = (load_file(d / "model.safetensors") for d in (early, two, ten))
    assert all(torch.equal(a[k], b[k]) for k in a)  # stopped after step 2
    assert json.loads((early / "warmup.json").read_text())["steps_done"] == 2
    assert not all(torch.equal(a[k], c[k]) for k in a)  # an unreachable target runs all steps
    with pytest.raises(ValueError, match="pool"):
        warm_up(tmp_path / "x", steps=2, target=0.5, **{k: v for k, v in kw.items() if k != "mix"})


def test_regression_warm_up_never_replaces_a_folder_of_other_files(tmp_path, capsys):
    """`python -m recipe.model --out runs/cpu_demo` (a run folder) deleted the whole folder (its
    log, checkpoints, notes) and put the warm-up model in its place; --digits 0 or 1, --threads
    0 ended in tracebacks after the work began. argparse refuses them now, naming the flag, and
    warm_up itself refuses a folder that is neither new, empty nor an earlier warm-up's."""
    from recipe.config import ConfigError
    from recipe.model import main, warm_up

    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(SystemExit) as err:
        main(["--out", str(run), "--steps", "0", "--train-prompts", "10", "--val-prompts", "5"])
    assert err.value.code == 2
    assert "argument --out: " in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"holds other files \(log.jsonl\): the warm-up"):
        warm_up(run, steps=0)
    assert [p.name for p in run.iterdir()] == ["log.jsonl"]
    for argv, words in [
        (["--digits", "0"], "argument --digits: must be at least 1, got 0"),
        (["--digits", "1"], "exceed the 100 distinct 1-digit problems"),
        (["--threads", "0"], "argument --threads: must be at least 1, got 0"),
        (["--mix", "2"], "argument --mix: a share in [0, 1], got 2.0"),
    ]:
        with pytest.raises(SystemExit):
            main(["--out", str(tmp_path / "new"), "--steps", "0", *argv])
        assert words in capsys.readouterr().err
        assert not (tmp_path / "new").exists()
    # an earlier warm-up's folder is rebuilt in place, as before
    out = warm_up(tmp_path / "init", steps=0)
    assert warm_up(out, steps=0) == out and (out / "warmup.json").exists()
