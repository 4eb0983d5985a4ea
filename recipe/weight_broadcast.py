"""One process group for every weight push: the trainer and the workers of every vLLM engine.

With ``weight_transfer: nccl`` the trainer's rank 0 and the workers of all N engines form one
NCCL group: the trainer is rank 0, engine i's workers follow at rank offset 1 + the workers of
engines 0 .. i-1. A push broadcasts each tensor once and every engine receives it in that same
collective, as PipelineRL's trainer broadcasts to all its actors at once; the trainer neither
holds a second copy of the model nor sends it N times.

Built on vLLM's documented trainer-side API (``vllm.distributed.weight_transfer``, 0.28 on;
checked in the installed 0.32): ``WeightTransferTrainerFactory.trainer_init(
NCCLTrainerInitInfo(...), client=..., source=...)`` rendezvouses once, and each
``send_weights()`` runs one round: ``start_weight_update`` on the engines, their
``update_weights`` (the workers receive) concurrently with the trainer's broadcast, then
``finish_weight_update``. Two pieces are ours:

- :class:`EnginesClient`, the ``client``: vLLM's ``VLLMWeightSyncClient`` protocol (four
  methods) over N engines. vLLM's trainer engine tells its client that the workers start at rank
  1 (one engine); this client gives engine i its own offset and runs every call on all engines
  at once.
- :class:`PushSource`, the ``source``: vLLM's ``WeightSource`` over the current push's
  :class:`~recipe.weights.Weights`: metadata from names and shapes (nothing gathered), then each
  tensor cast to the engines' dtype on the trainer's GPU as it is read, one at a time (with
  several trainer ranks each read is an FSDP2 ``full_tensor()``).

Around ``send_weights``, :meth:`WeightBroadcast.push` pauses every engine
(``pause_generation(mode="keep")``) and afterwards resets their prefix caches, sets the version
and resumes them. Unpacked broadcasts (``packed=False``): vLLM's packed mode would add two 1 GiB
staging buffers on the trainer's GPU and on every worker's.

The engines' side is :class:`~recipe.generate_vllm.AsyncVLLMGenerator`'s ``init_weight_transfer``,
``start_weight_update``, ``update_weights``, ``finish_weight_update``, ``pause``, ``resume`` and
``fail``. The CPU tests swap vLLM's trainer engine for :class:`GlooTransport` (the same round over
a gloo group) and the engines for fakes whose workers are threads
(tests/test_recipe_weight_broadcast.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

from recipe.weights import Weights


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (for a rendezvous store)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class ParamMeta:
    """One tensor of a push as the workers are told to expect it (vLLM's ``ParamMeta``)."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]


class PushSource:
    """vLLM 0.32's ``WeightSource`` (``metadata()`` and iteration) over the push in progress.

    ``skip``: names the engines' loader drops (a tied ``lm_head.weight``: the engines' model
    reads the embedding), neither announced nor sent.
    """

    def __init__(
        self, dtype: torch.dtype, device: torch.device | str, skip: Iterable[str] = ()
    ) -> None:
        self.dtype, self.device = dtype, torch.device(device)
        self.skip = frozenset(skip)
        self.weights: Weights | None = None

    def metadata(self) -> list[ParamMeta]:
        assert self.weights is not None, "no push in progress"
        return [
            ParamMeta(n, self.dtype, tuple(s))
            for n, s in self.weights.shapes.items()
            if n not in self.skip
        ]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        assert self.weights is not None, "no push in progress"
        for name, tensor in self.weights.items():
            if name not in self.skip:
                yield name, tensor.detach().to(self.device, self.dtype).contiguous()


class EnginesClient:
    """vLLM's ``VLLMWeightSyncClient`` over several engines: every call reaches all of them at
    once (one thread each) and returns when all are done; the first error is raised."""

    def __init__(self, engines: Sequence[Any]) -> None:
        self.engines = list(engines)
        self.workers = [int(e.weight_workers) for e in self.engines]
        self._threads = ThreadPoolExecutor(len(self.engines), thread_name_prefix="weight-group")

    def each(self, call: Callable[[int, Any], Any]) -> list[Any]:
        futures = [self._threads.submit(call, i, e) for i, e in enumerate(self.engines)]
        for f in futures:  # every call finishes before an error is raised
            f.exception()
        return [f.result() for f in futures]

    def each_now(self, call: Callable[[int, Any], Any], timeout: float) -> None:
        """``call`` on every engine from threads of its own, waiting at most ``timeout``
        seconds in all (after a failed round this client's threads may be stuck in it);
        errors are ignored."""

        def run(i: int, e: Any) -> None:
            with contextlib.suppress(Exception):
                call(i, e)

        threads = [
            threading.Thread(target=run, args=(i, e), daemon=True)
            for i, e in enumerate(self.engines)
        ]
        end = time.monotonic() + timeout
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))

    def offsets(self, first: int) -> list[int]:
        """Engine i's first rank in the group: ``first`` + the workers of engines before it."""
        return [first + sum(self.workers[:i]) for i in range(len(self.engines))]

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        offsets = self.offsets(int(init_info["rank_offset"]))
        self.each(lambda i, e: e.init_weight_transfer({**init_info, "rank_offset": offsets[i]}))

    def start_weight_update(self) -> None:
        self.each(lambda i, e: e.start_weight_update())

    def update_weights(self, update_info) -> None:
        self.each(lambda i, e: e.update_weights(update_info))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.each(lambda i, e: e.finish_weight_update())  # the version is set on resume

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def vllm_nccl(world_size: int, client: EnginesClient, source: PushSource, address: str):
    """vLLM's trainer engine for the NCCL backend, rendezvoused with every engine's workers."""
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    info = NCCLTrainerInitInfo(
        master_address=address, master_port=free_port(address), world_size=world_size, rank=0,
        packed=False,
    )  # fmt: skip
    return WeightTransferTrainerFactory.trainer_init(info, client=client, source=source)


