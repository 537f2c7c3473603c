"""Mutant: the importance ratio as a quotient of probabilities, pi(a|s) / pi_old(a|s) (the
MorvanZhou tutorial's ``pi.prob(a) / oldpi.prob(a)``). Near log-probabilities of -1000 both
probabilities underflow to 0 and the ratio is 0/0 = NaN."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-RATIO-LOG-SPACE"], "bug": "C13 ratio-by-dividing-probabilities"}


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    ratio = torch.exp(logp_new) / torch.exp(logp_old)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    return -torch.min(ratio * advantages, clipped * advantages).mean()
