"""Stale log pi_old: recomputing it from the current network turns PPO into vanilla policy gradient.

Experiment. Per seed, the PPO harness trains a few iterations on the gridworld with the
protocol's ``ppo_update``, then collects one more batch and updates three copies of the same
policy on it, each with a fresh Adam (lr 0.1), 4 epochs of minibatches of 64, the advantages
normalised once over the batch, no value or entropy term and no gradient clipping (``vf_coef`` 0,
``ent_coef`` 0, ``max_grad_norm`` 1e6), so only the policy-gradient part is compared:

* *stored*: one ``ppo_update`` call with the log pi_old stored at collection time (correct);
* *recomputed*: the bug. Before every minibatch step log pi_old is recomputed from the current
  network, which is what a learner does when it evaluates "old" log-probabilities inside the update
  loop. It is run as one ``ppo_update`` call per minibatch (``epochs`` 1, the minibatch's rows)
  whose ``logp_old`` is the current policy's own;
* *vanilla PG*: plain REINFORCE steps, loss ``-mean(log pi(a|s) A)`` (``reinforce_loss``), on the same
  minibatches in the same order.

Claims (PPO, Schulman et al. 2017, arXiv:1707.06347 §3: r(theta) = pi_theta / pi_theta_old, and
without the clip "maximization of L^CPI would lead to an excessively large policy update"; Huang et
al., "The 37 Implementation Details of PPO", ICLR Blog Track 2022: clipfrac as a debug variable):

1. with log pi_old recomputed every ratio is 1, so the clip fraction is pinned at 0 on every step;
2. the recomputed update equals vanilla policy-gradient steps (the same parameters, to rounding);
3. with log pi_old stored the ratios reach the clip: the clip fraction of the last epoch is above 0;
4. without the clip the policy moves further: KL(pi_old || pi_new) is larger recomputed than stored.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ...reference.ppo import normalize_advantages
from . import _harness as H
from ._core import Claim, Table, call_op, fmt_mean, mean_se, sign_flip_p

NAME = "stale-logp-old"
TITLE = "recomputed log pi_old: ratios pinned at 1, clip fraction 0, the update a vanilla policy-gradient step"
ILLUSTRATES = {"chapter": "ppo", "clauses": ["PPO-UPDATE-STORED-LOGP-OLD", "PPO-UPDATE-FIRST-RATIOS-ONE", "PPO-FIRST-STEP-VANILLA-GRADIENT"]}
SOURCES = [
    "Schulman, Wolski, Dhariwal, Radford & Klimov, Proximal Policy Optimization Algorithms, arXiv:1707.06347, §3 (the ratio against theta_old; without a constraint L^CPI gives excessively large updates)",
    "Huang, Dossa, Raffin, Kanervisto & Wang, The 37 Implementation Details of Proximal Policy Optimization, ICLR Blog Track 2022 (log-probabilities stored at rollout time; clipfrac)",
]
OPERATIONS = ("ppo_update", "reinforce_loss")
SEEDS = {"default": 16, "small": 5}
MIN_SEEDS = 5  # a one-sided sign-flip test at 0.05 needs 2^-n < 0.05
SIZES = {"default": {"warmup": 5}, "small": {"warmup": 1}}
CONFIG = {**H.UPDATE_CONFIG, "vf_coef": 0.0, "ent_coef": 0.0, "max_grad_norm": 1e6, "target_kl": None, "normalize_advantages": False}
EPS = CONFIG["clip_eps"]
ALPHA = 0.05
RATIO_TOL = 1e-12  # exp(logp - logp) of one float64 evaluation is exactly 1; a separate forward pass differs by ulps
# The recomputed and vanilla updates compute the same gradient A/B per sample (d/dlogp exp(logp - sg(logp)) A
# = A exactly, exp(0) = 1) up to the order of a B-term mean: relative error ~ B u ~ 1e-14. Adam's step
# lr m/(sqrt(v) + 1e-8) moves at most lr |dg| / 1e-8 for a gradient error dg, so 8 steps stay below
# 8 x 0.1 x 1e-14 |g| / 1e-8 < 1e-6 |g|; the gradients here are below 1e-2, hence:
PARAMETER_TOL = 1e-8


def settings(size: dict) -> dict:
    return {"warmup_iterations": size["warmup"], "warmup_config": H.UPDATE_CONFIG, "update_config": CONFIG, "lr": H.TRAINER.lr}


def _fresh(learner: H.Learner, W0: dict) -> H.Learner:
    twin = copy.copy(learner)
    twin.policy = copy.deepcopy(learner.policy)
    twin.policy.load_state_dict(W0)
    twin.optimizer = H.RecordingAdam(list(twin.policy.parameters()), H.TRAINER.lr, twin.policy.actor.weight)
    return twin


def _one_seed(ops: dict, seed: int, warmup: int) -> dict:
    learner = H.new_learner(seed)
    for _ in range(warmup):
        H.run_update(ops["ppo_update"], learner, H.collect(learner), {**H.UPDATE_CONFIG, "seed": seed})
    batch = H.collect(learner)
    adv = normalize_advantages(batch.advantages)  # once over the batch, then fixed
    W0 = copy.deepcopy(learner.policy.state_dict())
    T, B = len(batch.states), CONFIG["minibatch_size"]
    shuffle = np.random.default_rng(seed + 10_000)
    order = [torch.from_numpy(shuffle.permutation(T)) for _ in range(CONFIG["epochs"])]
    minibatches = [o[i:i + B] for o in order for i in range(0, T, B)]

    stored = _fresh(learner, W0)
    H.run_update(ops["ppo_update"], stored, batch, {**CONFIG, "seed": seed}, advantages=adv)
    stored_W = stored.optimizer.before_step + [stored.W]

    recomputed = _fresh(learner, W0)
    ratio_dev, ratio_cf = [], []
    for idx in minibatches:
        with torch.no_grad():
            _, logp_now, _ = recomputed.policy.evaluate_actions(batch.obs[idx], batch.actions[idx])  # the bug
        rows = {k: v[idx] for k, v in batch.arguments().items()}
        rows.update(logp_old=logp_now, advantages=adv[idx])
        before = recomputed.W
        d = H.run_update(ops["ppo_update"], recomputed, batch, {**CONFIG, "epochs": 1, "minibatch_size": len(idx), "seed": seed}, **rows)
        if "ratios" in d:
            r = H.as_numpy(d["ratios"])
        else:  # not returned: the minibatch's ratios at the parameters its one step was taken at
            r = np.exp(H.log_policy(before)[batch.states[idx.numpy()], batch.actions.numpy()[idx.numpy()]] - logp_now.numpy())
        ratio_dev.append(float(np.max(np.abs(r - 1.0))))
        ratio_cf.append(float(np.mean(np.abs(r - 1.0) > EPS)))
    recomputed_W = recomputed.optimizer.before_step + [recomputed.W]

    vanilla = _fresh(learner, W0)
    for idx in minibatches:
        _, logp, _ = vanilla.policy.evaluate_actions(batch.obs[idx], batch.actions[idx])
        loss = call_op("reinforce_loss", ops["reinforce_loss"], logp, adv[idx].clone())
        vanilla.optimizer.zero_grad()
        loss.backward()
        vanilla.optimizer.step()
    vanilla_W = vanilla.optimizer.before_step + [vanilla.W]

    steps = len(minibatches)
    per_epoch = steps // CONFIG["epochs"]
    cf_stored = [H.clip_fraction(W, batch, EPS) for W in stored_W[:-1]]
    return {
        "clip_fraction_stored": cf_stored,
        "clip_fraction_stored_last_epoch": float(np.mean(cf_stored[-per_epoch:])),
        "clip_fraction_recomputed": ratio_cf, "ratio_deviation_recomputed": max(ratio_dev),
        "kl_stored": [H.exact_kl(batch.W_old, W, batch.states) for W in stored_W],
        "kl_recomputed": [H.exact_kl(batch.W_old, W, batch.states) for W in recomputed_W],
        "kl_vanilla": [H.exact_kl(batch.W_old, W, batch.states) for W in vanilla_W],
        "vanilla_difference": float(np.max(np.abs(recomputed_W[-1] - vanilla_W[-1]))),
        "stored_vs_vanilla_difference": float(np.max(np.abs(stored_W[-1] - vanilla_W[-1]))),
        "return_before": H.episode_return(batch.W_old), "return_stored": H.episode_return(stored_W[-1]),
        "return_recomputed": H.episode_return(recomputed_W[-1]),
        "steps": len(stored_W) - 1,
    }


def measure(ops: dict, seeds: int, size: dict) -> dict:
    runs = [_one_seed(ops, seed, size["warmup"]) for seed in range(seeds)]
    return {key: [r[key] for r in runs] for key in runs[0]}


def claims(m: dict) -> list[Claim]:
    dev = max(m["ratio_deviation_recomputed"])
    cf = max(max(c) for c in m["clip_fraction_recomputed"])
    out = [Claim("ratios-one", "with log pi_old recomputed every ratio is 1 and the clip fraction is 0 on every step", SOURCES[0],
                 f"over every minibatch step of every seed: ppo_update's reported ratios satisfy |r - 1| <= {RATIO_TOL:g} and "
                 "their clip fraction is exactly 0", dev <= RATIO_TOL and cf == 0, f"largest |r - 1| {dev:.3g}, largest clip fraction {cf:g}")]
    diff = max(m["vanilla_difference"])
    contrast = min(m["stored_vs_vanilla_difference"])
    out.append(Claim("equals-vanilla-pg", "the recomputed update equals vanilla policy-gradient steps on the same minibatches", SOURCES[0],
                     f"max |W_recomputed - W_vanilla| over every logit of every seed <= {PARAMETER_TOL:g} (derivation beside PARAMETER_TOL)",
                     diff <= PARAMETER_TOL, f"largest difference {diff:.3g} (the stored update differs from vanilla PG by at least {contrast:.3g})"))
    last = np.asarray(m["clip_fraction_stored_last_epoch"])
    p = sign_flip_p(last)
    out.append(Claim("stored-clips", "with log pi_old stored the ratios reach the clip: the last epoch's clip fraction is above 0", SOURCES[1],
                     f"per-seed clip fraction of the stored update's last epoch (the batch's ratios against the stored log pi_old) > 0: "
                     f"one-sided sign-flip test, p < {ALPHA}",
                     p < ALPHA, f"clip fraction {fmt_mean(last)}, p = {p:.2g}"))
    kl_s = np.array([k[-1] for k in m["kl_stored"]])
    kl_r = np.array([k[-1] for k in m["kl_recomputed"]])
    p = sign_flip_p(np.log(kl_r) - np.log(kl_s))
    out.append(Claim("moves-further", "without the clip the policy moves further: KL(pi_old || pi_new) is larger recomputed than stored", SOURCES[0],
                     f"paired over seeds, log KL_recomputed - log KL_stored > 0: one-sided sign-flip test, p < {ALPHA}", p < ALPHA,
                     f"KL stored {fmt_mean(kl_s)}, recomputed {fmt_mean(kl_r)}, ratio x{float(np.exp(np.mean(np.log(kl_r / kl_s)))):.3g} "
                     f"(geometric mean), p = {p:.2g}"))
    return out


def table(by_subject: dict) -> Table:
    rows = []
    for subject, m in by_subject.items():
        per_epoch = m["steps"][0] // CONFIG["epochs"]
        for arm in ("stored", "recomputed", "vanilla"):
            kl = np.array([k[-1] for k in m[f"kl_{arm}"]])
            if arm == "stored":
                cf, dev = m["clip_fraction_stored_last_epoch"], "-"
                ret = m["return_stored"]
            elif arm == "recomputed":
                cf = [float(np.mean(c[-per_epoch:])) for c in m["clip_fraction_recomputed"]]
                dev, ret = f"{max(m['ratio_deviation_recomputed']):.3g}", m["return_recomputed"]
            else:
                cf, dev, ret = None, "-", None
            diff = {"stored": max(m["stored_vs_vanilla_difference"]), "recomputed": max(m["vanilla_difference"]), "vanilla": 0.0}[arm]
            rows.append((subject, arm, "-" if cf is None else mean_se(cf)[0], dev, float(kl.mean()), diff,
                         "-" if ret is None else float(np.mean(ret)), float(np.mean(m["return_before"]))))
    return Table(("subject", "log pi_old", "clip fraction, last epoch", "max |r - 1|", "KL(old||new)", "max |W - W_vanilla|",
                  "return after", "return before"), tuple(rows))


def _draw(axes, by_subject):
    from ._plot import STYLE, label

    left, right = axes
    for subject, m in by_subject.items():
        st = STYLE[subject]
        for key, colour, text in (("clip_fraction_stored", "C0", "stored"), ("clip_fraction_recomputed", "C3", "recomputed")):
            y = np.asarray(m[key])
            left.plot(np.arange(1, y.shape[1] + 1), y.mean(axis=0), color=colour, ms=3, label=label(subject, text, by_subject), **st)
        for key, colour, text in (("kl_stored", "C0", "stored"), ("kl_recomputed", "C3", "recomputed"), ("kl_vanilla", "C2", "vanilla PG")):
            y = np.asarray(m[key])[:, 1:]
            right.semilogy(np.arange(1, y.shape[1] + 1), y.mean(axis=0), color=colour, ms=3 if text != "vanilla PG" else 6,
                           mfc="none" if text == "vanilla PG" else None, label=label(subject, text, by_subject), **st)
    left.set(title=f"clip fraction before each step (|r - 1| > {EPS})", xlabel="optimizer step (4 epochs x 2 minibatches)",
             ylabel="mean over seeds")
    right.set(title="exact KL(pi_old || pi) after each step", xlabel="optimizer step", ylabel="mean over seeds (log)")
    for ax in axes:
        ax.legend(fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, claims=claims)
