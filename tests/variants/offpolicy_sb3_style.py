"""Correct variant in Stable-Baselines3 2.9.2's style (stable_baselines3/sac/sac.py, td3/td3.py, common/utils.py):
critic outputs as (B, 1) columns reduced with th.cat(...).min(dim=1); the tanh correction log(1 - a^2 + 1e-6)
(declared); the actor losses call the critics with their live parameters, as SB3 does, because it zeroes the
critics' gradients before their own step (declared "discarded"); Polyak in place on clones (mul_(1 - tau), add with
alpha=tau); the TD3 delay on a counter that persists across train() calls (self._n_updates)."""

import math

import numpy as np
import torch as th

RLSPEC_ARRAY = "numpy"
RLSPEC_CONVENTIONS = {"tanh_log_prob_eps": 1e-6, "actor_loss_critic_gradient": "discarded"}


def td_target(rewards, next_q, terminated, truncated, gamma):
    dones = terminated.astype(next_q.dtype)  # the replay buffer's dones * (1 - timeouts)
    return rewards + (1 - dones) * gamma * next_q


def _column(x):
    return x.reshape(-1, 1)


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    with th.no_grad():
        next_q = _column(target_critic(next_obs, target_actor(next_obs)))
        dones = _column(terminated.to(next_q.dtype))
        return (_column(rewards) + (1 - dones) * gamma * next_q).flatten()


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    with th.no_grad():
        noise = noise.clamp(-noise_clip, noise_clip)
        next_actions = th.clamp(target_actor(next_obs) + noise, low, high)
        next_q = th.cat([_column(target_critic1(next_obs, next_actions)), _column(target_critic2(next_obs, next_actions))], dim=1)
        next_q, _ = th.min(next_q, dim=1, keepdim=True)
        dones = _column(terminated.to(next_q.dtype))
        return (_column(rewards) + (1 - dones) * gamma * next_q).flatten()


def _action_log_prob(policy, obs, noise, epsilon=1e-6):
    mean, log_std = policy(obs)
    gaussian_actions = mean + log_std.exp() * noise
    log_prob = th.distributions.Normal(mean, log_std.exp()).log_prob(gaussian_actions).sum(dim=1)
    actions = th.tanh(gaussian_actions)
    log_prob -= th.sum(th.log(1 - actions**2 + epsilon), dim=1)
    return actions, log_prob


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    with th.no_grad():
        next_actions, next_log_prob = _action_log_prob(policy, next_obs, noise)
        next_q = th.cat([_column(target_critic1(next_obs, next_actions)), _column(target_critic2(next_obs, next_actions))], dim=1)
        next_q, _ = th.min(next_q, dim=1, keepdim=True)
        next_q = next_q - alpha * next_log_prob.reshape(-1, 1)
        dones = _column(terminated.to(next_q.dtype))
        return (_column(rewards) + (1 - dones) * gamma * next_q).flatten()


def dpg_actor_loss(actor, critic, obs):
    return -critic(obs, actor(obs)).mean()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    actions_pi, log_prob = _action_log_prob(policy, obs, noise)
    q_values_pi = th.cat([_column(critic1(obs, actions_pi)), _column(critic2(obs, actions_pi))], dim=1)
    min_qf_pi, _ = th.min(q_values_pi, dim=1, keepdim=True)
    return (alpha * log_prob.reshape(-1, 1) - min_qf_pi).mean()


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    if target_entropy is None:
        target_entropy = float(-np.prod((action_dim,)).astype(np.float32))
    return -(log_alpha * (log_prob.reshape(-1, 1) + target_entropy).detach()).mean()


def polyak_update(target, online, tau):
    target_param, param = th.from_numpy(target.copy()), th.from_numpy(online)
    with th.no_grad():
        target_param.mul_(1 - tau)
        th.add(target_param, param, alpha=tau, out=target_param)
    return target_param.numpy()


def target_network_updates(target, online, tau, period, gradient_steps):
    out, current, n_updates = np.empty_like(online), target.copy(), 0
    for steps in gradient_steps:  # one train(gradient_steps=steps) call each
        for _ in range(steps):
            n_updates += 1
            if n_updates % period == 0:
                current = polyak_update(current, online[n_updates - 1], tau)
            out[n_updates - 1] = current
    return out


def td3_actor_update_steps(gradient_steps, policy_delay):
    actor, n_updates = [], 0
    for steps in gradient_steps:
        for _ in range(steps):
            n_updates += 1
            actor.append(1.0 if n_updates % policy_delay == 0 else 0.0)
    return np.array(actor), np.array(actor)
