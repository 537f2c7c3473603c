"""Token-level RLHF math over (B, L) response rows (PPO for language models, Ouyang et
al. 2022 §3.5; the conventions of verl 0.9.1, OpenRLHF 0.11.2 and TRL 1.16, read in their code).

A row is one response: ``mask[b, t]`` is True on its real (trainable) tokens, False on padding
(left or right) and on interior spans that are not the policy's tokens (a tool's output in a
multi-turn row). The real tokens of a row, in order, are one episode whose last real token is
terminal.

    token_gae          delta_k = r_k + gamma V_{k+1} - V_k,   A_k = delta_k + gamma lambda A_{k+1}
                       k runs over the row's real tokens only (masked positions are skipped: no
                       discount step, their r and V ignored); V and A after the last real token are 0;
                       returns = A + V
    assemble_rewards   r_t = -kl_coef kl_t on each real token, + score on the row's last real token
    aggregate_loss     sum_{b,t real} w_bt l_bt with
                         token-mean               w = 1 / N          (N = num_tokens, default the real-token count)
                         seq-mean-token-mean      w = 1 / (B n_b)    (n_b real tokens in row b)
                         seq-mean-token-sum       w = 1 / B
                         seq-mean-token-sum-norm  w = 1 / (B norm_length),  norm_length default L
    token_ppo_loss     -sum_{b,t real} min(r A, clip(r, 1 - clip_low, 1 + clip_high) A),  r = exp(logp_new - logp_old),
                       with a dual clip c > 1: for A < 0 the objective is floored at c A

Outputs at masked positions are not part of the meaning; this reference sets them to 0.
"""

from __future__ import annotations

import numpy as np
import torch


def token_gae(rewards, values, mask, gamma, lam):
    """GAE over each row's real tokens; (B, L) numpy -> (advantages, returns), (B, L)."""
    rewards, values, mask = np.asarray(rewards, dtype=float), np.asarray(values, dtype=float), np.asarray(mask, dtype=bool)
    B, L = rewards.shape
    advantages = np.zeros((B, L))
    next_value = np.zeros(B)  # V of the next real token; 0 after the last one (terminal)
    running = np.zeros(B)  # A of the next real token
    for t in reversed(range(L)):
        real = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = np.where(real, delta + gamma * lam * running, running)  # a masked position leaves both unchanged
        next_value = np.where(real, values[:, t], next_value)
        advantages[:, t] = np.where(real, running, 0.0)
    returns = np.where(mask, advantages + values, 0.0)
    return advantages, returns


def assemble_rewards(scores, kl, mask, kl_coef):
    """Per-token rewards: (B,), (B, L), (B, L) -> (B, L)."""
    kl, mask = np.asarray(kl, dtype=float), np.asarray(mask, dtype=bool)
    B, L = kl.shape
    rewards = np.where(mask, -kl_coef * kl, 0.0)
    last = L - 1 - np.argmax(mask[:, ::-1], axis=1)  # (B,) index of each row's last real token
    rewards[np.arange(B), last] += np.asarray(scores, dtype=float)
    return rewards


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    """Reduce a (B, L) torch per-token loss to a scalar; masked positions contribute nothing."""
    mask = mask.to(torch.bool)
    B, L = per_token_loss.shape
    masked = torch.where(mask, per_token_loss, torch.zeros_like(per_token_loss))  # (B, L)
    if mode == "token-mean":
        count = mask.sum() if num_tokens is None else num_tokens
        return masked.sum() / count
    row_sums = masked.sum(dim=-1)  # (B,)
    if mode == "seq-mean-token-mean":
        return (row_sums / mask.sum(dim=-1)).mean()
    if mode == "seq-mean-token-sum":
        return row_sums.mean()
    if mode == "seq-mean-token-sum-norm":
        return row_sums.sum() / (B * (L if norm_length is None else norm_length))
    raise ValueError(f"unknown aggregation mode {mode!r}")


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    """Sum over real tokens of the clipped PPO loss; (B, L) torch -> scalar, differentiable in ``logp_new``."""
    mask = mask.to(torch.bool)
    log_ratio = torch.where(mask, logp_new - logp_old, torch.zeros_like(logp_new))  # padding: r = 1, no NaN/inf
    ratio = torch.exp(log_ratio)  # log space: no 0/0 at log-probs near -1000
    objective = torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages)
    if dual_clip is not None:  # c > 1: for A < 0 the loss -objective is capped at -c A
        objective = torch.where(advantages < 0, torch.max(objective, dual_clip * advantages), objective)
    return -torch.where(mask, objective, torch.zeros_like(objective)).sum()
