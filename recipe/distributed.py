"""Several trainer processes: torchrun setup, FSDP2 sharding, the batch split, global reductions.

    torchrun --nproc-per-node 2 -m recipe.train --config recipe/configs/cpu_demo.yaml --out runs/x

One process = one rank = one device. Rank 0 owns the rollout source (the generator engine, the
prompt pool's draws, evaluation) and the log; each step it broadcasts the batch and every rank
computes the same rewards, pool update, zero-variance filter, advantages and aggregation weights
on the *whole* batch (cheap: numbers per completion), so those are global by construction. Only
the forward/backward is split: each rank takes whole prompt groups (group g goes to rank
g mod world) and weights its tokens with the whole batch's ``token_weights``, so the sum of the
ranks' losses is the one-process loss. FSDP2 sums (not averages) the ranks' gradients.

With one process (no ``WORLD_SIZE`` or ``WORLD_SIZE=1``) every function here is the identity and
the trainer is the single-process one.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from recipe.weights import Weights


@dataclass(frozen=True)
class Ranks:
    """Where this process stands: ``rank`` of ``world`` (``local`` = its device index)."""

    rank: int = 0
    world: int = 1
    local: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1


SINGLE = Ranks()


def launched_ranks() -> int:
    """How many ranks torchrun started (``WORLD_SIZE``; 1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init(device: torch.device, timeout: float = 1800.0) -> Ranks:
    """Join the torchrun group (gloo on CPU, nccl on CUDA); one process: :data:`SINGLE`.

    ``timeout`` (seconds, the config's ``dist_timeout``): how long a collective waits for the
    other ranks before it raises, so a rank that died or hangs fails the job instead of leaving
    the others blocked (torchrun then stops every rank). Rank 0 alone generates and evaluates
    while the others wait in the next collective, so it must exceed that stretch.
    """
    world = launched_ranks()
    if world <= 1:
        return SINGLE
    ranks = Ranks(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(ranks.local)
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout)
        )
    return ranks


def rank_device(device: torch.device, ranks: Ranks) -> torch.device:
    """Each rank's own GPU (``cuda:LOCAL_RANK``); CPU is shared."""
    if device.type == "cuda" and ranks.active:
        return torch.device("cuda", ranks.local)
    return device


def close(ranks: Ranks) -> None:
    """Leave the process group; on a clean end the ranks first meet in a barrier.

    A rank that left while another one still finished a collective with it would break that
    collective. With an exception in flight no collective is started: the other ranks may be
    elsewhere, or gone. A torchrun rank then ends with :func:`end_process`.
    """
    if not (ranks.active and dist.is_initialized()):
        return
    if sys.exc_info()[0] is None:
        dist.barrier()
    dist.destroy_process_group()


def end_process() -> None:
    """End a torchrun rank's process now, without finalizing the interpreter (``os._exit(0)``
    once the output is flushed), after :func:`close`; with one process, return.

    Why: gloo runs collectives on worker threads that live as long as the process group, and
    the group outlives ``destroy_process_group``: FSDP's modules and DTensor's caches hold it,
    and only its destructor stops those threads. A worker frees a finished collective's
    tensors just after the caller has moved on, which takes the GIL, and a thread still
    waiting for the GIL when the interpreter starts finalizing is ended by ``pthread_exit``,
    whose unwinding through C++ aborts the process ("terminate called without an active
    exception", SIGABRT; the core's backtrace: ``ProcessGroupGloo::runLoop`` ->
    ``~AsyncAllgatherWork`` -> ``decref_pyobject`` -> ``take_gil`` -> ``pthread_exit`` ->
    ``std::terminate``). A rank that has closed its files has nothing left to finalize.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks (Hugging Face names their class in ``_no_split_modules``)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def precision_policies(bf16: bool, fp32_head: bool):
    """FSDP2's mixed-precision policies: (the decoder layers', the root's).

    ``bf16``: parameters all-gathered in bf16, gradients reduced in FP32 (the FP32 shards stay
    the master weights); the root (embeddings, final norm, LM head) FP32 when ``fp32_head``.
    ``cast_forward_inputs=False`` everywhere: FSDP2's default casts every unit's floating-point
    inputs to ``param_dtype``, which would carry the residual stream between decoder layers in
    bf16; one process under autocast keeps it FP32 (autocast casts only the matmuls' inputs),
    and so must the sharded trainer, or the generator/trainer mismatch would change with the
    rank count.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy

    fp32 = MixedPrecisionPolicy(
        param_dtype=torch.float32, reduce_dtype=torch.float32, cast_forward_inputs=False
    )
    body = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False
    )
    layers = body if bf16 else fp32
    return layers, fp32 if fp32_head else layers


