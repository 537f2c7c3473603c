"""Mutant (bug E4, dongminlee94/deep_rl #5): the KL whose Hessian gives the Fisher
matrix is built as KL(pi_theta || pi_theta) with neither side detached. It is identically zero as a
function of theta, so its Hessian-vector product is zero: the "Fisher" product returns 0 (plus any
damping), and the natural step degenerates into a rescaled plain gradient."""

import torch
from torch.distributions import kl_divergence

RLSPEC_MUTANT = {"clauses": ["TRPO-FVP-EQUALS-FISHER"], "bug": "E4 fisher-vector-product-of-KL(pi||pi)-is-zero"}


def fisher_vector_product(policy, params, v):
    theta = params.detach().requires_grad_(True)
    dist = policy(theta)
    kl = kl_divergence(dist, dist).mean()  # both sides depend on theta: KL == 0 everywhere
    (grad,) = torch.autograd.grad(kl, theta, create_graph=True, allow_unused=True)
    if grad is None or not grad.requires_grad:
        return torch.zeros_like(v)
    (hv,) = torch.autograd.grad((grad * v).sum(), theta, allow_unused=True)
    return torch.zeros_like(v) if hv is None else hv
