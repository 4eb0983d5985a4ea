"""Policy-gradient losses (CISPO, DAPO, GRPO, GSPO) and loss aggregation.

Every loss takes the same tensors, so that the asynchronous trainer reuses them unchanged:

- ``logp_train`` (B, T): log pi_train of each sampled token, with gradients;
- ``logp_gen`` (B, T): log pi_gen of the same tokens, as reported by the generator;
- ``advantages`` (B,) or (B, T): A_hat per completion (or per token);
- ``mask`` (B, T): 1 on real completion tokens, 0 on padding;
- ``group_ids`` (B,): which prompt each completion answers (any integer labels).

Each returns ``(loss, diagnostics)``: a scalar to minimise and a dict of floats
(``clip_fraction`` = share of tokens whose ratio was clipped or truncated, ``rho_mean``,
``rho_max``).
"""

from __future__ import annotations

import torch

LOSSES = ("cispo", "dapo", "grpo", "gspo")
AGGREGATIONS = ("prompt", "sample", "token")
# (eps_low, eps_high) per clipped loss: DAPO's clip-higher, GRPO's symmetric clip, GSPO's
# sequence-level clip from the GSPO paper (ratios of geometric means sit much closer to 1).
DEFAULT_EPS = {"dapo": (0.2, 0.26), "grpo": (0.2, 0.2), "gspo": (3e-4, 4e-4)}


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor, how: str
) -> torch.Tensor:
    """Average per-token losses over the batch.

    ``token``: all tokens of the batch together. ``sample``: each completion's tokens averaged,
    then completions averaged (GRPO). ``prompt`` (ScaleRL): each prompt's completions' tokens
    averaged over that prompt's total token count, then prompts averaged. Completions or prompts
    without tokens are left out.
    """
    mask = mask.to(per_token.dtype)
    # where(), not a product: a non-finite value on padding must not leak in as NaN
    summed = torch.where(mask > 0, per_token, torch.zeros_like(per_token))
    if how == "token":
        return summed.sum() / mask.sum().clamp(min=1)
    if how == "sample":
        lengths = mask.sum(1)
        has = lengths > 0
        return (summed.sum(1)[has] / lengths[has]).mean()
    if how == "prompt":
        _, group = torch.unique(group_ids, return_inverse=True)
        n_groups = int(group.max()) + 1
        tok_sum = torch.zeros(n_groups, dtype=per_token.dtype).index_add(0, group, summed.sum(1))
        tok_cnt = torch.zeros(n_groups, dtype=per_token.dtype).index_add(0, group, mask.sum(1))
        has = tok_cnt > 0
        return (tok_sum[has] / tok_cnt[has]).mean()
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {how!r}")


def _per_token_adv(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return advantages.unsqueeze(1).expand_as(like) if advantages.dim() == 1 else advantages


def _log_ratio(logp_train, logp_gen, mask):
    # padding may hold arbitrary log-probs; zero them so exp() cannot overflow there
    return torch.where(mask > 0, logp_train - logp_gen, torch.zeros_like(logp_train))


def _ratio_stats(rho: torch.Tensor, mask: torch.Tensor, clipped: torch.Tensor) -> dict:
    on = mask > 0
    if not bool(on.any()):
        return {"clip_fraction": 0.0, "rho_mean": float("nan"), "rho_max": float("nan")}
    r = rho.detach()[on]
    return {
        "clip_fraction": clipped[on].float().mean().item(),
        "rho_mean": r.mean().item(),
        "rho_max": r.max().item(),
    }


def cispo_loss(logp_train, logp_gen, advantages, mask, group_ids, *, eps_max, aggregation):
    """CISPO: per token -sg(min(rho, eps_max)) * A_hat * log pi_train; no lower clip.

    rho = pi_train / pi_gen. The truncated ratio is a constant weight (stop-gradient), so every
    token keeps a gradient, unlike PPO-style clipping that zeroes it.
    """
    rho = torch.exp(_log_ratio(logp_train, logp_gen, mask))
    weight = torch.clamp(rho, max=eps_max).detach()
    per_token = -weight * _per_token_adv(advantages, logp_train) * logp_train
    loss = aggregate(per_token, mask, group_ids, aggregation)
    return loss, _ratio_stats(rho, mask, rho > eps_max)


def ppo_clip_loss(
    logp_train, logp_gen, advantages, mask, group_ids, *, eps_low, eps_high, aggregation
):
    """DAPO / GRPO: per token -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)."""
    rho = torch.exp(_log_ratio(logp_train, logp_gen, mask))
    adv = _per_token_adv(advantages, logp_train)
    unclipped = rho * adv
    clipped = torch.clamp(rho, 1 - eps_low, 1 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    loss = aggregate(per_token, mask, group_ids, aggregation)
    # the clipped branch is active (and the gradient zero) exactly here
    is_clipped = ((adv > 0) & (rho > 1 + eps_high)) | ((adv < 0) & (rho < 1 - eps_low))
    return loss, _ratio_stats(rho, mask, is_clipped)


def gspo_loss(logp_train, logp_gen, advantages, mask, group_ids, *, eps_low, eps_high, aggregation):
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
    loss = aggregate(per_token, mask, group_ids, aggregation)
    s = s_tok.detach()
    is_clipped = ((adv > 0) & (s > 1 + eps_high)) | ((adv < 0) & (s < 1 - eps_low))
    return loss, _ratio_stats(s, mask, is_clipped)


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
) -> tuple[torch.Tensor, dict]:
    """Dispatch to the loss named ``kind``; ``eps_low``/``eps_high`` None = that loss's default."""
    if kind == "cispo":
        return cispo_loss(
            logp_train, logp_gen, advantages, mask, group_ids,
            eps_max=eps_max, aggregation=aggregation,
        )  # fmt: skip
    if kind not in DEFAULT_EPS:
        raise ValueError(f"loss must be one of {LOSSES}, got {kind!r}")
    lo, hi = DEFAULT_EPS[kind]
    lo = lo if eps_low is None else eps_low
    hi = hi if eps_high is None else eps_high
    fn = gspo_loss if kind == "gspo" else ppo_clip_loss
    return fn(
        logp_train, logp_gen, advantages, mask, group_ids,
        eps_low=lo, eps_high=hi, aggregation=aggregation,
    )  # fmt: skip
