"""Proofs for the gridworld chapter, on a symbolic MDP small enough for SymPy.

The MDP: two non-terminal states 0 and 1, a terminal state, two actions. P(s'|s,a) is symbolic
(p[s][a][0], p[s][a][1] into states 0 and 1, the rest into the terminal state), so are the policy
pi(a|s) = (q_s, 1 - q_s) and the discount. Instead of inverting I - gamma P_pi symbolically, the MDP
is parametrised by what dynamic programming would return: the values V_0, V_1 of pi and, per
state, one number alpha_s with A^pi(s, 0) = (1 - q_s) alpha_s and A^pi(s, 1) = -q_s alpha_s (with
two actions, sum_a pi(a|s) A^pi(s, a) = 0 leaves exactly this freedom). The rewards are then
r(s, a) = V_s + A^pi(s, a) - gamma sum_s' P(s'|s,a) V_s', the Bellman equation solved for r: every
MDP of this shape, with its exact V^pi and A^pi, is an instance.

The identities are polynomial (the one quotient, in the performance difference, is cross-multiplied),
so they are computed in SymPy's sparse polynomial ring over the rationals, which expands products
exactly and fast; ``identity`` then confirms each one on the expanded polynomials.
"""

from __future__ import annotations

import sympy as sp

from .core import ProofResult, combine, identity, proof

STATES, ACTIONS = (0, 1), (0, 1)
NAMES = (["gamma", "lambda", "q0", "q1", "qn0", "qn1", "V0", "V1", "alpha0", "alpha1", "W0", "W1"]
         + [f"p{s}{a}_{k}" for s in STATES for a in ACTIONS for k in STATES])
RING, *GENERATORS = sp.ring(NAMES, sp.QQ)
_g = dict(zip(NAMES, GENERATORS))
gamma, lam = _g["gamma"], _g["lambda"]
q = (_g["q0"], _g["q1"])  # pi(a=0|s)
q_new = (_g["qn0"], _g["qn1"])  # pi'(a=0|s), a second policy
V = (_g["V0"], _g["V1"])  # V^pi on the two non-terminal states
alpha = (_g["alpha0"], _g["alpha1"])  # A^pi(s, 0) - A^pi(s, 1)
W = (_g["W0"], _g["W1"])  # an arbitrary critic
p = [[(_g[f"p{s}{a}_0"], _g[f"p{s}{a}_1"]) for a in ACTIONS] for s in STATES]  # P(s'|s,a), s' in {0, 1}


def same(lhs, rhs, label: str) -> ProofResult:
    """``lhs == rhs`` for two ring elements. Their difference, exact in the ring, goes to ``identity``:
    proved when it is the zero polynomial; otherwise it is non-zero at some rational point, and the
    value at the first such point of a fixed sequence goes to ``identity`` (refuted, the point in the
    label: SymPy's simplify on a large non-zero polynomial would take minutes)."""
    difference = RING(lhs) - RING(rhs)
    if difference == 0:
        return identity(difference.as_expr(), 0, label)
    for k in range(1, 25):
        # every value in (0, 1), transition probabilities in (0, 1/2): a real MDP with a real policy
        point = [sp.Rational(1 + (7 * k + 3 * i) % 10, (11 + (5 * k + i) % 7) * (2 if name.startswith("p") else 1))
                 for i, name in enumerate(NAMES)]
        value = difference(*point)
        if value != 0:
            used = sorted((str(x), v) for x, v in zip(GENERATORS, point) if difference.degree(x) > 0)
            return identity(sp.Rational(value), 0, f"{label}, at " + ", ".join(f"{x} = {v}" for x, v in used))
    return identity(difference.as_expr(), 0, label)  # no witness in 24 points: let identity decide


def until_refuted(checks) -> ProofResult:
    """Run the identity checks in order, stopping at the first that is not proved (its counterexample
    is the verdict's); ``checks`` yields zero-argument callables returning ProofResults."""
    steps = []
    for run in checks:
        steps.append(run())
        if not steps[-1].ok:
            break
    return combine(steps)


def policy(s, a, q_=q):
    return q_[s] if a == 0 else 1 - q_[s]


