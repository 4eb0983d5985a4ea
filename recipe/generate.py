"""The generation interface and the plain torch sampler behind it (part 2 adds vLLM).

A generator holds its own copy of the policy: the trainer pushes weights to it with
:meth:`Generator.push_weights` after each update, tagging them with a policy version, and every
sampled token records the version that produced it. In synchronous mode all tokens of a batch
share one version; PipelineRL-k (part 2) mixes versions within a sequence.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import PreTrainedModel

from recipe.model import body, head_logits, left_pad, positions


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    tokens: list[int]  # sampled token ids (prompt excluded), including EOS if emitted
    logprobs: list[float]  # per-token log pi_gen of the sampled token, from the generator's head
    # (FP32 when fp32_head), at the sampling temperature actually used
    versions: list[int]  # policy version that produced each token
    truncated: bool  # hit max_new_tokens without EOS


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
    """A batched, KV-cached sampler on a private copy of a Hugging Face causal LM.

    Parameters
    ----------
    model : PreTrainedModel
        The policy; it is deep-copied, so later trainer updates reach the sampler only through
        :meth:`push_weights`.
    eos_id, pad_id : int
        End-of-sequence and padding token ids.
    fp32_head : bool
        Compute sampling logits with the FP32 LM head.
    seed : int
        Seed of the sampler's private random generator.
    """

    def __init__(
        self, model: PreTrainedModel, *, eos_id: int, pad_id: int, fp32_head: bool, seed: int
    ) -> None:
        self.model = copy.deepcopy(model).eval()
        self.eos_id = eos_id
        self.pad_id = pad_id
        self.fp32_head = fp32_head
        self.rng = torch.Generator().manual_seed(seed)
        self.version = 0

    def push_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights (Hugging Face parameter names) and tag them with ``version``."""
        self.model.load_state_dict(dict(state_dict))
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

        rows = [list(p) for p in prompts for _ in range(n)]
        ids, mask = left_pad(rows, self.pad_id)
        pos = positions(mask)
        cache = DynamicCache(config=self.model.config)
        hidden = body(self.model, ids, mask, pos, cache)[:, -1]
        batch = len(rows)
        finished = torch.zeros(batch, dtype=torch.bool)
        tokens, logps = [], []
        for t in range(max_new_tokens):
            logits = head_logits(self.model, hidden, self.fp32_head).float() / temperature
            logp_all = torch.log_softmax(logits, dim=-1)
            tok = torch.multinomial(logp_all.exp(), 1, generator=self.rng).squeeze(1)
            tok = torch.where(finished, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp_all.gather(1, tok.unsqueeze(1)).squeeze(1))
            finished |= tok == self.eos_id
            if bool(finished.all()) or t == max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], dim=1)
            pos = pos[:, -1:] + 1
            hidden = body(self.model, tok.unsqueeze(1), mask, pos, cache)[:, -1]
        tok_m = torch.stack(tokens, 1).tolist()
        logp_m = torch.stack(logps, 1).tolist()
        out: list[list[Completion]] = []
        for i in range(batch):
            toks, lps = tok_m[i], logp_m[i]
            length = toks.index(self.eos_id) + 1 if self.eos_id in toks else len(toks)
            if i % n == 0:
                out.append([])
            out[-1].append(
                Completion(
                    tokens=toks[:length],
                    logprobs=lps[:length],
                    versions=[self.version] * length,
                    truncated=self.eos_id not in toks[:length],
                )
            )
        return out
