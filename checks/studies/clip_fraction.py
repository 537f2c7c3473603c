"""Clip fraction per epoch: how far extra epochs push pi away from pi_old.

Experiment. PPO on the gridworld with the reference trainer's settings (rollouts of 128 steps, GAE
gamma 0.99 lambda 0.95, minibatches of 64, Adam lr 0.1 on the tables, clip eps 0.2), the update
being the protocol's ``ppo_update`` with ``epochs`` K in {1, 4, 16} and no KL early stop, so every
epoch runs. Before every optimizer step the study evaluates the whole batch under the current actor
and counts the ratios outside [1 - eps, 1 + eps]; an epoch's clip fraction is the mean over its
steps, averaged over the iterations of the run with one seed. The exact KL(pi_old || pi) over the batch's
states after each epoch and the candidate's own ``approx_kl`` are recorded beside it.

Claims (PPO, Schulman et al. 2017, arXiv:1707.06347 §3: r(theta_old) = 1, and the clip removes the
incentive to move r past [1 - eps, 1 + eps]; Huang et al., "The 37 Implementation Details of PPO",
ICLR Blog Track 2022: clipfrac and approx_kl as the update's debug variables):

1. the first minibatch of the first epoch has clip fraction exactly 0: every ratio is 1;
2. the clip fraction does not decrease in expectation from one epoch to the next;
3. in the later epochs of 16 (the last four) it is above 0.3, the usual rule of thumb for "the
   policy is fighting the clip" (reported whatever it is).
"""

from __future__ import annotations

import numpy as np

from . import _harness as H
from ._core import Claim, StudyError, Table, fmt_mean, mean_se, sign_flip_p

NAME = "clip-fraction"
TITLE = "clip fraction per epoch for 1, 4 and 16 epochs of PPO on the gridworld"
ILLUSTRATES = {"chapter": "ppo", "clauses": ["PPO-UPDATE-FIRST-RATIOS-ONE", "PPO-CLIP-GRADIENT-TABLE", "PPO-UPDATE-KL-EARLY-STOP",
                                            "PPO-PESSIMISTIC-BOUND"]}
SOURCES = [
    "Schulman, Wolski, Dhariwal, Radford & Klimov, Proximal Policy Optimization Algorithms, arXiv:1707.06347, §3 (clipped surrogate, r(theta_old) = 1)",
    "Huang, Dossa, Raffin, Kanervisto & Wang, The 37 Implementation Details of Proximal Policy Optimization, ICLR Blog Track 2022 (debug variables clipfrac, approx_kl)",
]
OPERATIONS = ("ppo_update",)
SEEDS = {"default": 16, "small": 10}
MIN_SEEDS = 10  # the Bonferroni threshold 0.05 / 18 needs 2^-n below it: n >= 9, and one to spare
SIZES = {"default": {"iterations": 20, "epochs": (1, 4, 16)}, "small": {"iterations": 2, "epochs": (1, 4, 16)}}
EPS = H.TRAINER.clip_eps
THRESHOLD = 0.3  # the rule-of-thumb clip fraction of claim 3
LATER = 4  # "the later epochs": the last four of 16
ALPHA = 0.05
FIRST_RATIO_TOL = 1e-12  # |r - 1| of a ratio exp(logp - logp_old) of equal float64 log-probs: 0 when both come
# from the same evaluate_actions; a few ulps of a log-softmax over logits |z| < 40 otherwise (40 * 2^-52 ~ 1e-14)


def settings(size: dict) -> dict:
    return {"epochs": list(size["epochs"]), "iterations": size["iterations"], "rollout_steps": H.TRAINER.rollout_steps,
            "config": {**H.UPDATE_CONFIG, "target_kl": None}, "lr": H.TRAINER.lr}


