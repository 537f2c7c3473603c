"""Proofs for discounted returns (Sutton & Barto 2018 §3.3, eq. 3.9)."""

from __future__ import annotations

import sympy as sp

from .. import contract
from .core import ProofResult, combine, identity, proof
from .gae import HORIZON, gamma, l, n, peel_last, r


def reward_to_go_sum(t: int, T: int):
    return sum(gamma ** (k - t) * r[k] for k in range(t, T))


@proof(
    "returns.reward_to_go_recursion",
    statement="""G_t = sum_{k=t}^{T-1} gamma^(k-t) r_k satisfies G_t = r_t + gamma G_{t+1} with G_T = 0; the
    rewards_to_go known answers (rewards [1, 2, 3], gamma 1/2 -> [2.75, 3.5, 3]; bugs A1, A2) are its values.""",
    assumptions="None. Explicit for every t of episodes T = 1..8; for every length by induction; the known answers "
                "(spec/contract/10_gae.toml) in exact rationals.",
)
def reward_to_go_recursion(returns=reward_to_go_sum) -> ProofResult:
    steps = []
    for T in range(1, HORIZON + 1):
        for t in range(T):
            steps.append(identity(returns(t, T), r[t] + gamma * returns(t + 1, T), f"T = {T}, t = {t}"))
    # For every length n + 1: peel r_0 off the sum, shift the index of the rest by one, and the
    # remainder is gamma times the reward-to-go of the shifted episode (same limits, termwise equal).
    rr = sp.IndexedBase("r")
    rest = sp.Sum(gamma**l * rr[l], (l, 1, n)).change_index(l, l - 1)  # = sum_{l=0}^{n-1} gamma^(l+1) r_{l+1}
    shifted_return = gamma * sp.Sum(gamma**l * rr[l + 1], (l, 0, n - 1))
    (var, lo, hi), = rest.limits
    same_limits = (var, lo, hi) == shifted_return.args[1].limits[0]
    termwise = rest.function - gamma * shifted_return.args[1].function
    steps.append(identity(termwise if same_limits else sp.Integer(1), 0, "induction step: G_0 = r_0 + gamma G_1"))
    for answer_id, answer in contract.known_answers("rewards_to_go").items():
        rewards, T = answer.exact("rewards"), len(answer.inputs["rewards"])
        at = {gamma: sp.Rational(answer.exact("gamma")), **{r[k]: sp.Rational(v) for k, v in enumerate(rewards)}}
        steps += [identity(returns(t, T).xreplace(at), sp.Rational(G), f"{answer_id}: G_{t}")
                  for t, G in enumerate(answer.exact("returns"))]
    return combine(steps)
