"""Correct variant: each epoch splits a permutation into ceil(n / minibatch_size) minibatches whose sizes differ by
at most one (np.array_split, as skrl's PPO.update does), declared as minibatch_remainder = "balanced"; the
advantages are normalised over the whole batch once, before the epochs."""

import math

import numpy as np
import torch

RLSPEC_CONVENTIONS = {"minibatch_remainder": "balanced", "value_clipping": "none"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"] and n > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = np.random.default_rng(config["seed"])
    for epoch in range(config["epochs"]):
        kls = []
        for part in np.array_split(generator.permutation(n), math.ceil(n / size)):
            idx = torch.as_tensor(part)
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = torch.exp(log_ratio)
            adv = advantages[idx]
            policy_loss = -torch.min(adv * ratio, adv * torch.clamp(ratio, 1 - eps, 1 + eps)).mean()
            value_loss = torch.nn.functional.mse_loss(values, returns[idx])
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            with torch.no_grad():
                kls.append(float((torch.exp(log_ratio) - 1 - log_ratio).mean()))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=config["max_grad_norm"])
            optimizer.step()
        if config["target_kl"] is not None and kls[-1] > config["target_kl"]:
            break
