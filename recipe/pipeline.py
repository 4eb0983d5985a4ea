"""Where a step's rollouts come from: synchronous, PPO-off-policy-k, or PipelineRL-k.

The training loop asks a *rollout source* for one batch per step (:meth:`next_batch`) and hands it
the new weights after each update (:meth:`push`). Three sources, one interface:

- ``sync`` = :class:`OffPolicyRollouts` with k = 1: generate a batch, train on it, push.
- ``ppo-off-policy`` = :class:`OffPolicyRollouts` with k = ``max_lag``: k batches are generated
  with frozen weights in one ``generate`` call (k x ``prompts_per_step`` prompts, split into the
  k batches after), then the trainer takes k updates on them (lag 0, 1, ..., k-1), then the
  weights are pushed once. Generator and trainer take turns, so each idles while the other works.
- ``pipeline`` = :class:`PipelineRollouts` (PipelineRL-k): a producer thread keeps generating
  while the trainer trains; batches travel through a queue; the trainer pushes every new version
  as soon as its update lands. The generation itself runs outside the trainer's interpreter
  (vLLM's engine processes, or the torch sampler's own process), so the thread only waits.

Lag. The trainer taking step ``s`` holds policy version ``s - 1`` (version = updates so far); a
token sampled by version ``v`` has lag ``s - 1 - v``. PipelineRL-k bounds it by admission: the
producer starts the batch for step ``b`` only once the trainer has published version
``b - 1 - k``; every token of that batch comes from that version or a newer one, so its lag is at
most ``k``. The producer, not the trainer, is the side that waits (a trainer that is ahead of
stale data cannot make it fresher by waiting); the trainer waits only for data.

Two generator kinds:

- ``AsyncVLLMGenerator`` (has ``submit``): the producer submits each prompt's request and moves
  on; the trainer's :meth:`push` goes straight into the running engine (paused with
  ``mode="keep"``, loaded, resumed), so in-flight sequences continue on their stale KV cache and
  their tokens switch version mid-sequence (``mixed_version_samples`` counts them).
- ``TorchGenerator``, in its own process (:class:`~recipe.generate_process.ProcessGenerator`):
  it cannot change weights mid-sequence (one ``generate`` call samples a whole batch), so a push
  is parked and loaded before the producer's next ``generate`` call. Lag bounds and versions
  behave the same; completions are never mixed. A batch's lag depends on which side is the
  bottleneck at the time: k while the trainer is slower (the producer waits at admission), 1
  while the sampler is slower (the trainer waits for every batch), values in between around
  the changes (a trainer stall, an evaluation, a filter that empties the batches).

Idle accounting (logged per step as fractions of the step's wall time): the generator is idle
while nothing is being generated (sync/off-policy: during updates; pipeline: while the producer
waits for admission or, with vLLM, while no request is in flight); the trainer is idle while it
waits for a batch. Evaluation time is excluded from both, and :meth:`hold` stops the producer
from starting new batches during evaluation (vLLM requests already in flight finish).

Failures: an exception in the producer (a generator that dies, a weight load that fails) is
raised in the trainer's next :meth:`next_batch` as :class:`GeneratorFailed`, carrying the original
error; a push into vLLM that fails raises at once. The loop then stops with its log and last
checkpoint intact, and ``--resume`` continues from that checkpoint.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from recipe.config import ConfigError
from recipe.generate import Completion
from recipe.weights import Weights, as_weights


class GeneratorFailed(RuntimeError):
    """The rollout producer stopped with an error; the run cannot continue on these weights.

    ``fatal``: threads or other ranks may be stuck in a collective the failure left unfinished
    (a weight round that died midway), so the process must end instead of waiting for them at
    exit (recipe/cli.py ends it).
    """

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


def is_fatal(err: BaseException) -> bool:
    """Whether ``err`` or an error behind it left a collective unfinished (see
    :class:`GeneratorFailed`)."""
    from recipe.weight_broadcast import BroadcastFailed

    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, BroadcastFailed) or getattr(err, "fatal", False):
            return True
        err = err.__cause__ or err.__context__
    return False


@dataclass
class Batch:
    """One step's rollouts: prompt indices into the pool and ``n`` completions per prompt."""

    indices: list[int]
    groups: list[list[Completion]] = field(default_factory=list)
    futures: list[Future] = field(default_factory=list)  # async vLLM: resolved by next_batch


