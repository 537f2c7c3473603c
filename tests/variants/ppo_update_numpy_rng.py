"""Correct variant: the minibatch order comes from NumPy's global generator (np.random.permutation, as
Stable-Baselines3's rollout buffer draws it), not from a torch generator seeded with config["seed"], and
the update returns nothing: the suite sees the order it used from its own module's forwards."""

import numpy as np
import torch

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch", "value_clipping": "none"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    for epoch in range(config["epochs"]):
        kls = []
        indices = np.random.permutation(n)
        for start in range(0, n, size):
            idx = torch.as_tensor(indices[start : start + size])
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = torch.exp(log_ratio)
            adv = advantages[idx]
            if config["normalize_advantages"] and len(idx) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            policy_loss = -torch.min(adv * ratio, adv * torch.clamp(ratio, 1 - eps, 1 + eps)).mean()
            value_loss = torch.nn.functional.mse_loss(values, returns[idx])
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            with torch.no_grad():
                kls.append(float((torch.exp(log_ratio) - 1 - log_ratio).mean()))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=config["max_grad_norm"])
            optimizer.step()
        if config["target_kl"] is not None and kls[-1] > config["target_kl"]:
            break
