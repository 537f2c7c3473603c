"""Mutant: the gradient norm is clipped once per optimizer parameter group (actor and critic separately),
so the update's total norm can reach max_grad_norm times the square root of the number of groups and the
actor's share of the step changes."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STEP-GRADIENTS"], "bug": "gradient-norm clipping per parameter group instead of one global norm"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
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
            for group in optimizer.param_groups:  # one norm per group
                torch.nn.utils.clip_grad_norm_(group["params"], config["max_grad_norm"])
            optimizer.step()