class IdleClock:
    """Thread-safe stopwatch of the time something spends idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0.0
        self._since: float | None = time.perf_counter()  # idle until first marked busy

    def busy(self) -> None:
        with self._lock:
            if self._since is not None:
                self._total += time.perf_counter() - self._since
                self._since = None

    def idle(self) -> None:
        with self._lock:
            if self._since is None:
                self._since = time.perf_counter()

    def seconds(self) -> float:
        """Idle time so far, the current idle stretch included."""
        with self._lock:
            open_part = time.perf_counter() - self._since if self._since is not None else 0.0
            return self._total + open_part


def version_stats(groups: Sequence[Sequence[Completion]], trainer_version: int) -> dict:
    """Lag (in policy versions) of a batch's tokens behind the trainer, and mixed completions."""
    versions = [v for g in groups for c in g for v in c.versions]
    lags = [trainer_version - v for v in versions] or [0]
    return {
        "lag_min": min(lags),
        "lag_mean": sum(lags) / len(lags),
        "lag_max": max(lags),
        "mixed_version_samples": sum(c.mixed for g in groups for c in g),
    }


class SharedPool:
    """A :class:`~recipe.curriculum.PromptPool` behind a lock: in pipeline mode the producer
    thread draws prompts while the trainer records pass rates."""

    def __init__(self, pool) -> None:
        self.pool = pool
        self.lock = threading.Lock()

    @property
    def pool_size(self) -> int:
        with self.lock:
            return self.pool.pool_size

    def next_batch(self, n: int) -> list[int]:
        with self.lock:
            return self.pool.next_batch(n)

    def update(self, indices: Sequence[int], pass_rates: Sequence[float]) -> None:
        with self.lock:
            self.pool.update(indices, pass_rates)

    def state_dict(self) -> dict:
        with self.lock:
            return self.pool.state_dict()

    def load_state_dict(self, state: dict) -> None:
        with self.lock:
            self.pool.load_state_dict(state)


def takes_weights(step: int, k: int, steps: int) -> bool:
    """Whether the generator ever uses the weights of ``step``, so that the loop gathers and
    pushes them: every step's with k = 1 (sync, PipelineRL), a round's last with PPO-off-policy-k
    (the next round starts from them; the round's other versions would be replaced unread), and
    never the last step's (no batch follows; an evaluation pushes its own)."""
    return step < steps and step % k == 0


def push(generator, weights: Weights | Mapping[str, torch.Tensor], version: int) -> None:
    """Push weights or stop the run: never continue silently on old weights."""
    try:
        generator.push_weights(weights, version)
    except Exception as err:
        raise GeneratorFailed(
            f"weight push of policy version {version} failed: {err!r}; the generator does not "
            "hold the new weights, so the run stops", fatal=is_fatal(err),
        ) from err  # fmt: skip


