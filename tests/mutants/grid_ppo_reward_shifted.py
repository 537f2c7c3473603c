"""Mutant: the reference trainer, except that the rollout buffer stores, next to each action, the
reward that came *before* it (bug A2, openai/spinningup #50: r_{t-1} + gamma V_{t+1} - V_t). The
goal and pit rewards land on the first action of the next episode, so the learning signal says
nothing about which way to go; the episode returns it reports are still the env's."""

import numpy as np
import torch

from rlspec.reference import training as ref

RLSPEC_MUTANT = {"clauses": ["GRID-TRAIN-PPO-IMPROVES"], "bug": "A2 spinningup-ppo-reward-shifted-by-one"}


def _collect(env, logits, values, steps, rng, state):
    rollout = ref.collect_rollout(env, logits, values, steps, rng, state)
    shifted = np.concatenate([[state.get("previous_reward", 0.0)], rollout.rewards[:-1]])  # BUG: one step late
    state["previous_reward"] = float(rollout.rewards[-1])
    rollout.rewards = shifted
    return rollout


def train_ppo(env, iterations, seed):
    cfg = ref.PPOConfig()
    rng = np.random.default_rng(seed)
    logits = torch.zeros(env.observation_space.n, env.action_space.n, requires_grad=True)
    values = torch.zeros(env.observation_space.n, requires_grad=True)
    optimizer = ref.Adam([logits, values], lr=cfg.lr)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    state = {"obs": obs, "episode_return": 0.0, "returns": []}
    for _ in range(iterations):
        rollout = _collect(env, logits, values, cfg.rollout_steps, rng, state)
        ref.update_from_rollout(logits, values, optimizer, rollout, cfg, rng)
    return state["returns"]