def shard(
    model: torch.nn.Module,
    ranks: Ranks,
    *,
    bf16: bool,
    fp32_head: bool,
    device: torch.device | str = "cpu",
):
    """FSDP2 ``fully_shard`` per decoder layer, then the root; in place, returns ``model``.

    ``bf16`` (GPU): see :func:`precision_policies`. On CPU the policy is plain FP32, which is
    what makes the 1-rank / 2-rank comparison exact to rounding. Only rank 0 holds the weights
    (the other ranks' models are on the meta device: :func:`recipe.run.setup`): after sharding,
    the others allocate their shards on ``device`` and every rank takes its shard of rank 0's
    weights (``set_model_state_dict(..., broadcast_from_rank0=True)``), then rank 0's buffers
    (rotary frequencies, which no state dict holds); no rank but 0 ever holds the full model.
    """
    if not ranks.active:
        return model
    full = model.state_dict() if ranks.main else {}  # rank 0's loaded weights, unsharded
    fully_shard_model(model, *precision_policies(bf16, fp32_head))
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if not ranks.main:
        model.to_empty(device=device)
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, full, options=options)
    del full
    for buffer in model.buffers():
        dist.broadcast(buffer, src=0)
    return model


def fully_shard_model(model: torch.nn.Module, layer_policy, root_policy) -> torch.nn.Module:
    """:func:`shard` with the policies given (one per decoder layer, the root's)."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    from recipe.forward import SHARDED_FORWARD, body_and_head

    units = [fully_shard(layer, mp_policy=layer_policy) for layer in decoder_layers(model)]
    # the root (embeddings, final norm, LM head) in FP32 when the head is: recipe/forward.py
    # reads the head's weight directly. A root keeps its parameters gathered from forward to
    # the end of backward, which that direct read (and the checkpointed chunks' recomputation)
    # needs; forward.py calls the body and head, not the model's forward, so that call is
    # registered as an FSDP forward method.
    units.append(fully_shard(model, mp_policy=root_policy))
    setattr(model, SHARDED_FORWARD, functools.partial(body_and_head, model))
    register_fsdp_forward_method(model, SHARDED_FORWARD)
    for unit in units:  # every rank's loss carries the whole batch's denominators: sum
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no PREMUL_SUM)
    return model


def micro_batches(
    positions: list[int], group_of: list[int], size: int, ranks: Ranks
) -> list[tuple[list[int], float]]:
    """This rank's micro-batches of ``positions`` (whole prompt groups, group g on rank
    g mod world), each with a scale: 1.0, or 0.0 for a padding micro-batch.

    FSDP's forward and backward are collectives, so every rank must run the same number of
    micro-batches: a rank with fewer repeats its first completion with its loss scaled by 0.
    """
    if not ranks.active:
        return [(positions[lo : lo + size], 1.0) for lo in range(0, len(positions), size)]
    mine = [p for p, g in zip(positions, group_of, strict=True) if g % ranks.world == ranks.rank]
    chunks = [(mine[lo : lo + size], 1.0) for lo in range(0, len(mine), size)]
    n = int(all_max([float(len(chunks))], ranks)[0])
    pad = (mine or positions)[:1]
    return chunks + [(pad, 0.0)] * (n - len(chunks))


def backward(loss: torch.Tensor, ranks: Ranks) -> bool:
    """``loss.backward()`` unless the loss is NaN or inf; returns whether it was finite.

    With several ranks the backward runs even on a non-finite loss: FSDP's gradient reduction
    waits for every rank's backward, so a rank that skipped it would hang the others. The update
    is then dropped on every rank (:func:`reduce_stats` spreads ``finite``).
    """
    finite = bool(torch.isfinite(loss))
    if finite or ranks.active:
        loss.backward()
    return finite


def reduce_stats(stats, ranks: Ranks):
    """An update's diagnostics over every rank, in place: the fields named in
    ``type(stats).SUMS`` summed, those in ``MAXIMA`` maxed (None where no rank has a value),
    ``finite`` true only if it is on every rank. One process: unchanged."""
    if not ranks.active:
        return stats
    *sums, n_bad = all_sum(
        [getattr(stats, k) for k in stats.SUMS] + [float(not stats.finite)], ranks
    )
    for k, v in zip(stats.SUMS, sums, strict=True):
        setattr(stats, k, v)
    stats.finite = n_bad == 0
    for k in stats.MAXIMA:
        setattr(stats, k, all_max_optional(getattr(stats, k), ranks))
    return stats


def _reduce(values: list[float], ranks: Ranks, op) -> list[float]:
    if not ranks.active:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=op)
    return t.cpu().tolist()


def all_sum(values: list[float], ranks: Ranks) -> list[float]:
    return _reduce(values, ranks, dist.ReduceOp.SUM if ranks.active else None)


def all_max(values: list[float], ranks: Ranks) -> list[float]:
    return _reduce(values, ranks, dist.ReduceOp.MAX if ranks.active else None)


def all_max_optional(value: float | None, ranks: Ranks) -> float | None:
    """The max over ranks of a value some ranks may not have (None)."""
    (m,) = all_max([-math.inf if value is None else value], ranks)
    return None if m == -math.inf else m


def broadcast(obj, ranks: Ranks):
    """Rank 0's ``obj`` on every rank (our own objects between our own processes)."""
    if not ranks.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(ranks: Ranks) -> None:
    if ranks.active:
        dist.barrier()


