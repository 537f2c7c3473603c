"""Baseline ablation: REINFORCE with and without a learned baseline, then with every reward shifted.

Experiment. REINFORCE (Williams 1992) on the gridworld env, one update per episode: the policy is a
softmax table (logits z[s, a], starting uniform), the loss ``reinforce_loss(log pi(a_t|s_t), G_t,
b(s_t))`` with reward-to-go G_t (gamma 0.95), one Adam step (lr 0.1) on z; the baseline, when used,
is a learned table V(s), moved after the policy step by the every-visit Monte Carlo update
V(s_t) <- V(s_t) + alpha (G_t - V(s_t)), alpha = 0.1 (Sutton & Barto §13.4's SGD on the baseline's
weights, for a table). Its step is a fixed fraction of the error, so it tracks returns of any scale;
an Adam step would move each entry by at most about its learning rate per update and could not reach
a +100 scale within the budget. 300 episodes per run. Three conditions:

* *none*: the world's rewards;
* *rewards +100*: every reward shifted by +100 (step cost, goal and pit alike), as the exercise says;
* *returns +100*: every weight G_t shifted by +100, the setting of the chapter's intuition ("all
  returns between +100 and +102"); in expectation the same policy gradient, since a constant is a
  baseline.

Scored: the final policy's exact expected return under the world's own rewards (dynamic
programming, 50-step time limit), the fraction of the way it got from the uniform policy's return
towards the unshifted run's, and the variance across episodes of the policy-gradient norm ||dL/dz||.

Claims (Williams, Machine Learning 8, 1992: the reinforcement baseline; Sutton & Barto,
Reinforcement Learning, 2nd ed. 2018, §13.4: a baseline leaves the gradient unbiased and can cut
its variance; Greensmith, Bartlett & Baxter, JMLR 5, 2004: variance reduction by baselines):

1. with the shift, the run without a baseline degrades sharply: it keeps less than half of the
   unshifted run's improvement over the uniform policy;
2. with the shift, the run with a learned baseline is nearly unchanged: it keeps at least 90%;
3. with the shift, the learned baseline lowers the variance of the gradient norm (unshifted, where
   the world's returns are already small and centred, its effect is expected to be modest: reported).

A constant added to every *reward* is not a constant added to every *return* when the episode length
depends on the policy: with +100 a step, a longer episode is worth more, so the shifted task prefers
to stay out of the goal and the pit until the time limit (Ng, Harada & Russell, ICML 1999: only
potential-based shaping keeps the optimal policy). The "returns +100" condition isolates the
variance effect; the "rewards +100" condition is the exercise as written.
"""

from __future__ import annotations

import numpy as np
import torch

from ...reference.returns import rewards_to_go
from ...reference.training import Adam
from . import _harness as H
from ._core import Claim, Table, call_op, mean_se, sign_flip_p

NAME = "baseline-ablation"
TITLE = "REINFORCE with and without a learned baseline, and with every reward shifted by +100"
ILLUSTRATES = {"chapter": "pg", "clauses": ["PG-BASELINE-NO-BIAS", "PG-REINFORCE-SURROGATE-GRADIENT", "RETURNS-REWARD-TO-GO"]}
SOURCES = [
    "Williams, Simple statistical gradient-following algorithms for connectionist reinforcement learning, Machine Learning 8 (1992) (REINFORCE and the reinforcement baseline)",
    "Sutton & Barto, Reinforcement Learning: An Introduction, 2nd ed. (2018), §13.4 (REINFORCE with baseline: unbiased, lower variance)",
    "Greensmith, Bartlett & Baxter, Variance Reduction Techniques for Gradient Estimates in Reinforcement Learning, JMLR 5 (2004)",
]
OPERATIONS = ("reinforce_loss",)
SEEDS = {"default": 8, "small": 5}
MIN_SEEDS = 5
SIZES = {"default": {"episodes": 300}, "small": {"episodes": 40}}
GAMMA = 0.95
LR = 0.1  # Adam on the policy logits, as the reference PPO trainer
ALPHA_V = 0.1  # the baseline's step, a fraction of its error per visit
SHIFT = 100.0
CONDITIONS = ("none", "rewards +100", "returns +100")
SHARP = 0.5  # claim 1: keeps less than this fraction of the improvement
NEARLY = 0.9  # claim 2: keeps at least this fraction
ALPHA = 0.05
NOTES = ["a constant added to every reward is not policy-invariant in an episodic task whose length depends on the policy "
         "(Ng, Harada & Russell, ICML 1999): 'rewards +100' changes the task, 'returns +100' does not"]


