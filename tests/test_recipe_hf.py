"""Any causal LM from a local Hugging Face folder: tiny random Qwen2 (tied) and Llama (untied)
built here (nothing downloaded), with their tokenizers, chat templates, EOS ids and pad
fallback, trained a few RL steps on CPU through the code path a GPU takes (device=cpu)."""

from __future__ import annotations

import pytest
import recipe_helpers
import torch
from safetensors.torch import load_file

from recipe import train as T
from recipe.forward import completion_logprobs
from recipe.generate import TorchGenerator
from recipe.model import encode_prompts, load_policy, stop_token_ids


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def hf_dir(request, tmp_path_factory):
    return recipe_helpers.build_hf_folder(request.param, tmp_path_factory.mktemp(request.param))


def test_tokenizer_eos_ids_pad_fallback_and_chat_template(hf_dir):
    model, tok = load_policy(hf_dir)
    kind = "qwen2" if "qwen2" in str(hf_dir) else "llama"
    spec = recipe_helpers.CHAT[kind]
    ids = stop_token_ids(tok, hf_dir)
    # every EOS of the family, the chat turn's end included (from generation_config.json)
    assert sorted(ids) == sorted(tok.convert_tokens_to_ids(t) for t in spec["generation_eos"])
    assert tok.pad_token_id is not None  # Llama-3 has none: EOS stands in
    assert model.config.tie_word_embeddings == (kind == "qwen2")
    chat = encode_prompts(tok, ["2+2?"], chat_template=True)[0]
    raw = encode_prompts(tok, ["2+2?"], chat_template=False)[0]
    text = tok.decode(chat)
    assert "2+2?" in text and len(chat) > len(raw)
    assert text.endswith("<|im_start|>assistant\n" if kind == "qwen2" else "assistant: ")
    if kind == "llama":
        assert chat.count(tok.bos_token_id) == 1  # the template's BOS, not a second one


def test_bf16_autocast_and_fp32_head_on_tied_and_untied_models(hf_dir):
    """The bug of issue 14: `.float()` on a tied head upcast the shared embedding and the bf16
    body failed with a dtype mismatch. Now weights stay FP32 and the body runs under autocast."""
    model, tok = load_policy(hf_dir)
    gen = TorchGenerator(
        model, eos_ids=stop_token_ids(tok, hf_dir), pad_id=tok.pad_token_id, fp32_head=True,
        seed=0, dtype="bfloat16", copy=False,
    )  # fmt: skip
    prompts = encode_prompts(tok, ["hello", "a longer prompt"], chat_template=True)
    out = gen.generate(prompts, 3, max_new_tokens=5)
    flat = [c for g in out for c in g]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    with torch.no_grad():
        logp, _ = completion_logprobs(
            model, [p for p in prompts for _ in range(3)], [c.tokens for c in flat],
            fp32_head=True, temperature=1.0, pad_id=tok.pad_token_id, dtype="bfloat16",
        )  # fmt: skip
    assert logp.dtype == torch.float32
    for i, c in enumerate(flat):
        # sampler (KV-cached, bf16 body) and trainer (full forward, bf16 body): the same
        # numbers up to bf16 rounding of the two attention paths
        gap = (logp[i, : len(c.tokens)] - torch.tensor(c.logprobs)).abs().max()
        assert gap < 0.1, gap


@pytest.mark.parametrize("mode", ["sync", "pipeline"])
def test_tiny_hf_model_trains_a_few_rl_steps(tmp_path, hf_dir, mode):
    cfg = recipe_helpers.hf_cfg(
        hf_dir, mode=mode, max_lag=1, dtype="bfloat16", fp32_head=True, micro_batch_size=5,
        gradient_checkpointing=True,
    )  # fmt: skip
    T.run(cfg, tmp_path)
    rows = recipe_helpers.read_log(tmp_path / "log.jsonl")
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3]
    assert any(0 < r["train_reward"] < 1 for r in train)
    assert sum(r["updated"] for r in train) >= 2
    assert all(r["loss"] is not None for r in train if r["updated"])
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["model"]
    init = load_file(hf_dir / "model.safetensors")
    changed = [k for k in init if not torch.equal(state[k], init[k].float())]
    assert len(changed) > len(init) // 2  # the RL updates moved most tensors
    assert (tmp_path / "final" / "config.json").exists()
