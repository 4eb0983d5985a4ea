"""Several generator engines behind one (recipe/engines.py), against fake engines (no vLLM).

The real engines (two vLLM CPU engines on the tiny model) are tested in
tests/test_vllm_generate.py; here the routing, the order of the groups, the pushes and the
failure rule are checked exactly, with engines whose requests the test finishes by hand.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch

from recipe import config as C
from recipe import distributed
from recipe.curriculum import PromptPool
from recipe.engines import (
    MultiEngineGenerator,
    engine_devices,
    engines_on_own_devices,
    on_device,
    start_engines,
    visible_devices,
)
from recipe.generate import Completion
from recipe.generate_vllm import GeneratorBrokenError, WeightPushError, check_version
from recipe.pipeline import PipelineRollouts, SharedPool, version_stats


class FakeEngine:
    """One engine: a completion's tokens are ``[engine id, first prompt token]``, stamped with
    the engine's version. ``submit`` requests stay in flight until :meth:`finish` (or 20 ms
    with ``instant``); ``barrier`` makes ``generate`` and ``push_weights`` wait for the other
    engines' calls (they pass only when the calls run concurrently)."""

    def __init__(self, eid, *, barrier=None, fail_push=False, instant=False, version=0):
        self.eid, self.version, self.barrier = eid, version, barrier
        self.fail_push, self.instant = fail_push, instant
        self.calls: list[list[list[int]]] = []
        self.pushes: list[int] = []
        self.pending: list[tuple[Future, list[int], int]] = []
        self.closed = False

    def _group(self, prompt, n):
        return [Completion([self.eid, prompt[0]], [-0.5, -0.5], [self.version] * 2, False)] * n

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        self.calls.append([list(p) for p in prompts])
        return [self._group(p, n) for p in prompts]

    def push_weights(self, state_dict, version):
        check_version(version, self.version)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        if self.fail_push:
            raise RuntimeError(f"engine {self.eid}: worker died")
        self.pushes.append(version)
        self.version = version

    def close(self):
        self.closed = True


class AsyncFakeEngine(FakeEngine):
    def submit(self, prompt, n, *, max_new_tokens, temperature=1.0):
        future: Future = Future()
        if self.instant:  # finished a moment later, stamped with the version then
            timer = threading.Timer(0.02, lambda: future.set_result(self._group(prompt, n)))
            timer.start()
        else:
            self.pending.append((future, list(prompt), n))
        return future

    def finish(self):
        for future, prompt, n in self.pending:
            future.set_result(self._group(prompt, n))
        self.pending.clear()


KW = {"max_new_tokens": 4, "temperature": 1.0}


def test_submit_routes_each_group_to_the_least_loaded_engine():
    engines = [AsyncFakeEngine(i) for i in range(3)]
    gen = MultiEngineGenerator(engines)
    chosen = []
    for n in (4, 2, 1, 1, 3):
        gen.submit([7], n, **KW)
        chosen.append(next(e.eid for e in engines if e.pending and e.pending[-1][2] == n
                           and len(e.pending) == sum(c == e.eid for c in chosen) + 1))  # fmt: skip
    # loads (samples in flight) after each: (4,0,0) (4,2,0) (4,2,1) (4,2,2) (4,5,2);
    # round-robin would have sent the 4th group to engine 0
    assert chosen == [0, 1, 2, 2, 1]
    assert gen.load == [4, 5, 2]
    engines[1].finish()  # engine 1's 5 samples are done: it is the least loaded now
    assert gen.load == [4, 0, 2]
    future = gen.submit([8], 2, **KW)
    assert len(engines[1].pending) == 1
    engines[1].finish()
    assert future.result(timeout=5)[0].tokens == [1, 8]
    assert gen.routed == [4, 7, 2]


def test_generate_splits_a_batch_across_engines_concurrently_and_keeps_the_order():
    barrier = threading.Barrier(2)  # passes only if both engines' calls run at the same time
    engines = [FakeEngine(i, barrier=barrier) for i in range(2)]
    gen = MultiEngineGenerator(engines)
    prompts = [[10 + j] for j in range(5)]
    groups = gen.generate(prompts, 3, **KW)
    assert [len(g) for g in groups] == [3] * 5
    # group j answers prompt j; idle engines share the batch evenly, alternating
    assert [g[0].tokens[1] for g in groups] == [10, 11, 12, 13, 14]
    assert [g[0].tokens[0] for g in groups] == [0, 1, 0, 1, 0]
    assert engines[0].calls == [[[10], [12], [14]]] and engines[1].calls == [[[11], [13]]]
    assert gen.load == [0, 0]


def test_async_generate_keeps_the_order():
    engines = [AsyncFakeEngine(i) for i in range(3)]
    gen = MultiEngineGenerator(engines)
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(gen.generate, [[20 + j] for j in range(7)], 2, **KW)
        deadline = time.monotonic() + 10
        while sum(len(e.pending) for e in engines) < 7:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for e in reversed(engines):  # the last engine finishes first
            e.finish()
        groups = call.result(timeout=10)
    assert [g[0].tokens[1] for g in groups] == list(range(20, 27))
    # equal groups on idle engines: each goes to the least loaded, so they take turns
    assert [g[0].tokens[0] for g in groups] == [0, 1, 2, 0, 1, 2, 0]


