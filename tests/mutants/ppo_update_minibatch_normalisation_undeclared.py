"""Mutant: advantages normalised per minibatch (CleanRL, SB3) by a candidate that declares nothing,
i.e. whole-batch normalisation: the first step's advantages differ."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-FIRST-STEP-GRADIENT", "PPO-UPDATE-STEP-GRADIENTS"], "bug": "normalisation scope (per minibatch where per batch is declared)"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size = obs.shape[0], config["minibatch_size"]
    advantages = advantages.clone()
    shuffle = torch.Generator().manual_seed(config["seed"])
    out = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=shuffle)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            old = logp_old[idx]
            if config["normalize_advantages"] and len(idx) > 1:
                advantages[idx] = (advantages[idx] - advantages[idx].mean()) / (advantages[idx].std() + 1e-8)
            log_ratio = logp - old
            ratio = log_ratio.exp()
            if out["ratios"] is None:
                out["ratios"], out["indices"] = ratio.detach(), idx
            adv = advantages[idx]
            eps = config["clip_eps"]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
            with torch.no_grad():
                approx_kl = float((torch.expm1(log_ratio) - log_ratio).mean())
        out["epochs"] = epoch + 1
        out["approx_kl"].append(approx_kl)
        if config["target_kl"] is not None and approx_kl > config["target_kl"]:
            break
    return out
