"""Mutant: SAC's soft target computed without torch.no_grad(): the right numbers, but the next action a' ~ pi(.|s') and
its log-density keep their graph, so the critics' loss (Q(s, a) - y)^2 sends gradient through y into the policy, and the
actor's optimizer then steps on the critic's error (a target built inside a loss function that forgot its no_grad block)."""

import math

import torch
import torch.nn.functional as F

RLSPEC_MUTANT = {"clauses": ["SAC-TARGET-NO-GRAPH"], "bug": "the SAC target keeps its graph: the critic loss trains the policy"}


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, alpha, noise):
    mean, log_std = policy(next_obs)
    u = mean + torch.exp(log_std) * noise
    log_prob = (-0.5 * noise * noise - log_std - 0.5 * math.log(2 * math.pi) - 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
    next_action = torch.tanh(u)
    soft = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action)) - alpha * log_prob
    return rewards + gamma * torch.where(terminated, torch.zeros_like(soft), soft)
