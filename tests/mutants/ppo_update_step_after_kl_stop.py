"""Mutant: the KL test sets a flag after the epoch, but the loop reads it only after the next minibatch's
step: one more optimizer step follows the stop (bug C12's "over-step")."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-KL-EARLY-STOP"], "bug": "C12 kl-early-stop-on-wrong-quantity-or-at-wrong-time (a step after the stop)"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = torch.Generator().manual_seed(config["seed"])
    stop = False
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = log_ratio.exp()
            with torch.no_grad():
                approx_kl = float((torch.expm1(log_ratio) - log_ratio).mean())
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
            if stop:  # read after the step
                return
        stop = config["target_kl"] is not None and approx_kl > config["target_kl"]
