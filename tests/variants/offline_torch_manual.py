"""Correct variant: the offline chapter by hand in torch. The logsumexp shifted by the maximum explicitly; the
dataset's Q picked with a one-hot mask; the sampled partition function as a mixture of the two proposals'
log-mean-exps (logaddexp of log N + L_uniform and log M + L_policy, minus log n); the expectile loss as
tau relu(u)^2 + (1 - tau) relu(-u)^2; the AWR clip taken in log space, exp(min(beta A, log 100)); IQL's targets
in torch with float flags and a stacked minimum."""

import math

import torch

RLSPEC_ARRAY = "torch"
RLSPEC_FLAGS = "float"


def _logsumexp(x, dim=-1):
    m = x.max(dim=dim, keepdim=True).values
    return (m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))).squeeze(dim)


def cql_penalty(q_values, actions, alpha):
    onehot = torch.nn.functional.one_hot(actions, q_values.shape[-1]).to(q_values.dtype)
    q_data = (q_values * onehot).sum(dim=-1)
    return alpha * _logsumexp(q_values) - alpha * q_data


def cql_sampled_penalty(q_uniform, q_policy, log_pi, q_data, action_low, action_high, alpha, temperature):
    log_volume = torch.log(torch.prod(action_high - action_low))
    N, M = q_uniform.shape[-1], q_policy.shape[-1]
    lme_uniform = _logsumexp(q_uniform / temperature + log_volume) - math.log(N)  # log mean over the uniform samples
    lme_policy = _logsumexp(q_policy / temperature - log_pi.detach()) - math.log(M)
    log_z = torch.logaddexp(lme_uniform + math.log(N), lme_policy + math.log(M)) - math.log(N + M)
    return alpha * temperature * log_z - alpha * q_data


def expectile_loss(target, prediction, tau):
    u = target - prediction
    return tau * torch.relu(u) ** 2 + (1 - tau) * torch.relu(-u) ** 2


def iql_targets(target_q, rewards, next_values, terminated, truncated, gamma):
    value_target = torch.stack(list(target_q)).min(dim=0).values
    return value_target, rewards + gamma * (1.0 - terminated) * next_values


def awr_loss(log_prob, advantages, beta):
    exponent = torch.clamp(beta * advantages.detach(), max=math.log(100.0))
    return -(torch.exp(exponent) * log_prob)
