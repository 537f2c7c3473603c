"""Mutant: the KL is summed over the batch of states instead of averaged, so the product is B F v: the
trust region shrinks by a factor B as the batch grows."""

import torch
from torch.distributions import kl_divergence

RLSPEC_MUTANT = {"clauses": ["TRPO-FVP-EQUALS-FISHER"], "bug": "mean KL written as kl.sum(): Fisher scaled by the batch size"}


def fisher_vector_product(policy, params, v):
    theta = params.detach().requires_grad_(True)
    kl = kl_divergence(policy(params.detach()), policy(theta)).sum()  # should be .mean()
    (grad,) = torch.autograd.grad(kl, theta, create_graph=True)
    (hv,) = torch.autograd.grad((grad * v).sum(), theta)
    return hv
