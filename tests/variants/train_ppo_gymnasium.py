"""Correct variant: a PPO trainer written against the Gymnasium API alone, the way Stable-Baselines3
structures it. One-hot observations into linear torch modules (``nn.Linear``), ``torch.optim.Adam``,
actions drawn by inverse CDF from the policy evaluated once per rollout (it is fixed while acting),
``torch.distributions.Categorical``; a time-limit truncation folds gamma V(final observation) into the
reward and then counts as an episode end (SB3's ``collect_rollouts``); GAE in torch with
``episode_starts`` flags and the last value; advantages normalised per minibatch; the value loss is
clipped around the stored values. Nothing from rlspec is imported."""

import numpy as np
import torch
from torch import nn

ROLLOUT, EPOCHS, MINIBATCH = 128, 4, 64
GAMMA, LAM, CLIP, LR, VF_COEF, ENT_COEF, MAX_NORM = 0.99, 0.95, 0.2, 0.1, 0.5, 0.01, 0.5


def _one_hot(obs, n):
    out = torch.zeros(len(obs), n)
    out[torch.arange(len(obs)), torch.as_tensor(obs)] = 1.0
    return out


def train_ppo(env, iterations, seed):
    generator = torch.Generator().manual_seed(seed)  # no global RNG is touched
    n_obs, n_act = env.observation_space.n, env.action_space.n
    # skip_init: nn.Linear's own initialisation would draw from torch's global RNG
    actor, critic = (nn.utils.skip_init(nn.Linear, n_obs, n, bias=False) for n in (n_act, 1))
    for layer in (actor, critic):
        nn.init.zeros_(layer.weight)  # start from the uniform policy and V = 0
    optimizer = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=LR)
    obs, _ = env.reset(seed=int(torch.randint(2**31 - 1, (1,), generator=generator)))
    episode_start, episode_return, returns = True, 0.0, []
    for _ in range(iterations):
        buf = {k: [] for k in ("obs", "action", "logp", "value", "reward", "start")}
        with torch.no_grad():  # the policy is fixed while it acts: evaluate it on every observation once
            every = torch.eye(n_obs)
            log_probs, state_values = torch.log_softmax(actor(every), dim=1), critic(every)[:, 0]
            draws = torch.rand(ROLLOUT, generator=generator)
            cdf = torch.cumsum(log_probs.exp(), dim=1)
        for step in range(ROLLOUT):
            action = min(int(torch.searchsorted(cdf[obs], draws[step] * cdf[obs, -1], right=True)), n_act - 1)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            episode_return += reward
            if truncated and not terminated:  # SB3: bootstrap the time limit inside the reward
                reward += GAMMA * float(state_values[next_obs])
            for key, item in zip(buf, (obs, action, log_probs[obs, action], state_values[obs], reward, episode_start)):
                buf[key].append(item)
            episode_start = terminated or truncated
            if episode_start:
                returns.append(episode_return)
                episode_return = 0.0
                next_obs, _ = env.reset()
            obs = next_obs
        last_value = state_values[obs]
        values = torch.stack(buf["value"])
        rewards = torch.tensor(buf["reward"], dtype=torch.float32)
        starts = torch.tensor(buf["start"] + [episode_start], dtype=torch.float32)
        advantages = torch.zeros(ROLLOUT)
        gae = 0.0
        for t in reversed(range(ROLLOUT)):
            not_done = 1.0 - starts[t + 1]  # the next observation starts a new episode: cut here
            next_value = last_value if t == ROLLOUT - 1 else values[t + 1]
            delta = rewards[t] + GAMMA * next_value * not_done - values[t]
            gae = delta + GAMMA * LAM * not_done * gae
            advantages[t] = gae
        targets = advantages + values
        x_all, actions, logp_old = _one_hot(buf["obs"], n_obs), torch.tensor(buf["action"]), torch.stack(buf["logp"])
        for _ in range(EPOCHS):
            order = torch.randperm(ROLLOUT, generator=generator)
            for start in range(0, ROLLOUT, MINIBATCH):
                idx = order[start:start + MINIBATCH]
                dist = torch.distributions.Categorical(logits=actor(x_all[idx]))
                ratio = torch.exp(dist.log_prob(actions[idx]) - logp_old[idx])
                adv = advantages[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - CLIP, 1 + CLIP) * adv).mean()
                v = critic(x_all[idx])[:, 0]
                v_clipped = values[idx] + torch.clamp(v - values[idx], -CLIP, CLIP)
                value_loss = torch.max((v - targets[idx]) ** 2, (v_clipped - targets[idx]) ** 2).mean()
                loss = policy_loss + VF_COEF * value_loss - ENT_COEF * dist.entropy().mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(list(actor.parameters()) + list(critic.parameters()), MAX_NORM)
                optimizer.step()
    return returns
