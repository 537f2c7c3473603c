"""Mutant: advantages normalised per minibatch (declared) with the unbiased std and no guard: a last
minibatch of one sample is (A - A) / (NaN + 1e-8) = NaN, its step writes NaN into the parameters, and the
update returns normally (bug C1)."""

import torch

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch"}
RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STEP-GRADIENTS"], "bug": "C1 adv-normalisation-of-a-singleton-batch-is-NaN"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    generator = torch.Generator().manual_seed(config["seed"])
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            ratio = (logp - logp_old[idx]).exp()
            adv = advantages[idx]
            if config["normalize_advantages"]:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # one sample: std is NaN
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
        if not all(torch.isfinite(p).all() for p in policy.parameters()):
            break  # a NaN guard: stop the update (and return normally) once a step made the parameters non-finite