def _one_run(ppo_update, seed: int, epochs: int, iterations: int) -> dict:
    learner = H.new_learner(seed)
    config = {**H.UPDATE_CONFIG, "epochs": epochs, "target_kl": None, "seed": seed}
    per_step = -(-H.TRAINER.rollout_steps // config["minibatch_size"])  # ceil(T / B) steps per epoch
    cf, kl, approx, first_dev, first_cf = [], [], [], 0.0, 0.0
    for _ in range(iterations):
        batch = H.collect(learner)
        learner.optimizer.before_step.clear()
        diagnostics = H.run_update(ppo_update, learner, batch, config)
        snapshots = learner.optimizer.before_step + [learner.W]  # actor before each step, and after the last
        if len(snapshots) - 1 != epochs * per_step:
            raise StudyError(f"ppo_update took {len(snapshots) - 1} optimizer steps in {epochs} epochs of a {H.TRAINER.rollout_steps}-step "
                             f"batch with minibatch_size {config['minibatch_size']}; the study expects {per_step} per epoch")
        cf.append([np.mean([H.clip_fraction(snapshots[e * per_step + j], batch, EPS) for j in range(per_step)]) for e in range(epochs)])
        kl.append([H.exact_kl(batch.W_old, snapshots[(e + 1) * per_step], batch.states) for e in range(epochs)])
        reported = H.as_numpy(diagnostics.get("approx_kl", []))
        approx.append(list(reported[:epochs]) + [np.nan] * (epochs - len(reported)))
        if "ratios" in diagnostics:
            ratios = H.as_numpy(diagnostics["ratios"])
        else:  # not returned: the whole batch's ratios at the parameters of the first step (the same log pi_old)
            ratios = np.exp(H.batch_log_ratio(snapshots[0], batch))
        first_dev = max(first_dev, float(np.max(np.abs(ratios - 1.0))))
        first_cf = max(first_cf, float(np.mean(np.abs(ratios - 1.0) > EPS)))
    return {"clip_fraction": np.mean(cf, axis=0), "kl": np.mean(kl, axis=0), "approx_kl": np.mean(approx, axis=0),
            "first_ratio_deviation": first_dev, "first_clip_fraction": first_cf, "final_return": H.episode_return(learner)}


def measure(ops: dict, seeds: int, size: dict) -> dict:
    out = {}
    for K in size["epochs"]:
        runs = [_one_run(ops["ppo_update"], seed, K, size["iterations"]) for seed in range(seeds)]
        out[str(K)] = {key: [r[key] for r in runs] for key in runs[0]}  # per seed; arrays are (K,) per seed
    return {"epochs": out}


def claims(m: dict) -> list[Claim]:
    runs = m["epochs"]
    dev = max(max(r["first_ratio_deviation"]) for r in runs.values())
    first = max(max(r["first_clip_fraction"]) for r in runs.values())
    out = [Claim(
        "first-minibatch-zero", "the first minibatch of the first epoch has clip fraction exactly 0: every ratio is 1",
        SOURCES[0], f"over every update of every run: the clip fraction of ppo_update's reported first-minibatch ratios is 0 "
        f"exactly and max |r - 1| <= {FIRST_RATIO_TOL:g}", first == 0 and dev <= FIRST_RATIO_TOL,
        f"largest first-minibatch clip fraction {first:g}, largest |r - 1| {dev:.3g}")]

    pairs = [(K, e) for K in runs for e in range(len(runs[K]["clip_fraction"][0]) - 1)]
    level = ALPHA / max(len(pairs), 1)
    tests = []  # (p, K, e, mean drop) per pair; a drop > 0 is a decrease from epoch e + 1 to e + 2
    for K, e in pairs:
        cf = np.asarray(runs[K]["clip_fraction"])  # (seeds, K)
        drop = cf[:, e] - cf[:, e + 1]
        tests.append((sign_flip_p(drop), K, e, float(drop.mean())))
    p, K, e, d = min(tests, key=lambda t: t[0]) if tests else (1.0, "-", 0, 0.0)
    out.append(Claim(
        "non-decreasing", "the clip fraction does not decrease in expectation from one epoch to the next", SOURCES[0],
        f"no consecutive pair of epochs (K = 4 and 16) shows a decrease significant at family-wise level {ALPHA} "
        f"(one-sided paired sign-flip test over seeds, Bonferroni: p < {level:.2g} for any of {len(pairs)} pairs refutes it)",
        p >= level, f"most significant decrease: K = {K}, epoch {e + 1} -> {e + 2}, mean drop {d:.3g}, p = {p:.2g}"))

    if "16" in runs:
        cf16 = np.asarray(runs["16"]["clip_fraction"])
        later = cf16[:, -LATER:].mean(axis=1)  # per seed
        p = sign_flip_p(later - THRESHOLD)
        out.append(Claim(
            "later-epochs-above-0.3", f"in the later epochs of 16 (the last {LATER}) the clip fraction is above {THRESHOLD}", SOURCES[1],
            f"per-seed mean clip fraction over epochs {16 - LATER + 1}-16 exceeds {THRESHOLD}: one-sided sign-flip test, p < {ALPHA}",
            p < ALPHA, f"clip fraction {fmt_mean(later)}, p = {p:.2g}"))
        # the clip does not bound the KL (theory.clip_does_not_bound_kl): once the clip fraction has stopped rising, the
        # exact KL(pi_old || pi) keeps growing with the epochs
        kl16 = np.asarray(runs["16"]["kl"])  # (seeds, 16)
        peak = int(np.argmax(cf16.mean(axis=0)))
        growth = kl16[:, -1] - kl16[:, peak]
        p = sign_flip_p(growth)
        out.append(Claim(
            "kl-grows-past-clip", "the clip does not bound the KL: after the clip fraction peaks, the exact KL(pi_old || pi) "
            "keeps growing with the epochs", SOURCES[1],
            f"per seed, exact KL after epoch 16 minus exact KL after the epoch of the highest mean clip fraction is > 0: "
            f"one-sided sign-flip test, p < {ALPHA}", peak < 15 and p < ALPHA,
            f"clip fraction peaks at epoch {peak + 1}; KL there {float(kl16[:, peak].mean()):.3g}, after epoch 16 "
            f"{float(kl16[:, -1].mean()):.3g} (growth {fmt_mean(growth)}, p = {p:.2g})"))
    return out


def table(by_subject: dict) -> Table:
    rows = []
    for subject, m in by_subject.items():
        for K, r in m["epochs"].items():
            cf, kl, approx = (np.asarray(r[k]) for k in ("clip_fraction", "kl", "approx_kl"))
            for e in range(cf.shape[1]):
                mean, se = mean_se(cf[:, e])
                reported = approx[:, e][np.isfinite(approx[:, e])]  # empty where the update returns no approx_kl
                rows.append((subject, int(K), e + 1, mean, se, float(kl[:, e].mean()),
                             float(reported.mean()) if reported.size else float("nan")))
    return Table(("subject", "epochs", "epoch", "clip fraction", "s.e.", "KL(old||new) exact", "approx_kl (k3)"), tuple(rows))


def _draw(axes, by_subject):
    from ._plot import STYLE, label

    left, right = axes
    for subject, m in by_subject.items():
        for i, (K, r) in enumerate(m["epochs"].items()):
            cf, kl = np.asarray(r["clip_fraction"]), np.asarray(r["kl"])
            x = np.arange(1, cf.shape[1] + 1)
            name = f"{K} epoch" + ("" if K == "1" else "s")
            se = cf.std(axis=0, ddof=1) / np.sqrt(len(cf))
            left.errorbar(x, cf.mean(axis=0), yerr=se, color=f"C{i}", capsize=2, ms=3, label=label(subject, name, by_subject), **STYLE[subject])
            right.semilogy(x, kl.mean(axis=0), color=f"C{i}", ms=3, label=label(subject, name, by_subject), **STYLE[subject])
    left.axhline(THRESHOLD, color="0.5", lw=0.8, ls=":", label=f"{THRESHOLD} rule of thumb")
    left.set(title=f"clip fraction (|r - 1| > {EPS}) per epoch", xlabel="epoch", ylabel="fraction of the batch, mean ± s.e. over seeds")
    right.axhline(H.TRAINER.target_kl, color="0.5", lw=0.8, ls=":", label=f"target_kl {H.TRAINER.target_kl} (off here)")
    right.set(title="exact KL(pi_old || pi) after each epoch", xlabel="epoch", ylabel="mean over the batch's states")
    for ax in axes:
        ax.legend(fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, claims=claims)
