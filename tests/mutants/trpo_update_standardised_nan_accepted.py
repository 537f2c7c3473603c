"""Mutant: trpo_update standardises its advantages without an epsilon, (A - mean) / std, which is
0/0 = NaN on constant advantages (Tianshou's NPG/TRPO ``_preprocess_batch``), and its line search
rejects a trial only when it is known to be worse (``kl > max_kl or gain <= 0``): every comparison with
NaN is False, so the NaN step is accepted and the policy's parameters become NaN. It runs with torch's
distribution argument checks off (as training loops often do, for speed), so nothing raises."""

import torch
from torch.distributions import kl_divergence

from rlspec.reference import trpo as ref

RLSPEC_CONVENTIONS = {"trpo_advantage_normalization": "batch"}
RLSPEC_MUTANT = {"clauses": ["TRPO-UPDATE-TRUST-REGION"], "bug": "R15 tianshou-npg-standardises-advantages-without-epsilon"}


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    checks = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        return _update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks)
    finally:
        torch.distributions.Distribution.set_default_validate_args(checks)


def _update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    theta0 = params.detach()
    advantages = (advantages - advantages.mean()) / advantages.std()
    with torch.no_grad():
        old = policy(theta0)
        logp_old = old.log_prob(actions)
    surrogate = lambda th: (torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
    theta = theta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surrogate(theta), theta)
    step = ref.natural_step(g, lambda v: ref.fisher_vector_product(policy, theta0, v), max_kl, cg_iters)
    with torch.no_grad():
        before = surrogate(theta0)
        for k in range(max_backtracks):
            new = theta0 + 0.5**k * step
            if kl_divergence(old, policy(new)).mean() > max_kl or surrogate(new) <= before:
                continue
            return new
    return theta0.clone()
