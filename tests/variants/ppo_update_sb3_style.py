"""Correct variant: a PPO update in Stable-Baselines3's shape (PPO.train): evaluate_actions, advantages
normalised per minibatch (skipped for one sample), MSE value loss without clipping (clip_range_vf None,
the default), and the KL checked before every optimizer step against 1.5 * target_kl, ending all epochs.
Its conventions are declared."""

import torch
import torch.nn.functional as F

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch", "kl_stop": "minibatch", "kl_stop_factor": 1.5, "value_clipping": "none"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    clip_range = config["clip_eps"]
    generator = torch.Generator().manual_seed(config["seed"])
    first = {}
    approx_kl_divs, epochs_with_steps = [], 0
    continue_training = True
    for epoch in range(config["epochs"]):
        stepped = False
        indices = torch.randperm(obs.shape[0], generator=generator)
        for start in range(0, obs.shape[0], config["minibatch_size"]):
            batch = indices[start : start + config["minibatch_size"]]
            values, log_prob, entropy = policy.evaluate_actions(obs[batch], actions[batch])
            adv = advantages[batch]
            if config["normalize_advantages"] and len(adv) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            ratio = torch.exp(log_prob - logp_old[batch])
            if not first:
                first = {"ratios": ratio.detach().clone(), "indices": batch.clone()}
            policy_loss_1 = adv * ratio
            policy_loss_2 = adv * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
            policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean()
            value_loss = F.mse_loss(returns[batch], values)
            entropy_loss = -torch.mean(entropy)
            loss = policy_loss + config["ent_coef"] * entropy_loss + config["vf_coef"] * value_loss

            with torch.no_grad():
                log_ratio = log_prob - logp_old[batch]
                approx_kl_div = torch.mean((torch.exp(log_ratio) - 1) - log_ratio).item()
                approx_kl_divs.append(approx_kl_div)
            if config["target_kl"] is not None and approx_kl_div > 1.5 * config["target_kl"]:
                continue_training = False
                break

            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
            stepped = True
        epochs_with_steps += stepped
        if not continue_training:
            break
    return {**first, "approx_kl": approx_kl_divs, "epochs": epochs_with_steps}
