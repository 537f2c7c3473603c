"""Mutant (bug E3's mirror, in a complete update): the line search tests the KL constraint only, so it
accepts the full step whenever it stays inside the trust region, even where the step overshoots the
surrogate's peak and the surrogate falls."""

import torch
from torch.distributions import kl_divergence

RLSPEC_MUTANT = {"clauses": ["TRPO-UPDATE-LINE-SEARCH-TRIALS"], "bug": "E2 no-working-line-search (the surrogate's improvement never tested)"}


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    theta0 = params.detach()
    old = policy(theta0)
    logp_old = old.log_prob(actions).detach()
    surrogate = lambda th: (torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
    leaf = theta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surrogate(leaf), leaf)

    def fvp(v):
        th = theta0.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(kl_divergence(old, policy(th)).mean(), th, create_graph=True)
        (hv,) = torch.autograd.grad((grad * v).sum(), th)
        return hv

    x, r = torch.zeros_like(g), g.clone()
    p, rr = r.clone(), r @ r
    for _ in range(cg_iters):
        if rr <= (torch.finfo(g.dtype).eps * g.norm()) ** 2:
            break
        Ap = fvp(p)
        alpha = rr / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        new = r @ r
        p, rr = r + (new / rr) * p, new
    step = torch.sqrt(2 * max_kl / (x @ fvp(x))) * x
    with torch.no_grad():
        for k in range(max_backtracks):
            theta = theta0 + 0.5**k * step
            if kl_divergence(old, policy(theta)).mean() <= max_kl:  # the surrogate is never compared
                return theta
    return theta0.clone()
