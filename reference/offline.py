"""Offline RL: CQL(H)'s conservative penalty and IQL's expectile regression and advantage-weighted actor.

CQL(H) (Kumar, Zhou, Tucker, Levine 2020, "Conservative Q-Learning for Offline Reinforcement
Learning", arXiv:2006.04779, eq. 4 with the entropy regulariser R(mu) = H(mu)). The critic's loss gets,
per state s with a dataset action a_data,

    alpha (log sum_a exp Q(s, a) - Q(s, a_data))                              (discrete actions, exact)

which pushes Q down on every action in proportion to softmax(Q) and up on the dataset's action.
For continuous actions the log-partition is estimated by importance sampling (arXiv:2006.04779
Appendix F): with samples a_i from proposals p_i (uniform on the action box, and the current policy),
each weighted by its own proposal's density,

    Z_hat = (1 / n) sum_i exp(Q(s, a_i) / T - log p_i(a_i))     E[Z_hat] = integral exp(Q(s, a) / T) da
    penalty = alpha (T log Z_hat - Q(s, a_data))

The policy's log-densities are constants of the critic's loss (detached): the penalty trains Q only.

IQL (Kostrikov, Nair, Levine 2021, "Offline Reinforcement Learning with Implicit Q-Learning",
arXiv:2110.06169). With u = target - prediction,

    L_2^tau(u) = |tau - 1(u < 0)| u^2         (§4.1; tau > 1/2 weights under-prediction more)
    V(s) regresses on min_k Q'_k(s, a_data)   (the value loss: the target critics at the dataset action)
    Q(s, a) regresses on r + gamma (1 - terminated) V(s')   (the critic loss; a time-limit end is not terminal)
    actor: -exp(beta (Q'(s, a) - V(s))) log pi(a | s), the weight detached and clipped at 100
                                              (policy extraction)

The weight is advantage-weighted regression's (Peng, Kumar, Zhang, Levine 2019, arXiv:1910.00177),
with beta an inverse temperature; the clip (100 in the authors' code) is taken after the exponential.
"""

from __future__ import annotations

import math

import numpy as np
import torch

AWR_MAX_WEIGHT = 100.0  # exp(beta A) is clipped here (IQL's code, TorchRL IQLLoss, CORL)


def cql_penalty(q_values, actions, alpha):
    """CQL(H) over a discrete action set; torch q_values (B, A), integer actions (B,) -> (B,)."""
    log_partition = torch.logsumexp(q_values, dim=-1)  # (B,) stable: max + log sum exp(q - max)
    q_data = q_values.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # (B,)
    return alpha * (log_partition - q_data)


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    """CQL(H) with the importance-sampled log-partition; torch q_uniform (B, N), q_policy and log_pi (B, M),
    q_data (B,), the action box's bounds (D,) -> (B,)."""
    log_uniform = -torch.log(action_high - action_low).sum()  # the uniform density on the box: 1 / volume
    log_density = torch.cat([log_uniform.expand_as(q_uniform), log_pi.detach()], dim=-1)  # (B, N + M)
    q = torch.cat([q_uniform, q_policy], dim=-1)  # (B, N + M)
    n = q.shape[-1]
    log_z = torch.logsumexp(q / temperature - log_density, dim=-1) - math.log(n)  # log of the mean of the weights
    return alpha * (temperature * log_z - q_data)


def expectile_loss(target, prediction, tau):
    """|tau - 1(u < 0)| u^2 with u = target - prediction, elementwise; torch (N,) -> (N,)."""
    u = target - prediction
    weight = torch.abs(tau - (u < 0).to(u.dtype))  # tau where u >= 0, 1 - tau where u < 0, in u's precision
    return weight * u**2


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    """IQL's regression targets ``(min_k target_q[k], r + gamma (1 - terminated) V(s'))``; numpy target_q
    (K, B) (the target critics at the dataset action), the rest (B,) -> ((B,), (B,)). ``truncated`` does
    not stop the bootstrap."""
    value_target = np.min(target_q, axis=0)  # the pessimistic twin
    q_target = rewards + gamma * np.where(terminated, 0.0, next_values)
    return value_target, q_target


def awr_loss(log_prob, advantages, beta):
    """-min(exp(beta A), 100) log pi(a | s) per sample, the weight detached; torch (B,) -> (B,)."""
    weight = torch.exp(beta * advantages.detach()).clamp(max=AWR_MAX_WEIGHT)  # clip after the exp (inf -> 100)
    return -weight * log_prob
