"""Correct variant: the rollout is stored in float32 (as a rollout buffer that keeps float32 arrays
does), so logp_old, the advantages and the returns reach the update rounded to single precision while the
policy computes in the suite's precision. The ratios of the first minibatch are then 1 only to float32
rounding, and its k3 approximate KL is a second-order rounding term (about 1e-16, not 0): declared with
RLSPEC_PRECISION. It clips the value loss when config asks and returns the diagnostics, approx_kl included."""

import torch

RLSPEC_PRECISION = "float32"


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    dtype = logp_old.dtype
    stored = {name: x.detach().float().to(dtype) for name, x in
              (("logp_old", logp_old), ("advantages", advantages), ("returns", returns))}
    logp_old, advantages, returns = stored["logp_old"], stored["advantages"], stored["returns"]
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    n, size, eps = obs.shape[0], config["minibatch_size"], config["clip_eps"]
    generator = torch.Generator().manual_seed(config["seed"])
    out = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    for epoch in range(config["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            idx = order[start : start + size]
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            log_ratio = logp - logp_old[idx]
            ratio = log_ratio.exp()
            if out["ratios"] is None:
                out["ratios"], out["indices"] = ratio.detach().clone(), idx.clone()
            adv = advantages[idx]
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
            value_loss = (values - returns[idx]) ** 2
            if config["value_clip_eps"] is not None:  # clip_range_vf: the change from the stored values_old
                v_eps = config["value_clip_eps"]
                clipped = values_old[idx] + (values - values_old[idx]).clamp(-v_eps, v_eps)
                value_loss = torch.maximum(value_loss, (clipped - returns[idx]) ** 2)
            value_loss = value_loss.mean()
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
            with torch.no_grad():
                approx_kl = float(((ratio - 1) - log_ratio).mean())
        out["epochs"] = epoch + 1
        out["approx_kl"].append(approx_kl)
        if config["target_kl"] is not None and approx_kl > config["target_kl"]:
            break
    return out
