"""Mutant: declares advantage_normalization = "minibatch" (as SB3 and CleanRL do) but normalises the
advantages once over the whole batch: the declaration and the code disagree."""

import torch

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch"}
RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STEP-GRADIENTS"], "bug": "advantage normalisation over another scope than declared (batch, declared minibatch)"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # the whole batch
    generator = torch.Generator().manual_seed(config["seed"])
    for epoch in range(config["epochs"]):
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
