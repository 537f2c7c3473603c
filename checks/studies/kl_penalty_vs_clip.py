"""The adaptive KL penalty against the clip, on the gridworld.

Experiment. Two PPO variants trained per seed with the same rollouts (128 steps), GAE (gamma 0.99,
lambda 0.95), advantages normalised per batch, 4 epochs of minibatches of 64, Adam lr 0.1, value
coefficient 0.5, entropy coefficient 0.01, gradient norm 0.5, and no KL early stop in either (the
paper compares the objectives alone):

* *clip*: the protocol's ``ppo_update`` (the candidate's, or the reference's), clip eps 0.2;
* *KL penalty*: the surrogate ``-mean(r A) + beta mean KL(pi_old(.|s) || pi(.|s))`` with the KL exact
  over the actions (``reference.ppo.ppo_kl_penalty_loss``); after each update d = the exact mean KL
  over the batch's states, and beta <- ``kl_coefficient_update(beta, d, d_targ)`` (the candidate's,
  or the reference's): 2 beta above 1.5 d_targ, beta / 2 below d_targ / 1.5. d_targ = 0.01 and
  beta_0 = 1, the paper's best adaptive setting and its starting value.

The final return is the exact expected return of the policy after the last update (dynamic
programming, 50-step time limit); the learning curve and every update's exact KL are kept.

Claims (Schulman et al. 2017, arXiv:1707.06347 §4 and §6.1, Table 1):

1. the beta trace follows the adaptive rule on every update;
2. with it the KL is rarely far from its target ("we occasionally see policy updates where the KL
   divergence is significantly different from d_targ, however, these are rare, and beta quickly
   adjusts"): after a burn-in of 5 updates, fewer than 20% of updates have d outside [d_targ / 2, 2 d_targ];
3. the clipped objective does at least as well as the adaptive KL penalty (Table 1: 0.82 against
   0.74 for the best adaptive setting): mean final return of clip minus penalty >= 0, paired by seed.
"""

from __future__ import annotations


import numpy as np
import torch

from ...reference.ppo import normalize_advantages, ppo_entropy_loss, ppo_kl_penalty_loss, ppo_value_loss
from . import _harness as H
from ._core import Claim, Table, call_op, fmt_mean, mean_se, sign_flip_p

NAME = "kl-penalty-vs-clip"
TITLE = "adaptive-KL-penalty PPO against clipped PPO on the gridworld: return, KL per update, beta trace"
ILLUSTRATES = {"chapter": "kl", "clauses": ["KL-ADAPTIVE-PENALTY", "PPO-CLIP-LOSS-VALUE", "PPO-UPDATE-KL-EARLY-STOP"]}
SOURCES = ["Schulman, Wolski, Dhariwal, Radford & Klimov, Proximal Policy Optimization Algorithms, arXiv:1707.06347, §4 (adaptive KL penalty coefficient), §6.1 and Table 1 (clip eps = 0.2: 0.82; best adaptive KL, d_targ = 0.01: 0.74)"]
OPERATIONS = ("ppo_update", "kl_coefficient_update")
SEEDS = {"default": 16, "small": 5}
MIN_SEEDS = 5
SIZES = {"default": {"iterations": 20}, "small": {"iterations": 6}}
TARGET = 0.01
BETA0 = 1.0
BURN_IN = 5
FAR = 2.0  # "significantly different from d_targ": outside [d_targ / FAR, FAR d_targ]
RARE = 0.2  # ... on fewer than this fraction of the updates
CLIP_CONFIG = {**H.UPDATE_CONFIG, "target_kl": None}
ALPHA = 0.05


def settings(size: dict) -> dict:
    return {"iterations": size["iterations"], "clip_config": CLIP_CONFIG, "kl_target": TARGET, "beta_0": BETA0,
            "burn_in": BURN_IN, "lr": H.TRAINER.lr, "rollout_steps": H.TRAINER.rollout_steps}


