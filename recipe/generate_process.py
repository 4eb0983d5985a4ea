"""The torch sampler in its own process: PipelineRL's producer without the trainer's GIL.

In ``mode: pipeline`` with ``generator: torch`` the producer thread of
:class:`recipe.pipeline.PipelineRollouts` calls a :class:`ProcessGenerator`, which forwards each
call to a :class:`~recipe.generate.TorchGenerator` living in a child process and waits for the
answer. Waiting on a pipe releases the GIL, so generation and the trainer's update overlap
fully; in a thread they shared one interpreter and overlapped only inside torch kernels that
release the GIL (the sampler's per-token Python loop and the trainer's Python code took turns).

The child is never ``fork``-ed from the trainer (a process that runs threads and OpenMP pools).
It comes from ``forkserver`` where the platform has it: a clean server process, started once per
trainer with torch, transformers and this package imported, forks each child (measured here:
0.24 s per child after the first, against 7-10 s for a ``spawn``-ed one that imports everything
itself on a loaded 2-core machine); ``spawn`` elsewhere.

Weights travel through shared memory: at start the parent copies the policy's state dict into
tensors in shared memory (CUDA tensors: the same, through CUDA IPC, with a device synchronize
after each side's copy, since the two processes' streams are not ordered), which the child
receives once; a push copies the new weights into those tensors in place and sends only the version
number, and the child loads them (``load_state_dict``) before answering. Pushes are synchronous
(they return once the child holds the new weights), so the shared tensors are never rewritten
while the child reads them, and every completion's ``versions`` stamps the weights that
produced it, exactly as in process. Only our own objects cross the pipe: prompts as token ids,
completions as :class:`~recipe.generate.Completion`, tensors, and the picklable engine builder
(a module-level function and its arguments); no user file is ever pickled.

The child exits on :meth:`ProcessGenerator.close`, and by itself within a second when the
trainer disappears (checked while it waits for work: the trainer's pid, and its own parent, the
trainer or the fork server, which exits with the trainer), so a killed trainer leaves no orphan;
it is also a daemon process, which ``multiprocessing`` terminates when the trainer exits. A
signal sent to the trainer's whole process group (Ctrl-C in a terminal, SIGTERM from Slurm or
torchrun) ends the child quietly, as does a pipe its trainer reset or closed. An
error in the child comes back as :class:`GeneratorProcessError` with the child's traceback; a
child that dies (killed, out of memory) is noticed within a second by a caller waiting on it.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.multiprocessing as mp

from recipe.weights import as_weights

if TYPE_CHECKING:  # a child with another engine need not import transformers
    from recipe.generate import Completion

POLL_SECONDS = 1.0
# imported once by the fork server, not by every child (the built model is a Llama)
PRELOAD = ["recipe.generate_process", "recipe.model", "transformers.models.llama.modeling_llama"]


class GeneratorProcessError(RuntimeError):
    """The generator's child process failed or is gone; the message carries its traceback."""


def torch_sampler(init: str, device: str, **kwargs):
    """Build the child's :class:`~recipe.generate.TorchGenerator` on the model folder ``init``.

    The weights read from the folder are replaced by the parent's at once (the first push), so
    only the architecture must match. ``kwargs`` are TorchGenerator's (``eos_ids``, ``pad_id``,
    ``fp32_head``, ``seed``, ``dtype``).
    """
    from transformers import AutoModelForCausalLM

    from recipe.generate import TorchGenerator

    model = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32).to(device)
    # the child's model is the sampler's own: no second copy
    return TorchGenerator(model, copy=False, **kwargs)


def torch_sampler_builder(init: str | Path, device: torch.device | str, **kwargs):
    """A picklable builder of :func:`torch_sampler` for :class:`ProcessGenerator`."""
    return functools.partial(torch_sampler, str(init), str(device), **kwargs)


def _sync_cuda(tensors: Mapping[str, torch.Tensor]) -> None:
    """Wait for this process's copies into or out of shared CUDA tensors: the other process
    reads them on its own stream, which does not order after ours."""
    if any(t.is_cuda for t in tensors.values()):
        torch.cuda.synchronize()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (a reused pid): treat as gone
        return False
    return True


