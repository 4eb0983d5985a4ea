"""Policy-gradient losses (CISPO, DAPO, GRPO, GSPO) and loss aggregation.

Every loss takes the same tensors, so that the asynchronous trainer reuses them unchanged:

- ``logp_train`` (B, T): log pi_train of each sampled token, with gradients;
- ``logp_gen`` (B, T): log pi_gen of the same tokens, as reported by the generator;
- ``advantages`` (B,) or (B, T): A_hat per completion (or per token);
- ``mask`` (B, T): 1 on real completion tokens, 0 on padding;
- ``group_ids`` (B,): which prompt each completion answers (any integer labels).

Each returns ``(loss, diagnostics)``: a scalar to minimise and a dict of floats over the
masked tokens: ``clip_fraction`` = share of tokens whose ratio was clipped or truncated,
``zero_grad_fraction`` = share whose gradient is exactly zero because of the clip, ``rho_mean``,
``rho_max``. The two fractions differ in kind, not by accident: CISPO truncates a stop-gradient
weight, so every token keeps its gradient (``zero_grad_fraction`` is 0 however many are
truncated); the PPO-style clips (DAPO, GRPO, and GSPO on the sequence ratio) act through
``min(rho A, clip(rho) A)``, whose clipped branch is active exactly where it has no gradient, so
for them a clipped token *is* a zero-gradient one (the usual ``clip_ratio`` of PPO
implementations counts the same tokens).
"""

from __future__ import annotations

import torch

LOSSES = ("cispo", "dapo", "grpo", "gspo")
AGGREGATIONS = ("prompt", "sample", "token")
# (eps_low, eps_high) per clipped loss: DAPO's clip-higher, GRPO's symmetric clip, GSPO's
# sequence-level clip from the GSPO paper (ratios of geometric means sit much closer to 1).
DEFAULT_EPS = {"dapo": (0.2, 0.26), "grpo": (0.2, 0.2), "gspo": (3e-4, 4e-4)}


