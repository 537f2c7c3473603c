"""Explained variance of the critic, and what advantage normalisation hides when the critic is broken.

Experiment. PPO on the gridworld with the reference trainer's settings through the protocol's
``ppo_update``, in two arms per seed:

* *healthy*: the batch as collected;
* *broken*: the critic's regression targets are misaligned with their states (``returns`` handed to
  ``ppo_update`` in a random order, a fresh permutation per iteration: the bug of value targets
  indexed with another permutation than the observations), so the critic learns little more
  than the batch mean while the policy update sees the same kind of advantages.

For every collected batch the study logs the explained variance of the critic (SB3's and
CleanRL's ``explained_variance``), EV = 1 - Var[R - V] / Var[R], with R the GAE value targets and
V the critic's values at collection; the raw and the normalised advantages' scale; and how well the
update's direction agrees with the true policy gradient. The true gradient is exact: for the
softmax table, dJ/dz[s, a] = d^pi(s) pi(a|s) A^pi(s, a) by the policy-gradient theorem (Sutton,
McAllester, Singh & Mansour, NIPS 1999), with d^pi and A^pi of pi_old by dynamic programming. The
batch's estimate g[s, a] = (1/T) sum_t 1[s_t = s] (1[a_t = a] - pi(a|s)) A_t is scored by its cosine
with the true gradient, for the critic's (normalised) GAE advantages and, critic-free, for the
normalised discounted returns G_t (REINFORCE with a batch-mean baseline).

Claims (Huang et al., "The 37 Implementation Details of PPO", ICLR Blog Track 2022: explained
variance as the critic's debug variable, per-minibatch advantage normalisation; Schulman et al.,
arXiv:1506.02438 §3: advantages from an inaccurate V are biased):

1. a healthy critic explains the returns: its median EV over the second half of training is above 0.3;
2. the broken critic's median EV stays below 0.3;
3. normalisation hides the difference: every batch's normalised advantages have mean 0 and std 1
   in both arms, whatever their raw scale;
4. below an EV of about 0.3 the critic is not helping: in batches with EV < 0.3 the critic's
   advantages point the update no closer to the true gradient than the critic-free returns do,
   while in batches with EV >= 0.3 they point it closer.
"""

from __future__ import annotations

import numpy as np
import torch

from ...reference import gridworld as gw
from ...reference.gae import gae
from ...reference.ppo import normalize_advantages
from . import _harness as H
from ._core import Claim, Table, fmt_mean, sign_flip_p

NAME = "explained-variance"
TITLE = "the critic's explained variance over training, healthy and broken, and what advantage normalisation hides"
ILLUSTRATES = {"chapter": "ppo", "clauses": ["PPO-ADVANTAGE-NORMALISATION", "PPO-VALUE-LOSS", "GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES"]}
SOURCES = [
    "Huang, Dossa, Raffin, Kanervisto & Wang, The 37 Implementation Details of Proximal Policy Optimization, ICLR Blog Track 2022 (explained_variance as a debug variable; advantage normalisation)",
    "Schulman, Moritz, Levine, Jordan & Abbeel, Generalized Advantage Estimation, ICLR 2016, arXiv:1506.02438, §3 (GAE is biased by an inaccurate V)",
    "Sutton, McAllester, Singh & Mansour, Policy Gradient Methods for Reinforcement Learning with Function Approximation, NIPS 1999 (the exact gradient used as the yardstick)",
]
OPERATIONS = ("ppo_update",)
SEEDS = {"default": 16, "small": 5}
MIN_SEEDS = 5
SIZES = {"default": {"iterations": 30}, "small": {"iterations": 6}}
THRESHOLD = 0.3
ALPHA = 0.05
ARMS = ("healthy", "broken")
NORMALISED_TOL = 1e-12  # |mean| of (A - m) / (s + 1e-8): float64 rounding of a 128-term sum of O(1) values


def settings(size: dict) -> dict:
    return {"iterations": size["iterations"], "config": H.UPDATE_CONFIG, "rollout_steps": H.TRAINER.rollout_steps,
            "ev_threshold": THRESHOLD, "broken": "returns handed to ppo_update in a fresh random order per iteration"}


def gradient_cosine(batch: H.Batch, weights: np.ndarray, true_gradient: np.ndarray) -> float:
    """cos(g, grad J) of the batch's score-function estimate with per-sample ``weights``."""
    pi = np.exp(H.log_policy(batch.W_old))  # (S, A)
    score = -pi[batch.states]  # (T, A) d log pi(a_t|s_t) / d z[s_t, .] = onehot(a_t) - pi(.|s_t)
    score[np.arange(len(batch.states)), batch.actions.numpy()] += 1.0
    g = np.zeros_like(pi)
    np.add.at(g, batch.states, score * weights[:, None])
    g /= len(batch.states)
    norm = np.linalg.norm(g) * np.linalg.norm(true_gradient)
    return float((g * true_gradient).sum() / norm) if norm > 0 else 0.0


