"""Mutant (bug E4 in a complete update, dongminlee94/deep_rl #5): the Fisher-vector product
differentiates KL(pi_theta || pi_theta), which is identically zero, so with the usual damping 0.1 the
product is 0.1 v; the "natural" step is the plain gradient sized by sqrt(2 delta / 0.1 g'g), and the
line search then backtracks along the wrong direction."""

import torch
from torch.distributions import kl_divergence

RLSPEC_MUTANT = {"clauses": ["TRPO-UPDATE-TRUST-REGION"], "bug": "E4 fisher-vector-product-of-KL(pi||pi)-is-zero"}

DAMPING = 0.1


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    theta0 = params.detach()
    old = policy(theta0)
    logp_old = old.log_prob(actions).detach()
    surrogate = lambda th: (torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
    leaf = theta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surrogate(leaf), leaf)

    def fvp(v):
        th = theta0.clone().requires_grad_(True)
        dist = policy(th)
        (grad,) = torch.autograd.grad(kl_divergence(dist, dist).mean(), th, create_graph=True)  # KL(pi || pi) == 0
        hv = torch.autograd.grad((grad * v).sum(), th, allow_unused=True)[0] if grad.requires_grad else None
        return (torch.zeros_like(v) if hv is None else hv) + DAMPING * v

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
        base = surrogate(theta0)
        for k in range(max_backtracks):
            theta = theta0 + 0.5**k * step
            if surrogate(theta) > base and kl_divergence(old, policy(theta)).mean() <= max_kl:
                return theta
    return theta0.clone()