def gloo_group(address: str, port: int, rank: int, world_size: int, timeout: float = 300.0):
    """A gloo process group of its own (not torch.distributed's default one), over a TCP store
    that rank 0 hosts: what vLLM's ``StatelessProcessGroup`` is for NCCL."""
    import torch.distributed as dist

    store = dist.TCPStore(
        address, port, world_size, rank == 0, timeout=timedelta(seconds=timeout)
    )  # fmt: skip
    return dist.ProcessGroupGloo(store, rank, world_size, timedelta(seconds=timeout))


def gloo_broadcast(group, tensor: torch.Tensor) -> None:
    import torch.distributed as dist

    options = dist.BroadcastOptions()
    options.rootRank = 0
    group.broadcast([tensor], options).wait()


class GlooTransport:
    """vLLM's NCCL trainer engine re-enacted over gloo for CPU tests: the same rendezvous (the
    client's ``init_weight_transfer_engine`` with ``rank_offset`` 1, concurrently with the
    trainer joining as rank 0) and the same round per ``send_weights`` (start; ``update_weights``
    in a thread while each tensor is broadcast once; finish). ``sent`` counts the broadcasts."""

    def __init__(self, world_size: int, client, source, address: str = "127.0.0.1") -> None:
        self.client, self.source, self.sent = client, source, 0
        port = free_port(address)
        info = {"master_address": address, "master_port": port, "rank_offset": 1,
                "world_size": world_size}  # fmt: skip
        with ThreadPoolExecutor(1) as pool:
            joined = pool.submit(client.init_weight_transfer_engine, info)
            self.group = gloo_group(address, port, 0, world_size)
            joined.result()

    def send_weights(self) -> None:
        meta = self.source.metadata()
        update_info = {
            "names": [m.name for m in meta],
            "dtype_names": [str(m.dtype).removeprefix("torch.") for m in meta],
            "shapes": [list(m.shape) for m in meta],
        }
        self.client.start_weight_update()
        with ThreadPoolExecutor(1) as pool:
            receiving = pool.submit(self.client.update_weights, update_info)
            for _name, tensor in self.source:
                gloo_broadcast(self.group, tensor)
                self.sent += 1
            receiving.result()
        self.client.finish_weight_update()


class BroadcastFailed(RuntimeError):
    """A weight round failed or timed out after it started: the engines' workers may still sit
    in the group's broadcast (vLLM's NCCL communicator has no timeout), and so may the threads
    that drive them; the process must end (recipe/cli.py does) rather than wait for them."""


