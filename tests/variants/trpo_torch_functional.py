"""Correct variant in torch (RLSPEC_ARRAY = "torch"): conjugate gradient with torch.dot, the Fisher-vector
product as the Hessian of KL(new || old) (sb3-contrib's direction: both KLs share the Hessian at the old
policy), the step normalised with g'x, a Spinning Up-style line search written on the loss -L, and a
complete update that flattens nothing (the parameters already are one vector)."""

import torch
from torch.distributions import kl_divergence

RLSPEC_ARRAY = "torch"


def conjugate_gradient(matvec, b, iters, tol):
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rs = torch.dot(r, r)
    k = 0
    while k < iters and rs > tol:
        Ap = matvec(p)
        step = rs / torch.dot(p, Ap)
        x += step * p
        r -= step * Ap
        rs_next = torch.dot(r, r)
        p = r + (rs_next / rs) * p
        rs = rs_next
        k += 1
    return x


def fisher_vector_product(policy, params, v):
    theta = params.detach().clone().requires_grad_(True)
    old = policy(params.detach())
    kl = kl_divergence(policy(theta), old).mean()  # KL(new || old): same Hessian at theta = params
    (g,) = torch.autograd.grad(kl, theta, create_graph=True)
    return torch.autograd.grad(torch.dot(g, v), theta)[0]


def natural_step(grad, fvp, max_kl, cg_iters):
    tol = (torch.finfo(grad.dtype).eps * torch.linalg.vector_norm(grad)) ** 2
    x = conjugate_gradient(fvp, grad, cg_iters, tol)
    return torch.sqrt(2 * max_kl / torch.dot(grad, x)) * x


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    loss = lambda x: -surrogate(x)
    loss_old = loss(x0)
    for j in range(max_backtracks):
        candidate = x0 + (0.5**j) * fullstep
        if kl(candidate) <= max_kl and loss(candidate) < loss_old:
            return candidate
    return x0.clone()


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    params = params.detach()
    old = policy(params)
    logp_old = old.log_prob(actions)

    def loss(theta):
        return -(advantages * torch.exp(policy(theta).log_prob(actions) - logp_old)).mean()

    theta = params.clone().requires_grad_(True)
    g = -torch.autograd.grad(loss(theta), theta)[0]
    step = natural_step(g, lambda v: fisher_vector_product(policy, params, v), max_kl, cg_iters)
    with torch.no_grad():
        return line_search(lambda th: -loss(th), lambda th: kl_divergence(old, policy(th)).mean(), params, step, max_kl,
                           max_backtracks)