def expected_next(s, a, values):
    """sum over non-terminal s' of P(s'|s,a) values(s'): nothing is bootstrapped past the terminal state."""
    return sum(p[s][a][k] * values[k] for k in STATES)


def exact_advantage(s, a):
    """A^pi(s, a): (1 - q_s) alpha_s for a = 0, -q_s alpha_s for a = 1 (so that sum_a pi A = 0)."""
    return (1 - q[s]) * alpha[s] if a == 0 else -q[s] * alpha[s]


def rewards():
    """r[s][a] = V_s + A^pi(s, a) - gamma E[V(s')|s, a]: the Bellman equation of pi, solved for r."""
    return {s: [V[s] + exact_advantage(s, a) - gamma * expected_next(s, a, V) for a in ACTIONS] for s in STATES}


def advantage(r, s, a):
    """A^pi(s, a) = Q^pi(s, a) - V^pi(s), computed from the rewards (not read off the parametrisation)."""
    return r[s][a] + gamma * expected_next(s, a, V) - V[s]


def td_error(reward, next_value, value):
    """E[delta | s, a] from r(s,a), E[V(s')|s,a] and V(s): the one-step TD error (Schulman et al. 2016 §3)."""
    return reward + gamma * next_value - value


@proof(
    "gridworld.td_error_is_advantage",
    statement="""With the exact critic V^pi, E[delta_t | s_t, a_t] = r(s,a) + gamma E[V^pi(s')|s,a] - V^pi(s)
    is A^pi(s, a), and its policy average sum_a pi(a|s) E[delta | s, a] is 0 in every state, so
    E[delta_{t+l} | s_t, a_t] = 0 for every l >= 1.""",
    assumptions="""A two-state MDP with a terminal state, two actions, symbolic transitions, policy and
    discount, parametrised by its exact V^pi and A^pi (module docstring); terminal states have value 0.""",
)
def td_error_is_advantage(td_error=td_error) -> ProofResult:
    r = rewards()

    def checks():
        for s in STATES:
            expected = [td_error(r[s][a], expected_next(s, a, V), V[s]) for a in ACTIONS]
            for a in ACTIONS:
                yield lambda s=s, a=a, e=expected: same(e[a], advantage(r, s, a), f"E[delta | s={s}, a={a}] = A(s, a)")
            yield lambda s=s, e=expected: same(sum(policy(s, a) * e[a] for a in ACTIONS), RING(0),
                                               f"sum_a pi(a|{s}) E[delta | s, a] = 0")

    return until_refuted(checks())


def bootstrap_at_limit(critic):
    """What the step at the time limit bootstraps from: the critic's value of the real next state."""
    return critic


def expected_gae(critic, K, gl, limit=bootstrap_at_limit):
    """[E_K(s, a)] for the critic with K steps left before a time limit: E_1 bootstraps from
    ``limit(critic)``, E_K = d + gamma lambda sum_{s' not terminal} P(s'|s,a) e_{K-1}(s')."""
    r = rewards()
    td = lambda values: {s: [r[s][a] + gamma * expected_next(s, a, values) - critic[s] for a in ACTIONS] for s in STATES}
    d, E = td(critic), td(limit(critic))
    for _ in range(K - 1):
        e = [sum(policy(s, a) * E[s][a] for a in ACTIONS) for s in STATES]
        E = {s: [d[s][a] + gl * expected_next(s, a, e) for a in ACTIONS] for s in STATES}
    return E, r


@proof(
    "gridworld.expected_gae_exact_critic",
    statement="""With the exact critic, the expected GAE advantage E_K(s, a) equals A^pi(s, a) for every
    lambda and every number K of steps left before a time limit that bootstraps from V^pi
    (K = 1..4 explicitly; the induction step is td_error_is_advantage's zero policy average).""",
    assumptions="The symbolic MDP of this module; lambda symbolic; the time limit bootstraps from V^pi.",
)
def expected_gae_exact_critic(limit=bootstrap_at_limit) -> ProofResult:
    def checks():
        for K in range(1, 5):
            E, r = expected_gae(V, K, gamma * lam, limit)
            for s in STATES:
                for a in ACTIONS:
                    yield lambda K=K, E=E, r=r, s=s, a=a: same(E[s][a], advantage(r, s, a), f"K = {K}: E_K({s}, {a}) = A({s}, {a})")

    return until_refuted(checks())


