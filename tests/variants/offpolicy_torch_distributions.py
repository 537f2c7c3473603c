"""Correct variant: the off-policy chapter in torch throughout (RLSPEC_ARRAY = "torch"). The squashed density is
torch.distributions' TransformedDistribution(Independent(Normal), TanhTransform) scored at the tensor the transform
produced from the pre-tanh sample (cached, so no atanh); twin critics reduced with torch.stack(...).min(0); the
critics held fixed by turning their parameters' requires_grad off for the call (and back on); Polyak by lerp."""

import torch
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

RLSPEC_ARRAY = "torch"


def td_target(rewards, next_q, terminated, truncated, gamma):
    return rewards + gamma * (~terminated.bool()).to(next_q.dtype) * next_q


def _bootstrap(rewards, value, terminated, gamma):
    return rewards + gamma * (1.0 - terminated.to(value.dtype)) * value


def ddpg_critic_target(actor, critic, target_actor, target_critic, obs, actions, rewards, next_obs, terminated, truncated, gamma):
    with torch.no_grad():
        return _bootstrap(rewards, target_critic(next_obs, target_actor(next_obs)), terminated, gamma)


def td3_critic_target(actor, critic1, critic2, target_actor, target_critic1, target_critic2, obs, actions, rewards, next_obs,
                      terminated, truncated, gamma, noise, noise_clip, low, high):
    with torch.no_grad():
        smoothed = torch.clamp(noise, min=-noise_clip, max=noise_clip)
        a = torch.max(torch.min(target_actor(next_obs) + smoothed, high), low)
        q = torch.stack([target_critic1(next_obs, a), target_critic2(next_obs, a)]).min(0).values
        return _bootstrap(rewards, q, terminated, gamma)


def _squashed(policy, obs, noise):
    mean, log_std = policy(obs)
    tanh = TanhTransform(cache_size=1)
    u = mean + log_std.exp() * noise
    a = tanh(u)
    dist = TransformedDistribution(Independent(Normal(mean, log_std.exp()), 1), [tanh])
    return a, dist.log_prob(a)


def sac_critic_target(policy, critic1, critic2, target_critic1, target_critic2, obs, actions, rewards, next_obs, terminated,
                      truncated, gamma, alpha, noise):
    with torch.no_grad():
        a, log_prob = _squashed(policy, next_obs, noise)
        q = torch.stack([target_critic1(next_obs, a), target_critic2(next_obs, a)]).min(0).values
        return _bootstrap(rewards, q - alpha * log_prob, terminated, gamma)


class _frozen:
    def __init__(self, *modules):
        self.params = [p for m in modules for p in m.parameters()]

    def __enter__(self):
        self.saved = [p.requires_grad for p in self.params]
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc):
        for p, flag in zip(self.params, self.saved):
            p.requires_grad_(flag)


def dpg_actor_loss(actor, critic, obs):
    with _frozen(critic):
        return -critic(obs, actor(obs)).mean()


def sac_actor_loss(policy, critic1, critic2, obs, alpha, noise):
    a, log_prob = _squashed(policy, obs, noise)
    with _frozen(critic1, critic2):
        q = torch.stack([critic1(obs, a), critic2(obs, a)]).min(0).values
    return torch.mean(alpha * log_prob - q)


def sac_alpha_loss(log_alpha, log_prob, action_dim, target_entropy=None):
    target = -action_dim if target_entropy is None else target_entropy
    with torch.no_grad():
        deficit = log_prob + target
    return -(log_alpha * deficit).mean()


def polyak_update(target, online, tau):
    return torch.lerp(target, online, tau)


def target_network_updates(target, online, tau, period, gradient_steps):
    rows, current, step = [], target.clone(), 0
    for calls in gradient_steps:
        for _ in range(calls):
            step += 1
            if step % period == 0:
                current = torch.lerp(current, online[step - 1], tau)
            rows.append(current)
    return torch.stack(rows)


def td3_actor_update_steps(gradient_steps, policy_delay):
    n = sum(gradient_steps)
    due = (torch.arange(1, n + 1) % policy_delay == 0).double()
    return due, due.clone()
