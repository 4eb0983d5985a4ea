"""Fake vLLM engines for the one-group weight broadcast (recipe/weight_broadcast.py) on CPU.

Each :class:`FakeGroupEngine` offers the engine side that
:class:`~recipe.generate_vllm.AsyncVLLMGenerator` offers (``weight_workers``,
``init_weight_transfer``, ``start_weight_update``, ``update_weights``, ``finish_weight_update``,
``pause``, ``resume``, ``fail``), with its workers as threads that join the trainer's gloo group
at the engine's rank offset and receive each broadcast tensor as vLLM's NCCL worker does
(an empty tensor of the announced dtype and shape per name, in order).
"""

from __future__ import annotations

import threading

import torch

from recipe.weight_broadcast import gloo_broadcast, gloo_group


class FakeGroupEngine:
    def __init__(
        self,
        workers: int,
        *,
        dtype=torch.bfloat16,
        timeout: float = 60.0,
        omittable=(),
        stuck: threading.Event | None = None,
    ) -> None:
        self.weight_workers, self.dtype, self.timeout = workers, dtype, timeout
        self.omittable = set(omittable)  # names the engine's loader drops (a tied head)
        self.stuck = stuck  # set: update_weights waits for it instead of receiving (a dead worker)
        self.version = 0
        self.events: list[str] = []
        self.groups: list = [None] * workers
        self.received: list[dict[str, torch.Tensor]] = [{} for _ in range(workers)]
        self.rank_offset: int | None = None
        self.init_info: dict | None = None
        self.broadcast = None

    def _on_workers(self, work) -> None:
        """Run ``work(i)`` on every worker thread; raise the first error."""
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                work(i)
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(self.weight_workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def init_weight_transfer(self, info: dict) -> None:
        self.init_info = dict(info)
        self.rank_offset = info["rank_offset"]
        self.events.append("init")

        def join(i: int) -> None:
            self.groups[i] = gloo_group(
                info["master_address"], info["master_port"], info["rank_offset"] + i,
                info["world_size"], timeout=self.timeout,
            )  # fmt: skip

        self._on_workers(join)

    def start_weight_update(self) -> None:
        self.events.append("start")

    def update_weights(self, info: dict) -> None:
        self.events.append("update")
        if self.stuck is not None:
            self.stuck.wait()
            return

        def receive(i: int) -> None:
            for name, dtype, shape in zip(
                info["names"], info["dtype_names"], info["shapes"], strict=True
            ):
                t = torch.empty(shape, dtype=getattr(torch, dtype))
                gloo_broadcast(self.groups[i], t)
                self.received[i][name] = t

        self._on_workers(receive)

    def finish_weight_update(self) -> None:
        self.events.append("finish")

    def pause(self) -> int:
        self.events.append("pause")
        return 0

    def resume(self, version, *, start, load_seconds, in_flight) -> None:
        self.events.append(f"resume {version}")
        self.version = version

    def fail(self, err) -> None:
        self.events.append("fail")

    def push_weights(self, state_dict, version):  # only the group route is used here
        raise AssertionError("a group member is pushed to through its WeightBroadcast")

    def generate(self, prompts, n, *, max_new_tokens, temperature=1.0):
        raise AssertionError("not used")

    def close(self) -> None:
        self.events.append("close")


class FakeOfflineLLM:
    """What :class:`~recipe.generate_vllm.VLLMGenerator` uses of ``vllm.LLM``, with the engine's
    workers as threads in the weight group: ``collective_rpc`` of the workers' weight-transfer
    methods runs them as vLLM's ``Worker`` would (``init_weight_transfer_engine(init_info)``,
    ``start_weight_update()``, ``update_weights(update_info)``, ``finish_weight_update()``)."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        workers = int(kwargs.get("tensor_parallel_size", 1))
        self.workers = FakeGroupEngine(workers, dtype=getattr(torch, kwargs["dtype"]))
        self.calls: list[str] = []
        self.weight_version = None
        llm = self

        class Core:
            def shutdown(self) -> None:
                llm.calls.append("shutdown")

        class Engine:
            engine_core = Core()

            def set_weight_version(self, version: str) -> None:
                llm.weight_version = version

        self.llm_engine = Engine()

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.calls.append(method)
        kw = kwargs or {}
        run = {
            "init_weight_transfer_engine": lambda: self.workers.init_weight_transfer(
                kw["init_info"]
            ),
            "start_weight_update": self.workers.start_weight_update,
            "update_weights": lambda: self.workers.update_weights(kw["update_info"]),
            "finish_weight_update": self.workers.finish_weight_update,
        }[method]
        run()
        return [None] * self.workers.weight_workers

    def reset_prefix_cache(self) -> None:
        self.calls.append("reset_prefix_cache")