def test_a_push_reaches_every_engine_at_one_version_before_it_returns():
    barrier = threading.Barrier(3)  # the three loads run concurrently
    engines = [AsyncFakeEngine(i, barrier=barrier) for i in range(3)]
    gen = MultiEngineGenerator(engines)
    gen.push_weights({"w": torch.ones(2)}, 1)
    assert gen.version == 1 and [e.pushes for e in engines] == [[1], [1], [1]]
    # a version that goes back is refused before any engine sees it; the generator stays usable
    with pytest.raises(WeightPushError, match="version"):
        gen.push_weights({"w": torch.ones(2)}, 0)
    assert [e.pushes for e in engines] == [[1], [1], [1]] and gen.broken is None
    gen.push_weights({"w": torch.ones(2)}, 2)
    assert {e.version for e in engines} == {2}


def test_one_failing_engine_breaks_the_whole_generator():
    engines = [AsyncFakeEngine(0), AsyncFakeEngine(1, fail_push=True), AsyncFakeEngine(2)]
    gen = MultiEngineGenerator(engines)
    in_flight = gen.submit([5], 2, **KW)  # on engine 0, still running during the push
    with pytest.raises(WeightPushError, match=r"failed on engine\(s\) \[1\].*\[0, 2\] hold"):
        gen.push_weights({"w": torch.ones(2)}, 1)
    assert gen.version == 0 and gen.broken is not None
    # tokens finished after the failure are never handed back
    engines[0].finish()
    with pytest.raises(GeneratorBrokenError):
        in_flight.result(timeout=5)
    for call in (
        lambda: gen.submit([5], 1, **KW),
        lambda: gen.generate([[5]], 1, **KW),
        lambda: gen.push_weights({"w": torch.ones(2)}, 2),
    ):
        with pytest.raises(GeneratorBrokenError, match="no longer hold the same weights"):
            call()


def test_engines_must_start_at_one_version_and_close_together():
    with pytest.raises(ValueError, match="different policy versions"):
        MultiEngineGenerator([FakeEngine(0), FakeEngine(1, version=3)])
    with pytest.raises(ValueError, match="at least one"):
        MultiEngineGenerator([])

    class Failing(FakeEngine):
        def close(self):
            raise RuntimeError("engine 0 would not stop")

    engines = [Failing(0), FakeEngine(1)]
    with pytest.raises(RuntimeError, match="would not stop"):
        MultiEngineGenerator(engines).close()
    assert engines[1].closed  # every engine is closed, the first error raised after


def test_the_pipeline_over_several_engines_keeps_the_lag_bound():
    """PipelineRL-k on three engines: the source publishes a version only once every engine
    holds it, so admission still bounds every token's lag by k."""
    k = 2
    engines = [AsyncFakeEngine(i, instant=True) for i in range(3)]
    gen = MultiEngineGenerator(engines)
    cfg = C.Config(steps=12, prompts_per_step=3, generations=2, max_new_tokens=4)
    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = PipelineRollouts(gen, pool, [[5]] * 50, cfg, k, first_step=1, version=0)
    try:
        for step in range(1, 13):
            batch = src.next_batch(step)
            stats = version_stats(batch.groups, trainer_version=step - 1)
            assert 0 <= stats["lag_min"] <= stats["lag_max"] <= k
            src.push({"w": torch.zeros(1)}, version=step)
            assert {e.version for e in engines} == {step}
    finally:
        src.close()
    assert all(sum(e.pushes) == sum(range(1, 13)) for e in engines)
    assert min(gen.routed) > 0  # every engine generated


# --------------------------------------------------------------------------- devices


def test_engine_devices_follow_the_trainer_ranks():
    # CPU, or one rpc engine: the engines see the trainer's devices
    assert engine_devices(3, None, cuda=False, weight_transfer="rpc", trainer_gpus=1) is None
    assert engine_devices(1, None, cuda=True, weight_transfer="rpc", trainer_gpus=1) is None
    # an 8-GPU node with 2 trainer ranks and 6 engines: GPUs 2..7
    assert engine_devices(6, None, cuda=True, weight_transfer="rpc", trainer_gpus=2) == [
        2, 3, 4, 5, 6, 7,
    ]  # fmt: skip
    # NCCL needs the one engine off the trainer's GPU
    assert engine_devices(1, None, cuda=True, weight_transfer="nccl", trainer_gpus=1) == [1]
    assert engine_devices(2, [5, 3], cuda=True, weight_transfer="rpc", trainer_gpus=2) == [5, 3]
    assert engines_on_own_devices(None, 1) == 0
    assert engines_on_own_devices([2, 3, 4, 5, 6, 7], 2) == 6
    assert engines_on_own_devices([0, 1], 1) == 1  # engine 0 shares the trainer's GPU 0


