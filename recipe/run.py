"""The plumbing beside the step loop: policy and task setup, engines, rollout sources, the log,
checkpoints and resume. ``recipe/train.py`` reads top to bottom because all of this lives here.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from recipe import config as config_mod
from recipe import distributed
from recipe.config import Config, ConfigError
from recipe.forward import resolve_device
from recipe.generate import TorchGenerator
from recipe.generate_process import ProcessGenerator, torch_sampler_builder
from recipe.length_control import InterruptingGenerator
from recipe.model import encode_prompts, load_policy, stop_token_ids, warm_up
from recipe.pipeline import OffPolicyRollouts, PipelineRollouts, takes_weights
from recipe.tasks import Prompt, Task, load_task
from recipe.tasks.addition import split_problems

# keys that may change between a run and its --resume (they do not change what is learned;
# micro-batching and checkpointing change float rounding only, the engines' count and
# placement the sampling streams)
RESUMABLE = (
    "steps", "eval_every", "checkpoint_every", "threads", "device", "micro_batch_size",
    "logprob_chunk", "gradient_checkpointing", "generators", "generator_devices",
    "dist_timeout",
)  # fmt: skip


@dataclass
class Setup:
    """Everything a run starts from."""

    device: torch.device
    init: Path  # the model folder (the generator engines load it too)
    model: torch.nn.Module
    tokenizer: object
    stop_ids: list[int]
    task: Task
    train_prompts: list[Prompt]
    val_prompts: list[Prompt]
    train_ids: list[list[int]]
    val_ids: list[list[int]]
    ranks: distributed.Ranks = distributed.SINGLE  # torchrun's ranks (recipe/distributed.py)
    parameters: int = 0  # the policy's parameter count (for the FLOPs axis)


def setup(cfg: Config, out: Path, ranks: distributed.Ranks = distributed.SINGLE) -> Setup:
    """Task, model (warmed up in ``out/init`` when no ``init`` is given), tokenizer, prompt ids.

    With several ranks, rank 0 warms up and the others wait; only rank 0 loads the weights (the
    others build the model on the meta device), and the model is not sharded yet (rank 0's
    generators copy it first: :func:`make_generators`, then :func:`shard` fills every rank's
    shards from rank 0's weights).
    """
    device = distributed.rank_device(resolve_device(cfg.device), ranks)
    task = load_task(cfg)
    if len(task.train_prompts()) < cfg.prompts_per_step:  # known once the task has loaded
        raise ConfigError(config_mod.too_few_prompts(cfg, len(task.train_prompts())))
    init = Path(cfg.init) if cfg.init is not None else out / "init"
    if cfg.init is not None and not (init / "config.json").is_file():
        what = "no such folder" if not init.exists() else "no config.json in it"
        raise ConfigError(
            f"init={cfg.init}: {what}; init names a local Hugging Face model folder "
            "(config.json, weights, tokenizer: save_pretrained's output), never a hub id (the "
            "recipe downloads nothing), or null to build and warm up a small model in OUT/init"
        )
    needs_warm_up = cfg.init is None and not (init / "config.json").exists()
    needs_warm_up = distributed.broadcast(needs_warm_up, ranks)  # rank 0's view decides
    if needs_warm_up and ranks.main:
        # the built model is the addition tasks' character-level one; a task with its own
        # warm-up examples (addition_lsb) supplies them, the old task keeps its pool-mix path
        pool, _ = split_problems(cfg.digits, cfg.train_prompts, cfg.val_prompts, cfg.seed)
        # positions for the longest prompt + completion (the addition tasks keep the old 64)
        longest = max(len(p.text) for p in task.train_prompts() + task.val_prompts())
        warm_up(
            init, digits=cfg.digits, n_layer=cfg.n_layer, hidden=cfg.hidden, heads=cfg.heads,
            intermediate=cfg.intermediate, steps=cfg.warmup_sft_steps, mix=cfg.warmup_mix,
            pool=pool, target=cfg.warmup_target, probe_every=cfg.warmup_probe_every,
            seed=cfg.seed, device=device, task=task, max_new_tokens=cfg.max_new_tokens,
            max_positions=max(64, longest + 1 + cfg.max_new_tokens),
        )  # fmt: skip
    distributed.barrier(ranks)
    model, tokenizer = load_policy(init, device, weights=ranks.main or not ranks.active)
    if cfg.gradient_checkpointing:
        no_reentrant = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=no_reentrant)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=no_reentrant)
    train_prompts, val_prompts = task.train_prompts(), task.val_prompts()
    return Setup(
        device=device, init=init, model=model, tokenizer=tokenizer,
        stop_ids=stop_token_ids(tokenizer, init), task=task, train_prompts=train_prompts,
        val_prompts=val_prompts,
        train_ids=encode_prompts(tokenizer, [p.text for p in train_prompts], cfg.chat_template),
        val_ids=encode_prompts(tokenizer, [p.text for p in val_prompts], cfg.chat_template),
        ranks=ranks, parameters=sum(p.numel() for p in model.parameters()),
    )  # fmt: skip


def shard(cfg: Config, s: Setup) -> None:
    """FSDP2 over the ranks (no-op with one process); before the optimizer is built."""
    bf16 = s.device.type == "cuda" and cfg.dtype == "bfloat16"
    distributed.shard(s.model, s.ranks, bf16=bf16, fp32_head=cfg.fp32_head, device=s.device)


def trainer_gpus(ranks: distributed.Ranks) -> int:
    """Trainer ranks on this node (torchrun's ``LOCAL_WORLD_SIZE``): GPUs 0.. are theirs."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if ranks.active else 1


def engine_layout(
    cfg: Config, device: torch.device, ranks: distributed.Ranks = distributed.SINGLE
) -> list[int] | None:
    """The CUDA device of each vLLM engine (recipe/engines.py), or None where the engines see
    the trainer's devices (CPU; one rpc engine sharing the trainer's GPU)."""
    if cfg.generator != "vllm":
        return None
    if cfg.generator_devices is not None and device.type != "cuda":
        raise ConfigError(
            f"config key 'generator_devices' = {cfg.generator_devices!r} places engines on "
            f"GPUs, but the trainer runs on {device}; set it to null"
        )
    from recipe.engines import engine_devices

    layout = engine_devices(
        cfg.generators, cfg.generator_devices, cuda=device.type == "cuda",
        weight_transfer=cfg.weight_transfer, trainer_gpus=trainer_gpus(ranks),
    )  # fmt: skip
    if (
        layout is not None
        and torch.cuda.is_available()
        and max(layout) >= torch.cuda.device_count()
    ):
        raise ConfigError(
            f"the {cfg.generators} vLLM engine(s) need GPUs {layout}, but this node shows "
            f"{torch.cuda.device_count()} (0-{trainer_gpus(ranks) - 1} train): start fewer "
            "trainer ranks or engines, or set 'generator_devices'"
        )
    return layout


def devices_in_use(
    cfg: Config, ranks: distributed.Ranks, device: torch.device | None = None
) -> int:
    """The devices that ``gpu_hours`` counts, from rank 0's node: ``devices`` (a one-rank run's
    devices that share the trainer's, 1 by default) + one per further trainer rank + one per
    engine on a GPU of its own (counted already: do not add them to ``devices``)."""
    from recipe.engines import engines_on_own_devices

    layout = engine_layout(cfg, device, ranks) if device is not None else None
    return cfg.devices + ranks.world - 1 + engines_on_own_devices(layout, trainer_gpus(ranks))


@dataclass(frozen=True)
class Layout:
    """Where a launch's devices are, decided once for all ranks (:func:`launch_layout`)."""

    engines: list[int] | None  # each vLLM engine's CUDA device on rank 0's node (None: shared)
    in_use: int  # devices ``gpu_hours`` counts: trainer ranks + engines' own GPUs (+ ``devices``)
    held: int  # devices the job holds: every GPU visible to it on every node (>= in_use)


def visible_gpus() -> int:
    """GPUs this process can see (the node's allocation under a scheduler's
    ``CUDA_VISIBLE_DEVICES``); 0 without CUDA."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def launch_layout(cfg: Config, ranks: distributed.Ranks, device: torch.device) -> Layout:
    """Engine devices and device counts, computed on rank 0 and broadcast (a collective).

    Only rank 0's node runs engines, so only its ``LOCAL_WORLD_SIZE`` places them: a node with
    other trainer ranks would place them after its own and refuse (e.g. GPUs 8-13 on an 8-GPU
    node). ``held`` sums every node's visible GPUs (each node's local rank 0 reports them), and
    is never below ``in_use`` (on CPU, where nothing is visible, it equals it).
    """
    mine = None
    if ranks.main:
        mine = (engine_layout(cfg, device, ranks), devices_in_use(cfg, ranks, device))
    engines, in_use = distributed.broadcast(mine, ranks)
    node_gpus = visible_gpus() if ranks.local == 0 else 0
    (held,) = distributed.all_sum([float(node_gpus)], ranks)
    return Layout(engines=engines, in_use=in_use, held=max(int(held), in_use))


def process_start_time() -> float:
    """When this process started (Unix time): from /proc on Linux (so the interpreter's and
    torch's start-up count), else when this module was imported."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


_IMPORTED = time.time()


class Bill:
    """``allocated_gpu_hours``: the devices the job holds x the wall-clock time since this
    process started, plus ``earlier`` hours billed to the run's previous processes."""

    def __init__(self, held: int, earlier: float = 0.0) -> None:
        self.held, self.earlier, self.start = held, earlier, process_start_time()

    def hours(self) -> float:
        return self.earlier + (time.time() - self.start) / 3600 * self.held


def previous_bill(log_path: Path, state: dict | None) -> float:
    """On ``--resume``: the allocated hours of the previous processes, from the last row the
    killed one wrote (rows after the checkpoint are dropped from the log, but their hours were
    spent), else the checkpoint's; 0 for a fresh run."""
    if state is None:
        return 0.0
    hours = float(state.get("allocated_gpu_hours", 0.0))
    if log_path.exists():
        for line in log_path.read_text(errors="replace").splitlines():
            try:
                hours = max(hours, float(json.loads(line).get("allocated_gpu_hours") or 0.0))
            except (ValueError, AttributeError):
                continue  # a torn last line
    return hours


def flops(parameters: int, trained_tokens: int, generated_tokens: int) -> float:
    """Training FLOPs (6 N per token through forward + backward) plus generation's (2 N per
    sampled token): the usual dense-transformer estimate, attention left out."""
    return 6.0 * parameters * trained_tokens + 2.0 * parameters * generated_tokens


def make_optimizer(cfg: Config, model) -> torch.optim.Optimizer:
    """AdamW over the FP32 master weights (so its moments are FP32 too)."""
    return torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )  # fmt: skip


def with_length_control(cfg: Config, generator, tokenizer, seed: int):
    if cfg.interrupt_range is None:
        return generator
    text_ids = tokenizer(cfg.interrupt_text, add_special_tokens=False)["input_ids"]
    lo, hi = cfg.interrupt_range
    return InterruptingGenerator(generator, text_ids, lo, hi, seed)


def vllm_overrides(cfg: Config, device: torch.device, shares_trainer_gpu: bool = True) -> dict:
    """Engine settings from the config: memory share, CUDA graphs, weight transfer."""
    overrides: dict = {"enforce_eager": cfg.enforce_eager}
    share = cfg.gpu_memory_utilization
    if share is None and device.type == "cuda" and shares_trainer_gpu:
        share = 0.3  # trainer and engine on one GPU: leave the trainer most of it
    if share is not None:
        overrides["gpu_memory_utilization"] = share
    return overrides


def make_generators(cfg: Config, s: Setup, max_model_len: int):
    """(rollout generator, evaluator): the torch sampler or a vLLM engine on ``s.init``.

    The torch sampler shares the trainer's model in sync and PPO-off-policy modes (generation
    never overlaps an update there); for PipelineRL it runs in its own process on its own copy
    (:class:`~recipe.generate_process.ProcessGenerator`). Evaluation runs on
    the trainer's model (torch) or through the rollout engine itself (vLLM: no second engine).
    With several ranks only rank 0 has engines (``(None, None)`` elsewhere) and the torch ones
    hold their own unsharded copies, which the pushes keep current.
    """
    if not s.ranks.main:
        return None, None
    own_copy = s.ranks.active
    evaluator = TorchGenerator(
        s.model, eos_ids=s.stop_ids, pad_id=s.tokenizer.pad_token_id, fp32_head=cfg.fp32_head,
        seed=cfg.seed + 2, dtype=cfg.dtype, copy=own_copy,
    )  # fmt: skip
    if cfg.generator == "torch" and cfg.mode == "pipeline":
        # its own process (recipe/generate_process.py), so that generation overlaps the update
        build = torch_sampler_builder(
            s.init, s.device, eos_ids=s.stop_ids, pad_id=s.tokenizer.pad_token_id,
            fp32_head=cfg.fp32_head, seed=cfg.seed + 1, dtype=cfg.dtype,
        )  # fmt: skip
        generator = ProcessGenerator(build, s.model.state_dict(), threads=cfg.threads)
    elif cfg.generator == "torch":
        generator = TorchGenerator(
            s.model, eos_ids=s.stop_ids, pad_id=s.tokenizer.pad_token_id,
            fp32_head=cfg.fp32_head, seed=cfg.seed + 1, dtype=cfg.dtype, copy=own_copy,
        )  # fmt: skip
    else:
        # imported here: vllm is optional (and starts engine processes: callers need a main guard)
        from recipe.engines import on_device, start_engines
        from recipe.generate_vllm import AsyncVLLMGenerator, VLLMGenerator

        engine = AsyncVLLMGenerator if cfg.mode == "pipeline" else VLLMGenerator
        layout = engine_layout(cfg, s.device, s.ranks)  # None: the trainer's devices

        def make(i: int):
            # engine 0 keeps the one-engine seed; the others sample their own streams
            shared = layout is None or layout[i] < trainer_gpus(s.ranks)
            return engine(
                s.init, fp32_head=cfg.fp32_head, dtype=cfg.dtype, seed=cfg.seed + 1 + 1000 * i,
                max_model_len=max_model_len, stop_token_ids=s.stop_ids,
                weight_transfer=cfg.weight_transfer,
                **vllm_overrides(cfg, s.device, shares_trainer_gpu=shared),
            )  # fmt: skip

        if cfg.generators == 1 and cfg.weight_transfer == "rpc":
            with on_device(layout[0] if layout else None):
                generator = make(0)
        else:  # N engines behind one generator: least-loaded routing, every push to all (one
            # weight group of the trainer and all engines' workers with nccl)
            generator = start_engines(
                make, cfg.generators, layout, weight_transfer=cfg.weight_transfer,
                trainer_device=s.device, timeout=cfg.dist_timeout,
            )  # fmt: skip
        evaluator = generator
    generator = with_length_control(cfg, generator, s.tokenizer, cfg.seed + 3)
    evaluator = (
        generator if cfg.generator == "vllm"
        else with_length_control(cfg, evaluator, s.tokenizer, cfg.seed + 4)
    )  # fmt: skip
    return generator, evaluator


def make_rollouts(
    cfg: Config, generator, pool, prompt_ids, first_step: int,
    ranks: distributed.Ranks = distributed.SINGLE,
):  # fmt: skip
    """The rollout source of ``cfg.mode`` (recipe/pipeline.py); with several ranks, rank 0's
    broadcasts each batch to the others (:class:`recipe.distributed.RankRollouts`)."""
    if ranks.active:
        inner = make_rollouts(cfg, generator, pool, prompt_ids, first_step) if ranks.main else None
        k = cfg.max_lag if cfg.mode == "ppo-off-policy" else 1
        return distributed.RankRollouts(
            inner, ranks, functools.partial(takes_weights, k=k, steps=cfg.steps)
        )
    if cfg.mode == "pipeline":
        return PipelineRollouts(
            generator, pool, prompt_ids, cfg, cfg.max_lag,
            first_step=first_step, version=first_step - 1,
        )  # fmt: skip
    k = cfg.max_lag if cfg.mode == "ppo-off-policy" else 1
    return OffPolicyRollouts(generator, pool, prompt_ids, cfg, k)


def save_checkpoint(path: Path, state: dict) -> None:
    """Write atomically: a kill mid-save leaves the previous checkpoint intact."""
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    """On CPU: ``load_state_dict`` moves model and AdamW state to the parameters' device."""
    return torch.load(path, weights_only=True, map_location="cpu")


def checkpoint(path: Path, state: dict, model, optimizer, ranks=distributed.SINGLE) -> None:
    """Save ``state`` (step, counters, pool, ...) with the model and AdamW state.

    One process: one ``torch.save`` file. Several ranks: each rank writes its own shards with
    torch.distributed.checkpoint into ``<path>.shards/step-N``; then rank 0 writes ``path``
    (pointing there) atomically and removes the older step folder, so a kill at any point
    leaves a complete checkpoint.
    """
    if not ranks.active:
        save_checkpoint(path, {**state, "model": model.state_dict(),
                               "optimizer": optimizer.state_dict()})  # fmt: skip
        return
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    shards = path.parent / f"{path.name}.shards" / f"step-{state['step']}"
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=shards)
    distributed.barrier(ranks)
    if ranks.main:
        previous = load_checkpoint(path).get("shards") if path.exists() else None
        save_checkpoint(path, {**state, "shards": shards.name, "world": ranks.world})
        if previous is not None and previous != shards.name:
            shutil.rmtree(shards.parent / previous, ignore_errors=True)
    distributed.barrier(ranks)


