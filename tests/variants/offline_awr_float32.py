"""Correct variant: everything computed in float32 whatever the input precision (declared), and the advantage weight
as AWR writes it: beta a temperature, exp(A / beta), clipped at 20 (declared: awr_beta = "temperature",
awr_max_weight = 20). The CQL penalties through log_softmax (-log softmax(Q)[a] = logsumexp Q - Q[a]); the sampled
one as T times the log of the mean of exp(t - max) plus the max."""

import math

import numpy as np
import torch

RLSPEC_PRECISION = "float32"
RLSPEC_CONVENTIONS = {"awr_beta": "temperature", "awr_max_weight": 20.0}


def cql_penalty(q_values, actions, alpha):
    log_softmax = torch.log_softmax(q_values.float(), dim=-1)
    return -alpha * log_softmax.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    width = (action_high - action_low).float()
    t = torch.cat([q_uniform.float() / temperature + torch.log(width).sum(), q_policy.float() / temperature - log_pi.detach().float()], dim=-1)
    top = t.max(dim=-1, keepdim=True).values
    log_z = top.squeeze(-1) + torch.log(torch.exp(t - top).mean(dim=-1))
    return alpha * (temperature * log_z - q_data.float())


def expectile_loss(target, prediction, tau):
    u = (target - prediction).float()
    weight = torch.where(u < 0, torch.full_like(u, 1 - tau), torch.full_like(u, tau))
    return weight * u * u


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    target_q, rewards, next_values = (np.asarray(x, dtype=np.float32) for x in (target_q, rewards, next_values))
    bootstrap = np.float32(gamma) * np.where(terminated, np.float32(0), next_values)
    return target_q.min(axis=0), rewards + bootstrap


def awr_loss(log_prob, advantages, beta):
    weight = torch.exp(advantages.detach().float() / beta).clamp(max=20.0)
    return -weight * log_prob.float()
