"""Proximal Policy Optimisation with the clipped surrogate (Schulman et al. 2017, arXiv:1707.06347
§3-5; the implementation details of Huang et al. 2022).

    r_t      = exp(log pi(a_t|s_t) - log pi_old(a_t|s_t))                          ratio, in log space
    L_clip   = -mean_t min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)                policy loss (minimised)
    L_value  = mean_t (V(s_t) - R_t)^2                                              plain value loss
             = mean_t max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)    clipped (PPO2's max form)
    L_ent    = -c_e mean_t H[pi(.|s_t)]                                             entropy bonus
    A_norm   = (A - mean A) / (std A + 1e-8),  std with ddof = 1                    advantage normalisation
    KL_hat   = mean_t (r_t - 1 - log r_t)                                           k3: estimates KL(old || new)

One update (Schulman et al. 2017, Algorithm 1): normalise the advantages once over the batch, then for each epoch
shuffle the batch, and for each minibatch take one optimizer step on
L_clip + c_v L_value + L_ent with the gradient clipped to a global norm; after each epoch stop if
the last minibatch's KL_hat (measured before its step) exceeds the target.

Conventions this reference uses where libraries differ (the clauses take them as declared
parameters): no 0.5 factor on the squared error, ddof = 1 and eps = 1e-8 added to the std,
whole-batch normalisation, symmetric eps, no dual clip, KL checked after each epoch.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical, Normal


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    """Clipped surrogate loss; torch (B,) inputs -> scalar, differentiable in ``logp_new``."""
    ratio = torch.exp(logp_new - logp_old)  # (B,) exp of a difference: no overflow at logp ~ -1000
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -torch.min(unclipped, clipped).mean()  # the min: a pessimistic bound on the unclipped surrogate


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    """Squared error to the value targets; (B,) -> scalar. Clipped when ``old_values`` and ``clip_eps`` are given.

    The clipped form takes the larger of the two squared errors, so the clip can only remove the
    incentive to move V far from V_old, never the gradient that pulls V back towards the target.
    """
    unclipped = (values - returns) ** 2  # (B,)
    if old_values is None or clip_eps is None:
        return unclipped.mean()
    clipped_values = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)  # (B,)
    return torch.max(unclipped, (clipped_values - returns) ** 2).mean()


def normalize_advantages(advantages, ddof=1, eps=1e-8):
    """``(A - mean A) / (std_ddof A + eps)`` over the whole (B,) array (numpy or torch).

    The divisor ``max(B - ddof, 1)`` keeps a one-element batch finite: it comes out as 0, where an
    unguarded unbiased std would be 0/0 (bug C1).
    """
    centred = advantages - advantages.mean()  # (B,)
    variance = (centred**2).sum() / max(advantages.shape[0] - ddof, 1)
    return centred / (variance**0.5 + eps)


def ppo_entropy_loss(entropy, coef):
    """The entropy bonus as a term of the minimised loss: ``-coef * mean(H)``; (B,) -> scalar.

    ``entropy`` is the per-sample entropy, or its estimate ``-log pi(a|s)``; the minus sign makes
    gradient descent raise it.
    """
    return -coef * entropy.mean()


def ppo_kl_penalty_loss(logp_new, logp_old, advantages, kl, beta):
    """The adaptive-KL-penalty surrogate as a loss (Schulman et al. 2017, arXiv:1707.06347 §4, eq. 8):
    ``-mean(r A) + beta mean(KL)``, r = exp(logp_new - logp_old); torch (B,) inputs -> scalar.

    ``kl`` is KL(pi_old(.|s_t) || pi(.|s_t)) per sample, differentiable in the policy (exact over the
    actions for a categorical policy); ``beta`` is the coefficient, adapted between updates by
    ``rlspec.reference.kl.kl_coefficient_update``. Without the clip, the ratio term is TRPO's
    importance-sampled surrogate L^CPI; the penalty takes the place of its trust-region constraint.
    """
    ratio = torch.exp(logp_new - logp_old)  # (B,)
    return -(ratio * advantages).mean() + beta * kl.mean()


def approx_kl(log_ratio):
    """k3 estimate of KL(pi_old || pi) from samples of pi_old: ``mean(r - 1 - log r)``, r = exp(log_ratio).

    Every term is >= 0 (unlike k1 = -log r), so a batch whose sampled actions all gained probability
    still reports a positive KL. ``expm1`` keeps the small terms accurate.
    """
    return (torch.expm1(log_ratio) - log_ratio).mean()


class LinearActorCritic(nn.Module):
    """Actor and critic linear in the observation, for categorical or diagonal-Gaussian actions.

    ``kind = "categorical"``: logits = W obs over ``action_dim`` actions. ``kind = "gaussian"``: mean =
    W obs and a learned state-independent log-std per action dimension. value = v . obs.
    With one-hot observations this is a tabular policy, and every output row depends on its own
    observation only, bit for bit, whatever else is in the batch.

    ``policy(obs) -> (dist, values)``: ``Categorical``, or ``Normal`` with (B, D) parameters (per
    dimension: the joint log-prob is ``log_prob(actions).sum(-1)``). ``evaluate_actions(obs, actions)
    -> (values, log_prob, entropy)``, each (B,), joint over action dimensions.
    """

    def __init__(self, obs_dim, action_dim, kind="categorical"):
        super().__init__()
        if kind not in ("categorical", "gaussian"):
            raise ValueError(f"kind must be 'categorical' or 'gaussian', not {kind!r}")
        self.kind = kind
        self.actor = nn.Linear(obs_dim, action_dim, bias=False)
        self.critic = nn.Linear(obs_dim, 1, bias=False)
        if kind == "gaussian":
            self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, obs):
        out = self.actor(obs)  # (B, action_dim): logits or means
        values = self.critic(obs).squeeze(-1)  # (B,)
        if self.kind == "categorical":
            return Categorical(logits=out), values
        return Normal(out, self.log_std.exp().expand_as(out)), values

    def evaluate_actions(self, obs, actions):
        dist, values = self(obs)
        if self.kind == "categorical":
            return values, dist.log_prob(actions), dist.entropy()
        return values, dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)  # joint over dimensions


UPDATE_DEFAULTS = {
    "clip_eps": 0.2,
    "epochs": 4,
    "minibatch_size": 64,
    "vf_coef": 0.5,
    "ent_coef": 0.0,
    "max_grad_norm": 0.5,
    "target_kl": None,
    "normalize_advantages": True,
    "value_clip_eps": None,
    "seed": 0,
}


def ppo_update(policy, optimizer, obs, actions, logp_old, advantages, returns, values_old, config):
    """One PPO update on a collected batch; returns the protocol's (optional) diagnostics.

    obs (N, obs_dim), actions (N,) or (N, D), logp_old / advantages / returns / values_old (N,):
    the rollout as stored at collection time, fixed during the update. ``values_old`` centres the
    clipped value loss when ``config["value_clip_eps"]`` is not None. Returns ``ratios`` and
    ``indices`` of the first minibatch before any step, ``approx_kl`` per epoch (the value the early
    stop compared) and ``epochs`` run.
    """
    cfg = {**UPDATE_DEFAULTS, **config}
    logp_old, advantages, returns, values_old = logp_old.detach(), advantages.detach(), returns.detach(), values_old.detach()
    if cfg["normalize_advantages"]:
        advantages = normalize_advantages(advantages)  # once, over the whole batch
    n = obs.shape[0]
    shuffle = torch.Generator().manual_seed(int(cfg["seed"]))
    out = {"ratios": None, "indices": None, "approx_kl": [], "epochs": 0}
    for epoch in range(cfg["epochs"]):
        order = torch.randperm(n, generator=shuffle)  # (N,) a fresh shuffle every epoch
        for start in range(0, n, cfg["minibatch_size"]):
            idx = order[start : start + cfg["minibatch_size"]]  # (B,)
            values, logp, entropy = policy.evaluate_actions(obs[idx], actions[idx])  # current policy
            log_ratio = logp - logp_old[idx]  # (B,) against the stored log pi_old, never recomputed
            if out["ratios"] is None:  # before any step: exactly 1 when logp_old is this policy's
                out["ratios"], out["indices"] = log_ratio.detach().exp(), idx
            loss = (
                ppo_clip_loss(logp, logp_old[idx], advantages[idx], cfg["clip_eps"])
                + cfg["vf_coef"] * ppo_value_loss(values, returns[idx], values_old[idx], cfg["value_clip_eps"])
                + ppo_entropy_loss(entropy, cfg["ent_coef"])
            )
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), cfg["max_grad_norm"])  # one norm over all parameters
            optimizer.step()
            kl = float(approx_kl(log_ratio.detach()))  # this minibatch, measured before its step
        out["epochs"] = epoch + 1
        out["approx_kl"].append(kl)
        if cfg["target_kl"] is not None and kl > cfg["target_kl"]:
            break  # the policy has moved far enough from pi_old
    return out
