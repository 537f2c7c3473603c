"""Off-policy continuous control: DDPG, TD3 and SAC targets, actor losses, the SAC temperature, target networks.

    one-step TD target     y = r + gamma (1 - terminated) Q'(s', a')        (a time limit is not terminal)
    DDPG                   a' = mu'(s')                                       Lillicrap et al. 2015, arXiv:1509.02971, Alg. 1
    TD3                    a~ = clip(mu'(s') + clip(eps, -c, c), low, high),  y = r + gamma (1 - term) min_i Q_i'(s', a~)
                                                                              Fujimoto et al. 2018, arXiv:1802.09477, §4.2, §5.3 (eq. 15)
    SAC                    a' ~ pi(.|s') (current policy), y = r + gamma (1 - term) (min_i Q_i'(s', a') - alpha log pi(a'|s'))
                                                                              Haarnoja et al. 2018, arXiv:1801.01290, eq. 3 and 13;
                                                                              arXiv:1812.05905, eq. 7 and §5 (twin critics)
    DPG actor              L(theta) = -mean_b Q(s_b, mu_theta(s_b)),  grad = -mean grad_a Q grad_theta mu   Silver et al. 2014
    SAC actor              L(phi) = mean_b (alpha log pi(a~|s) - min_i Q_i(s, a~)),  a~ = tanh(mean + sigma noise)
                                                                              arXiv:1801.01290 eq. 12-13, Appendix C (tanh)
    temperature            J(alpha) = -mean(log alpha (log pi + H_target)),  H_target = -|A|   arXiv:1812.05905 eq. 18
    Polyak                 theta' <- tau theta + (1 - tau) theta'             arXiv:1509.02971 §3 ("soft" target updates)

Shapes: obs (B, O), actions (B, D), flags and targets (B,). The network operations take the suite's torch
modules (actor(obs) -> (B, D), critic(obs, action) -> (B,), policy(obs) -> (mean, log_std)); the noise is an
input, so each call is deterministic. The actor losses hold the critics fixed by calling them with detached
parameters (``torch.func.functional_call``), so one optimizer may step the sum of the losses.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

LOG_2 = math.log(2.0)
LOG_2PI = math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------------------------
# targets


def td_target(rewards, next_q, terminated, truncated, gamma):
    """``r + gamma (1 - terminated) Q'(s', a')``. ``truncated`` is deliberately unused: a time-limit end
    bootstraps from Q' at the real final observation, like any other row. (B,) -> (B,)."""
    del truncated  # not terminal
    return rewards + gamma * np.where(terminated, 0.0, next_q)


def _bootstrapped(rewards, next_value, terminated, gamma):
    """The torch form of :func:`td_target`."""
    return rewards + gamma * torch.where(terminated.bool(), torch.zeros_like(next_value), next_value)


@torch.no_grad()
def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated,
                       truncated, gamma):
    """``r + gamma (1 - terminated) Q'(s', mu'(s'))``: both target networks, at the next observation."""
    next_q = target_critic(next_obs, target_actor(next_obs))  # (B,)
    return _bootstrapped(rewards, next_q, terminated, gamma)


def smoothed_target_action(target_action, noise, noise_clip, low, high):
    """TD3's target-policy smoothing: the noise clipped to [-c, c], then the action clipped to the bounds. (B, D)."""
    return torch.clamp(target_action + noise.clamp(-noise_clip, noise_clip), low, high)


@torch.no_grad()
def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards,
                      next_obs, terminated, truncated, gamma, noise, noise_clip, low, high):
    """``r + gamma (1 - terminated) min_i Q_i'(s', a~)`` with a~ the smoothed target action."""
    next_action = smoothed_target_action(target_actor(next_obs), noise, noise_clip, low, high)  # (B, D)
    next_q = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action))  # (B,)
    return _bootstrapped(rewards, next_q, terminated, gamma)


def squashed_sample(policy, obs, noise):
    """The reparameterised tanh-Gaussian sample and its log-density, evaluated at the pre-tanh sample u:

        u = mean + exp(log_std) noise,  a = tanh(u),
        log pi(a|s) = sum_d [log N(u_d; mean_d, sigma_d) - 2 (log 2 - u_d - softplus(-2 u_d))].

    Returns ``(a, log_prob)``, (B, D) and (B,), both differentiable in the policy's parameters."""
    mean, log_std = policy(obs)  # (B, D) each
    u = mean + torch.exp(log_std) * noise
    gaussian = -0.5 * noise * noise - log_std - 0.5 * LOG_2PI  # log N(u) with (u - mean) / sigma = noise
    log_det = 2.0 * (LOG_2 - u - F.softplus(-2.0 * u))  # log(1 - tanh(u)^2), stable
    return torch.tanh(u), (gaussian - log_det).sum(-1)


@torch.no_grad()
def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, alpha, noise):
    """``r + gamma (1 - terminated) (min_i Q_i'(s', a') - alpha log pi(a'|s'))``, a' from the current policy at s'."""
    next_action, next_log_prob = squashed_sample(policy, next_obs, noise)
    soft_value = torch.minimum(target_critic1(next_obs, next_action), target_critic2(next_obs, next_action)) \
        - alpha * next_log_prob  # (B,): the entropy bonus -alpha log pi enters the value with a plus sign
    return _bootstrapped(rewards, soft_value, terminated, gamma)


# ------------------------------------------------------------------------------------------------
# actor losses


def held_fixed(module, *inputs):
    """``module(*inputs)`` with its parameters detached: gradient flows through the inputs, never into the module."""
    params = {name: p.detach() for name, p in module.named_parameters()}
    return functional_call(module, params, inputs)


def dpg_actor_loss(actor, critic, obs):
    """``-mean_b Q(s_b, mu(s_b))`` with the critic held fixed (the deterministic policy gradient)."""
    return -held_fixed(critic, obs, actor(obs)).mean()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    """``mean_b (alpha log pi(a~|s) - min_i Q_i(s, a~))`` through the reparameterised sample; critics held fixed."""
    action, log_prob = squashed_sample(policy, obs, noise)
    q = torch.minimum(held_fixed(critic1, obs, action), held_fixed(critic2, obs, action))
    return (alpha * log_prob - q).mean()


# ------------------------------------------------------------------------------------------------
# temperature


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    """``-mean(log_alpha (log pi + H_target))`` with log pi a constant (detached); H_target = -|A| by default.

    d/d log_alpha = H(pi) - H_target estimated on the batch: descending it raises alpha when the policy's
    entropy is below the target and lowers it above."""
    if target_entropy is None:
        target_entropy = -float(action_dim)
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


# ------------------------------------------------------------------------------------------------
# target networks


def polyak_update(target, online, tau):
    """``tau online + (1 - tau) target`` (a new array). (P,)."""
    return tau * online + (1.0 - tau) * target


def _delayed_steps(gradient_steps, period):
    """1-based step numbers counted across calls, and whether each is the last of its period ("end" phase)."""
    n = sum(int(k) for k in gradient_steps)
    steps = np.arange(1, n + 1)
    return steps % int(period) == 0


def target_network_updates(target, online, tau, period, gradient_steps):
    """The target after each of N gradient steps, updated on steps period, 2 period, ... (N, P)."""
    out = np.empty_like(online)
    current = target
    for n, due in enumerate(_delayed_steps(gradient_steps, period)):
        if due:
            current = polyak_update(current, online[n], tau)
        out[n] = current
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    """Actor and target-network updates on critic steps d, 2 d, ... (d = policy_delay), counted across calls."""
    due = _delayed_steps(gradient_steps, policy_delay).astype(np.float64)
    return due, due.copy()