@proof(
    "gridworld.lambda_one_critic_cancels",
    statement="""At lambda = 1, for ANY critic W, E_K(s, a) = A^pi(s, a) + (V^pi - W)(s)
    + gamma^K E[(W - V^pi)(s_{t+K}); no terminal state before | s, a]: the critic's error inside the
    segment telescopes away (K = 1..4).""",
    assumptions="The symbolic MDP of this module; W symbolic on both non-terminal states; lambda = 1.",
)
def lambda_one_critic_cancels(trace=lambda: gamma) -> ProofResult:
    error = [W[k] - V[k] for k in STATES]

    def checks():
        ahead = error  # E[error(s_{t+K}); alive | s_{t+1}] = P_pi^(K-1) error on non-terminal states
        for K in range(1, 5):
            E, r = expected_gae(W, K, trace())
            for s in STATES:
                for a in ACTIONS:
                    form = advantage(r, s, a) - error[s] + gamma**K * expected_next(s, a, ahead)
                    yield lambda K=K, E=E, s=s, a=a, form=form: same(E[s][a], form, f"K = {K}: E_K({s}, {a}) at lambda = 1")
            ahead = [sum(policy(s, a) * expected_next(s, a, ahead) for a in ACTIONS) for s in STATES]

    return until_refuted(checks())


def chain_of(q_):
    """P_pi(s'|s) on the two non-terminal states."""
    return [[sum(policy(s, a, q_) * p[s][a][k] for a in ACTIONS) for k in STATES] for s in STATES]


def solve_2x2(M, b):
    """x = M^-1 b by Cramer's rule: ``(numerators, determinant)``, both polynomials."""
    det = M[0][0] * M[1][1] - M[0][1] * M[1][0]
    return [b[0] * M[1][1] - M[0][1] * b[1], M[0][0] * b[1] - b[0] * M[1][0]], det


def discounted_occupancy(chain, start=0):
    """d' = e_start' (I - gamma P)^-1, i.e. (I - gamma P)' d = e_start: ``(numerators, determinant)``."""
    M_transposed = [[(1 if i == j else 0) - gamma * chain[j][i] for j in STATES] for i in STATES]
    return solve_2x2(M_transposed, [RING(1 if j == start else 0) for j in STATES])


@proof(
    "gridworld.performance_difference",
    statement="""J(pi') - J(pi) = sum_s d^pi'(s) sum_a pi'(a|s) A^pi(s, a), with J(pi) = V^pi(s_0) and
    d^pi' the discounted occupancy of the NEW policy from s_0 (Kakade & Langford 2002, Lemma 6.1;
    Schulman et al. 2015, eq. 1). The old policy's occupancy in its place gives TRPO's local surrogate, which differs.""",
    assumptions="""The symbolic MDP of this module with a second symbolic policy pi' = (qn_s, 1 - qn_s);
    V^pi' = (I - gamma P_pi')^-1 r_pi' by Cramer's rule; start state 0; both sides multiplied by the
    two determinants (non-zero for gamma < 1).""",
)
def performance_difference(occupancy=lambda old_chain, new_chain: discounted_occupancy(new_chain)) -> ProofResult:
    r = rewards()
    new_chain = chain_of(q_new)
    r_new = [sum(policy(s, a, q_new) * r[s][a] for a in ACTIONS) for s in STATES]
    (U0, _), det_U = solve_2x2([[(1 if i == j else 0) - gamma * new_chain[i][j] for j in STATES] for i in STATES], r_new)
    d, det_d = occupancy(chain_of(q), new_chain)
    gain = [sum(policy(s, a, q_new) * advantage(r, s, a) for a in ACTIONS) for s in STATES]  # E_pi'[A^pi(s, .)]
    # J(pi') - J(pi) = U0 / det_U - V0  vs  sum_s (d_s / det_d) gain_s, times det_U det_d
    lhs = (U0 - det_U * V[0]) * det_d
    rhs = sum(d[s] * gain[s] for s in STATES) * det_U
    return combine([same(lhs, rhs, "J(pi') - J(pi) = sum_s d^pi'(s) E_pi'[A^pi(s, .)] (times both determinants)")])
