"""Recipe losses and aggregation against hand-computed values."""

import math

import pytest
import torch

from recipe.loss import aggregate, cispo_loss, gspo_loss, policy_loss, ppo_clip_loss


def _leaf(values):
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def test_aggregation_prompt_sample_token():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [6.0, 6.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]])
    groups = torch.tensor([0, 0, 7])
    assert aggregate(per_token, mask, groups, "token").item() == pytest.approx(22 / 6)
    assert aggregate(per_token, mask, groups, "sample").item() == pytest.approx((2 + 4 + 6) / 3)
    # prompt 0: (1+2+3+4)/4 tokens = 2.5; prompt 7: 6
    assert aggregate(per_token, mask, groups, "prompt").item() == pytest.approx((2.5 + 6) / 2)


def test_aggregation_ignores_non_finite_padding():
    per_token = torch.tensor([[1.0, float("nan")], [3.0, float("inf")]])
    mask = torch.tensor([[1, 0], [1, 0]])
    for how in ("prompt", "sample", "token"):
        assert aggregate(per_token, mask, torch.tensor([0, 1]), how).item() == pytest.approx(2.0)


def test_aggregation_rejects_unknown():
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), torch.tensor([0]), "batch")


def test_cispo_value_gradient_and_truncation():
    # rho = [2, 1]; eps_max = 1.5 truncates the first token's weight to 1.5
    logp_train = _leaf([[math.log(0.5), math.log(0.2)]])
    logp_gen = torch.tensor([[math.log(0.25), math.log(0.2)]], dtype=torch.float64)
    adv = torch.tensor([2.0], dtype=torch.float64)
    loss, diag = cispo_loss(
        logp_train, logp_gen, adv, torch.ones(1, 2), torch.tensor([0]),
        eps_max=1.5, aggregation="token",
    )  # fmt: skip
    expected = -(1.5 * 2 * math.log(0.5) + 1.0 * 2 * math.log(0.2)) / 2
    assert loss.item() == pytest.approx(expected)
    loss.backward()
    # stop-gradient on the weight: d/d logp = -w * A / n_tokens, no term through rho
    assert logp_train.grad[0].tolist() == pytest.approx([-1.5, -1.0])
    assert diag["clip_fraction"] == pytest.approx(0.5)
    assert diag["rho_mean"] == pytest.approx(1.5)
    assert diag["rho_max"] == pytest.approx(2.0)


def test_cispo_has_no_lower_clip():
    # rho = 0.1 with a negative advantage: PPO would clip at 1 - eps and zero the gradient
    logp_train = _leaf([[math.log(0.05)]])
    logp_gen = torch.tensor([[math.log(0.5)]], dtype=torch.float64)
    loss, diag = cispo_loss(
        logp_train, logp_gen, torch.tensor([-1.0]), torch.ones(1, 1), torch.tensor([0]),
        eps_max=4.0, aggregation="token",
    )  # fmt: skip
    loss.backward()
    assert logp_train.grad.item() == pytest.approx(0.1)  # -(0.1)(-1)
    assert diag["clip_fraction"] == 0.0


def _ppo_case():
    rho = torch.tensor([1.5, 0.5, 1.1, 1.5], dtype=torch.float64)
    logp_gen = torch.log(torch.full((4, 1), 0.4, dtype=torch.float64))
    logp_train = (logp_gen.squeeze(1) + torch.log(rho)).unsqueeze(1).detach().requires_grad_()
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    return logp_train, logp_gen, adv, torch.ones(4, 1), torch.arange(4)


def test_dapo_clip_higher_values_and_gradients():
    logp_train, logp_gen, adv, mask, groups = _ppo_case()
    loss, diag = ppo_clip_loss(
        logp_train, logp_gen, adv, mask, groups, eps_low=0.2, eps_high=0.26, aggregation="token"
    )
    # per token: -1.26 (clipped high), +0.8 (clipped low), -1.1, +1.5 (A<0, rho>1: unclipped)
    assert loss.item() == pytest.approx((-1.26 + 0.8 - 1.1 + 1.5) / 4)
    loss.backward()
    assert logp_train.grad.squeeze(1).tolist() == pytest.approx([0, 0, -1.1 / 4, 1.5 / 4])
    assert diag["clip_fraction"] == pytest.approx(0.5)