class WeightBuffer:
    """One parked copy of the weights, allocated at the first push and overwritten in place.

    The optimizer updates parameters in place, so a push parked for the torch sampler (which
    loads it between ``generate`` calls) must not see later steps; copying into the same buffer
    every time costs no allocation per push (one extra copy of the weights in all).
    """

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] | None = None

    def put(self, weights: Weights | Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        weights = as_weights(weights)
        if self.tensors is None or self.tensors.keys() != weights.keys():
            self.tensors = {k: v.detach().clone() for k, v in weights.items()}
        else:
            for k, v in weights.items():
                self.tensors[k].copy_(v.detach())
        return self.tensors


class OffPolicyRollouts:
    """Sync (k = 1) and PPO-off-policy-k: k batches with frozen weights, generated in one call,
    then k updates.

    Parameters
    ----------
    generator
        A :class:`~recipe.generate.Generator`.
    pool
        The :class:`~recipe.curriculum.PromptPool`.
    prompt_ids : list of list of int
        Tokenized training prompts (indexed by the pool).
    cfg
        The run's :class:`~recipe.config.Config` (batch shape, sampling, ``steps``).
    k : int
        Batches per frozen-weights round.
    """

    def __init__(self, generator, pool, prompt_ids, cfg, k: int) -> None:
        self.generator, self.pool, self.prompt_ids, self.cfg, self.k = (
            generator, pool, prompt_ids, cfg, k
        )  # fmt: skip
        self.buffer: collections.deque[Batch] = collections.deque()
        self.generator_idle = IdleClock()
        self.trainer_wait = 0.0

    def next_batch(self, step: int) -> Batch:
        """The batch for ``step``; at a round's first step the whole round is generated.

        The round's index sets are drawn first (one per step, as the steps would draw them),
        then one ``generate`` call samples all of their prompts together and the result is
        split back into batches: the engine decodes the k batches as one batch of
        k x ``prompts_per_step`` groups (one wait for the slowest sequence per round, not one
        per batch). The torch sampler holds that whole call's sequences at once.
        """
        if not self.buffer:
            start = time.perf_counter()
            # a round is k steps long, aligned to step 1 (also after --resume mid-round)
            rounds = min(self.k - (step - 1) % self.k, self.cfg.steps - step + 1)
            self.generator_idle.busy()
            try:
                draws = [self.pool.next_batch(self.cfg.prompts_per_step) for _ in range(rounds)]
                groups = self.generator.generate(
                    [self.prompt_ids[i] for idx in draws for i in idx], self.cfg.generations,
                    max_new_tokens=self.cfg.max_new_tokens, temperature=self.cfg.temperature,
                )  # fmt: skip
                at = 0
                for idx in draws:
                    self.buffer.append(Batch(idx, groups[at : at + len(idx)]))
                    at += len(idx)
                if at != len(groups):
                    raise RuntimeError(
                        f"the generator returned {len(groups)} prompt groups for {at} prompts"
                    )
            except (GeneratorFailed, ConfigError):  # ConfigError: the prompt pool ran out
                raise
            except Exception as err:
                self.buffer.clear()
                raise GeneratorFailed(f"generator failed: {err!r}") from err
            finally:
                self.generator_idle.idle()
            self.trainer_wait += time.perf_counter() - start
        return self.buffer.popleft()

    def takes_weights(self, step: int) -> bool:
        """Whether the weights of ``step`` start a round (:func:`takes_weights`)."""
        return takes_weights(step, self.k, self.cfg.steps)

    def push(self, weights: Weights | Mapping[str, torch.Tensor], version: int) -> None:
        """Load the weights of a round's last step into the generator now (the next round
        generates with them); any other version is dropped unread (weights change only between
        rounds)."""
        if self.takes_weights(version):
            push(self.generator, weights, version)

    def hold(self) -> None:
        """Nothing runs in the background."""

    def release(self) -> None:
        """Nothing runs in the background."""

    def close(self) -> None:
        """Nothing to stop."""


class PipelineRollouts:
    """PipelineRL-k: a producer thread generates ahead while the trainer trains.

    Parameters are those of :class:`OffPolicyRollouts`, plus ``first_step`` (the step the loop
    starts at, > 1 after ``--resume``) and ``version`` (the trainer's version at start). ``k`` is
    the lag bound.
    """

    def __init__(
        self, generator, pool, prompt_ids, cfg, k: int, *, first_step: int, version: int
    ) -> None:
        self.generator, self.pool, self.prompt_ids, self.cfg, self.k = (
            generator, pool, prompt_ids, cfg, k
        )  # fmt: skip
        self.is_async = hasattr(generator, "submit")
        self.first_step = first_step
        self.version = version  # latest version the trainer published
        self.pending: tuple[dict, int] | None = None  # torch generator: next load
        self.parked = WeightBuffer()
        self.held = False
        self.stopping = False
        self.cond = threading.Condition()
        self.batches: queue.Queue[Batch | BaseException] = queue.Queue()
        self.generator_idle = IdleClock()
        self.trainer_wait = 0.0
        self.in_flight = 0  # async vLLM: requests submitted and not finished
        self.thread = threading.Thread(target=self._produce, name="rollouts", daemon=True)
        self.thread.start()

    # ----------------------------------------------------------------- producer thread
    def _produce(self) -> None:
        try:
            for step in range(self.first_step, self.cfg.steps + 1):
                with self.cond:  # admission: the batch for `step` may lag at most k versions
                    self.cond.wait_for(
                        lambda s=step: (
                            self.stopping or (not self.held and self.version >= s - 1 - self.k)
                        )
                    )
                    if self.stopping:
                        return
                    pending, self.pending = self.pending, None
                    if pending is not None:  # under the lock: push() cannot overwrite it now
                        push(self.generator, *pending)
                idx = self.pool.next_batch(self.cfg.prompts_per_step)  # a SharedPool
                prompts = [self.prompt_ids[i] for i in idx]
                kw = {"max_new_tokens": self.cfg.max_new_tokens,
                      "temperature": self.cfg.temperature}  # fmt: skip
                if self.is_async:
                    futures = [self._submit(p, kw) for p in prompts]
                    self.batches.put(Batch(idx, futures=futures))
                    continue
                self.generator_idle.busy()
                try:
                    groups = self.generator.generate(prompts, self.cfg.generations, **kw)
                finally:
                    self.generator_idle.idle()
                self.batches.put(Batch(idx, groups))
        except BaseException as err:  # handed to the trainer, which stops the run
            self.batches.put(err)

    def _submit(self, prompt, kw) -> Future:
        with self.cond:
            self.in_flight += 1
            self.generator_idle.busy()
        future = self.generator.submit(prompt, self.cfg.generations, **kw)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future) -> None:
        with self.cond:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.generator_idle.idle()

    # ----------------------------------------------------------------- trainer side
    def next_batch(self, step: int) -> Batch:
        """The batch for ``step`` (blocks until it is generated)."""
        start = time.perf_counter()
        try:
            while True:
                try:
                    item = self.batches.get(timeout=1.0)
                    break
                except queue.Empty:
                    if not self.thread.is_alive() and self.batches.empty():
                        raise GeneratorFailed(
                            "the rollout producer stopped without a batch"
                        ) from None
            if isinstance(item, ConfigError):  # the prompt pool ran out: no generator fault
                raise item
            if isinstance(item, BaseException):
                raise GeneratorFailed(f"generator failed: {item!r}") from item
            if item.futures:
                try:
                    item.groups = [f.result() for f in item.futures]
                except Exception as err:
                    raise GeneratorFailed(f"generator failed: {err!r}") from err
            return item
        finally:
            self.trainer_wait += time.perf_counter() - start

    def takes_weights(self, step: int) -> bool:
        """Every update but the last is published (:func:`takes_weights` with k = 1)."""
        return takes_weights(step, 1, self.cfg.steps)

    def push(self, weights: Weights | Mapping[str, torch.Tensor], version: int) -> None:
        """Publish ``version``: into the running vLLM engine now, or parked for the torch one."""
        if self.is_async:
            # in the trainer thread: a failed push raises here and stops the run
            push(self.generator, weights, version)
            with self.cond:
                self.version = version
                self.cond.notify_all()
            return
        with self.cond:
            self.pending, self.version = (self.parked.put(weights), version), version
            self.cond.notify_all()

    def hold(self) -> None:
        """Start no new batches (during evaluation)."""
        with self.cond:
            self.held = True

    def release(self) -> None:
        with self.cond:
            self.held = False
            self.cond.notify_all()

    def close(self) -> None:
        """Stop the producer (a running torch ``generate`` call finishes first)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout=60)
        if self.thread.is_alive():  # a daemon thread: the interpreter ends it at exit
            warnings.warn(
                "the rollout producer is still running 60 s after close() (a long generate "
                "call?); if it is inside torch when the interpreter exits, the process aborts "
                "with 'terminate called without an active exception'",
                RuntimeWarning,
                stacklevel=2,
            )
