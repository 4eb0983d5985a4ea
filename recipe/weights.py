"""What a weight push carries: names and shapes known up front, the tensors one at a time.

Every consumer of a push reads it through :class:`Weights`: the checks (names, shapes,
finiteness) before anything is sent, then one pass over :meth:`Weights.items`, tensor by tensor:

- vLLM's RPC path packs each tensor into bytes once (recipe/generate_vllm.py), and several
  engines share that one packed copy (recipe/engines.py);
- the one-group NCCL broadcast sends each tensor once to every engine worker
  (recipe/weight_broadcast.py);
- the torch sampler copies each tensor into its own model or into shared memory.

With one process a push is the model's own ``state_dict()``: no copy, readable any number of
times. With several torchrun ranks it is a stream (:func:`recipe.distributed.model_weights`):
each item is one parameter gathered from its FSDP2 shards (``full_tensor()``, a collective that
every rank joins), released before the next, so no rank ever holds the full model; such a stream
can be read once, and every rank must read it at the same point (the other ranks
:meth:`~Weights.drain` it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import torch


class Weights:
    """A push's weights (see the module docstring).

    Parameters
    ----------
    shapes : mapping of str to torch.Size
        Every name, in the order :meth:`items` yields them, with its full shape.
    items : callable
        Returns an iterator of ``(name, tensor)`` pairs in that order.
    finite : bool, optional
        Whether every value is finite, when the producer knows it (a sharded stream checks its
        shards with one all-reduce); None: checked on the values when asked.
    once : bool
        The items can be read once only (a stream of collectives).
    cancel : callable, optional
        Called by :meth:`cancel` when the stream is given up before its first item (a sharded
        stream tells the other ranks that rank 0 refused the push).
    """

    def __init__(
        self,
        shapes: Mapping[str, torch.Size],
        items: Callable[[], Iterator[tuple[str, torch.Tensor]]],
        *,
        finite: bool | None = None,
        once: bool = False,
        cancel: Callable[[], None] | None = None,
    ) -> None:
        self.shapes = dict(shapes)
        self._items = items
        self._finite = finite
        self._cancel = cancel
        self.once = once
        self.read = False
        self.started = False  # the first item was asked for
        self.finished = False  # the last item was read

    @classmethod
    def of(cls, state_dict: Mapping[str, torch.Tensor]) -> Weights:
        """The tensors of a mapping (no copy), readable any number of times."""
        return cls({k: v.shape for k, v in state_dict.items()}, lambda: iter(state_dict.items()))

    def keys(self):
        return self.shapes.keys()

    def __len__(self) -> int:
        return len(self.shapes)

    @property
    def finite(self) -> bool:
        """Every value is finite (NaN or inf must never reach a generator)."""
        if self._finite is None:
            self._finite = all(bool(torch.isfinite(t).all()) for _, t in self._items())
        return self._finite

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        """``(name, tensor)`` in ``shapes`` order; a stream raises on a second read."""
        if self.once and self.read:
            raise RuntimeError(
                "these weights were streamed already (a sharded push is read once, on every "
                "rank at the same point); take a new recipe.distributed.model_weights()"
            )
        self.read = True
        return self._tracked()

    def _tracked(self) -> Iterator[tuple[str, torch.Tensor]]:
        self.started = True
        yield from self._items()
        self.finished = True

    def drain(self) -> None:
        """Read a stream nobody read (a rank without a consumer still joins the gathers)."""
        if self.once and not self.read:
            for _ in self.items():
                pass

    def cancel(self) -> None:
        """Give the stream up unread (its consumer refused the push before reading): a sharded
        stream then tells the other ranks, whose :meth:`drain` raises instead of waiting in a
        gather. No effect once the stream has started."""
        if self.once and not self.started:
            self.read = True
            if self._cancel is not None:
                self._cancel()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every tensor at once (one full copy where the items are gathered)."""
        return dict(self.items())


def as_weights(weights: Weights | Mapping[str, torch.Tensor]) -> Weights:
    """A :class:`Weights` (a plain state dict is wrapped without a copy)."""
    return weights if isinstance(weights, Weights) else Weights.of(weights)