def restore(path: Path, model, optimizer, ranks=distributed.SINGLE) -> dict | None:
    """Load what :func:`checkpoint` saved into ``model`` and ``optimizer``; returns the rest of
    the state, or None when there is no checkpoint (a fresh start)."""
    if not path.exists():
        return None
    try:  # weights_only: a checkpoint is never unpickled, whatever the file holds
        state = load_checkpoint(path)
    except Exception as err:
        state = err
    if not isinstance(state, dict) or not ({"model", "shards"} & state.keys()):
        why = type(state).__name__ if isinstance(state, BaseException) else "no model state"
        raise ConfigError(
            f"--resume: {path} is not a checkpoint this trainer can read ({why}): damaged (a "
            "full disk, a copy cut short) or another program's; the log is left as it is. "
            "Start a new --out (or move the file away to start this folder over: its log rows "
            "are then dropped)"
        )
    sharded = "shards" in state
    if sharded != ranks.active or (sharded and state["world"] != ranks.world):
        saved = f"{state['world']} ranks" if sharded else "one process"
        raise ConfigError(
            f"{path} was written by {saved}; resume with the same launch "
            f"(now {ranks.world} rank{'s' if ranks.world > 1 else ''})"
        )
    if not sharded:
        model.load_state_dict(state.pop("model"))
        optimizer.load_state_dict(state.pop("optimizer"))
        return state
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    loaded = {"model": model_sd, "optimizer": optim_sd}
    dcp.load(loaded, checkpoint_id=path.parent / f"{path.name}.shards" / state["shards"])
    set_state_dict(
        model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"]
    )
    return state


