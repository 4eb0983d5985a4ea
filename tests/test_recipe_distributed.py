"""The sharded trainer (recipe/distributed.py) on CPU with gloo: two ranks = one rank."""

import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import recipe_helpers
import torch

ROOT = Path(__file__).resolve().parents[1]

# One train_step on a fixed batch, with whatever ranks torchrun gives (none: one process). Rank 0
# saves the step's log row and the updated full weights.
WORKER = """
import json, os, sys, torch
from pathlib import Path
from recipe import config as C, distributed
from recipe.curriculum import PromptPool
from recipe.forward import resolve_device
from recipe.generate import Completion
from recipe.pipeline import Batch, SharedPool
from recipe.run import make_optimizer, setup, shard
from recipe import train

# the tiny policy scores 0 on the task: a reward that varies within groups, so the step moves
train.score = lambda task, tokenizer, stop_ids, c, prompt: float(sum(c.tokens) % 3 == 0)

cfg_values, batch_path, out = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
cfg = C.from_dict(cfg_values)
torch.set_num_threads(1)
torch.manual_seed(0)
ranks = distributed.init(resolve_device(cfg.device))
s = setup(cfg, out, ranks)
shard(cfg, s)
optimizer = make_optimizer(cfg, s.model)
pool = SharedPool(PromptPool(len(s.train_prompts), cfg.seed, cfg.positive_threshold))
raw = json.loads(batch_path.read_text())
batch = Batch(raw["indices"], [[Completion(**c) for c in g] for g in raw["groups"]])
if os.environ.get("POISON_RANK") == os.environ.get("RANK", "0"):  # a NaN loss on that rank only
    real_loss = train.policy_loss
    def poisoned(*args, **kwargs):
        loss, diag = real_loss(*args, **kwargs)
        return loss * float("nan"), diag
    train.policy_loss = poisoned
row = train.train_step(cfg, s, batch, optimizer, pool, step=1)
weights = distributed.full_state_dict(s.model, ranks)
if ranks.main:
    torch.save({"weights": weights, "pool": pool.state_dict()}, out / "result.pt")
    (out / "row.json").write_text(json.dumps(row))
distributed.close(ranks)
distributed.end_process()
"""


def _batch(init, cfg, tmp_path):
    """One step's rollouts from the tiny policy, as JSON."""
    from recipe.curriculum import PromptPool
    from recipe.pipeline import SharedPool
    from recipe.run import make_generators, make_rollouts, setup

    torch.set_num_threads(1)
    s = setup(cfg, tmp_path / "gen")
    pool = SharedPool(PromptPool(len(s.train_prompts), cfg.seed, cfg.positive_threshold))
    generator, _ = make_generators(cfg, s, 64)
    batch = make_rollouts(cfg, generator, pool, s.train_ids, first_step=1).next_batch(1)
    path = tmp_path / "batch.json"
    groups = [[dataclasses.asdict(c) for c in g] for g in batch.groups]
    path.write_text(json.dumps({"indices": batch.indices, "groups": groups}))
    return path


