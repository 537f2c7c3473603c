"""Mutant: the clip taken in log space, the log-ratio clamped to (log(1 - eps), log(1 + eps)) as TorchRL's
ClipPPOLoss does (R45): for clip_eps > 1 the lower bound log(1 - eps) is NaN, the clamp returns NaN, the
pessimistic min (over a stacked pair) picks it, and the actor gets no gradient while the critic still learns."""

import math

import torch

RLSPEC_MUTANT = {"clauses": ["PPO-UPDATE-STORED-LOGP-OLD", "PPO-UPDATE-KL-EARLY-STOP"], "bug": "R45 torchrl-clipppoloss-nan-lower-bound-above-one"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size = obs.shape[0], config["minibatch_size"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    shuffle = torch.Generator().manual_seed(config["seed"])
    out = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    eps = config["clip_eps"]
    low = math.log1p(-eps) if eps < 1 else (-math.inf if eps == 1 else math.nan)  # torch's log1p(-eps): NaN above 1
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=shuffle)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = log_ratio.exp()
            if out["ratios"] is None:
                out["ratios"], out["indices"] = ratio.detach(), idx
            adv = advantages[idx]
            clipped = log_ratio.clamp(torch.tensor(low, dtype=log_ratio.dtype), torch.tensor(math.log1p(eps), dtype=log_ratio.dtype)).exp()
            # the pessimistic min over a stacked pair, as ClipPPOLoss takes it: min(dim) picks the NaN, and its
            # gradient goes to the clamped branch, which passes none
            policy_loss = -torch.stack([ratio * adv, clipped * adv], -1).min(-1).values.mean()
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