def test_grpo_symmetric_clip_and_defaults():
    logp_train, logp_gen, adv, mask, groups = _ppo_case()
    loss, _ = policy_loss("grpo", logp_train, logp_gen, adv, mask, groups, aggregation="token")
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 1.1 + 1.5) / 4)
    dapo, _ = policy_loss("dapo", logp_train, logp_gen, adv, mask, groups, aggregation="token")
    assert dapo.item() == pytest.approx((-1.26 + 0.8 - 1.1 + 1.5) / 4)


def test_gspo_sequence_ratio():
    # token log-ratios [log 1.1, 0] -> s = sqrt(1.1)
    logp_gen = torch.log(torch.tensor([[0.5, 0.25]], dtype=torch.float64))
    logp_train = (logp_gen + torch.log(torch.tensor([[1.1, 1.0]]))).detach().requires_grad_()
    args = (logp_train, logp_gen, torch.tensor([1.0]), torch.ones(1, 2), torch.tensor([0]))
    s = math.sqrt(1.1)
    loss, diag = gspo_loss(*args, eps_low=0.1, eps_high=0.1, aggregation="token")
    assert loss.item() == pytest.approx(-s)
    loss.backward()
    # every token's gradient carries the sequence ratio: -s * A / n_tokens
    assert logp_train.grad[0].tolist() == pytest.approx([-s / 2, -s / 2])
    assert diag["rho_mean"] == pytest.approx(s)
    assert diag["clip_fraction"] == 0.0

    logp_train.grad = None
    clipped, diag = gspo_loss(*args, eps_low=0.01, eps_high=0.01, aggregation="token")
    assert clipped.item() == pytest.approx(-1.01)
    clipped.backward()
    assert logp_train.grad.abs().max().item() == 0.0
    assert diag["clip_fraction"] == 1.0


def test_on_policy_losses_agree_at_ratio_one():
    # rho = 1 everywhere: every loss's gradient is -A * grad log pi, aggregated the same way
    torch.manual_seed(0)
    logp = torch.log(torch.rand(4, 3, dtype=torch.float64))
    adv = torch.tensor([1.0, -0.5, 0.3, 2.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]])
    groups = torch.tensor([0, 0, 1, 1])
    grads = []
    for kind in ("cispo", "dapo", "grpo", "gspo"):
        leaf = logp.clone().requires_grad_()
        loss, _ = policy_loss(kind, leaf, logp, adv, mask, groups, aggregation="prompt")
        loss.backward()
        grads.append(leaf.grad)
    for g in grads[1:]:
        assert torch.allclose(g, grads[0])


@pytest.mark.parametrize("kind", ["cispo", "dapo", "grpo", "gspo"])
def test_zero_grad_fraction_counts_exactly_the_tokens_without_gradient(kind):
    # ratios far from 1 in both directions, advantages of both signs and never 0 (so a zero
    # gradient can only come from the clip), padding in some rows
    torch.manual_seed(1)
    logp_gen = torch.log(torch.rand(6, 5, dtype=torch.float64) * 0.9 + 0.05)
    log_rho = torch.randn(6, 5, dtype=torch.float64) * (0.02 if kind == "gspo" else 0.8)
    leaf = (logp_gen + log_rho).detach().requires_grad_()
    adv = torch.tensor([1.0, -0.5, 0.7, -2.0, 0.3, -1.0], dtype=torch.float64)
    mask = torch.ones(6, 5)
    mask[1, 3:] = 0
    mask[4, 1:] = 0
    loss, diag = policy_loss(kind, leaf, logp_gen, adv, mask, torch.arange(6) // 2,
                             aggregation="token", eps_max=1.5)  # fmt: skip
    loss.backward()
    on = mask > 0
    no_grad = (leaf.grad[on] == 0).double().mean().item()
    assert diag["zero_grad_fraction"] == pytest.approx(no_grad, abs=1e-6)  # a float32 mean
    if kind == "cispo":  # truncation acts on many tokens, yet every one keeps its gradient
        assert diag["clip_fraction"] > 0.2 and diag["zero_grad_fraction"] == 0.0
    else:  # the clip acts, and where it acts the gradient is gone
        assert 0 < diag["zero_grad_fraction"] == diag["clip_fraction"] < 1


def test_unknown_loss():
    with pytest.raises(ValueError, match="loss must be one of"):
        policy_loss("ppo", torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1),
                    torch.ones(1, 1), torch.tensor([0]))  # fmt: skip
