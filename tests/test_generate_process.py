"""The pipeline's torch sampler in its own process (recipe/generate_process.py)."""

from __future__ import annotations

import collections
import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import recipe_helpers
import torch

from recipe.curriculum import PromptPool
from recipe.generate import TorchGenerator
from recipe.generate_process import (
    GeneratorProcessError,
    ProcessGenerator,
    torch_sampler_builder,
)
from recipe.model import encode_prompts, load_policy, stop_token_ids
from recipe.pipeline import PipelineRollouts, SharedPool, version_stats

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def policy(init_dir):
    torch.set_num_threads(1)
    model, tok = load_policy(init_dir)
    prompts = encode_prompts(tok, ["123+456=", "905+87=", "11+11="], False)
    return model, tok, stop_token_ids(tok, init_dir), prompts


def sampler_process(init_dir, policy, **kw) -> ProcessGenerator:
    model, tok, stops, _ = policy
    build = torch_sampler_builder(
        init_dir, "cpu", eos_ids=stops, pad_id=tok.pad_token_id, fp32_head=True, seed=1
    )
    return ProcessGenerator(build, model.state_dict(), **kw)


def gone(pid: int) -> bool:
    """No such process, or only its zombie entry (exited, not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_the_child_samples_exactly_what_the_in_process_sampler_samples(init_dir, policy):
    model, tok, stops, prompts = policy
    local = TorchGenerator(
        model, eos_ids=stops, pad_id=tok.pad_token_id, fp32_head=True, seed=1, copy=True
    )
    remote = sampler_process(init_dir, policy)
    try:
        assert remote.pid != os.getpid()
        first = remote.generate(prompts, 4, max_new_tokens=5)
        assert first == local.generate(prompts, 4, max_new_tokens=5)  # tokens and logprobs
        assert torch.equal(remote.rng.get_state(), local.rng.get_state())
        # a push: the child samples from the new weights, stamped with their version
        gen = torch.Generator().manual_seed(0)
        moved = {
            k: v + 0.05 * torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items()
        }
        local.push_weights(moved, 3)
        remote.push_weights(moved, 3)
        assert remote.version == 3
        pushed = remote.generate(prompts, 4, max_new_tokens=5)
        assert pushed == local.generate(prompts, 4, max_new_tokens=5)
        assert pushed != first
        assert all(c.versions == [3] * len(c.tokens) for g in pushed for c in g)
        # the sampler's random state round-trips (what a checkpoint and --resume do)
        state = remote.rng.get_state()
        again = remote.generate(prompts, 2, max_new_tokens=5)
        remote.rng.set_state(state)
        assert remote.generate(prompts, 2, max_new_tokens=5) == again
    finally:
        remote.close()
    assert not remote.process.is_alive() and remote.process.exitcode == 0
    assert gone(remote.pid)
    remote.close()  # idempotent


def test_child_errors_come_back_and_a_dead_child_is_noticed(init_dir, policy):
    _, _, _, prompts = policy
    remote = sampler_process(init_dir, policy)
    try:
        with pytest.raises(GeneratorProcessError, match=r"(?s)failed:.*Traceback.*IndexError"):
            remote.generate([[10**6]], 1, max_new_tokens=2)  # beyond the vocabulary
        assert len(remote.generate(prompts, 1, max_new_tokens=5)) == 3  # still serving
        with pytest.raises(ValueError, match="weight names differ"):
            remote.push_weights({"w": torch.zeros(1)}, 1)
        assert remote.version == 0
        os.kill(remote.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(GeneratorProcessError, match=r"died|gone|closed its pipe"):
            remote.generate(prompts, 1, max_new_tokens=5)
        assert time.monotonic() - start < 30
    finally:
        remote.close()
    assert gone(remote.pid)


KILLED_TRAINER = """
import functools, sys, time, torch
from recipe.generate_process import ProcessGenerator
from recipe_helpers import SleepyGenerator
if __name__ == "__main__":
    g = ProcessGenerator(functools.partial(SleepyGenerator, 0.0), {"w": torch.zeros(2)},
                         start_method=sys.argv[1])
    print(g.pid, flush=True)
    time.sleep(600)
"""


# ~5 s: a python process that starts a sampler child and is then SIGKILLed (no cleanup runs)
def test_a_killed_trainer_leaves_no_sampler_process(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(KILLED_TRAINER)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), "spawn"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        child = int(proc.stdout.readline())
        assert not gone(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        end = time.monotonic() + 30
        while not gone(child):  # it checks for its trainer every second
            assert time.monotonic() < end, f"sampler process {child} outlived its trainer"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()


RESET_TRAINER = """
import functools, sys, time, torch
from recipe.generate_process import ProcessGenerator
from recipe_helpers import SleepyGenerator
if __name__ == "__main__":
    g = ProcessGenerator(functools.partial(SleepyGenerator, 0.0), {"w": torch.zeros(2)})
    g._conn.send(("generate", ([[1]], 1, {"max_new_tokens": 1})))  # its answer is never read
    time.sleep(1.0)
    print(g.pid, flush=True)
    time.sleep(600)
"""


def test_regression_a_sampler_child_whose_trainer_is_killed_exits_without_a_traceback(tmp_path):
    """A trainer killed with an answer of its sampler child unread (SIGKILL, or SIGTERM before
    the trainer handled it) reset the pipe, and the child printed a ConnectionResetError
    traceback under the trainer's own exit; it now exits quietly, as on a closed pipe."""
    script = tmp_path / "trainer.py"
    script.write_text(RESET_TRAINER)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    try:
        child = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        end = time.monotonic() + 30
        while not gone(child):
            assert time.monotonic() < end, f"sampler process {child} outlived its trainer"
            time.sleep(0.1)
        # the child shares the trainer's stderr: read what it wrote before it exited
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in err, err


def test_process_producer_gives_a_staleness_mixture_within_the_bound():
    # A sampler process that takes 50 ms per batch, and a trainer that takes 5 ms per step but
    # stalls 400 ms every 6th step. Each stall lets the producer run ahead to the admission bound
    # (lags 2 .. k once the trainer drains the queue); in between, the trainer waits for every
    # batch (lag 1).
    # Measured (loaded 2-core machine): {0: 1, 1: 14, 2: 3, 3: 6} (lag 0: step 1).
    k, steps = 3, 24
    cfg = fake_cfg(steps)
    engine = ProcessGenerator(functools.partial(recipe_helpers.SleepyGenerator, 0.05),
                              {"w": torch.zeros(2)})  # fmt: skip
    pool = SharedPool(PromptPool(50, seed=0, positive_threshold=None))
    src = PipelineRollouts(engine, pool, [[5]] * 50, cfg, k, first_step=1, version=0)
    lags = []
    try:
        for step in range(1, steps + 1):
            batch = src.next_batch(step)
            stats = version_stats(batch.groups, trainer_version=step - 1)
            assert stats["lag_min"] == stats["lag_max"]  # one version per batch
            lags.append(stats["lag_max"])
            time.sleep(0.4 if step % 6 == 0 else 0.005)
            src.push({"w": torch.full((2,), float(step))}, version=step)
    finally:
        src.close()
        engine.close()
    histogram = dict(sorted(collections.Counter(lags).items()))
    print(f"lag histogram: {histogram}")
    assert max(lags) <= k
    assert len(histogram) >= 2, histogram


def fake_cfg(steps: int):
    """The config fields PipelineRollouts reads."""
    from types import SimpleNamespace

    return SimpleNamespace(
        steps=steps, prompts_per_step=2, generations=3, max_new_tokens=4, temperature=1.0
    )
