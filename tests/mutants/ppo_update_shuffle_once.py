"""Mutant: the batch is shuffled once, before the epochs, and every epoch visits the same minibatches in
the same order (the permutation drawn outside the epoch loop)."""

import numpy as np
import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-MINIBATCHES"], "bug": "minibatch order drawn once for the whole update instead of every epoch"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    order = torch.from_numpy(np.random.permutation(n))  # drawn once
    for epoch in range(config["epochs"]):
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            ratio = (logp - logp_old[idx]).exp()
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