class WeightBroadcast:
    """The trainer's end of the one-group weight push to ``engines`` (module docstring).

    Parameters
    ----------
    engines : sequence
        Started engines, each with ``weight_workers`` and the group methods of
        :class:`~recipe.generate_vllm.AsyncVLLMGenerator` (or
        :class:`~recipe.generate_vllm.VLLMGenerator`); their ``omittable`` names (a tied
        ``lm_head.weight``) are not sent.
    dtype : torch.dtype
        The engines' weight dtype (tensors are cast to it on the trainer's device).
    device : torch.device or str
        Where the trainer's end sends from (its GPU; CPU with :class:`GlooTransport`).
    transport : callable, optional
        ``transport(world_size, client, source, address)`` returning an object with
        ``send_weights()``; default :func:`vllm_nccl` (vLLM's trainer engine).
    timeout : float
        Seconds a round may take before :meth:`push` gives up on it (an engine worker that
        died mid-broadcast would otherwise block the trainer forever).
    """

    def __init__(
        self,
        engines: Sequence[Any],
        *,
        dtype: torch.dtype,
        device: torch.device | str = "cuda",
        transport: Callable[..., Any] | None = None,
        address: str = "127.0.0.1",
        timeout: float = 1800.0,
    ) -> None:
        self.engines = list(engines)
        self.client = EnginesClient(self.engines)
        skip = getattr(self.engines[0], "omittable", ())
        self.source = PushSource(dtype, device, skip=skip)
        self.world_size = 1 + sum(self.client.workers)
        self.timeout = timeout
        self.broken: BaseException | None = None
        self._lock = threading.Lock()
        try:
            self.sender = (transport or vllm_nccl)(
                self.world_size, self.client, self.source, address
            )
        except BaseException:
            self.client.close()
            raise

    def _send(self) -> None:
        """``send_weights()`` within :attr:`timeout` seconds, on a daemon thread of its own (a
        round stuck in a collective cannot be interrupted, only left behind)."""
        outcome: list[BaseException | None] = []
        # a thread starts on CUDA device 0: give it the caller's (the streams and the gathers)
        device = torch.cuda.current_device() if torch.cuda.is_initialized() else None

        def run() -> None:
            try:
                if device is not None:
                    torch.cuda.set_device(device)
                self.sender.send_weights()
            except BaseException as err:
                outcome.append(err)
            else:
                outcome.append(None)

        thread = threading.Thread(target=run, name="weight-round", daemon=True)
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            raise BroadcastFailed(
                f"the weight round did not finish in {self.timeout:g} s (dist_timeout): an "
                "engine worker died or hangs in the broadcast; the run stops"
            )
        if outcome[0] is not None:
            raise BroadcastFailed(f"the weight round failed: {outcome[0]!r}") from outcome[0]

    def push(self, weights: Weights, version: int) -> None:
        """Pause every engine, broadcast each tensor once to all, then resume them at
        ``version``. Checks (names, shapes, NaN, the version) are the caller's, before this.

        Raises
        ------
        BroadcastFailed
            The round failed or timed out: every engine stays paused, its requests are aborted
            and it is marked broken (its weights are in an unknown state); the group cannot be
            used again, and the process should end (threads may be stuck in the group).
        """
        with self._lock:
            if self.broken is not None:
                raise BroadcastFailed(f"the weight group failed before ({self.broken!r})")
            start = time.perf_counter()
            in_flight = self.client.each(lambda i, e: e.pause())
            loading = time.perf_counter()
            self.source.weights = weights
            try:
                self._send()
            except BaseException as err:
                self.broken = failure = err
                # the round's error is the one to raise
                self.client.each_now(lambda i, e: e.fail(failure), timeout=30.0)
                raise
            finally:
                self.source.weights = None
            load_seconds = time.perf_counter() - loading
            self.client.each(
                lambda i, e: e.resume(
                    version, start=start, load_seconds=load_seconds, in_flight=in_flight[i]
                )
            )

    def close(self) -> None:
        shutdown = getattr(self.sender, "shutdown", None)
        if callable(shutdown) and self.broken is None:  # a broken group may hang in its teardown
            shutdown()
        self.client.close()
