"""The trainer's one config dataclass, loaded from YAML with ``--set key=value`` overrides.

Every recipe choice is a switch with a fixed name (leave-one-out scripts depend on them). Bad
values are refused at start with a :class:`ConfigError` that names the key and the allowed values.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config value the trainer cannot run with; the message names the key and the fix."""


# the paper's length-control text (ScaleRL, section on forced interruptions)
INTERRUPT_TEXT = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"


def _f(default: Any, help: str) -> Any:
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class Config:
    # --- the ScaleRL recipe switches (names fixed) ---
    loss: str = _f("cispo", "policy loss: cispo | dapo | grpo | gspo")
    eps_max: float = _f(4.0, "CISPO upper truncation of the IS ratio (paper: 4, 5, 8 alike)")
    eps_low: float | None = _f(None, "clip low for dapo/grpo/gspo; null = loss default")
    eps_high: float | None = _f(None, "clip high (dapo 0.26, grpo 0.2, gspo 4e-4); null = default")
    aggregation: str = _f("prompt", "loss aggregation: prompt | sample | token")
    adv_norm: str = _f("batch", "advantage normalization: batch | prompt | none")
    zero_variance_filter: bool = _f(True, "drop prompts whose completions all score the same")
    positive_threshold: float | None = _f(
        0.9, "retire prompts whose pass rate reaches this; null = off"
    )
    fp32_head: bool = _f(True, "LM head in FP32 in generator and trainer")
    generator: str = _f("torch", "rollout engine: torch | vllm (vllm needs the vllm package)")
    mode: str = _f("sync", "sync | pipeline (PipelineRL-k) | ppo-off-policy (PPO-off-policy-k)")
    max_lag: int = _f(8, "k of PipelineRL-k / PPO-off-policy-k (unused in sync mode)")
    updates_per_batch: int = _f(
        1,
        "optimizer updates per generated batch (PPO-style minibatches of its prompt groups, "
        "each with its own aggregation denominators); one step = one batch = this many updates",
    )
    seed: int = _f(0, "seed of data split, model init, sampling")
    # --- task and data ---
    task: str = _f(
        "addition",
        "addition | addition_lsb | addition_chain | gsm8k | a user task 'my_module:MyTask' or "
        "'path/to/file.py:MyTask' (recipe/tasks)",
    )
    task_data: str | None = _f(None, "gsm8k: training problems, a local .jsonl or .parquet file")
    task_val_data: str | None = _f(
        None, "gsm8k: validation file; null = hold out val_prompts problems of task_data"
    )
    chat_template: bool = _f(False, "wrap each prompt in the tokenizer's chat template")
    digits: int = _f(3, "digits per operand of the addition tasks")
    chain_terms: int = _f(
        16,
        "addition_chain: terms the completion writes (answer chain_terms x 2 x digits tokens "
        "with EOS, carries included: the knob from short to long completions)",
    )
    train_prompts: int = _f(20000, "training pool size")
    val_prompts: int = _f(500, "held-out validation prompts (iid, disjoint from training)")
    val_samples_per_prompt: int = _f(4, "completions per validation prompt (mean@n)")
    # --- model ---
    init: str | None = _f(None, "HF model folder to start from; null = build + warm up in OUT/init")
    n_layer: int = _f(3, "layers of the built model")
    hidden: int = _f(128, "hidden size of the built model")
    heads: int = _f(4, "attention heads of the built model")
    intermediate: int = _f(512, "MLP size of the built model")
    warmup_sft_steps: int = _f(
        300,
        "supervised warm-up steps (carry-free problems + a warmup_mix share of harder ones)",
    )
    warmup_mix: float = _f(
        0.25,
        "warm-up share of harder problems, the rest carry-free (addition: full-distribution "
        "ones; addition_lsb: problems that carry, an equal share per number of carries)",
    )
    warmup_target: float | None = _f(
        None, "stop the warm-up once its sampled pass rate reaches this; null = run all steps"
    )
    warmup_probe_every: int = _f(
        50, "warm-up steps between the sampled pass-rate probes of warmup_target"
    )
    dtype: str = _f(
        "float32",
        "compute dtype of the model body: float32 | bfloat16 (autocast; weights, gradients and "
        "AdamW state stay FP32)",
    )
    device: str = _f("auto", "trainer device: auto (cuda when available) | cpu | cuda | cuda:N")
    micro_batch_size: int | None = _f(
        None, "completions per forward/backward pass (gradients accumulate); null = all at once"
    )
    logprob_chunk: int = _f(1024, "tokens per LM-head chunk when computing log-probs")
    gradient_checkpointing: bool = _f(False, "recompute the body's activations in backward")
    # --- RL loop ---
    steps: int = _f(1000, "RL steps (generated batches; updates_per_batch optimizer updates each)")
    prompts_per_step: int = _f(32, "prompts per batch")
    generations: int = _f(16, "completions per prompt")
    max_new_tokens: int = _f(5, "generation length limit (answer digits + EOS)")
    interrupt_range: list[int] | None = _f(  # noqa: RUF009  (None)
        None,
        "length control [lo, hi]: force interrupt_text after a random number of tokens in "
        "[lo, hi], then let the model answer; null = off",
    )
    interrupt_text: str = _f(
        INTERRUPT_TEXT, "text forced at the interruption point (the paper's, by default)"
    )
    temperature: float = _f(1.0, "sampling temperature (also used for trainer log-probs)")
    lr: float = _f(3e-4, "AdamW learning rate (constant after warm-up)")
    lr_warmup_steps: int = _f(10, "linear learning-rate warm-up steps")
    weight_decay: float = _f(0.01, "AdamW weight decay (paper: 0.01)")
    adam_eps: float = _f(1e-8, "AdamW epsilon (paper 1e-15 at 8B scale)")
    grad_clip: float = _f(1.0, "global gradient-norm clip; 0 = off")
    # --- vLLM engine (generator: vllm) ---
    gpu_memory_utilization: float | None = _f(
        None,
        "vLLM's share of GPU memory; null = 0.3 when trainer and engine share a GPU, else "
        "vLLM's default",
    )
    enforce_eager: bool = _f(True, "vLLM without CUDA graphs (true on CPU; false on GPU is faster)")
    weight_transfer: str = _f(
        "rpc",
        "vLLM weight push: rpc (bytes through collective_rpc; CPU or one GPU) | nccl (vLLM's "
        "native NCCL transfer, one group for every engine; engines on GPUs of their own; every "
        "mode)",
    )
    generators: int = _f(
        1,
        "vLLM engines generating rollouts (generator: vllm): each prompt group goes to the "
        "least-loaded engine, every weight push reaches all of them (recipe/engines.py)",
    )
    generator_devices: list[int] | None = _f(  # noqa: RUF009  (None)
        None,
        "CUDA device of each engine, as indices into the trainer's visible devices; null = the "
        "trainer's GPU for one rpc engine, else the GPUs after the node's trainer ranks",
    )
    # --- evaluation, checkpoints, accounting ---
    eval_every: int = _f(25, "evaluate every N steps (and at step 0 and the last step)")
    checkpoint_every: int = _f(50, "checkpoint every N steps (and at the last step)")
    devices: int = _f(
        1,
        "devices of a one-rank run that the trainer cannot see (leave 1 on GPUs: every further "
        "torchrun rank and every engine on a GPU of its own are counted already; on CPU, 2 "
        "stands for a separate generator device); gpu_hours = the steps' wall-clock hours x "
        "the devices in use, in every mode (a generator's device counts while it idles too)",
    )
    dist_timeout: int = _f(
        1800,
        "seconds a torchrun rank waits in a collective before the job fails (a dead or hung "
        "rank); must exceed rank 0's longest solo stretch: generation + evaluation. Also bounds "
        "an nccl weight round (vLLM's NCCL communicator has no timeout of its own)",
    )
    # 1, not 2: on a 2-core machine shared with other work, two OpenMP threads spin-wait on
    # each other (measured: warm-up step 0.15 s with 1 thread, 0.95 s with 2, under load)
    threads: int = _f(1, "torch CPU threads")