def local_value(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (``clip_grad_norm_`` over sharded parameters returns one)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def model_weights(
    model: torch.nn.Module, ranks: Ranks, dtype: torch.dtype | None = None
) -> Weights:
    """The policy's full weights for a push, one parameter at a time (recipe/weights.py).

    One process: the model's own tensors (no copy). Several ranks: a collective. Every rank
    calls this at the same point and reads the result there (rank 0's consumer, through
    :func:`hand_over`; the other ranks :meth:`~recipe.weights.Weights.drain` it): each item is
    one parameter gathered from its shards with ``full_tensor()`` on the trainer's device,
    dropped before the next, so no rank holds more than one full parameter; only rank 0's
    stream yields them.

    - ``dtype`` (the engines' weight dtype, e.g. bf16): each shard is cast to it before the
      gather, which halves the gather's traffic and its peak for FP32 master weights.
    - A tied parameter (``lm_head.weight`` sharing the embedding) is gathered once: its name
      follows the original's in the stream with the same gathered tensor (a consumer whose
      engine drops it skips it).
    - Before the first gather rank 0 broadcasts go or refuse (:meth:`~recipe.weights.Weights.
      cancel`): a push its consumer refused (a bad shape, a NaN) ends every rank's drain with
      :class:`~recipe.pipeline.GeneratorFailed` instead of a wait in a gather that rank 0
      never joins.
    - Finiteness comes from the shards (one all-reduce), so a NaN is refused before anything
      is sent.
    """
    state = model.state_dict()  # sharded DTensors under FSDP2: nothing is gathered here
    if not ranks.active:
        return Weights.of(state)
    from torch.distributed.tensor import DTensor

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if isinstance(t, DTensor) else t

    bad = sum(not bool(torch.isfinite(local(t)).all()) for t in state.values())
    (n_bad,) = all_sum([float(bad)], ranks)
    # each tied duplicate right after the parameter it shares (the same Parameter object)
    shared: dict[int, str] = {}
    tied: dict[str, str] = {}  # duplicate name -> the name it shares
    for name, param in model.named_parameters(remove_duplicate=False):
        tied[name] = shared.setdefault(id(param), name)
    ties: dict[str, list[str]] = {}
    for name in state:
        original = tied.get(name, name)
        if original != name and original in state:
            ties.setdefault(original, []).append(name)
        else:
            ties.setdefault(name, [])
    order = [n for name in ties for n in (name, *ties[name])]

    def go(flag: bool | None) -> bool:
        """Rank 0's go (True) or refusal (False), on every rank."""
        return bool(broadcast(flag, ranks))

    def items():
        if not go(True if ranks.main else None):
            raise refused()
        for name, dups in ties.items():
            value = state[name]
            if dtype is not None and value.is_floating_point():
                value = value.to(dtype)  # the shard: the gather then moves engine-dtype bytes
            full = value.full_tensor() if isinstance(value, DTensor) else value
            if ranks.main:
                for n in (name, *dups):
                    yield n, full
            del full

    def refuse():
        if ranks.main:
            go(False)

    return Weights(
        {k: state[k].shape for k in order}, items, finite=n_bad == 0, once=True, cancel=refuse
    )


def refused() -> Exception:
    from recipe.pipeline import GeneratorFailed

    return GeneratorFailed(
        "rank 0 refused the weight push before sending anything (its error is in rank 0's "
        "output); every rank stops"
    )


def hand_over(weights: Weights, consume: Callable[[Weights], None] | None, ranks: Ranks) -> None:
    """A push on every rank: rank 0's ``consume(weights)`` (None: nobody reads it), the other
    ranks joining its gathers.

    Rank 0's consumer refusing the push before reading it (checks fail) reaches every rank as
    :class:`~recipe.pipeline.GeneratorFailed`. A consumer that fails after the stream started
    leaves the other ranks inside a gather that rank 0 will not join: the error raised then is
    marked ``fatal`` and the process must end (recipe/cli.py), which makes torchrun stop the
    others.
    """
    if consume is not None:
        try:
            consume(weights)
        except BaseException as err:
            # Ctrl-C and SIGTERM end the process anyway (a torchrun rank through os._exit)
            stopping = not isinstance(err, Exception)
            if ranks.active and weights.started and not weights.finished and not stopping:
                from recipe.pipeline import GeneratorFailed

                if not isinstance(err, GeneratorFailed):
                    raise GeneratorFailed(
                        f"the weight push failed midway ({err!r}); the other ranks wait in a "
                        "gather", fatal=True,
                    ) from err  # fmt: skip
                err.fatal = True
                raise
            weights.cancel()
            raise
    weights.drain()


def full_state_dict(model: torch.nn.Module, ranks: Ranks) -> dict:
    """The unsharded weights on CPU (for the final Hugging Face folder): a collective; rank 0
    gets them, the other ranks an empty dict."""
    if not ranks.active:
        return model.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


class _NoClock:
    def seconds(self) -> float:
        return 0.0


class RankRollouts:
    """The rollout source on every rank: rank 0's real one (``inner``), whose batches are
    broadcast; the other ranks (``inner=None``) receive them. Idle clocks are rank 0's.
    ``takes_weights(step)``: the schedule of pushes (recipe/pipeline.py), known on every rank
    because every rank joins a push's gathers."""

    def __init__(self, inner, ranks: Ranks, takes_weights: Callable[[int], bool]) -> None:
        self.inner, self.ranks, self.takes_weights = inner, ranks, takes_weights

    @property
    def generator_idle(self):
        return self.inner.generator_idle if self.inner is not None else _NoClock()

    @property
    def trainer_wait(self) -> float:
        return self.inner.trainer_wait if self.inner is not None else 0.0

    def next_batch(self, step: int):
        batch = self.inner.next_batch(step) if self.inner is not None else None
        if batch is not None:  # resolved futures do not travel
            batch = dataclasses.replace(batch, futures=[])
        return broadcast(batch, self.ranks)

    def push(self, weights: Weights, version: int) -> None:
        """Rank 0's generator reads the stream; every other rank joins its gathers
        (:func:`hand_over`)."""
        consume = None
        if self.inner is not None:
            consume = functools.partial(self.inner.push, version=version)
        hand_over(weights, consume, self.ranks)

    def __getattr__(self, name):  # hold / release / sync / close: rank 0's, no-ops elsewhere
        if name.startswith("_") or name in ("inner", "ranks", "takes_weights"):
            raise AttributeError(name)
        return getattr(self.inner, name) if self.inner is not None else (lambda *a, **k: None)
