"""Mutant: the clipped value loss is centred on V_old recomputed with the network at the start of the
update instead of the values_old stored at collection (bug C9): the clip bounds the change from a value
the collector never predicted."""

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-VALUE-CLIPPING"], "bug": "C9 value-clip-against-recomputed-old-value"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    with torch.no_grad():
        _, values_old = policy(obs)  # recomputed, not the stored ones
    generator = torch.Generator().manual_seed(config["seed"])
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            ratio = (logp - logp_old[idx]).exp()
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = (values - returns[idx]) ** 2
            if config["value_clip_eps"] is not None:
                v_eps = config["value_clip_eps"]
                clipped = values_old[idx] + torch.clamp(values - values_old[idx], -v_eps, v_eps)
                value_loss = torch.max(value_loss, (clipped - returns[idx]) ** 2)
            loss = policy_loss + config["vf_coef"] * value_loss.mean() - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
