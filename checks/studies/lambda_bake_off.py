"""The lambda bake-off: exact bias, variance and MSE of the GAE advantage with a corrupted critic.

Experiment. The gridworld under the uniform policy, solved by dynamic programming (V^pi, A^pi);
a critic corrupted as V = c V^pi + noise, the noise N(0, sigma^2) per non-terminal state with sigma
= 0.1 x RMS(V^pi), one draw per seed, for c in {1, 0.9, 0.7, 0.5, 0.3}. For each lambda the first
and second moments of A_hat_0 = sum_l (gamma lambda)^l delta_l given (s_0, a_0) come in closed form
(``rlspec.reference.gridworld.gae_moments``: no time limit, no sampling), so

    bias^2(lambda)  = sum_a pi(a|s_0) b(a)^2,   b(a) = E[A_hat_0|s_0,a] - sum_a' pi(a') E[A_hat_0|s_0,a'] - A^pi(s_0,a)
    var(lambda)     = sum_a pi(a|s_0) Var[A_hat_0 | s_0, a]
    MSE(lambda)     = bias^2 + var         (the error of A_hat_0 - its action-independent part, against A^pi)

are exact for each critic draw; the table averages them over the draws (the expectation over the
critic's noise). The bias is centred, as in the GAE paper's reading of a baseline (Schulman et al.,
ICLR 2016, arXiv:1506.02438, §3 and eq. 16-18): an action-independent error is a baseline and costs
the policy gradient nothing. Time-unlimited, so lambda = 1 is the Monte Carlo advantage G_0 - V(s_0).

Claims (GAE paper §3: lambda trades the bias of a wrong V against variance; "lambda < 1 introduces
bias only when the value function is inaccurate"):

1. the bias falls monotonically in lambda, to exactly 0 at lambda = 1;
2. the variance rises monotonically in lambda;
3. the MSE-minimising lambda is interior (0 < lambda* < 1) for every corrupted critic (c < 1);
4. lambda* moves toward 1 as c moves away from 1.
"""

from __future__ import annotations

import numpy as np

from ...reference import gridworld as gw
from ._core import Claim, Table

NAME = "lambda-bake-off"
TITLE = "exact bias, variance and MSE of the GAE advantage against lambda, with a corrupted critic"
ILLUSTRATES = {"chapter": "gridworld", "clauses": ["GRID-GAE-EXPECTATION-CLOSED-FORM", "GRID-GAE-LAMBDA-ONE-CRITIC-CANCELS", "GAE-LAMBDA-MIXTURE"]}
SOURCES = ["Schulman, Moritz, Levine, Jordan & Abbeel, High-Dimensional Continuous Control Using Generalized Advantage Estimation, ICLR 2016, arXiv:1506.02438, §3 (bias of GAE(gamma, lambda) with an inaccurate V; lambda trades bias for variance)"]
OPERATIONS = ()  # the estimator's exact moments come from dynamic programming; a candidate's gae is held to
# the same closed form by GRID-GAE-EXPECTATION-CLOSED-FORM
SEEDS = {"default": 8, "small": 2}
MIN_SEEDS = 1  # exact per draw: no test statistic
SIZES = {"default": {"scales": (1.0, 0.9, 0.7, 0.5, 0.3), "grid": 101}, "small": {"scales": (1.0, 0.7, 0.3), "grid": 21}}
SHOWN = (0.0, 0.5, 0.9, 1.0)  # the exercise's lambdas, in the table
NOISE = 0.1  # sigma as a fraction of RMS(V^pi) over the non-terminal states
SLACK = 1e-9  # monotone "to rounding": float64 DP of quantities ~1e-3 .. 1, each a few hundred operations


def settings(size: dict) -> dict:
    return {"policy": "uniform", "scales": list(size["scales"]), "noise_sigma_relative": NOISE,
            "lambda_grid": size["grid"], "lambdas_shown": list(SHOWN), "time_limit": None}


def start_state_terms(mdp, policy, critic, advantages, lam) -> tuple[float, float]:
    """(bias^2, conditional variance) of A_hat_0 at the start state for one critic and lambda."""
    s0, p0 = mdp.start, policy[mdp.start]
    E, M = gw.gae_moments(mdp, policy, critic, lam)
    e = E[s0]
    b = e - (p0 * e).sum() - advantages[s0]
    return float((p0 * b * b).sum()), float((p0 * (M[s0] - e * e)).sum())


def measure(ops: dict, seeds: int, size: dict) -> dict:
    mdp = gw.tabular()
    S, A = mdp.P.shape[:2]
    policy = np.full((S, A), 1.0 / A)
    V, adv = gw.state_values(mdp, policy), gw.advantages(mdp, policy)
    sigma = NOISE * float(np.sqrt(np.mean(V[mdp.alive] ** 2)))
    lambdas = np.unique(np.concatenate([np.linspace(0.0, 1.0, size["grid"]), SHOWN]))
    noises = [np.random.default_rng(seed).normal(0.0, sigma, S) * mdp.alive for seed in range(seeds)]
    out = {"lambdas": lambdas, "sigma": sigma, "scales": {}}
    for c in size["scales"]:
        terms = np.array([[start_state_terms(mdp, policy, c * V + noise, adv, lam) for lam in lambdas] for noise in noises])
        bias2, var = terms[..., 0].mean(axis=0), terms[..., 1].mean(axis=0)  # over the draws
        out["scales"][str(c)] = {"bias": np.sqrt(bias2), "variance": var, "mse": bias2 + var,
                                 "bias_per_draw": np.sqrt(terms[..., 0])}
    return out