def settings(size: dict) -> dict:
    return {"episodes": size["episodes"], "gamma": GAMMA, "lr_policy": LR, "baseline_step": ALPHA_V, "shift": SHIFT,
            "conditions": list(CONDITIONS), "time_limit": 50}


def train_reinforce(reinforce_loss, seed: int, episodes: int, baseline: bool, condition: str) -> dict:
    from ..kit.gridworld_env import GridworldEnv

    env = GridworldEnv()
    S, A = env.observation_space.n, env.action_space.n
    rng = np.random.default_rng(seed)
    logits = torch.zeros(S, A, dtype=torch.float64, requires_grad=True)
    policy_opt = Adam([logits], lr=LR)
    V = np.zeros(S)  # the baseline table
    env.reset(seed=int(rng.integers(2**31)))
    norms, returns = [], []
    reward_shift = SHIFT if condition == "rewards +100" else 0.0
    return_shift = SHIFT if condition == "returns +100" else 0.0
    for _ in range(episodes):
        obs, _ = env.reset()
        probs = torch.softmax(logits.detach(), dim=1).numpy()
        cdf = np.cumsum(probs, axis=1)
        states, actions, rewards, done = [], [], [], False
        while not done:
            a = min(int(np.searchsorted(cdf[obs], rng.random() * cdf[obs, -1], side="right")), A - 1)
            next_obs, reward, terminated, truncated, _ = env.step(a)
            states.append(obs)
            actions.append(a)
            rewards.append(reward)
            obs, done = next_obs, terminated or truncated
        returns.append(float(np.sum(rewards)))  # the world's own rewards, whatever the condition
        G = rewards_to_go(np.asarray(rewards, dtype=np.float64) + reward_shift, GAMMA) + return_shift  # (T,)
        s, a = torch.tensor(states), torch.tensor(actions)
        logp = torch.log_softmax(logits[s], dim=1).gather(1, a[:, None])[:, 0]  # (T,)
        G_t = torch.from_numpy(G)
        b = torch.from_numpy(V[states]) if baseline else None  # (T,) b(s_t) before this episode's update
        loss = call_op("reinforce_loss", reinforce_loss, logp, G_t, b)
        policy_opt.zero_grad()
        loss.backward()
        norms.append(float(logits.grad.norm()))
        policy_opt.step()
        if baseline:  # every-visit Monte Carlo: each visit moves V(s_t) a fraction alpha toward G_t
            for state, target in zip(states, G):
                V[state] += ALPHA_V * (target - V[state])
    W = logits.detach().numpy().T  # (A, S), the harness's layout
    return {"final_return": H.episode_return(W), "grad_norm_variance": float(np.var(norms)), "grad_norm_mean": float(np.mean(norms)),
            "last_30_sampled": float(np.mean(returns[-30:]))}


def measure(ops: dict, seeds: int, size: dict) -> dict:
    out = {}
    for condition in CONDITIONS:
        for baseline in (False, True):
            runs = [train_reinforce(ops["reinforce_loss"], seed, size["episodes"], baseline, condition) for seed in range(seeds)]
            out[f"{condition} | {'baseline' if baseline else 'no baseline'}"] = {k: [r[k] for r in runs] for k in runs[0]}
    out["uniform_return"] = H.episode_return(np.zeros((4, 11)))
    return out


def retained(m: dict, condition: str, arm: str) -> float:
    """(J_shifted - J_uniform) / (J_unshifted - J_uniform), means over seeds, for one arm."""
    j0 = m["uniform_return"]
    base = float(np.mean(m[f"none | {arm}"]["final_return"]))
    shifted = float(np.mean(m[f"{condition} | {arm}"]["final_return"]))
    return (shifted - j0) / (base - j0) if base != j0 else float("nan")