CHOICES = {
    "loss": ("cispo", "dapo", "grpo", "gspo"),
    "aggregation": ("prompt", "sample", "token"),
    "adv_norm": ("batch", "prompt", "none"),
    "generator": ("torch", "vllm"),
    "mode": ("sync", "pipeline", "ppo-off-policy"),
    "dtype": ("float32", "bfloat16"),
    "weight_transfer": ("rpc", "nccl"),
}
TASKS = ("addition", "addition_lsb", "addition_chain", "gsm8k")  # built in (recipe/tasks)
POSITIVE = (
    "eps_max", "max_lag", "digits", "chain_terms", "train_prompts", "val_prompts",
    "val_samples_per_prompt", "n_layer", "hidden", "heads", "intermediate", "steps",
    "prompts_per_step", "generations",
    "max_new_tokens", "temperature", "lr", "adam_eps", "eval_every", "checkpoint_every",
    "devices", "threads", "micro_batch_size", "logprob_chunk", "generators", "dist_timeout",
    "updates_per_batch", "warmup_probe_every",
)  # fmt: skip
NON_NEGATIVE = (
    "eps_low", "eps_high", "warmup_sft_steps", "warmup_mix", "lr_warmup_steps", "weight_decay",
    "grad_clip", "seed",
)  # fmt: skip
FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def _type_of(name: str) -> tuple[type, bool]:
    """(base type, whether None is allowed) from the field's annotation string."""
    ann = str(FIELDS[name].type)
    base = {"str": str, "int": int, "float": float, "bool": bool, "list[int]": list}[
        ann.split(" |")[0]
    ]
    return base, "None" in ann


