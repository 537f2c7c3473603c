"""Mutant: the epoch loop runs one pass too many (range(epochs + 1), a 1-based counter tested with <=)."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-MINIBATCHES"], "bug": "epochs off by one: epochs + 1 passes over the batch"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = torch.Generator().manual_seed(config["seed"])
    epoch = 1
    while epoch <= config["epochs"] + 1:
        order = torch.randperm(n, generator=generator)
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
        epoch += 1