def _serve(conn, build, shared, version: int, threads: int, trainer: int) -> None:
    """The child's loop: build the engine, load the shared weights, answer requests in order."""
    parent = os.getppid()  # the trainer (spawn) or the fork server
    signal.signal(signal.SIGTERM, _stop_serving)  # an exit that runs the process's finalizers
    torch.set_num_threads(threads)
    try:
        try:
            engine = build()
            engine.push_weights(shared, version)
            _sync_cuda(shared)
            rng = getattr(engine, "rng", None)
            reply = ("ok", rng.get_state() if rng is not None else None)
        except _Stop:
            raise
        except BaseException:
            reply, engine = ("error", traceback.format_exc()), None
        conn.send(reply)
        if engine is not None:
            _answer(conn, engine, rng, shared, parent, trainer)
    except (EOFError, ConnectionError, KeyboardInterrupt, _Stop):
        # the trainer is gone (killed: its end of the pipe was reset or closed), or a signal
        # reached the trainer's whole process group (Ctrl-C in a terminal, SIGTERM from Slurm
        # or torchrun; the trainer closes down by itself): nothing is left to answer, and the
        # trainer says what happened
        return


class _Stop(BaseException):
    """SIGTERM in the child (:func:`_stop_serving`)."""


def _stop_serving(signum, frame) -> None:
    """SIGTERM ends the child's loop, even inside a request, and the process exits normally
    (the default action would skip its finalizers, and ``multiprocessing``'s resource tracker
    would warn of the semaphores they release)."""
    raise _Stop


def _answer(conn, engine, rng, shared, parent: int, trainer: int) -> None:
    """Answer the trainer's requests until ``close`` or until it is gone."""
    while True:
        if not conn.poll(POLL_SECONDS):
            if os.getppid() != parent or not _alive(trainer):  # do not outlive the trainer
                return
            continue
        op, args = conn.recv()  # EOFError: the trainer closed its end
        if op == "close":
            conn.send(("ok", None))
            return
        try:
            if op == "generate":
                prompts, n, kw = args
                groups = engine.generate(prompts, n, **kw)
                reply = (groups, rng.get_state() if rng is not None else None)
            elif op == "push":
                engine.push_weights(shared, args)
                _sync_cuda(shared)  # loaded before the parent may write the next push
                reply = None
            elif op == "set_rng":
                rng.set_state(args)
                reply = None
            else:
                raise ValueError(f"unknown request {op!r}")
        except _Stop:
            raise
        except BaseException:
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("ok", reply))


class _ChildRng:
    """The child sampler's random generator as the trainer's checkpoints see it: the state
    after the last answered ``generate`` call, and ``set_state`` forwarded to the child."""

    def __init__(self, owner: ProcessGenerator) -> None:
        self._owner = owner

    def get_state(self) -> torch.Tensor:
        return self._owner._rng_state.clone()

    def set_state(self, state: torch.Tensor) -> None:
        self._owner._request("set_rng", state.cpu())
        self._owner._rng_state = state.cpu().clone()


def _stop(process, conn) -> None:
    """End the child for good (also run by the finalizer when the object is collected)."""
    if process.is_alive():
        process.join(timeout=10)
    if process.is_alive():
        process.terminate()
        process.join(timeout=5)
    if process.is_alive():
        process.kill()
        process.join()
    conn.close()


