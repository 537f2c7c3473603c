"""Correct variant with Tianshou's and sb3-contrib's constants, declared: damping 0.1 in the
Fisher-vector product and in the step normalisation, trials shrinking by 0.8, a strict KL test
(kl < max_kl), and CG stopping once r'r < 1e-10. numpy for the array operations; the two operations
that differentiate receive torch as always."""

import numpy as np
import torch
from torch.distributions import kl_divergence

RLSPEC_CONVENTIONS = {"damping": 0.1, "backtrack_factor": 0.8, "natural_step_cg_tol": 1e-10}  # its line search accepts kl < max_kl (strict): no clause depends on the tie
DAMPING, BACKTRACK, RESIDUAL_TOL = 0.1, 0.8, 1e-10


def conjugate_gradient(matvec, b, iters, tol, x_kind=None):
    x = np.zeros_like(b) if x_kind is None else x_kind(b)
    r, p = b.copy() if hasattr(b, "copy") else b.clone(), None
    p = r * 1
    rdotr = (r * r).sum()
    for _ in range(int(iters)):
        z = matvec(p)
        alpha = rdotr / (p * z).sum()
        x = x + alpha * p
        r = r - alpha * z
        new_rdotr = (r * r).sum()
        p = r + (new_rdotr / rdotr) * p
        rdotr = new_rdotr
        if rdotr < tol:
            break
    return x


def natural_step(grad, fvp, max_kl, cg_iters):
    mvp = lambda v: fvp(v) + DAMPING * v
    s = conjugate_gradient(mvp, grad, cg_iters, RESIDUAL_TOL)
    return np.sqrt(2 * max_kl / (s @ mvp(s))) * s


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks):
    step, before = 1.0, surrogate(x0)
    for _ in range(max_backtracks):
        x = x0 + step * fullstep
        if kl(x) < max_kl and surrogate(x) > before:
            return x
        step *= BACKTRACK
    return x0.copy()


def fisher_vector_product(policy, params, v):
    theta = params.detach().requires_grad_(True)
    with torch.no_grad():
        old = policy(params)
    kl = kl_divergence(old, policy(theta)).mean()
    (flat_kl_grad,) = torch.autograd.grad(kl, theta, create_graph=True)
    (hv,) = torch.autograd.grad((flat_kl_grad * v).sum(), theta)
    return hv + v * DAMPING


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks):
    theta0 = params.detach()
    with torch.no_grad():
        old = policy(theta0)
        logp_old = old.log_prob(actions)
    actor_loss = lambda th: -(torch.exp(policy(th).log_prob(actions) - logp_old) * advantages).mean()
    theta = theta0.clone().requires_grad_(True)
    grad = -torch.autograd.grad(actor_loss(theta), theta)[0]
    mvp = lambda v: fisher_vector_product(policy, theta0, v)
    s = conjugate_gradient(mvp, grad, cg_iters, RESIDUAL_TOL, x_kind=torch.zeros_like)
    step = torch.sqrt(2 * max_kl / (s @ mvp(s))) * s
    with torch.no_grad():
        loss_before = actor_loss(theta0)
        size = 1.0
        for _ in range(max_backtracks):
            new = theta0 + size * step
            if kl_divergence(old, policy(new)).mean() < max_kl and actor_loss(new) < loss_before:
                return new
            size *= BACKTRACK
    return theta0.clone()