def _run(cmd, tmp_path, name, cfg_values, batch, **extra_env):
    out = tmp_path / name
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra_env}
    env.pop("WORLD_SIZE", None)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.run(
        [*cmd, str(script), json.dumps(cfg_values), str(batch), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = torch.load(out / "result.pt", weights_only=True)
    return json.loads((out / "row.json").read_text()), result


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2"]  # fmt: skip


# ~20-27 s each (a 1-rank and a 2-rank launch); one case in the quick suite
@pytest.mark.parametrize(
    ("aggregation", "updates"), [("prompt", 2), pytest.param("token", 1, marks=pytest.mark.slow)]
)
def test_two_ranks_give_the_one_rank_loss_and_weights(tmp_path, init_dir, aggregation, updates):
    # 3 prompt groups of 4 over 2 ranks: rank 0 trains 8 completions in 3 micro-batches of 3,
    # rank 1 4 completions in 2 and one zero-weighted padding micro-batch. With 2 updates the
    # minibatches are 2 groups and 1: a rank may hold no group of one (it pads), and every
    # rank takes both optimizer steps
    cfg_values = {
        "init": str(init_dir), "train_prompts": 300, "val_prompts": 16, "prompts_per_step": 3,
        "generations": 4, "threads": 1, "micro_batch_size": 3, "aggregation": aggregation,
        "zero_variance_filter": True, "lr": 1e-4, "lr_warmup_steps": 0,
        "updates_per_batch": updates,
    }  # fmt: skip
    cfg = recipe_helpers.C.from_dict(cfg_values)
    batch = _batch(init_dir, cfg, tmp_path)
    row1, one = _run([sys.executable], tmp_path, "one", cfg_values, batch)
    row2, two = _run(TORCHRUN, tmp_path, "two", cfg_values, batch)
    assert row1["updated"] and row2["updated"]
    assert row1["updates"] == row2["updates"] == updates
    assert row2["loss"] == pytest.approx(row1["loss"], abs=1e-6)
    assert row2["grad_norm"] == pytest.approx(row1["grad_norm"], rel=1e-5)
    for key in (
        "clip_fraction",
        "zero_grad_fraction",
        "rho_mean",
        "rho_max",
        "trained_tokens",
        "samples",
        "tokens",
        "train_reward",
        "prompts_filtered",
    ):
        assert row2[key] == pytest.approx(row1[key], rel=1e-6), key
    torch.testing.assert_close(
        two["pool"], one["pool"], rtol=0, atol=0, equal_nan=True
    )  # same history
    assert one["weights"].keys() == two["weights"].keys()
    from recipe.model import load_policy

    init = load_policy(init_dir, torch.device("cpu"))[0].state_dict()
    step_size = max((one["weights"][k] - init[k]).abs().max().item() for k in init)
    # AdamW's first step moves a weight by about lr whatever its gradient: lr = 1e-4 is 100x the
    # tolerance, and small enough that Adam's g / (|g| + eps) on gradients near eps does not
    # blow float32 rounding of the gradient sum up past it (at lr 1e-3: 2e-6 on 5 of 0.5M)
    assert step_size > 5e-5
    for name, w1 in one["weights"].items():
        torch.testing.assert_close(two["weights"][name], w1, atol=1e-6, rtol=0, msg=name)


# ~20 s (one 2-rank launch)
def test_a_nan_loss_on_one_rank_skips_the_update_on_all(tmp_path, init_dir):
    # the other rank must not hang in FSDP's gradient reduction, and no rank may step
    cfg_values = {
        "init": str(init_dir), "train_prompts": 300, "val_prompts": 16, "prompts_per_step": 3,
        "generations": 4, "threads": 1, "micro_batch_size": 3, "lr": 1e-4,
    }  # fmt: skip
    batch = _batch(init_dir, recipe_helpers.C.from_dict(cfg_values), tmp_path)
    row, result = _run(TORCHRUN, tmp_path, "two", cfg_values, batch, POISON_RANK="1")
    assert row["skipped_update"] and not row["updated"] and row["loss"] is None
    from recipe.model import load_policy

    init = load_policy(init_dir, torch.device("cpu"))[0].state_dict()
    for name, w in result["weights"].items():
        torch.testing.assert_close(w, init[name], rtol=0, atol=0, msg=name)


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (torchrun starts each rank in a session of its own,
    so killing torchrun's process group would leave the ranks running)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _kill_after_first_checkpoint(cmd, out: Path, env, log_file: Path) -> None:
    """Start ``cmd`` (torchrun), wait for the first checkpoint, then SIGKILL torchrun and every
    rank at once, as a machine that loses power would."""
    import signal
    import time

    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while not (out / "checkpoint.pt").exists():
                assert proc.poll() is None, log_file.read_text()[-4000:]
                assert time.monotonic() < deadline, "no checkpoint within 300 s"
                time.sleep(0.02)
            for pid in [*_children(proc.pid), proc.pid]:
                os.kill(pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)


# ~21 s for one 2-rank run (setup, 6 steps, 4 evaluations), plus ~12 s for the killed start
def test_two_rank_run_writes_one_log_that_read_log_reads_and_resumes_after_a_kill(
    tmp_path, init_dir
):
    import rlcurves

    cfg = recipe_helpers.tiny_cfg(
        init_dir, steps=6, eval_every=2, checkpoint_every=2, prompts_per_step=3
    )
    config = tmp_path / "config.yaml"
    config.write_text(recipe_helpers.C.to_yaml(cfg))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [*TORCHRUN, "-m", "recipe.train", "--config", str(config), "--out", str(out)]
    _kill_after_first_checkpoint(cmd, out, env, tmp_path / "killed.txt")
    assert not (out / "final").exists(), "the kill landed after the run ended: nothing tested"
    killed = recipe_helpers.read_log(out / "log.jsonl")
    assert killed and killed[-1]["step"] < 6
    proc = subprocess.run(
        [*cmd, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    # one log, rank 0's: no row twice, none lost across the kill
    rows = recipe_helpers.read_log(out / "log.jsonl")
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 2, 4, 6]
    assert all(b["wall_seconds"] > a["wall_seconds"] for a, b in itertools.pairwise(train))
    assert (out / "final" / "config.json").exists()
    # accounting: one device per rank (cfg.devices = 1 is the one-rank run's); the bill is
    # never below it, and continues across the kill
    for r in train:
        assert r["gpu_hours"] == pytest.approx(r["wall_seconds"] / 3600 * 2)
    assert all(r["allocated_gpu_hours"] >= r["gpu_hours"] for r in rows)
    billed = [r["allocated_gpu_hours"] for r in rows]
    assert billed == sorted(billed)
    from recipe.model import load_policy

    n = sum(p.numel() for p in load_policy(init_dir, torch.device("cpu"))[0].parameters())
    expected = 0.0
    for r in train:
        expected += 6 * n * r["trained_tokens"] + 2 * n * r["tokens"]
        assert r["flops"] == pytest.approx(expected)
    curve = rlcurves.read_log(out / "log.jsonl")
    assert len(curve) >= 2
    by_flops = rlcurves.read_log(out / "log.jsonl", compute="flops")
    assert len(by_flops) == len(curve)


@pytest.mark.slow  # ~45 s: two 2-rank launches
def test_two_rank_run_resumes_from_its_sharded_checkpoint(tmp_path, init_dir):
    cfg = recipe_helpers.tiny_cfg(init_dir, steps=3, eval_every=2, checkpoint_every=2)
    config = tmp_path / "config.yaml"
    config.write_text(recipe_helpers.C.to_yaml(cfg))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

    def launch(*extra):
        proc = subprocess.run(
            [*TORCHRUN, "-m", "recipe.train", "--config", str(config), "--out", str(out), *extra],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]

    launch()
    first = recipe_helpers.read_log(out / "log.jsonl")
    assert sorted(p.name for p in (out / "checkpoint.pt.shards").iterdir()) == ["step-3"]
    launch("--resume", "--set", "steps=5")
    rows = recipe_helpers.read_log(out / "log.jsonl")
    assert rows[: len(first)] == first
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4, 5]
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 2, 3, 4, 5]
    train = [r for r in rows if r["kind"] == "train"]
    assert all(b["wall_seconds"] > a["wall_seconds"] for a, b in itertools.pairwise(train))
    assert all(b["flops"] > a["flops"] for a, b in itertools.pairwise(train))
    # the same checkpoint refuses a one-process resume, with the launch to use
    from recipe.config import ConfigError
    from recipe.train import run

    with pytest.raises(ConfigError, match="2 ranks"):
        run(recipe_helpers.C.from_dict({**cfg.__dict__, "steps": 6}), out, resume=True)


# A rank that never reaches the collective: rank 0's barrier must fail after the timeout (and
# torchrun then stops rank 1) rather than wait for it.
HUNG_RANK = """
import sys, time, torch
from recipe import distributed
ranks = distributed.init(torch.device("cpu"), timeout=float(sys.argv[1]))
if ranks.rank == 1:
    time.sleep(600)
distributed.barrier(ranks)
"""


# ~8 s (one 2-rank launch of a script that imports torch)
def test_a_hung_rank_fails_the_job_after_dist_timeout(tmp_path):
    script = tmp_path / "hung.py"
    script.write_text(HUNG_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    # without the timeout this would block for rank 1's 600 s sleep, past the 120 s below
    proc = subprocess.run(
        [*TORCHRUN, str(script), "3"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "timed out waiting 3000ms" in proc.stderr.lower(), proc.stderr[-4000:]  # ours: 3 s


# Issue 25: rank 1 reached the end first and died in teardown with "terminate called without an
# active exception" (SIGABRT). A gloo worker thread frees a finished collective's tensors just
# after the caller has moved on, which takes the GIL; one still waiting for it when the
# interpreter starts finalizing is ended by pthread_exit, which aborts the process. Here rank 1
# closes while rank 0 is still busy and then keeps the GIL (as a loaded machine's slow last
# steps do), so that its worker thread is still waiting when the rank ends: ending through
# finalization (a bare destroy_process_group) aborts every time.
EARLY_CLOSE = """
import sys, time, torch, torch.distributed as dist
from recipe import distributed
ranks = distributed.init(torch.device("cpu"))
held = dist.group.WORLD  # as the trainer's FSDP modules and DTensor's caches hold the group


class Finalized:  # collected only if the interpreter finalizes; its output wakes gloo's threads
    def __del__(self, err=sys.stderr, rank=ranks.rank):
        print(f"rank {rank} finalized the interpreter", file=err, flush=True)


marker = Finalized()
gathered = [torch.zeros(1000) for _ in range(ranks.world)]
work = dist.all_gather(gathered, torch.ones(1000), async_op=True)
del gathered, work  # freed by gloo's worker thread when the collective ends: it takes the GIL
if ranks.rank == 0:
    time.sleep(1)  # still busy (writing its files) when rank 1 reaches close()
distributed.close(ranks)
sys.setswitchinterval(100)  # from here this thread keeps the GIL
start = time.perf_counter()
while time.perf_counter() - start < 2:
    pass
distributed.end_process()
"""


# ~10 s (one 2-rank launch of a script that imports torch)
def test_a_rank_that_closes_first_ends_without_the_gloo_teardown_abort(tmp_path):
    script = tmp_path / "early_close.py"
    script.write_text(EARLY_CLOSE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [*TORCHRUN, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "terminate called" not in proc.stderr
    # the cure: a rank ends without finalizing the interpreter, the step that aborts a thread
    # waiting for the GIL
    assert "finalized the interpreter" not in proc.stderr


# A rank that fails leaves at once: close() starts no barrier with an exception in flight (rank 0
# is elsewhere, as after a failure it may be, and would never join one).
FAILING_RANK = """
import time, torch
from recipe import distributed
ranks = distributed.init(torch.device("cpu"), timeout=300.0)
try:
    if ranks.rank == 1:
        raise RuntimeError("rank 1 failed")
    time.sleep(600)
finally:
    distributed.close(ranks)
"""


# ~10 s (one 2-rank launch of a script that imports torch)
def test_a_failing_rank_closes_without_waiting_for_the_others(tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(FAILING_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    # a barrier in close() would hold rank 1 for the 300 s collective timeout, past the 120 s
    proc = subprocess.run(
        [*TORCHRUN, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "rank 1 failed" in proc.stderr, proc.stderr[-4000:]


def test_the_trainer_passes_dist_timeout_to_the_process_group(tmp_path, monkeypatch):
    from recipe import distributed
    from recipe.train import run

    seen = []

    def init(device, timeout):
        seen.append(timeout)
        raise KeyboardInterrupt  # stop right there: only the call is checked

    monkeypatch.setattr(distributed, "init", init)
    with pytest.raises(KeyboardInterrupt):
        run(recipe_helpers.C.from_dict({"dist_timeout": 77}), tmp_path / "run")
    assert seen == [77]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ~30 s idle (two agents, one rank each): the README's two-node launch, on one machine
def test_a_two_node_launch_on_one_machine_writes_one_log(tmp_path, init_dir):
    cfg = recipe_helpers.tiny_cfg(init_dir, steps=3, eval_every=3, checkpoint_every=3)
    config = tmp_path / "config.yaml"
    config.write_text(recipe_helpers.C.to_yaml(cfg))
    out = tmp_path / "run"  # the folder every node sees
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)

    def agent(node: int) -> subprocess.Popen:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
            str(node), "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
            "--master-port", str(port), "-m", "recipe.train", "--config", str(config),
            "--out", str(out),
        ]  # fmt: skip
        log = open(tmp_path / f"node{node}.txt", "w")
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    agents = [agent(0), agent(1)]
    try:
        codes = [a.wait(timeout=600) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
            a.stdout and a.stdout.close()
    texts = [(tmp_path / f"node{n}.txt").read_text()[-3000:] for n in (0, 1)]
    assert codes == [0, 0], texts
    rows = recipe_helpers.read_log(out / "log.jsonl")  # rank 0's, the only one
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3]
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 3]
    for r in rows:  # two ranks (one per node): two devices, the bill at least that
        assert r["gpu_hours"] == pytest.approx(r["wall_seconds"] / 3600 * 2)
        assert r["allocated_gpu_hours"] >= r["gpu_hours"]
    # both ranks wrote their checkpoint shards into the shared folder
    shards = out / "checkpoint.pt.shards" / "step-3"
    assert sorted(p.name for p in shards.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert (out / "final" / "config.json").exists()


# FSDP2 with the bf16 policy, on one rank of a gloo group (world 1): the input of a decoder
# layer after the first is the residual stream. FSDP2's default would cast it to bf16 at every
# layer; one process under autocast keeps it FP32, and so must the sharded trainer.
RESIDUAL = """
import sys, torch, torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy
from recipe import distributed
from recipe.forward import completion_logprobs
from recipe.model import load_policy
dist.init_process_group("gloo", rank=0, world_size=1)
for name in ("recipe", "fsdp-default"):
    model, tok = load_policy(sys.argv[1])
    layers = distributed.decoder_layers(model)
    layer_policy, root_policy = distributed.precision_policies(bf16=True, fp32_head=True)
    if name == "fsdp-default":  # the control: FSDP2's own default
        layer_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    distributed.fully_shard_model(model, layer_policy, root_policy)
    seen = []
    layers[-1].register_forward_pre_hook(lambda m, args, kw: seen.append(
        (args[0] if args else kw["hidden_states"]).dtype), with_kwargs=True)
    completion_logprobs(model, [[1, 2, 3]], [[4, 5]], fp32_head=True, temperature=1.0,
                        pad_id=tok.pad_token_id, dtype="bfloat16")
    print(name, seen[0])
dist.destroy_process_group()
"""


# ~10 s idle (one process)
def test_the_sharded_bf16_trainer_keeps_the_residual_stream_in_fp32(tmp_path, init_dir):
    script = tmp_path / "residual.py"
    script.write_text(RESIDUAL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(script), str(init_dir)], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    dtypes = dict(line.split() for line in proc.stdout.splitlines()[-2:])
    assert dtypes == {"recipe": "torch.float32", "fsdp-default": "torch.bfloat16"}


# A 2-rank launch on a tied tiny Qwen2: only rank 0 reads the weights; every rank's shards and
# buffers come from them; a push gathers each parameter once, cast to bf16 before the gather,
# with the tied head riding on the embedding's gather; a push rank 0 refuses ends both ranks.
SHARDED_PUSH = """
import json, sys, time, torch
from pathlib import Path
import transformers
from recipe import config as C, distributed
from recipe.forward import completion_logprobs, resolve_device
from recipe.generate_vllm import WeightPushError
from recipe.pipeline import GeneratorFailed
from recipe.run import setup, shard
from torch.distributed.tensor import DTensor

out, cfg = Path(sys.argv[1]), C.from_dict(json.loads(sys.argv[2]))
torch.set_num_threads(1)
ranks = distributed.init(resolve_device("cpu"), timeout=1800)
if not ranks.main:  # rank 1 must never read the checkpoint
    def refuse(*a, **k):
        raise AssertionError("rank 1 loaded the weights")
    transformers.AutoModelForCausalLM.from_pretrained = refuse
s = setup(cfg, out, ranks)
meta = all(p.is_meta for p in s.model.parameters())
shard(cfg, s)
tied = s.model.lm_head.weight is s.model.model.embed_tokens.weight
result = {"meta_before_shard": meta, "tied": tied}
torch.save({n: b.clone() for n, b in s.model.named_buffers()}, out / f"buffers-{ranks.rank}.pt")
with torch.no_grad():  # the same forward on both ranks (an FSDP collective)
    logp, _ = completion_logprobs(s.model, s.train_ids[:2], [[5, 6, 7]] * 2, fp32_head=True,
                                  temperature=1.0, pad_id=s.tokenizer.pad_token_id)
result["logp"] = logp.tolist()
gathers = []
real = DTensor.full_tensor
def counted(self, *a, **k):
    gathers.append(self.dtype)
    return real(self, *a, **k)
DTensor.full_tensor = counted
weights = distributed.model_weights(s.model, ranks, torch.bfloat16)
got = {}
distributed.hand_over(weights, (lambda w: got.update(dict(w.items()))) if ranks.main else None,
                      ranks)
result["gathers"] = [str(d) for d in gathers]
result["names"] = list(got)
result["shapes"] = list(weights.shapes)
if ranks.main:
    torch.save({k: v.clone() for k, v in got.items()}, out / "pushed.pt")
# a push that rank 0 refuses before reading: every rank stops at once
weights = distributed.model_weights(s.model, ranks, torch.bfloat16)
def refuse_push(w):
    raise WeightPushError("weight push refused: contains NaN or inf")
start = time.perf_counter()
try:
    distributed.hand_over(weights, refuse_push if ranks.main else None, ranks)
    result["refused"] = None
except (GeneratorFailed, WeightPushError) as err:
    result["refused"] = type(err).__name__ + ": " + str(err)
result["refuse_seconds"] = time.perf_counter() - start
(out / f"result-{ranks.rank}.json").write_text(json.dumps(result))
distributed.barrier(ranks)
distributed.close(ranks)
distributed.end_process()
"""


# ~25 s (one 2-rank launch)
def test_a_sharded_push_gathers_each_parameter_once_in_the_engine_dtype(tmp_path):
    from recipe.model import load_policy

    folder = recipe_helpers.build_hf_folder("qwen2", tmp_path / "model")
    cfg = recipe_helpers.hf_cfg(folder)
    values = {f: getattr(cfg, f) for f in ("init", "task", "chat_template", "val_prompts",
                                            "prompts_per_step", "threads", "device")}  # fmt: skip
    script = tmp_path / "push.py"
    script.write_text(SHARDED_PUSH)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.run(
        [*TORCHRUN, str(script), str(tmp_path), json.dumps(values)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"result-{r}.json").read_text()) for r in (0, 1))
    # rank 1 built the model on the meta device and never read the weights (patched to fail)
    assert r1["meta_before_shard"] and not r0["meta_before_shard"]
    assert r0["tied"] and r1["tied"]
    reference = load_policy(folder)[0]
    # its buffers (rotary frequencies: in no state dict) and its forward are rank 0's
    b0, b1 = (torch.load(tmp_path / f"buffers-{r}.pt", weights_only=True) for r in (0, 1))
    for name, buf in reference.named_buffers():
        assert torch.equal(b0[name], buf) and torch.equal(b1[name], buf), name
    assert r1["logp"] == r0["logp"]
    # the push: every parameter gathered once, in bf16; the tied head right after the
    # embedding it shares, never gathered on its own
    state = reference.state_dict()
    unique = len(list(reference.parameters()))
    assert len(state) == unique + 1  # lm_head.weight is the embedding
    assert r0["gathers"] == r1["gathers"] == ["torch.bfloat16"] * unique
    names = r0["names"]
    assert sorted(names) == sorted(state) and names == r0["shapes"]
    assert names[names.index("model.embed_tokens.weight") + 1] == "lm_head.weight"
    pushed = torch.load(tmp_path / "pushed.pt", weights_only=True)
    for name, value in state.items():
        assert pushed[name].dtype == torch.bfloat16
        assert torch.equal(pushed[name], value.to(torch.bfloat16)), name
    # rank 0 refused the push before reading it: rank 1 stopped with it, without a wait in a
    # gather (dist_timeout is 1800 s)
    assert r0["refused"].startswith("WeightPushError")
    assert r1["refused"].startswith("GeneratorFailed: rank 0 refused the weight push")
    assert r1["refuse_seconds"] < 60


@pytest.mark.parametrize("signal_error", [KeyboardInterrupt, "Terminated"])
def test_regression_a_signal_during_a_sharded_push_ends_the_run_as_a_signal(signal_error):
    """Ctrl-C or SIGTERM on rank 0 while its generator read a sharded push's stream was wrapped
    into GeneratorFailed('the weight push failed midway (KeyboardInterrupt())', fatal): the run
    ended in exit status 1 and 'fix the cause' advice; the signal passes through (the CLI ends
    a torchrun rank with os._exit either way: 130 or 143 and its line)."""
    from recipe import cli, distributed
    from recipe.weights import Weights

    error = cli.Terminated if signal_error == "Terminated" else signal_error
    weights = Weights.of({"a": torch.zeros(2), "b": torch.zeros(2)})

    def consume(w):
        for _ in w.items():
            raise error  # after the stream started, before it finished

    with pytest.raises(error):
        distributed.hand_over(weights, consume, distributed.Ranks(0, 2, 0))