class ProcessGenerator:
    """A generator engine in a child process, with the :class:`~recipe.generate.Generator`
    interface (``generate``, ``push_weights``, ``close``, ``version``, ``rng``).

    Parameters
    ----------
    build : callable
        Called in the child to build the engine (:func:`torch_sampler_builder`); must pickle by
        reference (a module-level function, or a ``functools.partial`` of one).
    state_dict : mapping of str to Tensor
        The weights to start from (Hugging Face names), tagged ``version``.
    version : int
        Their policy version.
    threads : int
        torch CPU threads of the child.
    start_method : str or None
        ``"forkserver"`` (the default where available, with :data:`PRELOAD`) or ``"spawn"``;
        never ``"fork"``.
    timeout : float
        Seconds to wait for the child to start (imports and model build).

    Calls may come from several threads (the producer's ``generate`` and ``push_weights``, the
    trainer's ``close`` and checkpointed ``rng``); one request is in flight at a time.
    """

    def __init__(
        self,
        build: Callable[[], object],
        state_dict: Mapping[str, torch.Tensor],
        *,
        version: int = 0,
        threads: int = 1,
        start_method: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        if start_method == "fork":
            raise ValueError("start_method 'fork' is refused: the trainer runs threads")
        ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            ctx.set_forkserver_preload(PRELOAD)  # no effect once the server runs
        # CPU tensors move to shared memory; CUDA tensors are shared through CUDA IPC as they are
        self._shared = {k: v.detach().clone().share_memory_() for k, v in state_dict.items()}
        _sync_cuda(self._shared)
        self._conn, child_end = ctx.Pipe()
        self.process = ctx.Process(
            target=_serve, name="generator", daemon=True,
            args=(child_end, build, self._shared, version, threads, os.getpid()),
        )  # fmt: skip
        self.process.start()
        child_end.close()
        self._finalizer = weakref.finalize(self, _stop, self.process, self._conn)
        self._lock = threading.Lock()
        self._closed = False
        self.version = version
        try:
            self._rng_state = self._wait(timeout)
        except BaseException:
            self.close()
            raise
        self.rng = _ChildRng(self) if self._rng_state is not None else None

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _wait(self, timeout: float | None = None):
        """The child's answer to the request in flight, or an error if it failed or died."""
        waited = 0.0
        while not self._conn.poll(POLL_SECONDS):
            waited += POLL_SECONDS
            if not self.process.is_alive() and not self._conn.poll():
                raise GeneratorProcessError(
                    f"the generator process (pid {self.process.pid}) died with exit code "
                    f"{self.process.exitcode}"
                )
            if timeout is not None and waited >= timeout:
                raise GeneratorProcessError(f"the generator process did not answer in {timeout} s")
        try:
            status, payload = self._conn.recv()
        except (EOFError, OSError) as err:  # OSError: reset by a child that was killed
            raise GeneratorProcessError(
                f"the generator process (pid {self.process.pid}) closed its pipe ({err!r}); "
                f"exit code {self.process.exitcode}"
            ) from None
        if status == "error":
            raise GeneratorProcessError(f"the generator process failed:\n{payload}")
        return payload

    def _request(self, op: str, args):
        with self._lock:
            return self._send_and_wait(op, args)

    def _send_and_wait(self, op: str, args):
        """One request and its answer; the caller holds the lock."""
        if self._closed:
            raise GeneratorProcessError("the generator process was closed")
        try:
            self._conn.send((op, args))
        except (BrokenPipeError, OSError) as err:
            raise GeneratorProcessError(
                f"the generator process (pid {self.process.pid}) is gone: {err!r}"
            ) from err
        return self._wait()

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt in the child; blocks (GIL released) until done."""
        kw = {"max_new_tokens": max_new_tokens, "temperature": temperature}
        groups, self._rng_state = self._request("generate", ([list(p) for p in prompts], n, kw))
        return groups

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy the weights into shared memory and have the child load them; returns once it has.

        Names and shapes must be the starting state dict's (the child's ``load_state_dict``
        checks again).
        """
        weights = as_weights(state_dict)
        with self._lock:  # no copy while the child may still be reading the previous push
            if weights.keys() != self._shared.keys():
                missing = sorted(self._shared.keys() - weights.keys())[:3]
                extra = sorted(weights.keys() - self._shared.keys())[:3]
                raise ValueError(f"weight names differ: missing {missing}, unexpected {extra}")
            for name, shape in weights.shapes.items():  # all checked before any is written
                if shape != self._shared[name].shape:
                    raise ValueError(
                        f"{name}: shape {tuple(shape)}, expected {tuple(self._shared[name].shape)}"
                    )
            for name, value in weights.items():
                self._shared[name].copy_(value.detach())
            _sync_cuda(self._shared)  # written before the child reads them
            self._send_and_wait("push", version)
        self.version = version

    def close(self) -> None:
        """Stop the child (it finishes a running request first) and reap it; idempotent."""
        if self._closed:
            return
        acquired = self._lock.acquire(timeout=30)  # a running generate call finishes first
        try:
            self._closed = True
            if acquired and self.process.is_alive():
                try:
                    self._conn.send(("close", None))
                    if self._conn.poll(10):
                        self._conn.recv()
                except (BrokenPipeError, EOFError, OSError):
                    pass
        finally:
            if acquired:
                self._lock.release()
        self._finalizer()  # join, or terminate/kill one that does not exit
