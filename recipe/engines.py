"""Several vLLM engines behind one generator (``generators: N``), and where each engine runs.

:class:`MultiEngineGenerator` holds N engines (:class:`~recipe.generate_vllm.VLLMGenerator` or
:class:`~recipe.generate_vllm.AsyncVLLMGenerator`, each a vLLM engine of its own with its own
processes) and offers the interface the rollout sources and the evaluation already use
(``generate``, ``submit`` when the engines have it, ``push_weights``, ``close``, ``version``):

- **Routing**: each prompt group goes to the least-loaded engine, the one with the fewest
  samples in flight (ties to the lowest index), as PipelineRL's rollout scheduler picks the LLM
  with the fewest running rollouts. ``submit`` routes one group; ``generate`` routes every group
  of the batch in turn (the loads count the groups already assigned, so a batch is split evenly
  when the engines are idle) and returns the groups in the order of the prompts.
- **Weight pushes** reach every engine before :meth:`MultiEngineGenerator.push_weights` returns,
  all at the same version: the version is checked against every engine first, the state dict
  once (every engine runs the same model), then the weights are read once for all of them:
  packed into bytes once and loaded by the engines concurrently (``rpc``), or broadcast once
  over one group of the trainer and every engine's workers (``nccl``,
  recipe/weight_broadcast.py). The rollout
  source publishes the version only after that return, so its admission (the lag bound) and the
  per-token version stamps stay exact: a token carries the version of the engine that sampled
  it, and no engine is behind the published version.
- **Failures**: a push that fails on any engine leaves the engines on different weights, so the
  whole object is marked broken: every later call raises
  :class:`~recipe.generate_vllm.GeneratorBrokenError`, and requests still in flight resolve with
  that error rather than with tokens of unknown weights.

Devices (:func:`engine_devices`, :func:`visible_devices`): on CUDA each engine runs on a GPU of
its own, given as an index into the trainer's visible devices (``generator_devices``, or by
default the GPUs after the node's trainer ranks: with 2 torchrun ranks on an 8-GPU node, engines
on GPUs 2..7). vLLM's engine process sees only that GPU: ``CUDA_VISIBLE_DEVICES`` is set to it
while the engine is created (vLLM starts its engine-core process inside the constructor, and the
process inherits the environment), then restored. Engines are therefore created one at a time.
Tensor parallelism inside an engine is vLLM's ``tensor_parallel_size`` engine argument; it
needs that many devices per engine (not wired to a config key here).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import torch

from recipe.generate import Completion
from recipe.generate_vllm import (
    GeneratorBrokenError,
    WeightPushError,
    check_state_dict,
    check_version,
    pack_state_dict,
)
from recipe.weights import Weights, as_weights


class MultiEngineGenerator:
    """N generator engines behind one generator interface (see the module docstring).

    Parameters
    ----------
    engines : sequence
        Started engines, all holding the same policy version (their ``version`` attribute).
        Every engine must offer ``generate``, ``push_weights`` and ``close``; ``submit`` is
        offered here only when every engine has it.
    broadcast : recipe.weight_broadcast.WeightBroadcast, optional
        The one weight group of all the engines (``weight_transfer="nccl"``); None: pushes
        go to each engine (packed once for vLLM's RPC).

    Raises
    ------
    ValueError
        No engines, or engines at different versions.
    """

    def __init__(self, engines: Sequence[Any], broadcast: Any = None) -> None:
        if not engines:
            raise ValueError("MultiEngineGenerator needs at least one engine")
        versions = [e.version for e in engines]
        if len(set(versions)) != 1:
            raise ValueError(f"engines hold different policy versions {versions}")
        self.engines = list(engines)
        self.version: int = versions[0]
        self.broken: BaseException | None = None
        self.load = [0] * len(self.engines)  # samples in flight per engine
        self.routed = [0] * len(self.engines)  # samples ever routed per engine (diagnostics)
        self._lock = threading.Lock()
        self._push_lock = threading.Lock()
        # one thread per engine for generate calls, another set for pushes: a push never
        # waits for a thread that a generate call holds
        self._threads = ThreadPoolExecutor(len(self.engines), thread_name_prefix="engines")
        self._pushers = ThreadPoolExecutor(len(self.engines), thread_name_prefix="pushes")
        if all(hasattr(e, "submit") for e in self.engines):
            self.submit = self._submit  # the pipeline's producer looks for ``submit``
        # weight_transfer="nccl": one group over every engine's workers (start_engines joins it)
        self.broadcast = broadcast

    # ----------------------------------------------------------------- routing
    def _check_usable(self) -> None:
        if self.broken is not None:
            raise GeneratorBrokenError(
                f"a weight push failed on at least one of the {len(self.engines)} engines "
                f"({self.broken!r}), so they no longer hold the same weights; close this "
                "generator and start new engines"
            )

    def _route(self, samples: int) -> int:
        """The least-loaded engine (fewest samples in flight, ties to the lowest index); its
        load grows by ``samples`` until :meth:`_finished`."""
        with self._lock:
            i = min(range(len(self.load)), key=lambda k: (self.load[k], k))
            self.load[i] += samples
            self.routed[i] += samples
            return i

    def _finished(self, i: int, samples: int) -> None:
        with self._lock:
            self.load[i] -= samples

    def _submit(
        self, prompt: Sequence[int], n: int, *, max_new_tokens: int, temperature: float = 1.0
    ) -> Future[list[Completion]]:
        """Send one prompt group to the least-loaded engine; the future resolves with its
        ``n`` completions (or with the broken-generator error after a failed push)."""
        self._check_usable()
        i = self._route(n)
        try:
            inner = self.engines[i].submit(
                prompt, n, max_new_tokens=max_new_tokens, temperature=temperature
            )
        except BaseException:
            self._finished(i, n)
            raise
        outer: Future[list[Completion]] = Future()

        def done(f: Future) -> None:
            self._finished(i, n)
            try:
                result = f.result()
                self._check_usable()  # a failed push: never hand back tokens of mixed weights
            except BaseException as err:
                outer.set_exception(err)
            else:
                outer.set_result(result)

        inner.add_done_callback(done)
        return outer

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt across the engines; one group per prompt, in the
        order of ``prompts``. Blocks until every group is done."""
        self._check_usable()
        kw = {"max_new_tokens": max_new_tokens, "temperature": temperature}
        if hasattr(self, "submit"):  # async engines: every group routed on its own
            futures = [self.submit(p, n, **kw) for p in prompts]
            return [f.result() for f in futures]
        # offline engines: route the groups, then each engine samples its share in one call
        # (concurrently, one thread per engine: each call waits on its own engine's processes)
        shares: dict[int, list[int]] = {}
        for j in range(len(prompts)):
            shares.setdefault(self._route(n), []).append(j)
        out: list[list[Completion] | None] = [None] * len(prompts)

        def run(i: int, idx: list[int]) -> None:
            try:
                groups = self.engines[i].generate([prompts[j] for j in idx], n, **kw)
                for j, group in zip(idx, groups, strict=True):
                    out[j] = group
            finally:
                self._finished(i, n * len(idx))

        futures = [self._threads.submit(run, i, idx) for i, idx in shares.items()]
        for f in futures:  # every call finishes before an error is raised
            f.exception()
        for f in futures:
            f.result()
        self._check_usable()
        return out  # type: ignore[return-value]

    # ----------------------------------------------------------------- weights
    def push_weights(self, state_dict: Weights | Mapping[str, torch.Tensor], version: int) -> None:
        """Load ``state_dict`` into every engine as policy ``version``; returns once all hold it.

        Three routes, each reading the weights once: the one-group broadcast
        (``self.broadcast``: each tensor sent once to every engine's workers), vLLM's RPC (the
        weights packed into bytes once, the same packed list sent to every engine), or, for
        engines that take only ``push_weights``, the weights themselves (a sharded stream is
        gathered once into a state dict first).

        Raises
        ------
        WeightPushError
            Refused before anything was sent (bad version, or a state dict the model cannot
            take: every engine unchanged, the generator stays usable), or failed on at least one
            engine (the generator is then marked broken: every later call raises).
        """
        weights = as_weights(state_dict)
        with self._push_lock:
            self._check_usable()
            check_version(version, self.version)
            for e in self.engines:
                check_version(version, e.version)
            first = self.engines[0]
            if hasattr(first, "shapes"):  # vLLM engines: the client-side check, once for all
                check_state_dict(weights, first.shapes, first.omittable)
            if self.broadcast is not None:
                try:
                    self.broadcast.push(weights, version)
                except Exception as err:
                    errors = [(i, err) for i in range(len(self.engines))]
                else:
                    errors = []
            elif all(hasattr(e, "push_packed") for e in self.engines):
                packed = pack_state_dict(weights, first.dtype, first.omittable)
                errors = self._push_all(lambda e: e.push_packed(packed, version))
            else:
                once = Weights.of(weights.state_dict()) if weights.once else weights
                errors = self._push_all(lambda e: e.push_weights(once, version))
            if errors:
                self.broken = errors[0][1]
                reached = [i for i in range(len(self.engines)) if i not in dict(errors)]
                raise WeightPushError(
                    f"weight push of policy version {version} failed on engine(s) "
                    f"{[i for i, _ in errors]} of {len(self.engines)} ({errors[0][1]!r}); "
                    f"engine(s) {reached} hold the new weights, so the engines disagree and "
                    "this generator refuses all further use"
                ) from errors[0][1]
            self.version = version

    def _push_all(self, push_one: Callable[[Any], None]) -> list[tuple[int, BaseException]]:
        """Push to every engine concurrently; the (index, error) of those that failed."""

        def push(i: int) -> None:
            try:
                push_one(self.engines[i])
            except BaseException as err:
                # at once, not after the others: requests finishing meanwhile must see it
                self.broken = err
                raise

        futures = [self._pushers.submit(push, i) for i in range(len(self.engines))]
        return [(i, f.exception()) for i, f in enumerate(futures) if f.exception() is not None]

    def close(self) -> None:
        """Close every engine (all are tried; the first error is raised after)."""
        first: BaseException | None = None
        for e in self.engines:
            try:
                e.close()
            except Exception as err:
                first = first or err
        if self.broadcast is not None:
            self.broadcast.close()
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._pushers.shutdown(wait=False, cancel_futures=True)
        if first is not None:
            raise first


# --------------------------------------------------------------------------- devices


def engine_devices(
    generators: int,
    configured: Sequence[int] | None,
    *,
    cuda: bool,
    weight_transfer: str,
    trainer_gpus: int,
) -> list[int] | None:
    """The CUDA device index (into the trainer's visible devices) of each engine.

    None: the engines see what the trainer sees (on CPU; or one ``rpc`` engine sharing the
    trainer's GPU, with ``gpu_memory_utilization`` leaving the trainer room).

    Parameters
    ----------
    generators : int
        Number of engines.
    configured : sequence of int, optional
        The config's ``generator_devices`` (wins when given).
    cuda : bool
        Whether the trainer runs on CUDA.
    weight_transfer : str
        ``rpc`` or ``nccl`` (NCCL needs the engine on a GPU other than the trainer's).
    trainer_gpus : int
        Trainer ranks on this node (torchrun's ``LOCAL_WORLD_SIZE``; 1 without torchrun): they
        hold GPUs ``0 .. trainer_gpus - 1``.
    """
    if configured is not None:
        return list(configured)
    if not cuda or (generators == 1 and weight_transfer == "rpc"):
        return None
    return list(range(trainer_gpus, trainer_gpus + generators))


def engines_on_own_devices(devices: Sequence[int] | None, trainer_gpus: int) -> int:
    """How many GPUs the engines use besides the trainer's (for ``gpu_hours``)."""
    if devices is None:
        return 0
    return len(set(devices) - set(range(trainer_gpus)))


def visible_devices(index: int, parent: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for an engine on the trainer's visible device ``index``.

    ``parent`` is the trainer's own ``CUDA_VISIBLE_DEVICES`` (None: every GPU is visible), so
    index 1 under ``"4,5,6"`` is physical GPU 5.

    Raises
    ------
    ValueError
        The index is past the visible devices.
    """
    if parent is None or parent.strip() == "":
        return str(index)
    ids = [d.strip() for d in parent.split(",") if d.strip()]
    if not 0 <= index < len(ids):
        raise ValueError(
            f"engine device {index} is not among the trainer's visible devices "
            f"(CUDA_VISIBLE_DEVICES={parent!r})"
        )
    return ids[index]


_ENV_LOCK = threading.Lock()


@contextmanager
def on_device(index: int | None) -> Iterator[None]:
    """While an engine is created: its processes see only the trainer's device ``index``."""
    if index is None:
        yield
        return
    if torch.cuda.is_available():
        # the trainer's own CUDA state first: it must keep seeing all of its devices
        torch.cuda.init()
    with _ENV_LOCK:
        parent = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices(index, parent)
        try:
            yield
        finally:
            if parent is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = parent


def start_engines(
    make: Callable[[int], Any],
    generators: int,
    devices: Sequence[int] | None,
    *,
    weight_transfer: str = "rpc",
    trainer_device: torch.device | str = "cuda",
    timeout: float = 1800.0,
) -> MultiEngineGenerator:
    """``generators`` engines from ``make(i)``, engine ``i`` on ``devices[i]`` (see
    :func:`on_device`); a failed start closes the engines already started. With
    ``weight_transfer="nccl"`` the trainer and every engine's workers then join one weight group
    (recipe/weight_broadcast.py), whose rounds give up after ``timeout`` seconds."""
    engines: list[Any] = []
    try:
        for i in range(generators):
            with on_device(None if devices is None else devices[i]):
                engines.append(make(i))
        broadcast = None
        if weight_transfer == "nccl":
            from recipe.weight_broadcast import WeightBroadcast

            broadcast = WeightBroadcast(
                engines, dtype=engines[0].dtype, device=trainer_device, timeout=timeout
            )
            for e in engines:
                e.broadcast = broadcast
    except BaseException:
        for e in engines:
            e.close()
        raise
    return MultiEngineGenerator(engines, broadcast)
