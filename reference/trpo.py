"""Natural policy gradient and TRPO (Kakade 2001; Schulman et al., ICML 2015, arXiv:1502.05477,
Appendix C).

    L(theta) = mean_b exp(log pi_theta(a_b|s_b) - log pi_old(a_b|s_b)) A_b           surrogate (maximised)
    F        = Hessian at theta_old of mean_b KL(pi_old(.|s_b) || pi_theta(.|s_b))
             = mean_b E_{a ~ pi_old}[grad log pi grad log pi']                        the Fisher matrix
    x        = (F + damping I)^-1 g,  g = grad L(theta_old)                            conjugate gradient
    Delta    = sqrt(2 delta / x'(F + damping I) x) x       so  1/2 Delta'(F + damping I) Delta = delta
    theta'   = theta_old + 0.5^k Delta for the first k = 0..K-1 with L(theta') > L(theta_old) and
               KL(pi_old || pi_theta') <= delta; theta_old itself if no k qualifies

The damping (0 in the paper; 0.1 in most libraries) is a declared convention, not a default: with
damping the step meets the budget of the damped quadratic, and the true quadratic KL is smaller.
Every function works on numpy arrays and torch tensors alike, except the two that differentiate
(``fisher_vector_product``, ``trpo_update``), which take torch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.distributions import Categorical, Independent, Normal, kl_divergence


def conjugate_gradient(matvec, b, iters, tol):
    """Solve ``A x = b`` for SPD ``A`` given only ``v -> A v``; stops once ``r'r <= tol`` or after ``iters``.

    Starts from x = 0, so the iterates' norms grow monotonically and the attainable residual is set
    by |x| alone (a random start, as in sb3-contrib, caps it at the start's size instead).
    """
    x = b * 0  # (n,) zeros of b's kind and dtype
    r = b * 1  # residual b - A x, a fresh copy
    p = r * 1  # search direction
    rr = (r * r).sum()
    for _ in range(int(iters)):
        if rr <= tol:  # also ends a solve whose residual is exactly zero (else 0/0 below)
            break
        Ap = matvec(p)
        alpha = rr / (p * Ap).sum()
        x = x + alpha * p
        r = r - alpha * Ap
        rr_next = (r * r).sum()
        p = r + (rr_next / rr) * p  # the new direction is A-conjugate to every earlier one
        rr = rr_next
    return x


def fisher_vector_product(policy, params, v, damping=0.0):
    """``(F + damping I) v`` with F the Hessian of the mean KL(pi_params || pi_theta) at theta = params.

    ``policy(theta)`` returns a torch Distribution with batch shape (B,); params, v: (P,) torch.
    The old policy is evaluated on detached parameters: were both sides of the KL functions of
    theta, the KL would be identically 0 and so would its Hessian (bug E4).
    """
    theta = params.detach().requires_grad_(True)
    old = policy(params.detach())
    kl = kl_divergence(old, policy(theta)).mean()  # 0 at theta = params, gradient 0 there too
    (grad,) = torch.autograd.grad(kl, theta, create_graph=True)
    (hessian_v,) = torch.autograd.grad((grad * v).sum(), theta)
    return hessian_v + damping * v


def natural_step(grad, fvp, max_kl, cg_iters, damping=0.0):
    """``Delta = sqrt(2 max_kl / x'(F + damping I) x) x`` with ``x = (F + damping I)^-1 grad`` by CG.

    The normaliser uses ``x'(F + damping I) x`` rather than ``grad'x``: the two agree when CG has
    converged, and the first meets the budget exactly even when it has not.
    """
    damped = (lambda v: fvp(v) + damping * v) if damping else fvp
    # Stop once |r| <= eps |g|, the rounding floor: iterating past it only shrinks r'r towards underflow,
    # where p'Ap can round to 0 (float32: from about |g| 1e-19) and alpha becomes inf.
    x = conjugate_gradient(damped, grad, cg_iters, float((grad * grad).sum()) * _eps(grad) ** 2)
    quadratic = (x * damped(x)).sum()  # 2 x the model KL of the unscaled direction
    return (2.0 * max_kl / quadratic) ** 0.5 * x


def _eps(a) -> float:
    """Machine epsilon of an array's float dtype (numpy or torch)."""
    return float(torch.finfo(a.dtype).eps) if isinstance(a, torch.Tensor) else float(np.finfo(a.dtype).eps)


def line_search(surrogate, kl, x0, fullstep, max_kl, max_backtracks, backtrack_factor=0.5):
    """The first ``x0 + backtrack_factor^k fullstep``, k = 0..max_backtracks-1, that improves the
    surrogate strictly and keeps ``kl(x) <= max_kl``; ``x0`` (the old parameters) if none does.

    ``kl(x)`` is KL(pi_x0 || pi_x), the constraint of the TRPO paper.
    """
    base = surrogate(x0)
    for k in range(int(max_backtracks)):
        x = x0 + backtrack_factor**k * fullstep
        if surrogate(x) > base and kl(x) <= max_kl:
            return x
    return x0 * 1  # a copy: restoring the old parameters, not keeping the last rejected trial (E1)


def trpo_update(policy, params, actions, advantages, max_kl, cg_iters, max_backtracks, damping=0.0, backtrack_factor=0.5):
    """One TRPO step from ``params``: natural step on the surrogate, then the backtracking line search.

    ``policy(theta)`` -> torch Distribution with batch shape (B,) (one per state); ``actions`` were
    sampled from ``policy(params)``; advantages (B,). Returns the new parameters (P,).
    """
    theta_old = params.detach()
    old = policy(theta_old)
    logp_old = old.log_prob(actions).detach()  # (B,) stored at "collection" time

    def surrogate(theta):
        return (torch.exp(policy(theta).log_prob(actions) - logp_old) * advantages).mean()

    def kl(theta):  # KL(old || new): the old policy is the first argument
        return kl_divergence(old, policy(theta)).mean()

    theta = theta_old.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(surrogate(theta), theta)
    step = natural_step(g, lambda v: fisher_vector_product(policy, theta_old, v), max_kl, cg_iters, damping)
    with torch.no_grad():
        return line_search(surrogate, kl, theta_old, step, max_kl, max_backtracks, backtrack_factor)


# ---------------------------------------------------------------------------------------------
# the two small policies the chapter's checks drive (parameters: one flat vector)


class _Categorical(Categorical):
    """A Categorical whose ``probs`` are exp(normalised logits): the same numbers as the softmax, without
    torch's softmax kernel, which starts its thread pool even for a 3 x 3 input (1 ms a call on 2 busy
    cores, against 2 us for exp). ``kl_divergence`` dispatches to Categorical's rule."""

    @property
    def probs(self):
        return self.logits.exp()


def linear_categorical(features, n_actions):
    """pi(a|s_b) = softmax([features_b W, 0])_a: logits linear in theta = vec(W), W (m, n_actions - 1).

    Pinning the last logit at 0 removes the softmax's shift invariance, so the Fisher matrix is
    non-singular when the features have full column rank. features: (B, m) numpy or torch.
    """
    features = torch.as_tensor(features)
    m = features.shape[1]

    def policy(theta):
        W = theta.reshape(m, n_actions - 1)
        logits = features.to(theta.dtype) @ W  # (B, n_actions - 1)
        return _Categorical(logits=torch.cat([logits, torch.zeros_like(logits[:, :1])], dim=1))

    policy.n_params = m * (n_actions - 1)
    return policy


def linear_diag_gaussian(features, action_dim):
    """pi(.|s_b) = N(features_b W, diag(exp(2 s))): theta = [vec(W) (m * action_dim), s (action_dim)]."""
    features = torch.as_tensor(features)
    m = features.shape[1]

    def policy(theta):
        W = theta[: m * action_dim].reshape(m, action_dim)
        log_std = theta[m * action_dim:]
        mean = features.to(theta.dtype) @ W  # (B, action_dim)
        return Independent(Normal(mean, torch.exp(log_std).expand_as(mean)), 1)

    policy.n_params = m * action_dim + action_dim
    return policy
