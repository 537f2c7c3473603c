"""Mutant: a single-file PPO update that never calls optimizer.zero_grad(): every backward adds to the
gradients of all earlier minibatches, so each step after the first applies the sum of every minibatch's
gradient so far. It returns nothing, as real update loops do."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STEP-GRADIENTS"], "bug": "gradients accumulate across minibatches: optimizer.zero_grad() missing"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    for epoch in range(config["epochs"]):
        order = torch.randperm(n)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            ratio = (logp - logp_old[idx]).exp()
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            loss.backward()  # no optimizer.zero_grad() before it
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
