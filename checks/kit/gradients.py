"""Gradients of a candidate's output with respect to the leaf tensors the suite passed it.

The operations whose meaning is a gradient (the losses) get torch leaves that require grad; the suite
differentiates what the candidate returned with autograd, in float64 on the candidate's own graph. A
loss that does not depend on a leaf has gradient 0 there, which is what the clauses then judge.
"""

from __future__ import annotations

import numpy as np
import torch

from .context import CandidateError


def leaf_gradient(call, name: str, size: int) -> np.ndarray:
    """d (the candidate's scalar) / d (the leaf ``name`` the suite made), float64 of ``size`` elements;
    zeros if no graph reaches it."""
    raw, leaf = call.raw, call.inputs[name]
    if isinstance(raw, torch.Tensor) and raw.requires_grad:
        try:
            (grad,) = torch.autograd.grad(raw, leaf, allow_unused=True)
        except RuntimeError as exc:
            raise CandidateError(f"{call.code.split('(')[0]} returned a tensor autograd cannot differentiate: {exc}") from None
        if grad is not None:
            return grad.detach().cpu().double().numpy().reshape(size)
    return np.zeros(size)


def gradients(output, leaves: dict) -> dict[str, np.ndarray]:
    """``d output / d leaf`` for each named leaf as float64 arrays; zeros where no gradient flows."""
    names = list(leaves)
    if not (torch.is_tensor(output) and output.requires_grad):
        return {n: np.zeros(tuple(leaves[n].shape)) for n in names}
    grads = torch.autograd.grad(output, [leaves[n] for n in names], allow_unused=True, retain_graph=True)
    return {
        n: np.zeros(tuple(leaves[n].shape)) if g is None else g.detach().cpu().to(torch.float64).numpy()
        for n, g in zip(names, grads)
    }


def reduction_scale(ctx, T: int) -> float:
    """``d loss / d (logp_t w_t)`` for a loss over T terms under the declared ``pg_reduction``: 1/T for the default
    mean, 1 for a declared sum (the policy-gradient and gridworld chapters' actor_critic_losses and reinforce_loss)."""
    return 1.0 / T if ctx.convention("pg_reduction") == "mean" else 1.0