def kl_penalty_update(learner: H.Learner, batch: H.Batch, beta: float, seed: int) -> None:
    """One update on the KL-penalised surrogate: the epochs, minibatches, value and entropy terms and
    gradient clipping of the clipped update, only the policy term changed (arXiv:1707.06347 eq. 8)."""
    cfg = CLIP_CONFIG
    policy, optimizer = learner.policy, learner.optimizer
    adv = normalize_advantages(batch.advantages)
    log_old = torch.from_numpy(H.log_policy(batch.W_old)[batch.states])  # (T, A) log pi_old(.|s_t)
    shuffle = torch.Generator().manual_seed(seed)
    T = len(batch.states)
    for _ in range(cfg["epochs"]):
        order = torch.randperm(T, generator=shuffle)
        for start in range(0, T, cfg["minibatch_size"]):
            idx = order[start:start + cfg["minibatch_size"]]
            values, logp, entropy = policy.evaluate_actions(batch.obs[idx], batch.actions[idx])
            log_new = torch.log_softmax(policy.actor(batch.obs[idx]), dim=-1)  # (B, A)
            kl = (log_old[idx].exp() * (log_old[idx] - log_new)).sum(-1)  # (B,) exact KL(pi_old || pi)
            loss = (ppo_kl_penalty_loss(logp, batch.logp_old[idx], adv[idx], kl, beta)
                    + cfg["vf_coef"] * ppo_value_loss(values, batch.returns[idx]) + ppo_entropy_loss(entropy, cfg["ent_coef"]))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(policy.parameters()), cfg["max_grad_norm"])
            optimizer.step()


def _one_seed(ops: dict, seed: int, iterations: int) -> dict:
    out = {}
    for arm in ("clip", "penalty"):
        learner = H.new_learner(seed)
        beta, betas, kls, returns = BETA0, [BETA0], [], [H.episode_return(learner)]
        for _ in range(iterations):
            batch = H.collect(learner)
            if arm == "clip":
                H.run_update(ops["ppo_update"], learner, batch, {**CLIP_CONFIG, "seed": seed})
            else:
                kl_penalty_update(learner, batch, beta, seed)
            d = H.exact_kl(batch.W_old, learner.W, batch.states)
            kls.append(d)
            if arm == "penalty":
                beta = float(call_op("kl_coefficient_update", ops["kl_coefficient_update"], beta, d, TARGET))
                betas.append(beta)
            returns.append(H.episode_return(learner))
        out[arm] = {"kl": kls, "return": returns, "final_return": returns[-1]}
        if arm == "penalty":
            out[arm]["beta"] = betas
    return out


def measure(ops: dict, seeds: int, size: dict) -> dict:
    runs = [_one_seed(ops, seed, size["iterations"]) for seed in range(seeds)]
    return {arm: {key: [r[arm][key] for r in runs] for key in runs[0][arm]} for arm in ("clip", "penalty")}


def adaptive_rule(beta: float, d: float, target: float = TARGET) -> float:
    """The paper's rule (both inequalities strict), to check a beta trace against."""
    return 2.0 * beta if d > 1.5 * target else beta / 2.0 if d < target / 1.5 else beta