def _one_run(ppo_update, seed: int, iterations: int, broken: bool) -> dict:
    mdp = H.world_mdp()
    learner = H.new_learner(seed)
    shuffle = np.random.default_rng(seed + 20_000)
    rows = {k: [] for k in ("ev", "ev_exact", "raw_std", "norm_mean", "norm_std", "cos_critic", "cos_no_critic", "cos_returns", "return")}
    for _ in range(iterations):
        batch = H.collect(learner)
        R, V = batch.returns.numpy(), batch.values_old.numpy()
        pi = np.exp(H.log_policy(batch.W_old))
        true_gradient = gw.discounted_occupancy(mdp, pi)[:, None] * pi * gw.advantages(mdp, pi)  # (S, A) dJ/dz
        adv = batch.advantages.numpy()
        normalised = normalize_advantages(adv)
        zero = np.zeros_like(R)
        no_critic, _ = gae(batch.rewards, zero, zero, batch.terminated, batch.truncated, H.TRAINER.gamma, H.TRAINER.lam)
        G, _ = gae(batch.rewards, zero, zero, batch.terminated, batch.truncated, H.TRAINER.gamma, 1.0)
        V_pi = gw.state_values(mdp, pi)  # the exact critic of pi_old: the EV a perfect critic would log
        _, R_pi = gae(batch.rewards, V_pi[batch.states], V_pi[batch.next_states], batch.terminated, batch.truncated,
                      H.TRAINER.gamma, H.TRAINER.lam)
        rows["ev"].append(H.explained_variance(R, V))
        rows["ev_exact"].append(H.explained_variance(R_pi, V_pi[batch.states]))
        rows["raw_std"].append(float(adv.std(ddof=1)))
        rows["norm_mean"].append(float(normalised.mean()))
        rows["norm_std"].append(float(normalised.std(ddof=1)))
        rows["cos_critic"].append(gradient_cosine(batch, normalised, true_gradient))
        rows["cos_no_critic"].append(gradient_cosine(batch, normalize_advantages(no_critic), true_gradient))
        rows["cos_returns"].append(gradient_cosine(batch, normalize_advantages(G), true_gradient))
        rows["return"].append(H.episode_return(batch.W_old))
        overrides = {"returns": batch.returns[torch.from_numpy(shuffle.permutation(len(R)))]} if broken else {}
        H.run_update(ppo_update, learner, batch, {**H.UPDATE_CONFIG, "seed": seed}, **overrides)
    rows["final_return"] = H.episode_return(learner)
    return rows


def measure(ops: dict, seeds: int, size: dict) -> dict:
    out = {}
    for arm in ARMS:
        runs = [_one_run(ops["ppo_update"], seed, size["iterations"], arm == "broken") for seed in range(seeds)]
        out[arm] = {key: [r[key] for r in runs] for key in runs[0]}
    return out


