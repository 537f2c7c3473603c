"""Correct variant in CleanRL's style (sac_continuous_action.py, td3_continuous_action.py) with its choices
declared: the temperature loss in alpha, (-log_alpha.exp() * (log_pi + target_entropy)).mean() with log_pi computed
under no_grad (alpha_loss_parameter = "alpha"); the tanh correction log(1 - y^2 + 1e-6) (declared); the actor losses
call the critics directly, which CleanRL's separate optimizers tolerate (declared "discarded"); float flags
(RLSPEC_FLAGS = "float") as CleanRL's `data.dones.flatten()`; soft updates written theta' + tau (theta - theta')."""

import math

import numpy as np
import torch
import torch.nn.functional as F

RLSPEC_FLAGS = "float"
RLSPEC_CONVENTIONS = {"alpha_loss_parameter": "alpha", "tanh_log_prob_eps": 1e-6, "actor_loss_critic_gradient": "discarded"}


def td_target(rewards, next_q, terminated, truncated, gamma):
    return rewards.flatten() + (1 - terminated.flatten()) * gamma * next_q.flatten()


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    with torch.no_grad():
        next_state_actions = target_actor(next_obs)
        qf1_next_target = target_critic(next_obs, next_state_actions)
        return rewards.flatten() + (1 - terminated.flatten()) * gamma * qf1_next_target.view(-1)


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    with torch.no_grad():
        clipped_noise = noise.clamp(-noise_clip, noise_clip)
        next_state_actions = (target_actor(next_obs) + clipped_noise).clamp(low, high)
        min_qf_next_target = torch.min(target_critic1(next_obs, next_state_actions), target_critic2(next_obs, next_state_actions))
        return rewards.flatten() + (1 - terminated.flatten()) * gamma * min_qf_next_target.view(-1)


def _get_action(policy, obs, noise):
    mean, log_std = policy(obs)
    std = log_std.exp()
    x_t = mean + std * noise  # normal.rsample()
    y_t = torch.tanh(x_t)
    log_prob = torch.distributions.Normal(mean, std).log_prob(x_t)
    log_prob -= torch.log(1 * (1 - y_t.pow(2)) + 1e-6)  # action_scale = 1
    return y_t, log_prob.sum(1, keepdim=True)


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    with torch.no_grad():
        next_state_actions, next_state_log_pi = _get_action(policy, next_obs, noise)
        min_qf_next_target = torch.min(target_critic1(next_obs, next_state_actions).view(-1, 1),
                                       target_critic2(next_obs, next_state_actions).view(-1, 1)) - alpha * next_state_log_pi
        return rewards.flatten() + (1 - terminated.flatten()) * gamma * min_qf_next_target.view(-1)


def dpg_actor_loss(actor, critic, obs):
    return -critic(obs, actor(obs)).mean()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    pi, log_pi = _get_action(policy, obs, noise)
    min_qf_pi = torch.min(critic1(obs, pi), critic2(obs, pi)).view(-1, 1)
    return ((alpha * log_pi) - min_qf_pi).mean()


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = -torch.prod(torch.Tensor((action_dim,))).item()
    with torch.no_grad():
        log_pi = log_prob.clone()
    return (-log_alpha.exp() * (log_pi + target_entropy)).mean()


def polyak_update(target, online, tau):
    return target + tau * (online - target)


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current, global_step = np.empty_like(online), target.copy(), 0
    for steps in gradient_steps:
        for _ in range(steps):
            global_step += 1
            if global_step % period == 0:
                current = tau * online[global_step - 1] + (1 - tau) * current
            out[global_step - 1] = current
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    steps = np.arange(1, sum(gradient_steps) + 1)
    due = (steps % policy_delay == 0).astype(np.float64)
    return due, due
