"""The one-group weight broadcast (recipe/weight_broadcast.py) with fake engines over gloo.

The trainer's end and the client/source pieces are the real ones; vLLM's NCCL trainer engine
is replaced by :class:`~recipe.weight_broadcast.GlooTransport` (same rendezvous, same round)
and the engines by tests/weight_group_fakes.py, whose worker threads receive exactly as vLLM's
NCCL workers do. The GPU run of the real thing is scripts/gpu_check.sh's ``vllm_two_gpus``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from weight_group_fakes import FakeGroupEngine

from recipe.engines import MultiEngineGenerator
from recipe.generate_vllm import GeneratorBrokenError, WeightPushError
from recipe.pipeline import GeneratorFailed, push
from recipe.weight_broadcast import BroadcastFailed, GlooTransport, WeightBroadcast
from recipe.weights import Weights

ROOT = Path(__file__).resolve().parents[1]


def _weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(7, 4, generator=g),
        "model.layers.0.mlp.up_proj.weight": torch.randn(5, 4, generator=g),
        "model.norm.weight": torch.randn(4, generator=g),
    }


def test_every_engine_worker_receives_each_tensor_from_one_broadcast():
    # engines of 1 and 2 workers: one group of 4 (the trainer is rank 0)
    engines = [FakeGroupEngine(1), FakeGroupEngine(2)]
    group = WeightBroadcast(engines, dtype=torch.bfloat16, device="cpu", transport=GlooTransport)
    gen = MultiEngineGenerator(engines, group)
    try:
        assert group.world_size == 4
        assert [e.rank_offset for e in engines] == [1, 2]  # engine 1's workers after engine 0's
        for version, seed in ((1, 0), (2, 1)):
            sent_before = group.sender.sent
            state = _weights(seed)
            gen.push_weights(state, version)
            # each tensor went out once, whatever the number of engines and workers
            assert group.sender.sent - sent_before == len(state)
            for e in engines:
                assert e.version == version
                for got in e.received:  # every worker of every engine, cast to bf16
                    assert got.keys() == state.keys()
                    for name, value in state.items():
                        assert got[name].dtype == torch.bfloat16
                        assert torch.equal(got[name], value.to(torch.bfloat16)), name
        # a push pauses first, receives in one round, resumes at the version
        assert engines[0].events == [
            "init",
            "pause", "start", "update", "finish", "resume 1",
            "pause", "start", "update", "finish", "resume 2",
        ]  # fmt: skip
        assert gen.version == 2
    finally:
        gen.close()


def test_a_stream_is_read_once_and_a_failed_round_breaks_every_engine():
    engines = [FakeGroupEngine(1, timeout=5), FakeGroupEngine(1, timeout=5)]
    group = WeightBroadcast(engines, dtype=torch.float32, device="cpu", transport=GlooTransport)
    gen = MultiEngineGenerator(engines, group)
    try:
        state = _weights(0)
        reads = []

        def items():
            for name, value in state.items():
                reads.append(name)
                yield name, value

        stream = Weights({k: v.shape for k, v in state.items()}, items, finite=True, once=True)
        gen.push_weights(stream, 1)
        assert reads == list(state)  # read once, in order, for both engines
        for e in engines:
            assert torch.equal(e.received[0]["model.norm.weight"], state["model.norm.weight"])

        def broken():
            raise RuntimeError("a rank died while gathering")
            yield  # pragma: no cover

        bad = Weights({k: v.shape for k, v in state.items()}, broken, finite=True, once=True)
        with pytest.raises(WeightPushError, match="a rank died while gathering"):
            gen.push_weights(bad, 2)  # the workers time out waiting (5 s), nothing resumes
        assert all(e.events[-1] == "fail" and e.version == 1 for e in engines)
        with pytest.raises(Exception, match="no longer hold the same weights"):
            gen.push_weights(state, 3)
    finally:
        gen.close()


def test_regression_a_tied_head_is_not_broadcast():
    """With tied embeddings vLLM's loader drops ``lm_head.weight``: it was broadcast anyway
    (0.27 GB a push for Qwen2.5); now it is neither announced nor sent."""
    tied = {"lm_head.weight"}
    engines = [FakeGroupEngine(1, omittable=tied), FakeGroupEngine(1, omittable=tied)]
    group = WeightBroadcast(engines, dtype=torch.float32, device="cpu", transport=GlooTransport)
    gen = MultiEngineGenerator(engines, group)
    try:
        state = {**_weights(0), "lm_head.weight": torch.randn(7, 4)}
        gen.push_weights(state, 1)
        assert group.sender.sent == len(state) - 1
        for e in engines:
            assert e.received[0].keys() == state.keys() - tied
            assert e.version == 1
    finally:
        gen.close()


def test_regression_a_round_that_never_finishes_times_out_and_is_fatal():
    """vLLM's NCCL communicator has no timeout: an engine worker that died mid-broadcast left
    the trainer blocked forever. The round now gives up after ``timeout`` seconds; the engines
    are marked broken and the error is fatal (the process ends:
    test_regression_a_fatal_push_ends_the_process)."""
    never = threading.Event()
    engines = [FakeGroupEngine(1, timeout=30), FakeGroupEngine(1, timeout=30, stuck=never)]
    group = WeightBroadcast(
        engines, dtype=torch.float32, device="cpu", transport=GlooTransport, timeout=3
    )
    gen = MultiEngineGenerator(engines, group)
    try:
        start = time.perf_counter()
        with pytest.raises(GeneratorFailed, match=r"did not finish in 3 s") as info:
            push(gen, _weights(0), 1)
        assert time.perf_counter() - start < 20
        assert info.value.fatal  # cli.end_now ends the process
        assert isinstance(group.broken, BroadcastFailed)
        assert all(e.events[-1] == "fail" and e.version == 0 for e in engines)
        with pytest.raises(GeneratorBrokenError, match="no longer hold the same weights"):
            gen.push_weights(_weights(1), 2)
    finally:
        never.set()
        gen.close()


# One push from a 2-rank FSDP2 trainer: rank 0 holds the fake engines and the group; rank 1
# only joins the per-parameter gathers (full_tensor) of the stream. No full state dict is built.
SHARDED = """
import json, sys, torch
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from weight_group_fakes import FakeGroupEngine
from recipe import config as C, distributed
from recipe.forward import resolve_device
from recipe.run import setup, shard
from recipe.pipeline import GeneratorFailed, push
from recipe.weight_broadcast import BroadcastFailed, GlooTransport, WeightBroadcast
import torch.distributed.checkpoint.state_dict as dcp_sd