def _late_median(ev) -> np.ndarray:
    ev = np.asarray(ev)  # (seeds, iterations)
    return np.median(ev[:, ev.shape[1] // 2:], axis=1)


def claims(m: dict) -> list[Claim]:
    healthy, broken = _late_median(m["healthy"]["ev"]), _late_median(m["broken"]["ev"])
    p_h, p_b = sign_flip_p(healthy - THRESHOLD), sign_flip_p(THRESHOLD - broken)
    out = [
        Claim("healthy-above", f"a healthy critic's explained variance is above {THRESHOLD}", SOURCES[0],
              f"per-seed median EV over the second half of training > {THRESHOLD}: one-sided sign-flip test, p < {ALPHA}",
              p_h < ALPHA, f"median EV {fmt_mean(healthy)}, p = {p_h:.2g}"),
        Claim("broken-below", f"the broken critic's explained variance stays below {THRESHOLD}", SOURCES[0],
              f"per-seed median EV over the second half of training < {THRESHOLD}: one-sided sign-flip test, p < {ALPHA}",
              p_b < ALPHA, f"median EV {fmt_mean(broken)}, p = {p_b:.2g}"),
    ]
    worst_mean = max(float(np.max(np.abs(m[a]["norm_mean"]))) for a in ARMS)
    std_dev = max(float(np.max(np.abs(np.asarray(m[a]["norm_std"]) - 1.0) * np.asarray(m[a]["raw_std"]))) for a in ARMS)
    scale = {a: float(np.median(m[a]["raw_std"])) for a in ARMS}
    out.append(Claim(
        "normalisation-hides", "normalisation hides the difference: every batch's normalised advantages have mean 0 and std 1 in both arms",
        SOURCES[0], f"every batch: |mean| <= {NORMALISED_TOL:g} and |std - 1| <= (1e-8 + {NORMALISED_TOL:g}) / raw std "
        "(the 1e-8 of the std's epsilon)", worst_mean <= NORMALISED_TOL and std_dev <= 1e-8 + NORMALISED_TOL,
        f"largest |mean| {worst_mean:.2g}, largest |std - 1| x raw std {std_dev:.2g}; raw advantage std (median): "
        + ", ".join(f"{a} {s:.3g}" for a, s in scale.items())))

    # claim 4: per (arm, seed) run, the mean gain in alignment of the critic over the comparator in each EV bin
    def gains(comparator):
        low, high = [], []
        for arm in ARMS:
            for ev, cc, cr in zip(m[arm]["ev"], m[arm]["cos_critic"], m[arm][comparator]):
                ev, gain = np.asarray(ev), np.asarray(cc) - np.asarray(cr)
                ok = np.isfinite(ev)
                if np.any(ok & (ev < THRESHOLD)):
                    low.append(float(gain[ok & (ev < THRESHOLD)].mean()))
                if np.any(ok & (ev >= THRESHOLD)):
                    high.append(float(gain[ok & (ev >= THRESHOLD)].mean()))
        return low, high

    def shown(values):
        return fmt_mean(values) if len(values) > 1 else (f"{values[0]:.3g} (one run)" if values else "no runs")

    low, high = gains("cos_no_critic")
    p_high = sign_flip_p(np.asarray(high)) if high else 1.0
    low_mean = float(np.mean(low)) if low else float("nan")
    low_g, high_g = gains("cos_returns")
    out.append(Claim(
        "threshold", f"below an explained variance of about {THRESHOLD} the critic is not helping", SOURCES[1],
        f"cosine with the exact policy gradient, the critic's GAE advantages minus the same GAE with no critic (V = 0, same gamma "
        f"and lambda), averaged per run over its batches on each side of EV = {THRESHOLD}: below, the mean over runs is <= 0; "
        f"above, > 0 by a one-sided sign-flip test, p < {ALPHA}",
        bool(low) and bool(high) and low_mean <= 0 and p_high < ALPHA,
        f"EV < {THRESHOLD}: gain {shown(low)}; EV >= {THRESHOLD}: gain {shown(high)}, p = {p_high:.2g}. Against the critic-free "
        f"returns G_t (lambda = 1) instead, which differ in lambda too: below {shown(low_g)}, above {shown(high_g)}"))
    return out


def table(by_subject: dict) -> Table:
    rows = []
    for subject, m in by_subject.items():
        for arm in ARMS:
            r = m[arm]
            ev = np.asarray(r["ev"])
            half = ev.shape[1] // 2
            per_seed = lambda x: float(np.mean(np.median(x, axis=1)))  # the median of each run, averaged over the runs (as the claims)
            rows.append((subject, arm, per_seed(ev[:, :half]), per_seed(ev[:, half:]),
                         per_seed(np.asarray(r["ev_exact"])[:, half:]), float(np.median(r["raw_std"])),
                         float(np.max(np.abs(r["norm_mean"]))), float(np.median(r["norm_std"])), float(np.mean(r["cos_critic"])),
                         float(np.mean(r["cos_no_critic"])), float(np.mean(r["cos_returns"])), float(np.mean(r["final_return"]))))
    return Table(("subject", "critic", "EV 1st half", "EV 2nd half", "EV of exact V^pi, 2nd half", "raw adv std", "max |norm mean|",
                  "norm std", "cos critic", "cos no critic", "cos returns G_t", "final return"), tuple(rows))


def _draw(axes, by_subject):
    from ._plot import STYLE, label

    left, right = axes
    for subject, m in by_subject.items():
        for arm, colour in zip(ARMS, ("C0", "C3")):
            ev = np.asarray(m[arm]["ev"])
            x = np.arange(1, ev.shape[1] + 1)
            left.plot(x, np.median(ev, axis=0), color=colour, ms=2, label=label(subject, f"{arm} critic (median over seeds)", by_subject), **STYLE[subject])
            left.fill_between(x, np.quantile(ev, 0.25, axis=0), np.quantile(ev, 0.75, axis=0), color=colour, alpha=0.15)
            cc, cr = np.asarray(m[arm]["cos_critic"]).ravel(), np.asarray(m[arm]["cos_no_critic"]).ravel()
            right.scatter(np.clip(ev.ravel(), -1.5, 1.0), cc - cr, s=5, color=colour, alpha=0.5, label=label(subject, arm, by_subject))
    left.axhline(THRESHOLD, color="0.5", lw=0.8, ls=":", label=f"EV {THRESHOLD}")
    left.set(title="explained variance 1 - Var[R - V] / Var[R] per batch", xlabel="iteration", ylabel="EV (band: quartiles)", ylim=(-1.5, 1.0))
    right.axvline(THRESHOLD, color="0.5", lw=0.8, ls=":")
    right.axhline(0.0, color="0.5", lw=0.8)
    right.set(title="does the critic help? cos(g, grad J): critic minus no critic", xlabel="EV of the batch (clipped at -1.5)",
              ylabel="gain in alignment with the exact gradient")
    for ax in axes:
        ax.legend(fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, claims=claims)
