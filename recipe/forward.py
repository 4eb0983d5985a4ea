"""The policy's forward pass, shared by trainer and torch sampler: device, precision, FP32 head.

Precision (the same on CPU and GPU, only the device differs):

- **Master weights.** Parameters, gradients and AdamW's moments stay FP32. ``dtype=bfloat16``
  runs the transformer body under ``torch.autocast`` (matmuls in bf16, reductions in FP32), so an
  update of size lr = 1e-6 is not rounded away as it is in bf16 parameters (measured in issue 14:
  98% of bf16 weights unchanged after 10 AdamW steps at lr 1e-6).
- **FP32 head.** With ``fp32_head`` the final projection to logits runs *outside* autocast, from
  FP32 hidden states and the FP32 output weight: a separate FP32 projection. It works the same for
  tied models (Qwen2.5, Llama-3.2: the weight is the input embedding) and untied ones, because it
  only reads ``get_output_embeddings().weight`` and never casts a module.
- **Sampled tokens only.** :func:`sampled_logprobs` computes log pi(token) in chunks of rows;
  under autograd each chunk is recomputed in the backward pass (``torch.utils.checkpoint``), so no
  (tokens x vocabulary) tensor outlives its chunk: 768 completions x 300 tokens x 152k vocabulary
  would be ~140 GB in FP32, a chunk of 1024 tokens is ~0.6 GB.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from recipe.config import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
LOGPROB_CHUNK = 1024  # rows (tokens) per head chunk


def resolve_device(name: str) -> torch.device:
    """``auto`` = CUDA when available, else CPU; ``cpu`` / ``cuda`` / ``cuda:N`` as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"config key 'device' = {name!r}, but torch sees no CUDA device here (torch "
            f"{torch.__version__}); use device=auto (CUDA when there is one) or cpu"
        )
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(
            f"config key 'device' = {name!r}, but torch sees {torch.cuda.device_count()} CUDA "
            f"device(s) (cuda:0 .. cuda:{torch.cuda.device_count() - 1}); use one of them or auto"
        )
    return device


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def autocast(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """The body's compute precision: bf16 autocast over FP32 weights, or plain FP32."""
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[dtype])


def base_model(model: PreTrainedModel) -> torch.nn.Module:
    """The transformer body (everything before the LM head)."""
    return getattr(model, model.base_model_prefix)


def _cache_kwarg(model: PreTrainedModel) -> str:
    # transformers 5 renamed past_key_values to cache in some models; accept both.
    params = inspect.signature(base_model(model).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def body(model: PreTrainedModel, input_ids, attention_mask, position_ids, cache=None):
    """Run the transformer body; returns the last hidden states."""
    kwargs = {_cache_kwarg(model): cache} if cache is not None else {}
    out = base_model(model)(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=cache is not None,
        **kwargs,
    )
    return out.last_hidden_state


def head_logits(model: PreTrainedModel, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """Logits from the LM head; with ``fp32_head`` a separate FP32 projection (no autocast).

    Without it the projection runs in the compute dtype (bf16 logits carry about 3 significant
    digits, which is what corrupts the importance ratio between generator and trainer).
    """
    head = model.get_output_embeddings()
    if fp32_head:
        bias = None if getattr(head, "bias", None) is None else head.bias.float()
        with torch.autocast(hidden.device.type, enabled=False):
            return F.linear(hidden.float(), head.weight.float(), bias)
    if torch.is_autocast_enabled(hidden.device.type):
        return head(hidden)
    return head(hidden.to(head.weight.dtype))


def _chunk_logprobs(model, hidden, tokens, fp32_head: bool, temperature: float) -> torch.Tensor:
    logits = head_logits(model, hidden, fp32_head).float() / temperature
    return logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)


def sampled_logprobs(
    model: PreTrainedModel,
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    *,
    fp32_head: bool,
    temperature: float,
    chunk: int = LOGPROB_CHUNK,
) -> torch.Tensor:
    """log pi(tokens[i] | hidden[i]) for (N, H) hidden states, in FP32, ``chunk`` rows at a time.

    With gradients, each chunk's logits are recomputed in the backward pass instead of stored.
    """
    outs = []
    for lo in range(0, hidden.shape[0], chunk):
        h, t = hidden[lo : lo + chunk], tokens[lo : lo + chunk]
        if torch.is_grad_enabled() and h.requires_grad:
            outs.append(
                checkpoint(
                    _chunk_logprobs, model, h, t, fp32_head, temperature, use_reentrant=False
                )
            )
        else:
            outs.append(_chunk_logprobs(model, h, t, fp32_head, temperature))
    return torch.cat(outs) if outs else hidden.new_zeros(0, dtype=torch.float32)


def left_pad(
    seqs: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded id matrix and attention mask (so that every row's last token lines up)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, width - len(s) :] = torch.tensor(list(s), dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids.to(device), mask.to(device)


def right_pad(
    seqs: Sequence[Sequence[float]], width: int, dtype=torch.float32, device="cpu"
) -> torch.Tensor:
    """Rows padded with zeros on the right to ``width``."""
    out = torch.zeros(len(seqs), width, dtype=dtype)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(list(s), dtype=dtype)
    return out.to(device)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding skipped)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


SHARDED_FORWARD = "recipe_body_and_head"


def body_and_head(model, ids, mask, prompt_width, c_ids, real, fp32_head, temperature, chunk):
    """log pi of the completion tokens ``c_ids[real]`` after the prompts (``ids`` = both)."""
    hidden = body(model, ids, mask, positions(mask))
    # the hidden state at position t predicts token t + 1
    hidden = hidden[:, prompt_width - 1 : -1]
    return sampled_logprobs(
        model, hidden[real], c_ids[real], fp32_head=fp32_head, temperature=temperature,
        chunk=chunk,
    )  # fmt: skip


def completion_logprobs(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    fp32_head: bool,
    temperature: float,
    pad_id: int,
    dtype: str = "float32",
    chunk: int = LOGPROB_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Trainer-side log pi(token) for each completion token, with gradients.

    Returns ``(logp, mask)`` of shape (batch, longest completion) on the model's device; ``mask``
    is 1 on real completion tokens (``logp`` is 0 on padding). Only the sampled tokens' log-probs
    are formed (see :func:`sampled_logprobs`).
    """
    device = model_device(model)
    p_ids, p_mask = left_pad(prompts, pad_id, device)
    width = max(1, max(len(c) for c in completions))
    c_ids = right_pad(completions, width, torch.long, device)
    c_mask = right_pad([[1] * len(c) for c in completions], width, torch.long, device)
    ids = torch.cat([p_ids, c_ids], dim=1)
    mask = torch.cat([p_mask, c_mask], dim=1)
    real = c_mask.bool()
    # a sharded model (recipe/distributed.py) runs this as an FSDP forward method, so that its
    # parameters are gathered for the body and the directly-read head alike
    run = getattr(model, SHARDED_FORWARD, None) or functools.partial(body_and_head, model)
    with autocast(device, dtype):
        logp = run(ids, mask, p_ids.shape[1], c_ids, real, fp32_head, temperature, chunk)
    full = torch.zeros(real.shape, dtype=logp.dtype, device=device).masked_scatter(real, logp)
    return full, c_mask.float()
