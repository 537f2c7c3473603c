"""A single-file PPO in the shape of the popular single-file implementations: an ``Args`` dataclass, an
``Agent`` module with ``get_value`` / ``get_action_and_value``, a rollout loop with GAE, and an update
that runs its own epochs over ``torch.randperm`` minibatches, steps the optimizer, clips the gradient
norm, stops on the k3 approximate KL after an epoch, and returns only its logs.

Written here, fresh, as the worked example of docs/adapting-real-code.md: it is "real code" in that
nothing in it knows about rlspec. ``train`` needs gymnasium; ``update`` needs only torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_timesteps: int = 100_000
    learning_rate: float = 2.5e-4
    num_envs: int = 4
    num_steps: int = 128
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    seed: int = 1
    # filled in at run time
    batch_size: int = 0
    minibatch_size: int = 0


def layer_init(layer, std=math.sqrt(2), bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Separate actor and critic MLPs; a categorical actor, or a Gaussian one with a state-independent log-std."""

    def __init__(self, obs_dim: int, n_actions: int, continuous: bool = False):
        super().__init__()
        self.continuous = continuous
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, n_actions), std=0.01))
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, n_actions))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        out = self.actor(x)
        if self.continuous:
            dist = Normal(out, self.actor_logstd.expand_as(out).exp())
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action).sum(1), dist.entropy().sum(1), self.critic(x)
        dist = Categorical(logits=out)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Advantages and returns of a (num_steps, num_envs) rollout, bootstrapping from next_value."""
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    num_steps = rewards.shape[0]
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal, nextvalues = 1.0 - next_done, next_value
        else:
            nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages, advantages + values


def update(agent, optimizer, b_obs, b_logprobs, b_actions, b_advantages, b_returns, b_values, args: Args) -> dict:
    """One PPO update on the flattened batch; returns the logs a training script writes to TensorBoard."""
    clipfracs = []
    for epoch in range(args.update_epochs):
        b_inds = torch.randperm(args.batch_size)
        for start in range(0, args.batch_size, args.minibatch_size):
            mb_inds = b_inds[start : start + args.minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
            logratio = newlogprob - b_logprobs[mb_inds]
            ratio = logratio.exp()
            with torch.no_grad():
                old_approx_kl = (-logratio).mean()
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())

            mb_advantages = b_advantages[mb_inds]
            if args.norm_adv and len(mb_inds) > 1:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

            pg_loss = torch.max(-mb_advantages * ratio,
                                -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()

            newvalue = newvalue.view(-1)
            if args.clip_vloss:
                v_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb_inds]) ** 2).mean()
            else:
                v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

            loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl is not None and approx_kl > args.target_kl:
            break
    return {"losses/value_loss": v_loss.item(), "losses/policy_loss": pg_loss.item(), "losses/entropy": entropy.mean().item(),
            "losses/old_approx_kl": old_approx_kl.item(), "losses/approx_kl": approx_kl.item(),
            "losses/clipfrac": float(np.mean(clipfracs))}


def train(args: Args) -> list[float]:  # pragma: no cover - needs gymnasium and minutes; not what the suite checks
    """The training loop: vectorised rollouts, GAE, the update; returns the episode returns seen."""
    import gymnasium as gym

    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    torch.manual_seed(args.seed)
    envs = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id)) for _ in range(args.num_envs)])
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    continuous = isinstance(envs.single_action_space, gym.spaces.Box)
    n_actions = envs.single_action_space.shape[0] if continuous else envs.single_action_space.n
    agent = Agent(obs_dim, n_actions, continuous)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    shape = (args.num_steps, args.num_envs)
    obs = torch.zeros(shape + envs.single_observation_space.shape)
    actions = torch.zeros(shape + envs.single_action_space.shape)
    logprobs, rewards, dones, values = (torch.zeros(shape) for _ in range(4))
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(args.num_envs)
    episode_returns = []
    for _ in range(args.total_timesteps // args.batch_size):
        for step in range(args.num_steps):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(np.logical_or(terminations, truncations).astype(np.float32))
            if "episode" in infos:
                episode_returns.extend(infos["episode"]["r"][infos["_episode"]].tolist())
        with torch.no_grad():
            advantages, returns = compute_gae(rewards, values, dones, agent.get_value(next_obs).reshape(1, -1), next_done,
                                              args.gamma, args.gae_lambda)
        update(agent, optimizer, obs.reshape((-1,) + envs.single_observation_space.shape), logprobs.reshape(-1),
               actions.reshape((-1,) + envs.single_action_space.shape), advantages.reshape(-1), returns.reshape(-1),
               values.reshape(-1), args)
    return episode_returns
