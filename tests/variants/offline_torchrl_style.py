"""Correct variant, written as TorchRL 0.14.1's loss modules write the pieces: DiscreteCQLLoss's
logsumexp(q, keepdim=True) - q.gather(...); CQLLoss's concatenation of the importance-weighted Q's with one
logsumexp over it (the weights summed, declared: cql_sampled_normalisation = "sum"; the densities outside the
temperature, unlike TorchRL); IQLLoss's where(diff > 0, expectile, 1 - expectile) * diff**2 with the weights in
diff's dtype; exp(advantage * temperature).clamp_max(100) under no_grad; numpy IQL targets with
np.minimum.reduce."""

import numpy as np
import torch

RLSPEC_CONVENTIONS = {"cql_sampled_normalisation": "sum"}


def cql_penalty(q_values, actions, alpha):
    logsumexp = torch.logsumexp(q_values, dim=-1, keepdim=True)
    q_a = q_values.gather(-1, actions.unsqueeze(-1))
    return alpha * (logsumexp - q_a).squeeze(-1)


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    random_density = torch.log(1.0 / (action_high - action_low)).sum()
    cat_q = torch.cat([q_uniform / temperature - random_density, q_policy / temperature - log_pi.detach()], dim=-1)
    return torch.logsumexp(cat_q, dim=-1) * alpha * temperature - q_data * alpha


def expectile_loss(target, prediction, tau):
    diff = target - prediction
    weight = torch.where(diff > 0, torch.tensor(tau, dtype=diff.dtype), torch.tensor(1 - tau, dtype=diff.dtype))
    return weight * (diff**2)


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    masks = 1.0 - terminated.astype(rewards.dtype)
    return np.minimum.reduce(list(target_q)), rewards + gamma * masks * next_values


def awr_loss(log_prob, advantages, beta):
    with torch.no_grad():
        exp_a = torch.exp(advantages * beta).clamp_max(100)
    return -(exp_a * log_prob)
