"""Correct variant: log-probabilities computed by hand from the policy's distribution parameters, the
categorical's logits re-normalised by log_softmax before the log-probability is read (one more rounding,
so log pi differs from the stored value by an ulp and the first ratios are 1 only to rounding) and the
Gaussian's density written out per dimension; the value loss clipped by clip_eps, the KL early stop and the diagnostics as CleanRL has them."""

import math

import torch

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch", "value_loss_factor": 0.5, "value_clipping": "clip_eps"}


def log_prob_and_entropy(policy, obs, actions):
    dist, values = policy(obs)
    if policy.kind == "categorical":
        logits = torch.log_softmax(dist.logits, dim=-1)  # already normalised: one more rounding
        logp = logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logits.exp() * logits).sum(-1)
        return logp, entropy, values
    mean, std = dist.mean, dist.stddev
    z = (actions - mean) / std
    logp = (-0.5 * z**2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
    return logp, entropy, values


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    generator = torch.Generator().manual_seed(config["seed"])
    out = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    for epoch in range(config["epochs"]):
        b_inds = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            mb = b_inds[start : start + size]
            logp, entropy, values = log_prob_and_entropy(policy, obs[mb], actions[mb])
            log_ratio = logp - logp_old[mb]
            ratio = log_ratio.exp()
            if out["ratios"] is None:
                out["ratios"], out["indices"] = ratio.detach().clone(), mb.clone()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - log_ratio).mean()
            adv = advantages[mb]
            if config["normalize_advantages"] and len(mb) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            policy_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps, 1 + eps)).mean()
            v_clipped = values_old[mb] + torch.clamp(values - values_old[mb], -eps, eps)  # clip_vloss, by clip_eps
            value_loss = 0.5 * torch.max((values - returns[mb]) ** 2, (v_clipped - returns[mb]) ** 2).mean()
            loss = policy_loss - config["ent_coef"] * entropy.mean() + config["vf_coef"] * value_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
        out["epochs"] += 1
        out["approx_kl"].append(float(approx_kl))
        if config["target_kl"] is not None and approx_kl > config["target_kl"]:
            break
    return out
