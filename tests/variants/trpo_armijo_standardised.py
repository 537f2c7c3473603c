"""Correct variant in the style of Schulman's TRPO code (arXiv:1502.05477, the modular_rl line search)
and of the libraries that standardise advantages first: a sufficient-increase test with accept ratio
0.1 (a trial must gain more than 0.1 x its linear prediction beta^k g'fullstep), trpo_update
standardising the advantages, (A - mean) / (std + 1e-8), and accepting Gaussian policies only (as
skrl's TRPO), all declared. numpy for the line search; trpo_update and fisher_vector_product receive
torch as always."""

import torch
from torch.distributions import kl_divergence

RLSPEC_CONVENTIONS = {
    "line_search_accept_ratio": 0.1,
    "trpo_advantage_normalization": "batch",
    "trpo_policy_families": ["gaussian"],
}
ACCEPT_RATIO, BACKTRACK = 0.1, 0.5


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks, expected_improve_rate=None):
    before = surrogate(x0)
    for k in range(max_backtracks):
        fraction = BACKTRACK**k
        x = x0 + fraction * fullstep
        improvement = surrogate(x) - before
        if improvement > 0 and improvement / (fraction * expected_improve_rate) > ACCEPT_RATIO and kl(x) <= max_kl:
            return x
    return x0.copy()


def fisher_vector_product(policy, params, v):
    theta = params.detach().requires_grad_(True)
    with torch.no_grad():
        old = policy(params)
    if not isinstance(getattr(old, "base_dist", old), torch.distributions.Normal):
        raise TypeError("Gaussian policies only")
    kl = kl_divergence(old, policy(theta)).mean()
    (grad,) = torch.autograd.grad(kl, theta, create_graph=True)
    (hv,) = torch.autograd.grad((grad * v).sum(), theta)
    return hv


def _cg(mvp, b, iters):
    x, r = torch.zeros_like(b), b.clone()
    p, rr = r.clone(), r @ r
    for _ in range(int(iters)):
        if rr <= (b @ b) * torch.finfo(b.dtype).eps ** 2:
            break
        z = mvp(p)
        alpha = rr / (p @ z)
        x, r = x + alpha * p, r - alpha * z
        rr, rr_old = r @ r, rr
        p = r + (rr / rr_old) * p
    return x


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    theta0 = params.detach()
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    with torch.no_grad():
        old = policy(theta0)
        logp_old = old.log_prob(actions)
    surrogate = lambda th: (torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
    theta = theta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surrogate(theta), theta)
    if not torch.any(g != 0):
        return theta0.clone()  # constant advantages: nothing to improve
    mvp = lambda v: fisher_vector_product(policy, theta0, v)
    x = _cg(mvp, g, cg_iters)
    step = torch.sqrt(2 * max_kl / (x @ mvp(x))) * x
    predicted = g @ step
    with torch.no_grad():
        before = surrogate(theta0)
        for k in range(max_backtracks):
            fraction = BACKTRACK**k
            new = theta0 + fraction * step
            improvement = surrogate(new) - before
            if improvement > ACCEPT_RATIO * fraction * predicted and kl_divergence(old, policy(new)).mean() <= max_kl:
                return new
    return theta0.clone()
