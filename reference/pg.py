"""Policy-gradient surrogate losses, and the small policies the numeric checks differentiate.

REINFORCE with a baseline (Williams 1992; Sutton & Barto 2018 §13.3-13.4):

    grad J = E[ sum_t grad log pi(a_t|s_t) (G_t - b(s_t)) ]
    L      = -(1/T) sum_t log pi(a_t|s_t) * sg(G_t - b_t)          sg = stop-gradient

The surrogate's value means nothing; its gradient is minus the estimator, so minimising L ascends J.
The weights are numbers, not functions of theta: a gradient through a learned baseline would add the
bias that the baseline theorem excludes.

One-step actor-critic (Sutton & Barto 2018 §13.5):

    delta_t  = r_t + gamma (1 - term_t) sg(V(s_{t+1})) - V(s_t)      TD error
    L_actor  = -(1/T) sum_t log pi(a_t|s_t) * sg(delta_t)            delta is a weight here
    L_critic =  (1/T) sum_t delta_t^2                                semi-gradient: flows into V(s_t) only

With a critic V(s) = phi(s) . w + c the semi-gradient of L_critic with respect to the bias c is
-2 mean(delta); the full gradient would add +2 gamma mean((1 - term) delta) through V(s_{t+1}).
"""

from __future__ import annotations

import math

import torch


def reinforce_loss(logp, returns, baseline=None):
    """``-(1/T) sum_t logp_t (G_t - b_t)`` with the weights detached; torch (T,) -> scalar."""
    weights = returns if baseline is None else returns - baseline  # (T,)
    return -(logp * weights.detach()).mean()


def actor_critic_losses(logp, values, next_values, rewards, terminated, truncated, gamma):
    """One-step TD actor-critic losses ``(actor_loss, critic_loss)``; torch (T,) inputs -> two scalars.

    ``terminated[t]``: s_{t+1} is terminal, so its value is not bootstrapped (bool, or 0./1.).
    ``truncated[t]``: a time limit cut the episode after step t; s_{t+1} is not terminal, so it bootstraps
    from ``next_values[t]`` like any step (Pardo et al. 2018, arXiv:1712.00378): the flag changes nothing here.
    """
    bootstrap = torch.where(terminated.bool(), 0.0, next_values.detach())  # (T,) V(s_{t+1}), constant target
    delta = rewards + gamma * bootstrap - values  # (T,) gradient reaches values only
    actor_loss = -(logp * delta.detach()).mean()
    critic_loss = delta.pow(2).mean()
    return actor_loss, critic_loss


# ---------------------------------------------------------------------------------------------
# Policies for the numeric checks. Both are differentiable in their parameters; actions are data.


def softmax_policy_log_probs(weight, bias, obs):
    """Linear softmax policy ``pi(a|s) = softmax(obs @ weight + bias)_a``.

    obs (S, K), weight (K, A), bias (A,) -> log pi(a|s) for every action, (S, A). ``log_softmax``
    subtracts the row maximum first, so large logits do not overflow.
    """
    return torch.log_softmax(obs @ weight + bias, dim=-1)


def gaussian_policy_log_prob(weight, bias, log_std, obs, actions):
    """Diagonal Gaussian policy ``a ~ N(obs @ weight + bias, diag(exp(log_std))^2)``.

    obs (B, K), weight (K, D), bias (D,), log_std (D,), actions (B, D) -> log pi(a|s), (B,):

        log pi(a|s) = sum_d [ -((a_d - mu_d) / sigma_d)^2 / 2 - log sigma_d - log(2 pi) / 2 ]

    the joint density of independent dimensions, so the per-dimension terms add.
    """
    mean = obs @ weight + bias  # (B, D)
    z = (actions - mean) * torch.exp(-log_std)  # (B, D) standardised action
    return (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)