def _finite(x: float | None) -> float | None:
    """JSON has no NaN/inf: non-finite numbers are logged as null."""
    return x if x is not None and math.isfinite(x) else None


class NullLog:
    """The log of ranks other than 0: writes nothing."""

    def write(self, row: dict) -> None:
        pass

    def sync(self) -> int:
        return 0

    def close(self) -> None:
        pass


class Log:
    """``log.jsonl``: one JSON object per line, flushed per row; truncated to a checkpoint's
    length on resume (rows written after the checkpoint are dropped)."""

    def __init__(self, path: Path, keep_bytes: int | None) -> None:
        if keep_bytes is not None:
            size = path.stat().st_size if path.is_file() else None
            if size is None or size < keep_bytes:
                held = "is missing" if size is None else f"holds {size} bytes"
                raise ConfigError(
                    f"--resume: {path} {held}, but the checkpoint was written when it held "
                    f"{keep_bytes}: the log was cut, replaced or removed since, and resuming "
                    "would lose its rows up to the checkpoint; put the log back, or start a new "
                    "--out"
                )
            with open(path, "r+b") as f:
                f.truncate(keep_bytes)
        elif path.exists():
            path.unlink()  # a fresh start (or --resume without a checkpoint): start over
        self.file = open(path, "ab")

    def write(self, row: dict) -> None:
        clean = {k: _finite(v) if isinstance(v, float) else v for k, v in row.items()}
        self.file.write((json.dumps(clean) + "\n").encode())
        self.file.flush()

    def sync(self) -> int:
        """Flush to disk; returns the byte length (what a checkpoint records)."""
        os.fsync(self.file.fileno())
        return self.file.tell()

    def close(self) -> None:
        self.file.close()