def claims(m: dict) -> list[Claim]:
    shifted = [c for c in CONDITIONS if c != "none"]
    src = SOURCES[1]
    kept = {(c, arm): retained(m, c, arm) for c in shifted for arm in ("no baseline", "baseline")}
    show = lambda arm: "; ".join(f"{c}: {kept[(c, arm)]:.0%} (final return {np.mean(m[f'{c} | {arm}']['final_return']):.3f} "
                                 f"vs {np.mean(m[f'none | {arm}']['final_return']):.3f} unshifted)" for c in shifted)
    out = [
        Claim("no-baseline-degrades", "with the shift, learning without a baseline degrades sharply", src,
              f"in each shifted condition the no-baseline run keeps < {SHARP:.0%} of its unshifted improvement over the uniform "
              f"policy ({m['uniform_return']:.4f}), means over seeds", all(kept[(c, "no baseline")] < SHARP for c in shifted),
              show("no baseline")),
        Claim("baseline-unchanged", "with the shift, learning with a learned baseline is nearly unchanged", src,
              f"in each shifted condition the baseline run keeps >= {NEARLY:.0%} of its unshifted improvement",
              all(kept[(c, "baseline")] >= NEARLY for c in shifted), show("baseline")),
    ]
    parts, ok = [], True
    for c in CONDITIONS:
        ratio = np.log(np.asarray(m[f"{c} | no baseline"]["grad_norm_variance"])) - np.log(np.asarray(m[f"{c} | baseline"]["grad_norm_variance"]))
        p = sign_flip_p(ratio)
        ok &= p < ALPHA or c == "none"  # unshifted the exercise expects only a modest effect: reported, not judged
        parts.append(f"{c}: x{np.exp(np.mean(ratio)):.3g} lower (geometric mean), p = {p:.2g}")
    out.append(Claim("baseline-cuts-variance", "with the rewards shifted, the learned baseline lowers the variance of the gradient norm",
                     SOURCES[2], f"in each shifted condition, per seed log Var(no baseline) - log Var(baseline) > 0: one-sided sign-flip "
                     f"test, p < {ALPHA} (the unshifted condition, where the returns are already small and centred, is reported only)",
                     bool(ok), "; ".join(parts)))
    return out


def table(by_subject: dict) -> Table:
    rows = []
    for subject, m in by_subject.items():
        for key, r in m.items():
            if key == "uniform_return":
                continue
            condition, arm = key.split(" | ")
            kept = "-" if condition == "none" else f"{retained(m, condition, arm):.0%}"
            mean, se = mean_se(r["final_return"])
            rows.append((subject, condition, arm, mean, se, kept, float(np.mean(r["last_30_sampled"])), float(np.mean(r["grad_norm_variance"])), float(np.mean(r["grad_norm_mean"]))))
    return Table(("subject", "shift", "baseline", "final return (exact)", "s.e.", "improvement kept", "last 30 episodes (sampled)",
                  "Var grad norm", "mean grad norm"), tuple(rows))


def _draw(axes, by_subject):
    left, right = axes
    subjects = list(by_subject)
    width = 0.8 / (2 * len(subjects))
    x = np.arange(len(CONDITIONS))
    for j, subject in enumerate(subjects):
        m = by_subject[subject]
        for k, (arm, colour) in enumerate((("no baseline", "C3"), ("baseline", "C0"))):
            offset = (2 * j + k - (2 * len(subjects) - 1) / 2) * width
            final = np.array([m[f"{c} | {arm}"]["final_return"] for c in CONDITIONS])  # (conditions, seeds)
            var = np.array([m[f"{c} | {arm}"]["grad_norm_variance"] for c in CONDITIONS])
            name = arm if len(subjects) == 1 else f"{arm} ({subject})"
            left.bar(x + offset, final.mean(axis=1), width, yerr=final.std(axis=1, ddof=1) / np.sqrt(final.shape[1]), color=colour,
                     alpha=1.0 if j == 0 else 0.5, capsize=2, label=name)
            right.bar(x + offset, np.exp(np.log(var).mean(axis=1)), width, color=colour, alpha=1.0 if j == 0 else 0.5, label=name)
        left.axhline(by_subject[subject]["uniform_return"], color="0.5", lw=0.8, ls=":", label="uniform policy" if j == 0 else None)
    left.set(title="final policy's exact return (world's rewards, 50 steps)", xticks=x, xticklabels=CONDITIONS, ylabel="mean ± s.e. over seeds")
    right.set(title="variance of ||dL/dz|| across episodes", xticks=x, xticklabels=CONDITIONS, ylabel="geometric mean over seeds", yscale="log")
    for ax in axes:
        ax.legend(fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, claims=claims)
