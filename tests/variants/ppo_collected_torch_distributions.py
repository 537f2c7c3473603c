"""Correct variant written with torch.distributions: the collector keeps a rollout buffer (action, the sample
the density is taken at, log pi_old), the loss rebuilds the distribution from the policy's parameters and
re-scores. The squashed policy keeps its pre-tanh sample, scored with TanhTransform's log|det J| (torch's stable
form 2 (log 2 - u - softplus(-2u))), as SAC does for the sample it draws."""

import torch
from torch.distributions import Categorical, Independent, Normal
from torch.distributions.transforms import TanhTransform

RLSPEC_ARRAY = "torch"


def _policy(family, loc, scale):
    return Categorical(logits=loc) if family == "categorical" else Independent(Normal(loc, scale), 1)


def _score(family, dist, sample):
    log_prob = dist.log_prob(sample)
    if family == "tanh_gaussian":
        log_prob = log_prob - TanhTransform().log_abs_det_jacobian(sample, torch.tanh(sample)).sum(-1)
    return log_prob


def ppo_collected_ratios(family, loc, scale, seed):
    torch.manual_seed(int(seed))  # the suite restores torch's global RNG after the call
    with torch.no_grad():
        dist = _policy(family, loc, scale)
        sample = dist.sample()
        buffer = {"action": torch.tanh(sample) if family == "tanh_gaussian" else sample, "sample": sample,
                  "logp_old": _score(family, dist, sample)}
    new = _score(family, _policy(family, loc, scale), buffer["sample"])  # the loss's forward
    return torch.exp(new - buffer["logp_old"])