def claims(m: dict) -> list[Claim]:
    src = SOURCES[0]
    wrong = []
    for seed, (betas, kls) in enumerate(zip(m["penalty"]["beta"], m["penalty"]["kl"])):
        for k, (b, d, nxt) in enumerate(zip(betas, kls, betas[1:])):
            if nxt != adaptive_rule(b, d):
                wrong.append(f"seed {seed} update {k + 1}: beta {b:g}, d = {d:.3g} -> {nxt:g}, rule gives {adaptive_rule(b, d):g}")
    n = sum(len(b) - 1 for b in m["penalty"]["beta"])
    out = [Claim("beta-rule", "beta follows the adaptive rule: doubled above 1.5 d_targ, halved below d_targ / 1.5", src,
                 "every update of every seed: beta_next == rule(beta, d) exactly", not wrong and n > 0,
                 (f"{len(wrong)} of {n} updates off the rule, first: {wrong[0]}" if wrong else f"all {n} updates follow the rule")
                 + f"; beta ranged {min(min(b) for b in m['penalty']['beta']):g} .. {max(max(b) for b in m['penalty']['beta']):g}")]
    ratios = np.concatenate([np.asarray(k[BURN_IN:]) / TARGET for k in m["penalty"]["kl"]])
    far = float(np.mean((ratios > FAR) | (ratios < 1 / FAR))) if len(ratios) else 1.0
    band = float(np.mean((ratios <= 1.5) & (ratios >= 1 / 1.5))) if len(ratios) else 0.0
    clip_ratios = np.concatenate([np.asarray(k[BURN_IN:]) / TARGET for k in m["clip"]["kl"]])
    out.append(Claim("kl-near-target", "with the adaptive beta the KL is rarely far from its target", src,
                     f"after {BURN_IN} updates, the fraction of penalty updates with d outside [d_targ / {FAR:g}, {FAR:g} d_targ] is < {RARE}",
                     len(ratios) > 0 and far < RARE,
                     f"{far:.0%} of {len(ratios)} updates outside, {band:.0%} inside the rule's dead band [d_targ / 1.5, 1.5 d_targ]; "
                     f"median d / d_targ {np.median(ratios):.3g} (the clipped update's: {np.median(clip_ratios):.3g})"))
    diff = np.asarray(m["clip"]["final_return"]) - np.asarray(m["penalty"]["final_return"])
    mean, se = mean_se(diff)
    p = sign_flip_p(diff)
    out.append(Claim("clip-not-worse", "the clipped objective does at least as well as the adaptive KL penalty", src,
                     "mean over seeds of final return (clip) - final return (penalty) >= 0, paired by seed (its one-sided sign-flip p-value "
                     "for > 0 is reported, not required)", mean >= 0,
                     f"clip {fmt_mean(m['clip']['final_return'])}, penalty {fmt_mean(m['penalty']['final_return'])}, "
                     f"difference {mean:.3g} ± {se:.2g}, p = {p:.2g}"))
    return out


def table(by_subject: dict) -> Table:
    rows = []
    for subject, m in by_subject.items():
        for arm in ("clip", "penalty"):
            r = m[arm]
            kl = np.asarray(r["kl"])
            ret = np.asarray(r["return"])
            mean, se = mean_se(r["final_return"])
            beta = np.asarray(r["beta"]) if "beta" in r else None
            rows.append((subject, arm, mean, se, float(ret.mean()), float(np.median(kl)), float(kl.max()),
                         "-" if beta is None else float(np.median(beta[:, -1]))))
    return Table(("subject", "objective", "final return", "s.e.", "mean return over training", "median KL per update",
                  "max KL", "final beta (median)"), tuple(rows))


def _draw(axes, by_subject):
    from ._plot import STYLE, label

    left, middle, right = axes
    for subject, m in by_subject.items():
        st = STYLE[subject]
        for arm, colour in (("clip", "C0"), ("penalty", "C3")):
            ret, kl = np.asarray(m[arm]["return"]), np.asarray(m[arm]["kl"])
            left.plot(np.arange(ret.shape[1]), ret.mean(axis=0), color=colour, ms=2, label=label(subject, arm, by_subject), **st)
            middle.semilogy(np.arange(1, kl.shape[1] + 1), np.median(kl, axis=0), color=colour, ms=2, label=label(subject, arm, by_subject), **st)
        beta = np.asarray(m["penalty"]["beta"])
        right.semilogy(np.arange(beta.shape[1]), np.exp(np.log(beta).mean(axis=0)), color="C3", ms=2, label=label(subject, "beta (geometric mean)", by_subject), **st)
    for edge in (TARGET / 1.5, TARGET * 1.5):
        middle.axhline(edge, color="0.6", lw=0.7, ls=":")
    middle.axhline(TARGET, color="0.4", lw=0.8, ls="--", label=f"d_targ {TARGET}")
    left.set(title="exact expected return (50-step limit)", xlabel="update", ylabel="mean over seeds")
    middle.set(title="exact KL(pi_old || pi) per update", xlabel="update", ylabel="median over seeds (dotted: the rule's band)")
    right.set(title="penalty coefficient beta", xlabel="update", ylabel="beta")
    for ax in axes:
        ax.legend(fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, columns=3, width=11.0, claims=claims)
