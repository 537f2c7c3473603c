"""Mutant: log pi_old refreshed from the network at the start of every epoch (a "fresh old policy" per
pass over the data), so each epoch's ratios restart at 1 instead of measuring the distance from the
policy that collected the batch."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STEP-GRADIENTS"], "bug": "C7 old-logprob-recomputed (at each epoch's start)"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = torch.Generator().manual_seed(config["seed"])
    for epoch in range(config["epochs"]):
        if epoch > 0:
            with torch.no_grad():
                _, logp_old, _ = policy.evaluate_actions(obs, actions)  # the "old" policy is this epoch's start
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