out = Path(sys.argv[1])
cfg = C.from_dict(json.loads(sys.argv[3]))
torch.set_num_threads(1)
ranks = distributed.init(resolve_device("cpu"))
s = setup(cfg, out, ranks)
reference = {k: v.clone() for k, v in s.model.state_dict().items()}  # before sharding
shard(cfg, s)
engines = [FakeGroupEngine(1, dtype=torch.float32), FakeGroupEngine(2, dtype=torch.float32)]
group = None
if ranks.main:
    group = WeightBroadcast(engines, dtype=torch.float32, device="cpu", transport=GlooTransport)
def no_full_copy(*a, **k):
    raise AssertionError("a push must not build the full state dict")
dcp_sd.get_model_state_dict = no_full_copy
weights = distributed.model_weights(s.model, ranks)
assert weights.once and weights.finite
if group is not None:
    group.push(weights, version=1)
weights.drain()
if ranks.main:
    ok = all(
        torch.equal(got[k], v) for e in engines for got in e.received for k, v in reference.items()
    ) and all(got.keys() == reference.keys() for e in engines for got in e.received)
    (out / "result.json").write_text(json.dumps(
        {"ok": ok, "sent": group.sender.sent, "tensors": len(reference),
         "versions": [e.version for e in engines]}))
distributed.barrier(ranks)
distributed.close(ranks)
"""


# ~25 s (one 2-rank launch)
def test_a_sharded_trainer_streams_each_parameter_once_to_every_engine(tmp_path, init_dir):
    script = tmp_path / "sharded.py"
    script.write_text(SHARDED)
    cfg = {"init": str(init_dir), "train_prompts": 300, "val_prompts": 16, "threads": 1}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(script), str(tmp_path), str(ROOT / "tests"), json.dumps(cfg)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["ok"], "an engine worker received weights that differ from the model's"
    assert result["sent"] == result["tensors"]  # once each, for 2 engines of 3 workers
    assert result["versions"] == [1, 1]


# A run whose push failed midway: a thread still waits in the round (as vLLM's trainer engine
# leaves its RPC thread, and the engines client its calls); the interpreter's exit would join it
END_AFTER_FATAL = """
import sys, threading
from concurrent.futures import ThreadPoolExecutor
import recipe.train
from recipe import cli
from recipe.pipeline import GeneratorFailed

def run(cfg, out, **kw):
    ThreadPoolExecutor(1).submit(threading.Event().wait)  # joined at exit: forever
    raise GeneratorFailed("weight push of policy version 3 failed: the round timed out",
                          fatal=True)

recipe.train.run = run
cli.main(["--out", sys.argv[1], "--set", "steps=1"])
"""


def test_regression_a_fatal_push_ends_the_process(tmp_path):
    """After a weight round that failed midway the process hung at exit, joining the thread
    stuck in the round; it now ends with exit status 1 and the message."""
    script = tmp_path / "fatal.py"
    script.write_text(END_AFTER_FATAL)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "run stopped: weight push of policy version 3 failed" in proc.stderr
    assert "continue with --resume" in proc.stderr
