"""The engine-free parts of the vLLM backend: wire format, push checks, output conversion.

These need no vLLM (they run in the main venv); the engine itself is tested in
``test_vllm_generate.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from recipe.generate_vllm import (
    WeightPushError,
    check_state_dict,
    check_version,
    hf_parameter_shapes,
    pack_state_dict,
    to_completion,
    unpack_tensor,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_pack_round_trip_is_bit_exact(dtype):
    gen = torch.Generator().manual_seed(0)
    sd = {
        "a.weight": torch.randn(3, 5, generator=gen),
        "b.bias": torch.randn(7, generator=gen),
        "empty": torch.empty(0, 4),
        "strided": torch.randn(6, 4, generator=gen).t(),  # non-contiguous source
    }
    for packed in pack_state_dict(sd, dtype):
        name, tensor = unpack_tensor(packed)
        assert tensor.dtype == dtype and tensor.shape == sd[name].shape
        assert torch.equal(tensor, sd[name].to(dtype))
        assert isinstance(packed[3], bytes)  # plain bytes: survives vLLM's RPC serialization


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    config = LlamaConfig(
        vocab_size=16,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    path = tmp_path_factory.mktemp("llama")
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def test_expected_shapes_come_from_the_config_alone(model_dir):
    shapes, omittable = hf_parameter_shapes(model_dir)
    assert shapes["lm_head.weight"] == (16, 64)
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (32, 64)  # 1 KV head of 32
    assert omittable == set()
    real = LlamaForCausalLM.from_pretrained(model_dir).state_dict()
    assert shapes == {k: tuple(v.shape) for k, v in real.items()}
    check_state_dict(real, shapes, omittable)  # the real thing passes


def test_push_checks_name_the_problem(model_dir):
    shapes, omittable = hf_parameter_shapes(model_dir)
    good = LlamaForCausalLM.from_pretrained(model_dir).state_dict()
    bad = {
        "unknown": good | {"_orig_mod.lm_head.weight": good["lm_head.weight"]},
        "missing": {k: v for k, v in good.items() if k != "model.norm.weight"},
        "shape": good | {"model.norm.weight": torch.ones(65)},
        "dtype": good | {"model.norm.weight": torch.ones(64, dtype=torch.int64)},
        "NaN": good | {"lm_head.weight": torch.full((16, 64), float("inf"))},
    }
    for word, state_dict in bad.items():
        with pytest.raises(WeightPushError, match=word):
            check_state_dict(state_dict, shapes, omittable)
    # tied embeddings: the lm_head copy may be left out
    check_state_dict(
        {k: v for k, v in good.items() if k != "lm_head.weight"}, shapes, {"lm_head.weight"}
    )


def test_versions_only_move_forward():
    check_version(3, 3)
    check_version(4, 3)
    for bad in (2, 3.5, True, "4"):
        with pytest.raises(WeightPushError, match="version"):
            check_version(bad, 3)


def fake_output(tokens, spans, finish_reason="length"):
    logprobs = [{t: SimpleNamespace(logprob=-0.1 * (i + 1))} for i, t in enumerate(tokens)]
    return SimpleNamespace(
        token_ids=tokens,
        logprobs=logprobs,
        finish_reason=finish_reason,
        weight_versions=[SimpleNamespace(version=v, start=s, end=e) for v, s, e in spans],
    )


def test_weight_version_spans_become_per_token_versions():
    out = to_completion(fake_output([5, 6, 7, 8, 9], [("3", 0, 2), ("4", 2, 5)]), 0)
    assert out.versions == [3, 3, 4, 4, 4]
    assert out.tokens == [5, 6, 7, 8, 9] and out.truncated
    assert out.logprobs == pytest.approx([-0.1, -0.2, -0.3, -0.4, -0.5])
    # no span labels at all (engine never told a version): the submit-time version
    assert to_completion(fake_output([5, 2], [], "stop"), 7).versions == [7, 7]
    assert not to_completion(fake_output([5, 2], [("default", 0, 2)], "stop"), 7).truncated
