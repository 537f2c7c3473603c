"""Correct variant written per row: GAE as the direct sum A_k = sum_l (gamma lambda)^l delta_{k+l}
over the compacted row (numpy), reward placement in a Python loop, aggregation as an explicit weight
table, and the clipped loss in its piecewise form A min(r, 1 + clip_high) / A max(r, 1 - clip_low)
on the real tokens selected by boolean indexing."""

import numpy as np
import torch


def token_gae(rewards, values, mask, gamma, lam):
    advantages = np.zeros(rewards.shape)
    for b in range(rewards.shape[0]):
        idx = np.flatnonzero(mask[b])
        r, v = rewards[b, idx], values[b, idx]
        following = np.concatenate([v[1:], [0.0]])
        delta = r + gamma * following - v
        n = len(idx)
        for k in range(n):
            advantages[b, idx[k]] = sum((gamma * lam) ** l * delta[k + l] for l in range(n - k))
    returns = np.where(mask, advantages + values, 0.0)
    return advantages, returns


def assemble_rewards(scores, kl, mask, kl_coef):
    rewards = np.zeros(kl.shape)
    for b in range(kl.shape[0]):
        real = [t for t in range(kl.shape[1]) if mask[b, t]]
        for t in real:
            rewards[b, t] = -kl_coef * kl[b, t]
        if real:
            rewards[b, real[-1]] += scores[b]
    return rewards


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.detach().cpu().numpy().astype(bool)
    B, L = m.shape
    n = m.sum(axis=1, keepdims=True)
    if mode == "token-mean":
        w = np.ones((B, L)) / (m.sum() if num_tokens is None else num_tokens)
    elif mode == "seq-mean-token-mean":
        w = np.ones((B, L)) / (B * np.maximum(n, 1))
    elif mode == "seq-mean-token-sum":
        w = np.ones((B, L)) / B
    else:
        w = np.ones((B, L)) / (B * (L if norm_length is None else norm_length))
    weights = torch.as_tensor(np.where(m, w, 0.0), dtype=per_token_loss.dtype)
    return (weights[mask.bool()] * per_token_loss[mask.bool()]).sum()


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    real = mask.bool()
    ratio = torch.exp(logp_new[real] - logp_old[real])
    A = advantages[real]
    upper = A * torch.clamp(ratio, max=1 + clip_high)  # A >= 0: the objective is A min(r, 1 + clip_high)
    lower = A * torch.clamp(ratio, min=1 - clip_low)  # A < 0: A max(r, 1 - clip_low)
    if dual_clip is not None:
        lower = A * torch.clamp(torch.clamp(ratio, min=1 - clip_low), max=dual_clip)
    return -torch.where(A >= 0, upper, lower).sum()
