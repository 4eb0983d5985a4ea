"""The generation interface and the plain torch sampler behind it (vLLM: generate_vllm.py).

The trainer pushes weights to a generator with :meth:`Generator.push_weights` after each update,
tagging them with a policy version, and every sampled token records the version that produced
it. In synchronous mode all tokens of a batch share one version; PipelineRL-k with vLLM mixes
versions within a sequence.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import PreTrainedModel

from recipe.forward import autocast, body, head_logits, left_pad, model_device, positions
from recipe.weights import as_weights


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    tokens: list[int]  # sampled token ids (prompt excluded), including EOS if emitted
    logprobs: list[float]  # per-token log pi_gen of the sampled token, from the generator's head
    # (FP32 when fp32_head), at the sampling temperature actually used
    versions: list[int]  # policy version that produced each token
    truncated: bool  # hit max_new_tokens without EOS
    # [start, end) of tokens forced by length control (recipe/length_control.py), not sampled:
    # context for later tokens, left out of the loss; None when the completion ran freely
    forced: tuple[int, int] | None = None
    # the oldest policy version whose KV the tokens may have attended to, when it can differ
    # from theirs: vLLM's prefix cache is salted with the version at submission, so a request
    # that waited in the engine's queue across a push samples every token with the new weights
    # over prompt KV that may be the old ones'. None: the tokens' own versions tell it all.
    kv_version: int | None = None

    @property
    def mixed(self) -> bool:
        """Tokens (or their KV) come from more than one policy version."""
        seen = set(self.versions) | ({self.kv_version} if self.kv_version is not None else set())
        return len(seen) > 1


class Generator(Protocol):
    """What the trainer needs from a rollout engine."""

    version: int

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]: ...  # n per prompt

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None: ...

    def close(self) -> None: ...


class TorchGenerator:
    """A batched, KV-cached sampler over a Hugging Face causal LM, on the model's device.

    Parameters
    ----------
    model : PreTrainedModel
        The policy (FP32 master weights).
    eos_ids : sequence of int
        Every token id that ends a completion (instruct models have several).
    pad_id : int
        Padding id (masked out; any existing id).
    fp32_head : bool
        Compute sampling logits with the FP32 LM head (:func:`recipe.forward.head_logits`).
    seed : int
        Seed of the sampler's private random generator (on the model's device).
    dtype : str
        Compute dtype of the body (the trainer's ``dtype``: the same autocast as the trainer).
    copy : bool
        True: sample from a private copy, so later trainer updates reach the sampler only
        through :meth:`push_weights` (needed when sampling overlaps training: PipelineRL).
        False: sample from the trainer's own model (sync, PPO-off-policy and evaluation, where
        generation never overlaps an update); no second copy of the weights exists.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        eos_ids: Sequence[int],
        pad_id: int,
        fp32_head: bool,
        seed: int,
        dtype: str = "float32",
        copy: bool = True,
    ) -> None:
        self.model = _copy.deepcopy(model).eval() if copy else model
        self.shared = not copy
        self.eos_ids = list(eos_ids)
        self.pad_id = pad_id
        self.fp32_head = fp32_head
        self.dtype = dtype
        self.device = model_device(model)
        self.rng = torch.Generator(device=self.device).manual_seed(seed)
        self.version = 0

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights (Hugging Face parameter names) and tag them with ``version``.

        A sampler sharing the trainer's model already holds them: only the version changes.
        """
        weights, own = as_weights(state_dict), self.model.state_dict()
        if weights.keys() != own.keys() or any(
            weights.shapes[k] != v.shape for k, v in own.items()
        ):  # checked before anything is copied: a refused push changes nothing
            raise ValueError(
                f"weight names or shapes differ from the sampler's model: missing "
                f"{sorted(own.keys() - weights.keys())[:3]}, unexpected "
                f"{sorted(weights.keys() - own.keys())[:3]}"
            )
        with torch.no_grad():
            for name, value in weights.items():  # one tensor at a time (a stream, sharded)
                if value.data_ptr() != own[name].data_ptr():  # a shared model holds them
                    own[name].copy_(value)
        self.version = version

    def close(self) -> None:
        """Nothing to release for the in-process sampler."""

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt; returns one list of ``n`` per prompt."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 (got {temperature}); sampling only")
        from transformers import DynamicCache

        was_training = self.model.training
        self.model.eval()
        try:
            with autocast(self.device, self.dtype):
                return self._sample(prompts, n, max_new_tokens, temperature, DynamicCache)
        finally:
            self.model.train(was_training)

    def _sample(self, prompts, n, max_new_tokens, temperature, cache_cls):
        rows = [list(p) for p in prompts for _ in range(n)]
        ids, mask = left_pad(rows, self.pad_id, self.device)
        pos = positions(mask)
        cache = cache_cls(config=self.model.config)
        hidden = body(self.model, ids, mask, pos, cache)[:, -1]
        batch = len(rows)
        eos = torch.tensor(self.eos_ids, device=self.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=self.device)
        tokens, logps = [], []
        for t in range(max_new_tokens):
            logits = head_logits(self.model, hidden, self.fp32_head).float() / temperature
            logp_all = torch.log_softmax(logits, dim=-1)
            tok = torch.multinomial(logp_all.exp(), 1, generator=self.rng).squeeze(1)
            tok = torch.where(finished, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp_all.gather(1, tok.unsqueeze(1)).squeeze(1))
            finished |= torch.isin(tok, eos)
            if bool(finished.all()) or t == max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            pos = pos[:, -1:] + 1
            hidden = body(self.model, tok.unsqueeze(1), mask, pos, cache)[:, -1]
        tok_m = torch.stack(tokens, 1).tolist()
        logp_m = torch.stack(logps, 1).tolist()
        stops = set(self.eos_ids)
        out: list[list[Completion]] = []
        for i in range(batch):
            toks, lps = tok_m[i], logp_m[i]
            end = next((j for j, x in enumerate(toks) if x in stops), None)
            length = len(toks) if end is None else end + 1
            if i % n == 0:
                out.append([])
            out[-1].append(
                Completion(
                    tokens=toks[:length],
                    logprobs=lps[:length],
                    versions=[self.version] * length,
                    truncated=end is None,
                )
            )
        return out