def token_weights(mask: torch.Tensor, group_ids: torch.Tensor, how: str) -> torch.Tensor:
    """Per-token weights w with ``aggregate(per_token) = sum(w * per_token)``.

    They depend only on token counts, so a batch split into micro-batches keeps the *global*
    denominators exactly: each micro-batch's loss is ``sum(w[mb] * per_token[mb])`` and the
    micro-batch gradients add up to the full batch's gradient, whatever the split.

    ``token``: 1 / (tokens in the batch). ``sample``: 1 / (completion's tokens x completions with
    tokens). ``prompt`` (ScaleRL): 1 / (prompt's tokens x prompts with tokens).
    """
    mask = (mask > 0).to(torch.float64)
    if how == "token":
        return mask / mask.sum().clamp(min=1)
    lengths = mask.sum(1)
    if how == "sample":
        n = (lengths > 0).sum().clamp(min=1)
        return mask / (lengths.clamp(min=1) * n).unsqueeze(1)
    if how == "prompt":
        _, group = torch.unique(group_ids.to(mask.device), return_inverse=True)
        n_groups = int(group.max()) + 1 if group.numel() else 0
        tok_cnt = torch.zeros(n_groups, dtype=mask.dtype, device=mask.device)
        tok_cnt = tok_cnt.index_add(0, group, lengths)
        n = (tok_cnt > 0).sum().clamp(min=1)
        return mask / (tok_cnt[group].clamp(min=1) * n).unsqueeze(1)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    how: str,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Average per-token losses over the batch.

    ``token``: all tokens of the batch together. ``sample``: each completion's tokens averaged,
    then completions averaged (GRPO). ``prompt`` (ScaleRL): each prompt's completions' tokens
    averaged over that prompt's total token count, then prompts averaged. Completions or prompts
    without tokens are left out. ``weights`` (from :func:`token_weights` of the whole batch)
    replace the ones of this batch: the micro-batch form.
    """
    if weights is None:
        weights = token_weights(mask, group_ids, how)
    # where(), not a product: a non-finite value on padding must not leak in as NaN
    summed = torch.where(mask > 0, per_token, torch.zeros_like(per_token))
    return (summed * weights.to(per_token.dtype)).sum()


def _per_token_adv(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return advantages.unsqueeze(1).expand_as(like) if advantages.dim() == 1 else advantages


def _log_ratio(logp_train, logp_gen, mask):
    # padding may hold arbitrary log-probs; zero them so exp() cannot overflow there
    return torch.where(mask > 0, logp_train - logp_gen, torch.zeros_like(logp_train))


def _ratio_stats(
    rho: torch.Tensor, mask: torch.Tensor, clipped: torch.Tensor, zero_grad: torch.Tensor
) -> dict:
    on = mask > 0
    if not bool(on.any()):
        return {"clip_fraction": 0.0, "zero_grad_fraction": 0.0, "rho_mean": float("nan"),
                "rho_max": float("nan")}  # fmt: skip
    r = rho.detach()[on]
    return {
        "clip_fraction": clipped[on].float().mean().item(),
        "zero_grad_fraction": zero_grad[on].float().mean().item(),
        "rho_mean": r.mean().item(),
        "rho_max": r.max().item(),
    }


def cispo_loss(
    logp_train, logp_gen, advantages, mask, group_ids, *, eps_max, aggregation, weights=None
):
    """CISPO: per token -sg(min(rho, eps_max)) * A_hat * log pi_train; no lower clip.

    rho = pi_train / pi_gen. The truncated ratio is a constant weight (stop-gradient), so every
    token keeps a gradient, unlike PPO-style clipping that zeroes it.
    """
    rho = torch.exp(_log_ratio(logp_train, logp_gen, mask))
    weight = torch.clamp(rho, max=eps_max).detach()
    per_token = -weight * _per_token_adv(advantages, logp_train) * logp_train
    loss = aggregate(per_token, mask, group_ids, aggregation, weights)
    # truncation changes a token's weight, never removes its gradient
    return loss, _ratio_stats(rho, mask, rho > eps_max, torch.zeros_like(mask, dtype=torch.bool))


def ppo_clip_loss(
    logp_train, logp_gen, advantages, mask, group_ids, *, eps_low, eps_high, aggregation,
    weights=None,
):  # fmt: skip
    """DAPO / GRPO: per token -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)."""
    rho = torch.exp(_log_ratio(logp_train, logp_gen, mask))
    adv = _per_token_adv(advantages, logp_train)
    unclipped = rho * adv
    clipped = torch.clamp(rho, 1 - eps_low, 1 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = aggregate(per_token, mask, group_ids, aggregation, weights)
    # the clipped branch is active (and the gradient zero) exactly here
    is_clipped = ((adv > 0) & (rho > 1 + eps_high)) | ((adv < 0) & (rho < 1 - eps_low))
    return loss, _ratio_stats(rho, mask, is_clipped, is_clipped)


def gspo_loss(
    logp_train, logp_gen, advantages, mask, group_ids, *, eps_low, eps_high, aggregation,
    weights=None,
):  # fmt: skip
    """GSPO: the PPO clip on the sequence ratio s = exp(mean_t (log pi_train - log pi_gen)).

    Uses GSPO's token form s_t = sg(s) * pi_train(t) / sg(pi_train(t)): its value is s and its
    gradient is s * grad log pi_train(t), so aggregation switches still apply per token.
    """
    m = mask.to(logp_train.dtype)
    log_s = _log_ratio(logp_train, logp_gen, m).sum(1) / m.sum(1).clamp(min=1)
    s_tok = torch.exp(log_s.detach().unsqueeze(1) + logp_train - logp_train.detach())
    adv = _per_token_adv(advantages, logp_train)
    unclipped = s_tok * adv
    clipped = torch.clamp(s_tok, 1 - eps_low, 1 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = aggregate(per_token, mask, group_ids, aggregation, weights)
    s = s_tok.detach()
    # a clipped sequence loses the gradient of every one of its tokens
    is_clipped = ((adv > 0) & (s > 1 + eps_high)) | ((adv < 0) & (s < 1 - eps_low))
    return loss, _ratio_stats(s, mask, is_clipped, is_clipped)


def policy_loss(
    kind: str,
    logp_train: torch.Tensor,
    logp_gen: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    aggregation: str = "prompt",
    eps_max: float = 4.0,
    eps_low: float | None = None,
    eps_high: float | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """Dispatch to the loss named ``kind``; ``eps_low``/``eps_high`` None = that loss's default.

    ``weights``: the whole batch's :func:`token_weights` rows of these completions, when this
    call sees one micro-batch of it.
    """
    if kind == "cispo":
        return cispo_loss(
            logp_train, logp_gen, advantages, mask, group_ids,
            eps_max=eps_max, aggregation=aggregation, weights=weights,
        )  # fmt: skip
    if kind not in DEFAULT_EPS:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    lo, hi = DEFAULT_EPS[kind]
    lo = lo if eps_low is None else eps_low
    hi = hi if eps_high is None else eps_high
    fn = gspo_loss if kind == "gspo" else ppo_clip_loss
    return fn(
        logp_train, logp_gen, advantages, mask, group_ids,
        eps_low=lo, eps_high=hi, aggregation=aggregation, weights=weights,
    )  # fmt: skip