def _lam_star(m, c) -> float:
    r = m["scales"][c]
    return float(np.asarray(m["lambdas"])[int(np.argmin(r["mse"]))])


def claims(m: dict) -> list[Claim]:
    lambdas = np.asarray(m["lambdas"])
    scales = list(m["scales"])
    src = SOURCES[0]

    def monotone(key, sign):
        bad = []
        for c in scales:
            y = np.asarray(m["scales"][c][key])
            steps = sign * np.diff(y)  # >= 0 where it moves the claimed way
            worst = int(np.argmin(steps))
            if steps[worst] < -SLACK * max(1.0, float(np.abs(y).max())):
                bad.append(f"c = {c}: {y[worst]:.4g} at lambda {lambdas[worst]:.2f} -> {y[worst + 1]:.4g} at {lambdas[worst + 1]:.2f}")
        return bad

    falls = monotone("bias", -1)
    zero_at_one = max(float(m["scales"][c]["bias"][-1]) for c in scales)
    shown = "; ".join(f"c = {c}: " + " > ".join(f"{np.interp(l, lambdas, m['scales'][c]['bias']):.3g}" for l in SHOWN) for c in scales)
    out = [Claim("bias-falls", "the bias falls monotonically in lambda, to 0 at lambda = 1", src,
                 f"for every c, the noise-averaged bias is non-increasing on the {len(lambdas)}-point lambda grid (to {SLACK:g} relative) "
                 f"and at most 1e-12 at lambda = 1", not falls and zero_at_one <= 1e-12,
                 ("; ".join(falls) + "; " if falls else "") + f"bias at lambda = {', '.join(map(str, SHOWN))}: {shown}")]
    rises = monotone("variance", +1)
    shown = "; ".join(f"c = {c}: " + ", ".join(f"{np.interp(l, lambdas, m['scales'][c]['variance']):.3g}" for l in SHOWN) for c in scales)
    out.append(Claim("variance-rises", "the variance rises monotonically in lambda", src,
                     f"for every c, the noise-averaged variance is non-decreasing on the {len(lambdas)}-point lambda grid (to {SLACK:g} relative)",
                     not rises, ("decreases: " + "; ".join(rises) + ". " if rises else "") + f"variance at lambda = {', '.join(map(str, SHOWN))}: {shown}"))
    corrupted = [c for c in scales if float(c) < 1.0]
    stars = {c: _lam_star(m, c) for c in scales}
    interior = [c for c in corrupted if 0.0 < stars[c] < 1.0]
    out.append(Claim("interior-optimum", "the MSE-minimising lambda is interior for a corrupted critic", src,
                     "0 < argmin_lambda MSE < 1 on the grid for every c < 1", bool(corrupted) and len(interior) == len(corrupted),
                     ", ".join(f"c = {c}: lambda* = {stars[c]:.2f}" for c in scales)))
    order = sorted(scales, key=lambda c: abs(1.0 - float(c)))  # c moving away from 1
    seq = [stars[c] for c in order]
    moves = all(b >= a for a, b in zip(seq, seq[1:])) and len(seq) > 1 and seq[-1] > seq[0]
    out.append(Claim("optimum-moves-to-one", "lambda* moves toward 1 as c moves away from 1", src,
                     "lambda* is non-decreasing in |1 - c| and larger at the farthest c than at the nearest", moves,
                     " <= ".join(f"{stars[c]:.2f} (c = {c})" for c in order)))
    return out


def table(by_subject: dict) -> Table:
    m = by_subject["reference"]
    lambdas = np.asarray(m["lambdas"])
    rows = []
    for c, r in m["scales"].items():
        for lam in SHOWN:
            i = int(np.argmin(np.abs(lambdas - lam)))
            rows.append((float(c), f"{lam:g}", float(r["bias"][i]), float(r["variance"][i]), float(r["mse"][i])))
        i = int(np.argmin(r["mse"]))
        rows.append((float(c), f"lambda* = {lambdas[i]:.2f}", float(r["bias"][i]), float(r["variance"][i]), float(r["mse"][i])))
    return Table(("c", "lambda", "bias (centred, RMS)", "variance", "MSE"), tuple(rows))


def _draw(axes, by_subject):
    m = by_subject["reference"]
    lam = np.asarray(m["lambdas"])
    left, middle, right = axes
    for i, (c, r) in enumerate(m["scales"].items()):
        kw = {"color": f"C{i}", "label": f"c = {c}"}
        left.plot(lam, r["bias"], **kw)
        middle.semilogy(lam, r["variance"], **kw)
        right.semilogy(lam, r["mse"], **kw)
        j = int(np.argmin(r["mse"]))
        right.plot([lam[j]], [r["mse"][j]], "o", color=f"C{i}", ms=4)
    left.set(title="bias of A_hat_0 (centred) vs A^pi", xlabel="lambda", ylabel="policy-weighted RMS over actions")
    middle.set(title="variance of A_hat_0 given (s_0, a_0)", xlabel="lambda", ylabel="log scale")
    right.set(title="MSE = bias^2 + variance (dot: lambda*)", xlabel="lambda", ylabel="log scale")
    for ax in axes:
        ax.legend(fontsize=6, title=f"V = c V^pi + noise", title_fontsize=6)


def figure(by_subject: dict, path, claims=()):
    from ._plot import render

    return render(_draw, by_subject, path, columns=3, width=11.0, claims=claims)
