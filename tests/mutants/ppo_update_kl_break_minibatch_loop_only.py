"""Mutant: tests each minibatch's KL before its step (declared kl_stop "minibatch"), but the ``break`` that
follows a firing test leaves only the minibatch loop: the epoch loop goes on, and every later epoch tests its
first minibatch again and steps while that minibatch's KL is below the target (skrl 2.1.1's PPO, bug R47)."""

import torch

RLSPEC_CONVENTIONS = {"kl_stop": "minibatch", "kl_stop_statistic": "last-minibatch"}
RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-KL-EARLY-STOP"], "bug": "R47 skrl-ppo-kl-stop-breaks-only-the-minibatch-loop"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    generator = torch.Generator().manual_seed(int(config["seed"]))
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            with torch.no_grad():
                approx_kl = float((torch.expm1(log_ratio) - log_ratio).mean())  # this minibatch, before its step
            if config["target_kl"] is not None and approx_kl > config["target_kl"]:
                break  # leaves the minibatch loop only: the next epoch tests again
            ratio = log_ratio.exp()
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = ((values - returns[idx]) ** 2).mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
