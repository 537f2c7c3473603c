"""Correct variant written the way verl 0.9.1 writes it (core_algos.py), minus the whitening: torch
throughout, masks as 0/1 multipliers that carry the next value and advantage through masked tokens,
max of negated surrogates with the dual clip as a min, and the declared deviations verl makes: the
log-ratio clamped to +-20 and 1e-8 added to each row's token count in seq-mean-token-mean."""

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {"log_ratio_clamp": 20.0, "seq_mean_token_mean_eps": 1e-8}


def token_gae(rewards, values, mask, gamma, lam):
    m = mask.to(values.dtype)
    nextvalues = torch.zeros_like(values[:, 0])
    lastgaelam = torch.zeros_like(values[:, 0])
    reversed_adv = []
    for t in reversed(range(values.shape[-1])):
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * m[:, t] + (1 - m[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * m[:, t] + (1 - m[:, t]) * lastgaelam
        reversed_adv.append(lastgaelam)
    advantages = torch.stack(reversed_adv[::-1], dim=1)
    return advantages, advantages + values


def assemble_rewards(scores, kl, mask, kl_coef):
    m = mask.to(kl.dtype)
    rewards = -kl_coef * kl * m
    positions = torch.arange(kl.shape[1]).expand_as(kl)
    last = torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values
    return rewards.scatter_add(1, last[:, None], scores[:, None].to(kl.dtype))


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    if mode == "token-mean":
        count = m.sum() if num_tokens is None else num_tokens
        return (per_token_loss * m).sum() / count
    seq_losses = (per_token_loss * m).sum(dim=-1)
    if mode == "seq-mean-token-mean":
        return (seq_losses / (m.sum(dim=-1) + 1e-8)).mean()
    if mode == "seq-mean-token-sum":
        return seq_losses.mean()
    scale = m.shape[-1] if norm_length is None else norm_length
    return seq_losses.sum() / (m.shape[0] * scale)


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    m = mask.to(logp_new.dtype)
    ratio = torch.exp(torch.clamp(logp_new - logp_old, min=-20.0, max=20.0))
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses = clip_pg_losses1
    if dual_clip is not None:
        clip_pg_losses2 = torch.min(-advantages * dual_clip, clip_pg_losses1)
        pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    return (pg_losses * m).sum()
