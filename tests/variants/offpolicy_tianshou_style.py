"""Correct variant in Tianshou 2.0.1's style, with its phase declared: delayed updates tested on a counter before it
advances (`if self._cnt % freq == 0: ...; self._cnt += 1`, so steps 1, d + 1, ...: update_phase = "start"); the
tanh correction log(1 - tanh(u)^2 + eps), eps = float32 eps (declared); the temperature through the entropy
deficit, -(log_alpha * (target_entropy - entropy)).mean() with entropy = -log_prob.detach(); the critics held fixed
with torch.func.functional_call on detached parameters; the soft value min_i (Q_i - alpha log pi)."""

import math

import numpy as np
import torch
from torch.func import functional_call

RLSPEC_ARRAY = "numpy"
RLSPEC_CONVENTIONS = {"update_phase": "start", "tanh_log_prob_eps": float(np.finfo(np.float32).eps)}


def td_target(rewards, next_q, terminated, truncated, gamma):
    value_mask = ~terminated  # Algorithm.value_mask: ~buffer.terminated
    return rewards + gamma * next_q * value_mask


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    with torch.no_grad():
        return rewards + gamma * target_critic(next_obs, target_actor(next_obs)) * (~terminated)


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    with torch.no_grad():
        act = target_actor(next_obs) + noise.clamp(-noise_clip, noise_clip)
        act = torch.where(act < low, low, torch.where(act > high, high, act))
        q = torch.min(target_critic1(next_obs, act), target_critic2(next_obs, act))
        return rewards + gamma * q * (~terminated)


def _forward(policy, obs, noise):
    loc, log_std = policy(obs)
    dist = torch.distributions.Independent(torch.distributions.Normal(loc, log_std.exp()), 1)
    act = loc + log_std.exp() * noise  # dist.rsample() with the given noise
    log_prob = dist.log_prob(act).unsqueeze(-1)
    squashed = torch.tanh(act)
    eps = np.finfo(np.float32).eps.item()
    log_prob = log_prob - torch.log(1 - squashed.pow(2) + eps).sum(-1, keepdim=True)
    return squashed, log_prob


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    with torch.no_grad():
        act, log_prob = _forward(policy, next_obs, noise)
        q = torch.stack([target_critic1(next_obs, act), target_critic2(next_obs, act)])  # (2, B)
        value = (q - alpha * log_prob.flatten()).min(0).values
        return rewards + gamma * value * (~terminated)


def _fixed(module, *inputs):
    return functional_call(module, {k: v.detach() for k, v in module.named_parameters()}, inputs)


def dpg_actor_loss(actor, critic, obs):
    return -_fixed(critic, obs, actor(obs)).mean()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    act, log_prob = _forward(policy, obs, noise)
    return (alpha * log_prob.flatten() - torch.min(_fixed(critic1, obs, act), _fixed(critic2, obs, act))).mean()


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    target_entropy = -float(action_dim) if target_entropy is None else target_entropy
    entropy = -log_prob.detach()
    return -(log_alpha * (target_entropy - entropy)).mean()


def polyak_update(target, online, tau):
    return target + tau * (online - target)


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current, cnt = np.empty_like(online), target, 0
    for _ in range(sum(gradient_steps)):
        if cnt % period == 0:
            current = (1.0 - tau) * current + tau * online[cnt] if tau != 1.0 else online[cnt].copy()
        out[cnt] = current
        cnt += 1
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    n = sum(gradient_steps)
    due = (np.arange(n) % policy_delay == 0).astype(np.float64)
    return due, due.copy()
