"""Mutant: the KL early stop compares the mean of the epoch's minibatch KLs while the candidate declares
nothing (the contract's default is the last minibatch's KL): the declaration and the code disagree."""

import numpy as np
import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-KL-EARLY-STOP"], "bug": "C12 kl-early-stop-on-wrong-quantity-or-at-wrong-time (epoch mean, last minibatch declared)"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = torch.Generator().manual_seed(config["seed"])
    for epoch in range(config["epochs"]):
        kls = []
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = log_ratio.exp()
            kls.append(float((torch.expm1(log_ratio) - log_ratio).mean()))
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
        if config["target_kl"] is not None and np.mean(kls) > config["target_kl"]:
            break
