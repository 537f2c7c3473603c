"""Correct variant in float32 (torch), vectorised: each row's GAE as a discount-matrix product on its
compacted real tokens, rewards by scatter, aggregation by per-row sums, the loss with torch.where over
the full (B, L) layout (padding replaced by r = 1 before exp)."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"


def token_gae(rewards, values, mask, gamma, lam):
    rewards, values, mask = rewards.float(), values.float(), mask.bool()
    advantages = torch.zeros_like(values)
    c = torch.tensor(gamma * lam, dtype=torch.float32)
    for b in range(values.shape[0]):
        idx = torch.nonzero(mask[b]).flatten()
        r, v = rewards[b, idx], values[b, idx]
        following = torch.cat([v[1:], torch.zeros(1)])
        delta = r + gamma * following - v
        k = torch.arange(len(idx))
        lag = (k[None, :] - k[:, None]).float()
        discount = torch.where(lag >= 0, c ** lag.clamp(min=0), torch.zeros(()))
        advantages[b, idx] = discount @ delta
    return advantages, advantages + values


def assemble_rewards(scores, kl, mask, kl_coef):
    kl, mask = kl.float(), mask.bool()
    rewards = torch.where(mask, -kl_coef * kl, torch.zeros_like(kl))
    L = kl.shape[1]
    last = L - 1 - torch.argmax(mask.flip(1).to(torch.int64), dim=1)
    return rewards.scatter_add(1, last[:, None], scores.float()[:, None])


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    loss = torch.where(mask.bool(), per_token_loss.float(), torch.zeros((), dtype=torch.float32))
    counts = mask.bool().sum(dim=1).float()
    B, L = loss.shape
    if mode == "token-mean":
        return loss.sum() / (counts.sum() if num_tokens is None else float(num_tokens))
    rows = loss.sum(dim=1)
    if mode == "seq-mean-token-mean":
        return torch.mean(rows / counts)
    if mode == "seq-mean-token-sum":
        return torch.mean(rows)
    return rows.sum() / float(B * (L if norm_length is None else norm_length))


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    real = mask.bool()
    log_ratio = torch.where(real, logp_new.float() - logp_old.float(), torch.zeros((), dtype=torch.float32))
    ratio = log_ratio.exp()
    A = torch.where(real, advantages.float(), torch.zeros((), dtype=torch.float32))
    surrogate = torch.minimum(ratio * A, ratio.clamp(1 - clip_low, 1 + clip_high) * A)
    if dual_clip is not None:
        surrogate = torch.where(A < 0, torch.maximum(surrogate, dual_clip * A), surrogate)
    return -surrogate.sum()