def test_visible_devices_index_into_the_trainers():
    assert visible_devices(3, None) == "3"
    assert visible_devices(1, "4,5,6") == "5"
    assert visible_devices(0, "GPU-a1, GPU-b2") == "GPU-a1"
    with pytest.raises(ValueError, match="not among the trainer's visible devices"):
        visible_devices(3, "4,5,6")


def test_engines_start_one_by_one_each_seeing_its_device(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    seen = []

    def make(i):
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
        return FakeEngine(i)

    gen = start_engines(make, 2, [2, 3])
    assert seen == ["2", "3"] and len(gen.engines) == 2
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # restored
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with on_device(1):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ

    started = []

    def make_failing(i):
        if i == 2:
            raise RuntimeError("no memory on GPU 2")
        started.append(FakeEngine(i))
        return started[-1]

    with pytest.raises(RuntimeError, match="no memory"):
        start_engines(make_failing, 3, None)
    assert [e.closed for e in started] == [True, True]  # no engine left running


def test_gpu_hours_count_the_engines_own_gpus(monkeypatch):
    from recipe.run import devices_in_use

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    cfg = C.from_dict({"generator": "vllm", "generators": 6, "device": "cuda"})
    two = distributed.Ranks(rank=0, world=2, local=0)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert devices_in_use(cfg, two, cuda) == 8  # 2 trainer GPUs + 6 engines
    assert devices_in_use(cfg, two, cpu) == 2  # on CPU the engines share the cores
    one = C.from_dict({"generator": "vllm", "device": "cuda"})
    assert devices_in_use(one, distributed.SINGLE, cuda) == 1  # the engine shares GPU 0
    nccl = C.from_dict({"generator": "vllm", "device": "cuda", "mode": "pipeline",
                        "weight_transfer": "nccl"})  # fmt: skip
    assert devices_in_use(nccl, distributed.SINGLE, cuda) == 2


def test_make_generators_starts_one_engine_per_generator(monkeypatch, tmp_path, init_dir):
    """The wiring in recipe/run.py, with the vLLM engine class replaced by a fake."""
    import recipe.generate_vllm as gv
    from recipe.run import make_generators, setup

    made = []

    class Engine(FakeEngine):
        def __init__(self, model_dir, *, seed, **kw):
            super().__init__(len(made))
            made.append((seed, kw))

    monkeypatch.setattr(gv, "VLLMGenerator", Engine)
    cfg = C.from_dict({"init": str(init_dir), "generator": "vllm", "generators": 3,
                       "train_prompts": 300, "val_prompts": 16, "threads": 1})  # fmt: skip
    generator, evaluator = make_generators(cfg, setup(cfg, tmp_path), 64)
    assert isinstance(generator, MultiEngineGenerator) and evaluator is generator
    assert len(generator.engines) == 3
    assert [seed for seed, _ in made] == [1, 1001, 2001]  # engine 0 keeps the one-engine seed
    assert all("gpu_memory_utilization" not in kw for _, kw in made)  # CPU: vLLM's own
    generator.close()
    assert all(e.closed for e in generator.engines)


def test_more_engines_than_gpus_is_refused_with_the_fix(monkeypatch):
    from recipe.config import ConfigError
    from recipe.run import engine_layout

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    two = distributed.Ranks(rank=0, world=2, local=0)
    cfg = C.from_dict({"generator": "vllm", "generators": 2, "device": "cuda"})
    assert engine_layout(cfg, torch.device("cuda"), two) == [2, 3]
    cfg = C.from_dict({"generator": "vllm", "generators": 6, "device": "cuda"})
    with pytest.raises(ConfigError, match=r"need GPUs \[2, 3, 4, 5, 6, 7\].*shows 4"):
        engine_layout(cfg, torch.device("cuda"), two)


def test_the_launch_layout_is_rank_0s_on_every_node(monkeypatch):
    # a rank on node 1 of a two-node launch: its own node has 8 trainer ranks and 8 GPUs, so
    # working the engines out from its LOCAL_WORLD_SIZE would ask for GPUs 8-13 and refuse.
    # It takes rank 0's layout (2 trainer ranks there, engines on GPUs 2-7) instead.
    import recipe.run as run_mod

    def must_not_run(*args, **kwargs):
        raise AssertionError("only rank 0 places the engines")

    rank0 = ([2, 3, 4, 5, 6, 7], 16)
    monkeypatch.setattr(run_mod, "engine_layout", must_not_run)
    monkeypatch.setattr(run_mod.distributed, "broadcast", lambda obj, ranks: rank0)
    monkeypatch.setattr(run_mod.distributed, "all_sum", lambda values, ranks: [16.0])
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    cfg = C.from_dict({"generator": "vllm", "generators": 6, "device": "cuda"})
    node1 = distributed.Ranks(rank=9, world=10, local=7)
    layout = run_mod.launch_layout(cfg, node1, torch.device("cuda"))
    assert layout == run_mod.Layout(engines=[2, 3, 4, 5, 6, 7], in_use=16, held=16)
    # the job holds what its nodes show, never less than it uses
    monkeypatch.setattr(run_mod.distributed, "all_sum", lambda values, ranks: [0.0])
    assert run_mod.launch_layout(cfg, node1, torch.device("cuda")).held == 16
