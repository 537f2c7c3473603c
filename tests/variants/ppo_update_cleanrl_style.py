"""Correct variant: a PPO update in CleanRL's shape (ppo_continuous_action.py): the distribution from
policy(obs) with the Gaussian log-prob summed over dimensions, advantages normalised per minibatch,
the value loss clipped against the stored values by clip_eps with a 0.5 factor (clip_vloss), and the KL checked once per
epoch on the last minibatch's approx_kl. Its conventions are declared."""

import torch
from torch import nn

RLSPEC_CONVENTIONS = {"advantage_normalization": "minibatch", "value_loss_factor": 0.5, "value_clipping": "clip_eps"}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    b_inds = torch.arange(obs.shape[0])
    generator = torch.Generator().manual_seed(config["seed"])
    diagnostics = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    clip_coef = config["clip_eps"]
    for epoch in range(config["epochs"]):
        b_inds = b_inds[torch.randperm(len(b_inds), generator=generator)]
        for start in range(0, obs.shape[0], config["minibatch_size"]):
            mb_inds = b_inds[start : start + config["minibatch_size"]]
            dist, newvalue = policy(obs[mb_inds])
            if policy.kind == "gaussian":
                newlogprob, entropy = dist.log_prob(actions[mb_inds]).sum(1), dist.entropy().sum(1)
            else:
                newlogprob, entropy = dist.log_prob(actions[mb_inds]), dist.entropy()
            logratio = newlogprob - logp_old[mb_inds]
            ratio = logratio.exp()
            if diagnostics["ratios"] is None:
                diagnostics["ratios"], diagnostics["indices"] = ratio.detach().clone(), mb_inds.clone()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()

            mb_advantages = advantages[mb_inds]
            if config["normalize_advantages"] and len(mb_inds) > 1:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()

            v_loss_unclipped = (newvalue - returns[mb_inds]) ** 2
            v_clipped = values_old[mb_inds] + torch.clamp(newvalue - values_old[mb_inds], -clip_coef, clip_coef)
            v_loss_clipped = (v_clipped - returns[mb_inds]) ** 2
            v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()

            loss = pg_loss - config["ent_coef"] * entropy.mean() + v_loss * config["vf_coef"]
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), config["max_grad_norm"])
            optimizer.step()
        diagnostics["epochs"] += 1
        diagnostics["approx_kl"].append(float(approx_kl))
        if config["target_kl"] is not None and approx_kl > config["target_kl"]:
            break
    return diagnostics
