"""Correct variant: a minimal continuous-control update: normalisation over the whole batch
with the population std (std(unbiased=False)), 0.5 * MSE for the value, the joint log-prob and
entropy summed over action dimensions, and the KL early stop on the mean of the epoch's minibatch
KLs, no value clipping. Its conventions are declared."""

import torch
import torch.nn.functional as F

RLSPEC_CONVENTIONS = {"advantage_std_ddof": 0, "value_loss_factor": 0.5, "kl_stop_statistic": "epoch-mean", "value_clipping": "none"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    old_log_probs = logp_old.detach()
    advantages = advantages.detach()
    returns = returns.detach()
    if config["normalize_advantages"]:
        advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8)

    num_samples = obs.shape[0]
    generator = torch.Generator().manual_seed(config["seed"])
    metrics = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    for _ in range(config["epochs"]):
        permutation = torch.randperm(num_samples, generator=generator)
        epoch_kls = []
        for start in range(0, num_samples, config["minibatch_size"]):
            idx = permutation[start : start + config["minibatch_size"]]
            dist, values = policy(obs[idx])
            if policy.kind == "gaussian":
                new_log_probs = dist.log_prob(actions[idx]).sum(dim=-1)
                entropy = dist.entropy().sum(dim=-1).mean()
            else:
                new_log_probs = dist.log_prob(actions[idx])
                entropy = dist.entropy().mean()
            log_ratio = new_log_probs - old_log_probs[idx]
            ratio = log_ratio.exp()
            if metrics["ratios"] is None:
                metrics["ratios"], metrics["indices"] = ratio.detach(), idx
            unclipped = ratio * advantages[idx]
            clipped = torch.clamp(ratio, 1.0 - config["clip_eps"], 1.0 + config["clip_eps"]) * advantages[idx]
            policy_loss = -torch.min(unclipped, clipped).mean()
            value_loss = 0.5 * F.mse_loss(values, returns[idx])
            loss = policy_loss + config["vf_coef"] * value_loss - config["ent_coef"] * entropy

            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
            with torch.no_grad():
                epoch_kls.append(((ratio - 1.0) - log_ratio).mean())
        metrics["epochs"] += 1
        epoch_kl = torch.stack(epoch_kls).mean()
        metrics["approx_kl"].append(float(epoch_kl))
        if config["target_kl"] is not None and epoch_kl > config["target_kl"]:
            break
    return metrics