def _coerce(name: str, value: Any) -> Any:
    base, nullable = _type_of(name)
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"config key {name!r} may not be null")
    if base is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key {name!r} must be true or false, got {value!r}")
    if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):  # YAML's .nan and .inf: NaN weights, or a torch traceback
            raise ConfigError(f"config key {name!r} must be float and finite, got {value!r}")
        return float(value)
    if base is float and isinstance(value, str):
        # YAML 1.1 reads 1e-4 (no dot) as a string; a finite number written so is meant
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    if base is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if base is str and isinstance(value, str):
        return value
    if base is list and isinstance(value, (list, tuple)):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return list(value)
    raise ConfigError(
        f"config key {name!r} must be {base.__name__}{' or null' if nullable else ''}, "
        f"got {value!r}"
    )


def _unknown(name: str) -> ConfigError:
    close = difflib.get_close_matches(name, FIELDS, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown config key {name!r}{hint} (see python -m recipe.train --help)")


def validate(cfg: Config) -> Config:
    """Refuse values the trainer cannot run with; returns ``cfg`` unchanged."""
    for name in FIELDS:
        _coerce(name, getattr(cfg, name))
    for name, allowed in CHOICES.items():
        value = getattr(cfg, name)
        if value not in allowed:
            raise ConfigError(
                f"config key {name!r} = {value!r} is not allowed; choose one of {list(allowed)}"
            )
    for name in POSITIVE:
        if getattr(cfg, name) is not None and getattr(cfg, name) <= 0:
            raise ConfigError(f"config key {name!r} must be > 0, got {getattr(cfg, name)!r}")
    for name in NON_NEGATIVE:
        value = getattr(cfg, name)
        if value is not None and value < 0:
            raise ConfigError(f"config key {name!r} must be >= 0, got {value!r}")
    if cfg.seed >= 2**32:  # derived seeds (seed x 1,000,003 + epoch...) must fit torch's int64
        raise ConfigError(f"config key 'seed' must be below 2**32 = {2**32}, got {cfg.seed}")
    if cfg.generations == 1:
        raise ConfigError(
            "config key 'generations' = 1 leaves nothing to learn: a completion's advantage is "
            "its reward minus the mean of its prompt's completions, always 0 for one (and the "
            "zero-variance filter drops every prompt); use at least 2 (the recipe: 16)"
        )
    if cfg.positive_threshold is not None and not 0 < cfg.positive_threshold <= 1:
        raise ConfigError(
            f"config key 'positive_threshold' must be in (0, 1] or null (off), "
            f"got {cfg.positive_threshold!r}"
        )
    if cfg.warmup_target is not None and not 0 < cfg.warmup_target <= 1:
        raise ConfigError(
            f"config key 'warmup_target' must be in (0, 1] or null, got {cfg.warmup_target!r}"
        )
    if cfg.warmup_mix > 1:
        raise ConfigError(f"config key 'warmup_mix' must be in [0, 1], got {cfg.warmup_mix!r}")
    if cfg.hidden % cfg.heads:
        raise ConfigError(f"config key 'hidden' ({cfg.hidden}) must be divisible by 'heads'")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ConfigError(
            f"config key 'device' = {cfg.device!r} is not allowed; choose auto, cpu, cuda or cuda:N"
        )
    if cfg.interrupt_range is not None:
        lo_hi = cfg.interrupt_range
        if len(lo_hi) != 2 or not 0 < lo_hi[0] <= lo_hi[1] < cfg.max_new_tokens:
            raise ConfigError(
                f"config key 'interrupt_range' = {lo_hi!r} must be [lo, hi] with "
                f"0 < lo <= hi < max_new_tokens ({cfg.max_new_tokens}), or null"
            )
    if cfg.gpu_memory_utilization is not None and not 0 < cfg.gpu_memory_utilization <= 1:
        raise ConfigError(
            "config key 'gpu_memory_utilization' must be in (0, 1] or null, got "
            f"{cfg.gpu_memory_utilization!r}"
        )
    if cfg.weight_transfer == "nccl" and cfg.generator != "vllm":
        raise ConfigError(
            "config key 'weight_transfer' = 'nccl' needs generator=vllm (vLLM engines on GPUs "
            "of their own); the torch sampler takes its weights in memory: use rpc"
        )
    if cfg.generators > 1 and cfg.generator != "vllm":
        raise ConfigError(
            f"config key 'generators' = {cfg.generators} needs generator=vllm: the torch "
            "sampler runs inside the trainer's process, so there is only one"
        )
    if cfg.generator_devices is not None:
        gpus = cfg.generator_devices
        if len(gpus) != cfg.generators or len(set(gpus)) != len(gpus) or min(gpus) < 0:
            raise ConfigError(
                f"config key 'generator_devices' = {gpus!r} must list {cfg.generators} distinct "
                "CUDA device indices >= 0 (one per engine, 'generators'), or be null"
            )
        if cfg.generator != "vllm" or cfg.device == "cpu":
            raise ConfigError(
                "config key 'generator_devices' places vLLM engines on GPUs: it needs "
                "generator=vllm and a CUDA device (set it to null)"
            )
    if cfg.task not in TASKS and ":" not in cfg.task:
        close = difflib.get_close_matches(cfg.task, TASKS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(
            f"config key 'task' = {cfg.task!r} is not a task{hint}; choose one of {list(TASKS)}, "
            "or a user task 'my_module:MyTask' or 'path/to/file.py:MyTask' (recipe/tasks)"
        )
    if cfg.init is None and cfg.task not in ("addition", "addition_lsb", "addition_chain"):
        raise ConfigError(
            f"config key 'init' is needed with task={cfg.task!r}: the built model only knows "
            "the addition tasks' characters; point init at a Hugging Face model folder"
        )
    if cfg.task == "gsm8k" and cfg.task_data is None:
        raise ConfigError(
            "config key 'task_data' is needed with task=gsm8k: a local .jsonl or .parquet file "
            "of {question, answer} rows"
        )
    space = 10 ** (2 * cfg.digits)  # the addition tasks' distinct problems (a + b)
    if cfg.task in TASKS[:3] and cfg.train_prompts + cfg.val_prompts > space:
        raise ConfigError(
            f"config keys 'train_prompts' + 'val_prompts' = {cfg.train_prompts} + "
            f"{cfg.val_prompts} exceed the {space} distinct problems of {cfg.digits}-digit "
            f"addition (task={cfg.task}); lower them or raise 'digits'"
        )
    if cfg.task in TASKS[:3] and cfg.prompts_per_step > cfg.train_prompts:
        raise ConfigError(too_few_prompts(cfg, cfg.train_prompts))
    if cfg.task in ("addition", "addition_lsb") and cfg.max_new_tokens < cfg.digits + 2:
        raise ConfigError(
            f"config key 'max_new_tokens' = {cfg.max_new_tokens} cannot hold a {cfg.digits + 1}"
            f"-digit answer plus EOS; use at least {cfg.digits + 2}"
        )
    need = cfg.chain_terms * 2 * cfg.digits
    if cfg.task == "addition_chain" and cfg.max_new_tokens < need:
        raise ConfigError(
            f"config key 'max_new_tokens' = {cfg.max_new_tokens} cannot hold the addition "
            f"chain's answer ({cfg.chain_terms} terms of {cfg.digits} digits, separators and "
            f"EOS); use at least chain_terms x 2 x digits = {need}"
        )
    return cfg


def too_few_prompts(cfg: Config, train: int) -> str:
    """The refusal of a batch larger than the task's training prompts (``train`` of them)."""
    more = (
        "raise 'train_prompts'" if cfg.task in TASKS[:3]
        else "give the task more (a longer task_data file)" if cfg.task == "gsm8k"
        else "give the task more"
    )  # fmt: skip
    return (
        f"config key 'prompts_per_step' = {cfg.prompts_per_step} exceeds the task's {train} "
        f"training prompts (task={cfg.task}): every batch would hold some prompts twice or "
        f"more, and each step would be more than an epoch; lower prompts_per_step to at most "
        f"{train}, or {more}"
    )


def inert_settings(cfg: Config) -> list[str]:
    """Switches turned off where they could not act, so a leave-one-out run measures nothing.

    Found by running the bundled leave-one-out study: two of its variants repeated the recipe's
    trajectory token for token.
    """
    notes = []
    if cfg.dtype == "float32" and not cfg.fp32_head:
        notes.append(
            "fp32_head=false has no effect with dtype=float32 (the head is float32 either "
            "way); compare FP32 heads with dtype=bfloat16"
        )
    epochs = cfg.steps * cfg.prompts_per_step / cfg.train_prompts
    if cfg.positive_threshold is None and epochs <= 1:
        notes.append(
            f"positive_threshold=null has no effect: {cfg.steps} steps x "
            f"{cfg.prompts_per_step} prompts is {epochs:.2f} epochs of {cfg.train_prompts} "
            "prompts, and no-positive resampling only acts from the second epoch; lower "
            "train_prompts to study it"
        )
    return notes


def parse_override(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value parsed as YAML, so 0.5, true, null work)."""
    if "=" not in text:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    key = key.strip()
    if key not in FIELDS:
        raise _unknown(key)
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {key}: cannot parse {raw!r} ({err})") from None
    return key, value


def from_dict(values: dict[str, Any]) -> Config:
    """Build and validate a config from plain values; unknown keys are refused."""
    cfg = Config()
    for key, value in values.items():
        if key not in FIELDS:
            raise _unknown(key)
        setattr(cfg, key, _coerce(key, value))
    return validate(cfg)


def load(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Config from a YAML file (or the defaults when ``path`` is None) plus ``key=value`` items."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"{path}: no such file (the configs shipped with the recipe are in "
                "recipe/configs/, e.g. recipe/configs/cpu_demo.yaml)"
            ) from None
        except (IsADirectoryError, UnicodeDecodeError, PermissionError) as err:
            raise ConfigError(f"{path}: cannot be read as a YAML config ({err})") from None
        try:
            loaded = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            where = getattr(err, "problem_mark", None)
            at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
            raise ConfigError(f"{path} is not valid YAML{at}: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"{path}: expected a mapping of config keys, got {type(loaded).__name__}"
            )
        values.update(loaded)
    for item in overrides:
        key, value = parse_override(item)
        values[key] = value
    return from_dict(values)


def to_yaml(cfg: Config) -> str:
    """The resolved config as YAML (every key, in declaration order)."""
    return yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False)
