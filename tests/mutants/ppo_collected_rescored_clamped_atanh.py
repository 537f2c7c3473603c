"""Mutant, as TorchRL 0.14.1's PPO scores a tanh-squashed policy (bug R32): the collector stores the
log-probability of the exact pre-tanh draw (ProbabilisticActor's sample_and_log_prob), the loss re-scores the
stored action through atanh of the action clamped to +-(1 - resolution) (TanhNormal.log_prob in ClipPPOLoss).
Once 1 - tanh(u) is below the resolution (u > 7.25 in float32, 17.6 in float64) the loss scores another
sample, and the first ratios are far from 1 before any update."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-COLLECTED-RATIOS-ONE"], "bug": "R32 torchrl-ppo-rescores-tanh-action-through-clamped-atanh"}


def _squashed_log_prob(loc, scale, u):
    z = (u - loc) / scale
    log_normal = (-0.5 * z * z - torch.log(scale) - 0.5 * math.log(2 * math.pi)).sum(-1)
    return log_normal - (2.0 * (math.log(2.0) - u - torch.nn.functional.softplus(-2.0 * u))).sum(-1)


def ppo_collected_ratios(family, loc, scale, seed):
    g = torch.Generator().manual_seed(int(seed))
    if family == "categorical":
        log_pi = torch.log_softmax(loc, -1)
        action = torch.multinomial(log_pi.exp(), 1, generator=g)
        return torch.exp(log_pi.gather(-1, action)[:, 0] - log_pi.gather(-1, action)[:, 0])
    x = loc + scale * torch.randn(loc.shape, generator=g, dtype=loc.dtype)
    if family == "gaussian":
        logp = torch.distributions.Normal(loc, scale).log_prob(x).sum(-1)
        return torch.exp(logp - logp)
    logp_old = _squashed_log_prob(loc, scale, x)  # stored at collection: the exact pre-image
    action = torch.tanh(x)  # the buffer keeps the action
    limit = 1.0 - torch.finfo(loc.dtype).resolution
    u = torch.atanh(action.clamp(-limit, limit))  # BUG: the loss re-inverts the stored action
    return torch.exp(_squashed_log_prob(loc, scale, u) - logp_old)
