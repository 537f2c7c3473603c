"""Proofs of the theory behind the estimators (chapter ``theory``, spec/clauses/75_theory.toml).

Each proof decides a statement a reviewer asks about: the score-function estimator over whole
trajectories (Williams 1992), the variance-minimising baseline (Greensmith, Bartlett & Baxter 2004),
the policy-improvement bound behind TRPO (Schulman et al. 2015, Theorem 1; Kakade & Langford 2002),
why the clip does not bound the KL, where k3 has a lower variance than k1 (Schulman 2020), the
fixed point of CQL (Kumar et al. 2020, §3.1) and the bias of batch advantage normalisation. Where a
published statement is not true as written, the proof decides what holds instead and refutes the
stronger claim with an exact counterexample.

Symbols are the clauses' own (gamma, pi, P, r, Q, b, epsilon, q ...); every proof that takes its formula
or its claim as a keyword argument has a wrong version refuted in tests/test_proofs.py. The gridworld
checks of the same chapter (checks/clauses/theory.py) decide the numeric statements on rlspec's MDP.
"""

from __future__ import annotations

import functools
import itertools
import math

import sympy as sp

from .core import INCONCLUSIVE, PROVED, REFUTED, Identity, ProofResult, combine, identity, proof, restate, field_sign
from .pg import all_of, nonzero, rational_identity

gamma = sp.Symbol("gamma", positive=True)


def decide_sign(expr, label: str, relation: str, witnesses, strict: bool = False) -> ProofResult:
    """``expr >= 0`` (``> 0`` when strict) over positive symbols: proved when, over a common denominator,
    numerator and denominator are polynomials whose coefficients all have one sign; refuted at the first
    rational point of ``witnesses`` (dicts) where it fails; inconclusive otherwise (fails closed)."""
    expr = sp.sympify(expr)
    decided = [Identity(label, expr, sp.Integer(0), ">" if strict else ">=")]
    if field_sign(expr) == 1:
        return ProofResult(PROVED, [f"{label}: proved"], identities=decided)
    numerator, denominator = sp.fraction(sp.together(expr))
    signs = []
    for part in (sp.expand(numerator), sp.expand(denominator)):
        if part.is_number:
            signs.append(1 if part > 0 else (-1 if part < 0 else 0))
            continue
        coefficients = sp.Poly(part, *sorted(part.free_symbols, key=lambda s: s.name)).coeffs()
        signs.append(1 if all(c > 0 for c in coefficients) else (-1 if all(c < 0 for c in coefficients) else None))
    if None not in signs and signs[0] * signs[1] > 0:
        return ProofResult(PROVED, [f"{label}: proved"], identities=decided)
    for point in witnesses:
        value = sp.simplify(sp.together(expr.subs(point)))
        if value.is_number and (value < 0 or (strict and value == 0)):
            shown = ", ".join(f"{s} = {v}" for s, v in point.items())
            return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: at {shown} it is {value}",
                               identities=decided)
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: sign of {expr} undecided",
                       identities=decided)


def same_polynomial(lhs: sp.Poly, rhs: sp.Poly, label: str, shown) -> ProofResult:
    """``lhs == rhs`` for polynomials (every coefficient equal), recorded as ``shown`` in the clause's notation (the
    polynomials themselves run to hundreds of terms)."""
    decided = [Identity(label, lhs.as_expr() if len(lhs.terms()) <= 40 else sp.Symbol("(polynomial)"),
                        rhs.as_expr() if len(rhs.terms()) <= 40 else sp.Symbol("(polynomial)"), "=", tuple(shown))]
    difference = lhs - rhs
    if difference.is_zero:
        return ProofResult(PROVED, [f"{label}: proved ({len(lhs.terms())} terms)"], identities=decided)
    result = identity(difference.as_expr(), 0, label)  # a rational point where the two differ
    result.identities = decided
    return result


# ---------------------------------------------------------------------------------------------
# the score-function estimator over whole trajectories


def discounted_reward_to_go(t: int, rewards, gamma_):
    """The reward-to-go form's weight of step t: gamma^t G_t, G_t = sum_{k >= t} gamma^(k - t) r_{k+1}. Both
    powers are needed: the objective discounts reward k by gamma^k from the start."""
    return gamma_**t * sum(gamma_ ** (k - t) * rewards[k] for k in range(t, len(rewards)))


def trajectories(H: int):
    """Every trajectory of the two-state chain below, as (states s_0..s_H, actions a_0..a_{H-1})."""
    for actions in itertools.product((0, 1), repeat=H):
        for nexts in itertools.product((0, 1), repeat=H):
            yield (0,) + nexts, actions


def _trajectory_score(weight=discounted_reward_to_go) -> ProofResult:
    pi = sp.symbols("pi_0 pi_1", positive=True)  # pi(1|s): action 1 at state s (a sigmoid of the logit theta_s)
    P = {(s, a): sp.Symbol(f"P_{s}{a}", positive=True) for s in (0, 1) for a in (0, 1)}  # P(1|s, a)
    r = sp.symbols("r_0 r_1", real=True)  # the reward on arriving in state 0 or 1
    policy = lambda a, s: pi[s] if a else 1 - pi[s]
    move = lambda s, a, s_next: P[(s, a)] if s_next else 1 - P[(s, a)]
    steps = []
    for H in (2, 3):  # H = 3: one state's logit (the other's is the same computation)
        paths = list(trajectories(H))
        rewards = [[r[s2] for s2 in states[1:]] for states, _ in paths]
        gens = (*pi, *P.values(), *r, gamma)
        poly = lambda expr: sp.Poly(expr, *gens)  # polynomial arithmetic: far faster than expanding sums of products
        factor = functools.lru_cache(maxsize=None)(poly)  # the few distinct linear factors, each converted once
        # p(tau) = prod_t pi(a_t|s_t) P(s_t+1|s_t, a_t), multiplied out in polynomials rather than expanded as an expression
        prob_p = [math.prod((factor(policy(a, s)) * factor(move(s, a, s2)) for s, a, s2 in zip(states, actions, states[1:])),
                            start=poly(1))
                  for states, actions in paths]
        R = [poly(sum(gamma**t * rt for t, rt in enumerate(rw))) for rw in rewards]
        J = sum((x * Rt for x, Rt in zip(prob_p, R)), poly(0))
        for s in ((0, 1) if H == 2 else (1,)):
            # d / d theta_s = pi_s (1 - pi_s) d / d pi_s for the sigmoid policy pi(1|s) = 1 / (1 + exp(-theta_s))
            d_theta = lambda f: pi[s] * (1 - pi[s]) * sp.diff(f, pi[s])
            score = [[(a - pi[s]) if st == s else 0 for st, a in zip(states, actions)] for states, actions in paths]
            grad_J = poly(pi[s] * (1 - pi[s])) * J.diff(pi[s])
            if H == 2:  # the dynamics drop out of grad log p(tau), trajectory by trajectory
                logs = [sum(sp.log(policy(a, st)) + sp.log(move(st, a, s2)) for st, a, s2 in zip(states, actions, states[1:]))
                        for states, actions in paths]
                steps.append(all_of((restate(rational_identity(d_theta(lg), sum(sc), f"tau = {paths[k]}"),
                                             shown=(sp.Derivative(sp.Function("log p")(sp.Symbol("tau")), sp.Symbol(f"theta_{s}")),
                                                    sp.Sum(sp.Symbol("s_t"), (sp.Symbol("t"), 0, H - 1))))
                                     for k, (lg, sc) in enumerate(zip(logs, score))),
                                    f"H = {H}, theta_{s}: d log p(tau) / d theta = sum_t d log pi(a_t|s_t) / d theta on every "
                                    f"trajectory (the log P(s_t+1|s_t, a_t) terms have derivative 0)"))
            whole = sum((x * poly(sum(sc)) * Rt for x, sc, Rt in zip(prob_p, score, R)), poly(0))
            theta = sp.Symbol(f"theta_{s}")
            steps.append(same_polynomial(whole, grad_J, f"H = {H}: E[(sum_t d log pi / d theta_{s}) R(tau)] = dJ / d theta_{s}",
                                         shown=(sp.Symbol("E") * sp.Sum(sp.Derivative(sp.Function("log pi")(sp.Symbol("a_t"), sp.Symbol("s_t")), theta),
                                                                       (sp.Symbol("t"), 0, H - 1)) * sp.Function("R")(sp.Symbol("tau")),
                                                sp.Derivative(sp.Symbol("J"), theta))))
            to_go = sum((x * poly(sum(sc[t] * weight(t, rw, gamma) for t in range(H))) for x, sc, rw in zip(prob_p, score, rewards)),
                        poly(0))
            steps.append(same_polynomial(to_go, grad_J, f"H = {H}: E[sum_t d log pi_t / d theta_{s} gamma^t G_t] = dJ / d theta_{s}",
                                         shown=(sp.Symbol("E") * sp.Sum(sp.Derivative(sp.Function("log pi")(sp.Symbol("a_t"), sp.Symbol("s_t")), theta)
                                                                       * gamma ** sp.Symbol("t") * sp.Symbol("G_t"), (sp.Symbol("t"), 0, H - 1)),
                                                sp.Derivative(sp.Symbol("J"), theta))))
            if not all(x.ok for x in steps):
                return combine(steps)
    # without gamma^t the reward-to-go form is not the gradient of J (unless gamma = 1): a rational instance
    H = 2
    paths = list(trajectories(H))
    point = {pi[0]: sp.Rational(1, 2), pi[1]: sp.Rational(1, 4), r[0]: 0, r[1]: 1, gamma: sp.Rational(1, 2),
             **{P[k]: sp.Rational(1 + 2 * i, 8) for i, k in enumerate(P)}}
    prob = [sp.Mul(*(policy(a, s) * move(s, a, s2) for s, a, s2 in zip(states, actions, states[1:]))) for states, actions in paths]
    rewards = [[r[s2] for s2 in states[1:]] for states, _ in paths]
    J = sum(p * sum(gamma**t * rt for t, rt in enumerate(rw)) for p, rw in zip(prob, rewards))
    undiscounted = sum(p * sum(((a - pi[0]) if st == 0 else 0) * sum(gamma ** (k - t) * rw[k] for k in range(t, H))
                               for t, (st, a) in enumerate(zip(states, actions)))
                       for p, (states, actions), rw in zip(prob, paths, rewards))
    gap = (undiscounted - pi[0] * (1 - pi[0]) * sp.diff(J, pi[0])).subs(point)
    steps.append(nonzero(gap, "H = 2, gamma = 1/2, pi = (1/2, 1/4), P = (1/8, 3/8, 5/8, 7/8), r = (0, 1): "
                              "E[sum_t d log pi_t / d theta_0 G_t] - dJ / d theta_0 (the form without gamma^t)"))
    return combine(steps)


@proof(
    "theory.trajectory_score_function",
    statement="""The score-function (REINFORCE) estimator over whole trajectories: with p(tau) = rho(s_0) prod_t
    pi(a_t|s_t) P(s_t+1|s_t, a_t) and R(tau) = sum_t gamma^t r_t+1, grad J = E[(sum_t grad log pi(a_t|s_t)) R(tau)]:
    grad log p(tau) = sum_t grad log pi(a_t|s_t) trajectory by trajectory, the transition probabilities dropping
    out. The reward-to-go form E[sum_t grad log pi(a_t|s_t) gamma^t G_t] is equal to it; without the factor
    gamma^t (the form most code computes) it is not the gradient of J for gamma < 1.""",
    assumptions="""A two-state chain with symbolic transition probabilities P(1|s, a), symbolic rewards on arrival,
    a sigmoid policy pi(1|s) = 1 / (1 + exp(-theta_s)) at each state (grad log pi(a|s) = a - pi(1|s)), symbolic
    gamma; every trajectory of H = 2 steps (both logits) and H = 3 steps (theta_1) enumerated; the counterexample at exact rationals.""",
)
def trajectory_score_function(weight=discounted_reward_to_go) -> ProofResult:
    return _trajectory_score(weight)


# ---------------------------------------------------------------------------------------------
# the variance-minimising baseline


def norm_weighted_baseline(p, Q, sq_norms):
    """b* = E[||grad log pi||^2 G] / E[||grad log pi||^2] = sum_a pi_a ||s_a||^2 Q_a / sum_a pi_a ||s_a||^2."""
    return sum(pa * n * qa for pa, n, qa in zip(p, sq_norms, Q)) / sum(pa * n for pa, n in zip(p, sq_norms))


def _optimal_baseline(baseline=norm_weighted_baseline) -> ProofResult:
    b = sp.Symbol("b", real=True)
    N, W, C0, m2 = sp.symbols("N W C_0 m^2", real=True)  # the aggregates below, as symbols
    steps = []
    for K in (2, 3, 4):
        free = list(sp.symbols(f"pi_0:{K - 1}", positive=True))
        p = free + [1 - sum(free)]  # pi(a|s) on the simplex
        Q = sp.symbols(f"Q_0:{K}", real=True)  # E[G | s, a]
        M = sp.symbols(f"M_0:{K}", real=True)  # E[G^2 | s, a]
        score = [[(1 if a == c else 0) - p[c] for c in range(K)] for a in range(K)]  # softmax: e_a - pi
        sq = [sp.expand(sum(x**2 for x in row)) for row in score]
        mean = [sum(p[a] * score[a][c] * Q[a] for a in range(K)) for c in range(K)]  # E[g], independent of b
        variance = sum(p[a] * sq[a] * (M[a] - 2 * b * Q[a] + b**2) for a in range(K)) - sum(m**2 for m in mean)
        aggregates = {C0: sum(p[a] * sq[a] * M[a] for a in range(K)), N: sum(p[a] * sq[a] * Q[a] for a in range(K)),
                      W: sum(p[a] * sq[a] for a in range(K)), m2: sum(m**2 for m in mean)}
        steps.append(restate(identity(variance, (C0 - 2 * b * N + b**2 * W - m2).subs(aggregates),
                                      f"K = {K}: Var(b) = E||s||^2 G^2 - 2 b E||s||^2 G + b^2 E||s||^2 - ||E g||^2"),
                             shown=(sp.Function("Var")(b), C0 - 2 * b * N + b**2 * W - m2)))
        claimed = baseline(p, Q, sq)
        decided = identity(claimed * aggregates[W], aggregates[N], f"K = {K}: W b* = N for the claimed baseline")
        steps.append(restate(decided, shown=(W * sp.Symbol("b^*"), N)))
        if not decided.ok:
            return combine(steps)
    # with W b* = N the quadratic completes, whatever the number of actions
    quadratic = lambda bb: C0 - 2 * bb * N + bb**2 * W - m2
    steps.append(restate(identity(sp.together(quadratic(b) - quadratic(N / W) - W * (b - N / W) ** 2), 0,
                                  "Var(b) - Var(b*) = W (b - b*)^2 >= 0 (W = E||grad log pi||^2 > 0)"),
                         shown=(sp.Function("Var")(b) - sp.Function("Var")(sp.Symbol("b^*")), W * (b - sp.Symbol("b^*")) ** 2)))
    steps.append(identity(sp.diff(quadratic(b), b).subs(b, N / W), 0, "dVar/db = 0 at b = b* = N / W"))
    # V is not b*: pi = (1/2, 1/4, 1/4), Q = (0, 1, 3)
    p = [sp.Rational(1, 2), sp.Rational(1, 4), sp.Rational(1, 4)]
    Q = [0, 1, 3]
    sq = [1 - 2 * pa + sum(x**2 for x in p) for pa in p]  # ||e_a - pi||^2
    V = sum(pa * qa for pa, qa in zip(p, Q))
    steps.append(identity(baseline(p, Q, sq) - V, sp.Rational(2, 5),
                          "pi = (1/2, 1/4, 1/4), Q = (0, 1, 3): b* - V = 7/5 - 1 = 2/5 (V is not the variance-minimising baseline)"))
    uniform = [sp.Rational(1, 3)] * 3
    sq_uniform = [1 - 2 * pa + sum(x**2 for x in uniform) for pa in uniform]
    Qs = sp.symbols("Q_0:3", real=True)
    steps.append(identity(sp.simplify(baseline(uniform, Qs, sq_uniform)), sum(pa * qa for pa, qa in zip(uniform, Qs)),
                          "pi uniform: b* = V (every ||grad log pi(a|s)||^2 is equal)"))
    return combine(steps)


@proof(
    "theory.optimal_baseline",
    statement="""Among state-dependent baselines b, the trace of the covariance of g = grad log pi(a|s) (G - b)
    is the quadratic Var(b) = Var(b*) + (b - b*)^2 E[||grad log pi||^2], minimised exactly at
    b*(s) = E[||grad log pi||^2 G | s] / E[||grad log pi||^2 | s], a norm-weighted average of the return. V(s) =
    E[G | s] is not b* in general: the two agree when ||grad log pi(a|s)||^2 is the same for every action (a
    uniform softmax policy), and at pi = (1/2, 1/4, 1/4), Q = (0, 1, 3) b* = 7/5 while V = 1.""",
    assumptions="""One state, K = 2..4 actions, a softmax policy with symbolic probabilities on the simplex
    (grad log pi(a|s) = e_a - pi in the logits), symbolic E[G | s, a] = Q_a and E[G^2 | s, a] = M_a (any return
    distribution with those moments); the variance is the trace of the covariance.""",
)
def optimal_baseline(baseline=norm_weighted_baseline) -> ProofResult:
    return _optimal_baseline(baseline)


# ---------------------------------------------------------------------------------------------
# the policy-improvement bound behind TRPO


def trpo_constant(eps, gamma_):
    """Schulman et al. 2015, Theorem 1: C = 4 epsilon gamma / (1 - gamma)^2, epsilon = max_{s,a} |A_pi(s, a)|."""
    return 4 * eps * gamma_ / (1 - gamma_) ** 2


def two_state_chain(q):
    """The chain s_0 -> s_1 of the bound's tightness: at s_0 'stay' (reward 0) or 'go' to the absorbing s_1
    (reward 1 on every step there); pi never goes, pi' goes with probability q. Returns
    ``(eta(pi'), L_pi(pi'), epsilon, alpha, KL(pi || pi'))`` from their definitions."""
    V1 = 1 / (1 - gamma)  # s_1: reward 1 forever
    V0 = sp.Integer(0)  # pi stays at s_0 for ever, reward 0
    A_go, A_stay = gamma * V1 - V0, gamma * V0 - V0
    rho0 = 1 / (1 - gamma)  # sum_t gamma^t Pr_pi(s_t = s_0): pi never leaves
    L = V0 + rho0 * (q * A_go + (1 - q) * A_stay)
    eta_new = q * gamma * V1 / (1 - gamma * (1 - q))  # V_pi'(s_0) = gamma (q V1 + (1 - q) V_pi'(s_0))
    eps = A_go  # = gamma / (1 - gamma) > 0 = |A_stay|: the largest |A_pi(s, a)|
    return eta_new, L, eps, q, -sp.log(1 - q)


def _improvement_bound(constant=trpo_constant) -> ProofResult:
    q = sp.Symbol("q", positive=True)  # 0 < q < 1
    g = sp.Symbol("g", positive=True)  # gamma = 1 / (1 + g): 0 < gamma < 1
    h = sp.Symbol("h", positive=True)  # q = 1 / (1 + h): 0 < q < 1
    eta_new, L, eps, alpha, kl = two_state_chain(q)
    eps = sp.simplify(eps)
    error = sp.simplify(eta_new - L)
    C = constant(eps, gamma)
    steps = [identity(sp.together(error + gamma**2 * q**2 / ((1 - gamma) ** 2 * (1 - gamma + gamma * q))), 0,
                      "two-state chain: J(pi') - L_pi(pi') = -gamma^2 q^2 / ((1 - gamma)^2 (1 - gamma + gamma q))")]
    gamma_is = {gamma: 1 / (1 + g)}
    notation = {g: 1 / gamma - 1, h: 1 / q - 1}
    where = sp.And(gamma < 1, q < 1)
    witnesses = [{gamma: gm, q: qq} for gm in (sp.Rational(99, 100), sp.Rational(9, 10), sp.Rational(1, 2))
                 for qq in (sp.Rational(1, 100), sp.Rational(1, 10), sp.Rational(1, 2))]
    for label, gap in (("J(pi') - (L_pi(pi') - C alpha^2) >= 0 (the bound)", error + C * alpha**2),
                       ("(L_pi(pi') + C alpha^2) - J(pi') >= 0 (the other side)", C * alpha**2 - error)):
        decided = decide_sign(gap.subs(gamma_is), label, ">=", [{g: 1 / w[gamma] - 1, q: w[q]} for w in witnesses])
        steps.append(restate(decided, shown=(gap, sp.Integer(0)), where=where, notation=notation))
        if not steps[-1].ok:
            return combine(steps)
    # tight up to the factor 4: the ratio |error| / (C alpha^2) tends to 1/4 as q -> 0
    ratio = sp.simplify((-error / (trpo_constant(eps, gamma) * alpha**2)).subs(gamma_is))
    steps.append(identity(sp.limit(ratio, q, 0), sp.Rational(1, 4),
                          "lim_{q -> 0} |J(pi') - L_pi(pi')| / (C alpha^2) = 1/4 (no smaller C of this form holds)"))
    # one power of 1 - gamma less is not a bound: at gamma = 99/100, q = 1/100
    weak = 4 * eps * gamma / (1 - gamma)
    point = {gamma: sp.Rational(99, 100), q: sp.Rational(1, 100)}
    value = sp.simplify((error + weak * alpha**2).subs(point))
    steps.append(restate(ProofResult(PROVED if value < 0 else REFUTED, [f"4 eps gamma / (1 - gamma) is not a bound: {value}"],
                                     "" if value < 0 else f"4 eps gamma / (1 - gamma) at gamma = 99/100, q = 1/100: gap = {value}",
                                     [Identity("gamma = 99/100, q = 1/100: J(pi') - (L_pi(pi') - (4 eps gamma / (1 - gamma)) alpha^2)",
                                               value, sp.Integer(0), "<")]),
                         where=sp.And(sp.Eq(gamma, point[gamma]), sp.Eq(q, point[q]))))
    # the KL form: alpha^2 <= KL(pi || pi'), since -log(1 - q) - q^2 has value 0 at q = 0 and derivative (1 - 2q + 2q^2) / (1 - q) > 0
    f = kl - alpha**2
    steps.append(identity(f.subs(q, 0), 0, "-log(1 - q) - q^2 = 0 at q = 0"))
    derivative = sp.simplify(sp.diff(f, q))
    steps.append(restate(decide_sign(derivative.subs(q, 1 / (1 + h)), "d/dq (-log(1 - q) - q^2) > 0 on 0 < q < 1", ">",
                                     [], strict=True),
                         shown=(sp.Derivative(kl - alpha**2, q), sp.Integer(0)), where=q < 1, notation=notation))
    return combine(steps)


@proof(
    "theory.trpo_improvement_bound",
    statement="""The policy-improvement bound (Schulman et al. 2015, Theorem 1): J(pi') >= L_pi(pi') - C alpha^2 with
    C = 4 epsilon gamma / (1 - gamma)^2, epsilon = max_{s,a} |A_pi(s, a)|, alpha = max_s D_TV(pi(.|s), pi'(.|s)), and
    alpha^2 <= max_s KL(pi(.|s) || pi'(.|s)) gives the KL form. On the two-state chain where the bound is tightest,
    J(pi') - L_pi(pi') = -gamma^2 q^2 / ((1 - gamma)^2 (1 - gamma + gamma q)): the bound holds on both sides for every
    gamma and q, its ratio to C alpha^2 tends to 1/4 as q -> 0, and the constant with one power of (1 - gamma) less,
    4 epsilon gamma / (1 - gamma), is not a bound (gamma = 99/100, q = 1/100).""",
    assumptions="""0 < gamma < 1 and 0 < q < 1 (written gamma = 1/(1+g), q = 1/(1+h) with g, h > 0 where a sign is
    decided by the signs of polynomial coefficients); pi deterministic at s_0 (stay), pi' going with probability q;
    alpha = q, KL(pi || pi') = -log(1 - q). The general theorem is Schulman et al.'s; the gridworld check of the chapter
    decides it on drawn policy pairs.""",
)
def trpo_improvement_bound(constant=trpo_constant) -> ProofResult:
    return _improvement_bound(constant)


# ---------------------------------------------------------------------------------------------
# the clip does not bound the KL


def _clip_does_not_bound_kl(kl_bound=None) -> ProofResult:
    from .ppo import clip_objective

    p0, p1, u1, u2, t, B = sp.symbols("pi_0 pi_1 pi_2 pi_3 t B", positive=True)
    epsilon, A0, A1 = sp.Symbol("epsilon", positive=True), sp.Symbol("A_0", real=True), sp.Symbol("A_1", real=True)
    old = [p0, p1, u1, u2]  # actions 0 and 1 were sampled, 2 and 3 were not
    new = [p0, p1, u1 + u2 - t, t]  # the sampled probabilities kept; the unsampled mass moved onto action 2
    ratios = [new[a] / old[a] for a in (0, 1)]
    steps = [identity(ratios[0], 1, "r_0 = pi'(a_0) / pi(a_0) = 1"), identity(ratios[1], 1, "r_1 = 1")]
    objective = (clip_objective(ratios[0], A0, epsilon) + clip_objective(ratios[1], A1, epsilon)) / 2
    steps.append(identity(objective, (A0 + A1) / 2, "L_clip(pi') = mean(A) = L_clip(pi_old) (the clip is inactive at r = 1)"))
    kl = sum(po * sp.log(po / pn) for po, pn in zip(old, new))  # KL(pi_old || pi')
    steps.append(identity(sp.expand_log(kl, force=True),
                          sp.expand_log(u1 * sp.log(u1 / (u1 + u2 - t)) + u2 * sp.log(u2 / t), force=True),
                          "KL(pi_old || pi') = pi_2 log(pi_2 / (pi_2 + pi_3 - t)) + pi_3 log(pi_3 / t)"))
    limit = sp.limit(kl, t, 0, "+")
    decided = [Identity("lim_{t -> 0+} KL(pi_old || pi')", limit, sp.oo)]
    steps.append(ProofResult(PROVED, ["KL(pi_old || pi') -> oo as t -> 0: proved"], identities=decided) if limit == sp.oo else
                 ProofResult(INCONCLUSIVE, ["KL(pi_old || pi') -> oo as t -> 0: inconclusive"], f"the limit = {limit}", decided))
    # every bound B is exceeded: at t_B = pi_3 exp(-(B - pi_2 log(pi_2 / (pi_2 + pi_3))) / pi_3) < pi_3
    t_B = u2 * sp.exp(-(B - u1 * sp.log(u1 / (u1 + u2))) / u2)
    lower = u1 * sp.log(u1 / (u1 + u2)) + u2 * sp.log(u2 / t_B)  # <= KL at t_B: log(pi_2 / (pi_2 + pi_3 - t)) > log(pi_2 / (pi_2 + pi_3))
    steps.append(restate(identity(sp.simplify(sp.expand_log(lower, force=True)), B,
                                  "pi_2 log(pi_2 / (pi_2 + pi_3)) + pi_3 log(pi_3 / t_B) = B, so KL(pi_old || pi') > B at t = t_B"),
                         shown=(sp.Symbol("pi_2") * sp.log(sp.Symbol("pi_2") / (sp.Symbol("pi_2") + sp.Symbol("pi_3")))
                                + sp.Symbol("pi_3") * sp.log(sp.Symbol("pi_3") / sp.Symbol("t_B")), B)))
    # an instance with exact numbers: pi_old = (1/2, 1/4, 1/8, 1/8), t = 2^-40, every sampled ratio 1
    point = {p0: sp.Rational(1, 2), p1: sp.Rational(1, 4), u1: sp.Rational(1, 8), u2: sp.Rational(1, 8), t: sp.Rational(1, 2**40)}
    value = kl.subs(point)
    steps.append(nonzero(value, "pi_old = (1/2, 1/4, 1/8, 1/8), t = 2^-40: KL(pi_old || pi') (every sampled ratio is 1)"))
    if kl_bound is not None:  # a claimed bound on the KL from the clip range alone
        claimed = kl_bound(sp.Rational(1, 5))
        exceeds = sp.N(value - claimed, 30)
        decided = [Identity("epsilon = 1/5: KL(pi_old || pi') <= the claimed bound", value, claimed, "<=")]
        steps.append(ProofResult(PROVED, ["the claimed bound holds here"], identities=decided) if exceeds <= 0 else
                     ProofResult(REFUTED, ["the claimed bound is exceeded"],
                                 f"epsilon = 1/5, pi_old = (1/2, 1/4, 1/8, 1/8), t = 2^-40: KL = {sp.N(value, 8)} > bound = {sp.N(claimed, 8)}",
                                 decided))
    return combine(steps)


@proof(
    "theory.clip_does_not_bound_kl",
    statement="""The clip bounds the ratio of the sampled actions, not the KL: keep pi_old's probabilities on the
    sampled actions and move the unsampled mass between two unsampled actions, pi' = (pi_0, pi_1, pi_2 + pi_3 - t, t).
    Every sampled ratio is exactly 1 (inside [1 - epsilon, 1 + epsilon] for every epsilon), the clipped objective and
    its gradient equal pi_old's, and KL(pi_old || pi') = pi_2 log(pi_2 / (pi_2 + pi_3 - t)) + pi_3 log(pi_3 / t) exceeds
    any bound B as t -> 0 (at t_B = pi_3 exp(-(B - pi_2 log(pi_2 / (pi_2 + pi_3))) / pi_3) it is above B). At
    pi_old = (1/2, 1/4, 1/8, 1/8) and t = 2^-40 the KL is (9/2) log 2 = 3.12.""",
    assumptions="""Four actions, two of them sampled; positive symbolic probabilities; 0 < t < pi_2 + pi_3; any clip
    range 0 < epsilon and advantages of any sign.""",
)
def clip_does_not_bound_kl(kl_bound=None) -> ProofResult:
    return _clip_does_not_bound_kl(kl_bound)


# ---------------------------------------------------------------------------------------------
# the variance of k1, k2, k3


def ratio_at_most_two(p, q) -> bool:
    """The region where Var[k3] <= Var[k1] is proved: q(x) / p(x) <= 2 on every outcome."""
    return all(qi / pi <= 2 for pi, qi in zip(p, q))


def _variances(p, q):
    """Exact Var_p[k1], Var_p[k2], Var_p[k3] for categorical p (the sampler) and q (closed forms in logs)."""
    x = [sp.log(qi / pi) for pi, qi in zip(p, q)]
    out = []
    for k in (lambda v: -v, lambda v: v**2 / 2, lambda v: sp.exp(v) - 1 - v):
        values = [sp.expand_log(sp.simplify(k(v)), force=True) for v in x]
        mean = sum(pi * v for pi, v in zip(p, values))
        out.append(sp.expand(sum(pi * v**2 for pi, v in zip(p, values)) - mean**2))
    return out


def _variance_gap(p, q):
    """Var_p[k3] - Var_p[k1] at rational p, q, to 50 significant digits (mpmath): a grid point's sign, certain when
    |gap| > 1e-40 (which every grid point's is; 0 exactly only at q = p, excluded)."""
    import mpmath

    with mpmath.workdps(50):
        P = [mpmath.mpf(x.p) / x.q for x in p]
        r = [mpmath.mpf(qi.p) / qi.q / pi for pi, qi in zip(P, q)]
        variance = lambda v: mpmath.fsum(pi * vi**2 for pi, vi in zip(P, v)) - mpmath.fsum(pi * vi for pi, vi in zip(P, v)) ** 2
        gap = variance([ri - 1 - mpmath.log(ri) for ri in r]) - variance([-mpmath.log(ri) for ri in r])
    if abs(gap) < mpmath.mpf(10) ** -40:
        raise ValueError(f"Var[k3] - Var[k1] at p = {p}, q = {q} is too close to 0 to decide at 50 digits")
    return sp.Float(gap, 30)


COUNTEREXAMPLE = ((sp.Rational(15, 16), sp.Rational(1, 16)), (sp.Rational(1, 2), sp.Rational(1, 2)))


def _k3_variance(holds_where=ratio_at_most_two) -> ProofResult:
    steps = []
    for n in (2, 3):
        free = list(sp.symbols(f"p_0:{n - 1}", positive=True))
        p = free + [1 - sum(free)]
        r = sp.symbols(f"r_0:{n}", positive=True)  # r_i = q_i / p_i
        L = sp.symbols(f"L_0:{n}", real=True)  # L_i = log r_i, an independent symbol (the identities are algebraic)
        E = lambda v: sum(pi * vi for pi, vi in zip(p, v))
        var = lambda v: E([vi**2 for vi in v]) - E(v) ** 2
        cov = lambda u, v: E([ui * vi for ui, vi in zip(u, v)]) - E(u) * E(v)
        k1 = [-Li for Li in L]
        k3 = [ri - 1 - Li for ri, Li in zip(r, L)]
        Var, Cov = sp.Function("Var"), sp.Function("Cov")
        rr, kk1, kk3, i_, j_ = sp.symbols("r k_1 k_3 i j")
        steps.append(restate(identity(sp.expand(var(k3) - var(k1)), sp.expand(var(r) - 2 * cov(r, L)),
                                      f"n = {n}: Var[k3] - Var[k1] = Var[r] - 2 Cov(r, log r)"),
                             shown=(Var(kk3) - Var(kk1), Var(rr) - 2 * Cov(rr, sp.log(rr)))))
        pairs = [(i, j) for i in range(n) for j in range(n)]
        p_i, p_j, r_i, r_j = (sp.Indexed("p", i_), sp.Indexed("p", j_), sp.Indexed("r", i_), sp.Indexed("r", j_))
        steps.append(restate(identity(sp.expand(cov(r, L)), sp.expand(sum(p[i] * p[j] * (r[i] - r[j]) * (L[i] - L[j]) for i, j in pairs) / 2),
                                      f"n = {n}: Cov(r, log r) = 1/2 sum_ij p_i p_j (r_i - r_j)(log r_i - log r_j)"),
                             shown=(Cov(rr, sp.log(rr)), sp.Sum(p_i * p_j * (r_i - r_j) * (sp.log(r_i) - sp.log(r_j)), (i_, 0, n - 1), (j_, 0, n - 1)) / 2)))
        steps.append(restate(identity(sp.expand(var(r)), sp.expand(sum(p[i] * p[j] * (r[i] - r[j]) ** 2 for i, j in pairs) / 2),
                                      f"n = {n}: Var[r] = 1/2 sum_ij p_i p_j (r_i - r_j)^2"),
                             shown=(Var(rr), sp.Sum(p_i * p_j * (r_i - r_j) ** 2, (i_, 0, n - 1), (j_, 0, n - 1)) / 2)))
    # log b - log a >= (b - a) / b for 0 < a <= b: f(u) = log u - 1 + 1/u, u = b/a >= 1, has f(1) = 0, f'(u) = (u - 1)/u^2 >= 0
    u, w = sp.Symbol("u", positive=True), sp.Symbol("w", positive=True)  # u = 1 + w
    f = sp.log(u) - 1 + 1 / u
    steps.append(identity(f.subs(u, 1), 0, "f(u) = log u - 1 + 1/u: f(1) = 0"))
    steps.append(restate(decide_sign(sp.diff(f, u).subs(u, 1 + w), "f'(u) = (u - 1) / u^2 >= 0 for u >= 1", ">=", []),
                         shown=(sp.Derivative(f, u), sp.Integer(0)), where=u >= 1, notation={w: u - 1}))
    steps.append(ProofResult(PROVED, ["so (r_i - r_j)(log r_i - log r_j) >= (r_i - r_j)^2 / max r, hence 2 Cov(r, log r) >= "
                                      "(2 / max r) Var[r] >= Var[r] where max r <= 2: Var[k3] <= Var[k1] there"]))
    # the counterexample: p = (15/16, 1/16), q = (1/2, 1/2): r = (8/15, 8)
    (p, q) = COUNTEREXAMPLE
    v1, v2, v3 = _variances(p, q)
    gap = sp.N(v3 - v1, 30)
    decided = [Identity("p = (15/16, 1/16), q = (1/2, 1/2): Var[k3] - Var[k1]", v3 - v1, sp.Integer(0), ">"),
               Identity("there: Var[k1]", v1, sp.Float(sp.N(v1, 12), 12), "="),
               Identity("there: Var[k3]", v3, sp.Float(sp.N(v3, 12), 12), "=")]
    steps.append(ProofResult(PROVED if gap > 0 else REFUTED, [f"counterexample: Var[k3] - Var[k1] = {sp.N(gap, 8)} > 0"],
                             "" if gap > 0 else f"Var[k3] - Var[k1] = {gap}", decided))
    # the claimed region must exclude the counterexample, and hold on a grid of two-outcome pairs
    grid = [sp.Rational(k, 16) for k in (1, 4, 8, 12, 15)]
    for pp in [COUNTEREXAMPLE[0]] + [(a, 1 - a) for a in grid]:
        for qq in [COUNTEREXAMPLE[1]] + [(c, 1 - c) for c in grid]:
            if pp == qq or not holds_where(pp, qq):
                continue
            excess = _variance_gap(pp, qq)
            if excess > 0:
                steps.append(ProofResult(REFUTED, ["the claimed region contains a pair where k3 varies more"],
                                         f"p = {pp}, q = {qq}: Var[k3] - Var[k1] = {sp.N(excess, 8)} > 0",
                                         [Identity(f"p = {pp}, q = {qq}: Var[k3] - Var[k1]", excess, sp.Integer(0), "<=")]))
                return combine(steps)
    steps.append(ProofResult(PROVED, ["Var[k3] <= Var[k1] on every pair of the grid inside the claimed region"]))
    return combine(steps)


@proof(
    "theory.k3_variance",
    statement="""k3 = r - 1 - log r does not have a lower variance than k1 = -log r in general:
    Var[k3] - Var[k1] = Var[r] - 2 Cov(r, log r), and Var[r] involves E_p[r^2] = sum q^2 / p, which is unbounded.
    At p = (15/16, 1/16), q = (1/2, 1/2) (r = 8 on the rare outcome) Var[k3] = 1.3268 and Var[k1] = 0.4297. What holds
    instead: where q(x) / p(x) <= 2 on every outcome, Cov(r, log r) >= Var[r] / max r >= Var[r] / 2, so
    Var[k3] <= Var[k1] (equality only at q = p); and as q -> p, Var[k3] = O(|q - p|^4) against Var[k1] = O(|q - p|^2).""",
    assumptions="""Categorical p (the sampler) and q; the identities with symbolic p on the simplex, r_i > 0 and
    L_i = log r_i as independent symbols (n = 2, 3); the counterexample's variances are closed forms in log 2 and
    log 15 evaluated to 30 digits; the region's claim also checked on a grid of two-outcome pairs (50-digit arithmetic).""",
)
def k3_variance(holds_where=ratio_at_most_two) -> ProofResult:
    return _k3_variance(holds_where)


# ---------------------------------------------------------------------------------------------
# the CQL fixed point


def cql_push(pi_a, beta_a):
    """The push-down of CQL's eq. 2 at (s, a), divided by alpha: mu(a|s) / pi_beta(a|s) - 1 with mu = pi."""
    return pi_a / beta_a - 1


def _cql_fixed_point(push=cql_push) -> ProofResult:
    steps = []
    for n in (2, 3, 4):
        pf = list(sp.symbols(f"pi_0:{n - 1}", positive=True))
        bf = list(sp.symbols(f"beta_0:{n - 1}", positive=True))
        pi_, beta = pf + [1 - sum(pf)], bf + [1 - sum(bf)]
        expected_push = sum(pa * push(pa, ba) for pa, ba in zip(pi_, beta))
        chi2 = sum((pa - ba) ** 2 / ba for pa, ba in zip(pi_, beta))
        numerator, _ = sp.fraction(sp.together(expected_push - chi2))
        result = identity(sp.expand(numerator), 0, f"n = {n}: E_pi[pi / pi_beta - 1] = chi^2(pi || pi_beta) >= 0")
        if not result.ok:  # the wrong push: show it negative somewhere
            point = {pf[0]: sp.Rational(3, 5), bf[0]: sp.Rational(9, 10)} if n == 2 else None
            if point is not None and sp.nsimplify(expected_push.subs(point)) < 0:
                result = ProofResult(REFUTED, result.steps, f"n = 2, pi = (3/5, 2/5), pi_beta = (9/10, 1/10): E_pi[push] = "
                                     f"{sp.nsimplify(expected_push.subs(point))} < 0", result.identities)
        steps.append(restate(result, shown=(sp.Sum(sp.Symbol("pi_a") * (sp.Symbol("pi_a") / sp.Symbol("beta_a") - 1), (sp.Symbol("a"), 1, n)),
                                            sp.Sum((sp.Symbol("pi_a") - sp.Symbol("beta_a")) ** 2 / sp.Symbol("beta_a"), (sp.Symbol("a"), 1, n)))))
        if not result.ok:
            return combine(steps)
    # the fixed point, on two states with symbolic transitions: V = V_0 - alpha (I - gamma P_pi)^-1 Delta
    alpha = sp.Symbol("alpha", positive=True)
    P = sp.Matrix(2, 2, sp.symbols("P_00 P_01 P_10 P_11", positive=True))
    r_pi = sp.Matrix(sp.symbols("r_0 r_1", real=True))
    Delta = sp.Matrix(sp.symbols("Delta_0 Delta_1", nonnegative=True))
    M = sp.eye(2) - gamma * P
    V = M.LUsolve(r_pi - alpha * Delta)
    V0 = M.LUsolve(r_pi)
    W = M.LUsolve(Delta)
    for s in (0, 1):
        steps.append(restate(identity(sp.simplify(V[s] - (V0[s] - alpha * W[s])), 0,
                                      f"V_hat({s}) = V_hat_0({s}) - alpha [(I - gamma P_pi)^-1 Delta]({s})"),
                             shown=(sp.Symbol(f"hat V_{s}"), sp.Symbol(f"hat V_0{s}") - alpha * sp.Symbol(f"w_{s}"))))
    return combine(steps)


@proof(
    "theory.cql_fixed_point",
    statement="""CQL's policy-evaluation fixed point (Kumar et al. 2020, eq. 2 with mu = pi, tabular): Q_hat = B_hat^pi Q_hat -
    alpha (pi / pi_beta - 1), so V_hat = V_hat_0 - alpha (I - gamma P_hat_pi)^-1 Delta with V_hat_0 the empirical MDP's value of
    pi and Delta(s) = E_pi[pi / pi_beta - 1] = chi^2(pi(.|s) || pi_beta(.|s)) >= 0. With exact backups any alpha > 0 gives
    V_hat <= V^pi; with a dataset's sampling error V_hat <= V^pi holds exactly for alpha >= max_s (V_hat_0 - V^pi)(s) / w(s),
    w = (I - gamma P_hat_pi)^-1 Delta, and fails at some state below it whenever V_hat_0 over-estimates there.""",
    assumptions="""pi and pi_beta categorical with positive symbolic probabilities (n = 2..4 actions, supp pi within
    supp pi_beta); the fixed point on two states with symbolic transitions, rewards and Delta >= 0; (I - gamma P_pi)^-1 is
    a Neumann series of nonnegative matrices, so w >= 0.""",
)
def cql_fixed_point(push=cql_push) -> ProofResult:
    return _cql_fixed_point(push)


# ---------------------------------------------------------------------------------------------
# batch advantage normalisation


def standardise(values, ddof: int):
    """``(A - mean A) / std_ddof(A)`` over the batch; a constant batch gives 0 (its std is 0)."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - ddof)
    return [sp.Integer(0)] * n if var == 0 else [(v - mean) / sp.sqrt(var) for v in values]


def _expected_batch_gradient(normalise, B: int, pi, R):
    """E[sum_i A_hat_i grad log pi(y_i)] over every batch of B independent draws, A_hat = normalise(R(y_1..y_B))."""
    K = len(pi)
    out = [sp.Integer(0)] * K
    for batch in itertools.product(range(K), repeat=B):
        weight = math.prod(pi[a] for a in batch)
        advantages = normalise([R[a] for a in batch])
        for a, adv in zip(batch, advantages):
            for k in range(K):
                out[k] += weight * adv * ((1 if a == k else 0) - pi[k])
    return [sp.nsimplify(sp.radsimp(sp.expand(x))) for x in out]


def _batch_normalisation(normalise=standardise) -> ProofResult:
    pi = [sp.Rational(1, 3)] * 3
    R = [sp.Integer(0), sp.Integer(1), sp.Integer(3)]
    J = sum(p * r for p, r in zip(pi, R))
    grad_J = [p * (r - J) for p, r in zip(pi, R)]  # (1/9)(-4, -1, 5)
    steps = []
    for B in (2, 3):
        centred = _expected_batch_gradient(lambda v: [x - sum(v) / len(v) for x in v], B, pi, R)
        steps.append(all_of((identity(c, (B - 1) * g, f"logit {k}") for k, (c, g) in enumerate(zip(centred, grad_J))),
                            f"B = {B}: the batch mean alone: E[sum_i (R_i - mean R) grad log pi_i] = (B - 1) grad J"))
        for ddof in (0, 1):
            estimate = _expected_batch_gradient(lambda v: normalise(v, ddof), B, pi, R)
            minor = sp.nsimplify(sp.radsimp(estimate[0] * grad_J[1] - estimate[1] * grad_J[0]))
            label = (f"B = {B}, ddof {ddof}: E[sum_i A_hat_i grad log pi_i] = ({', '.join(str(x) for x in estimate)}) "
                     f"is not parallel to grad J = (-4, -1, 5)/9")
            decided = [Identity(label, minor, sp.Integer(0), "!=")]
            steps.append(ProofResult(PROVED, [f"{label}: minor {sp.N(minor, 6)}"], identities=decided) if minor != 0 else
                         ProofResult(REFUTED, [f"{label}: refuted"], f"B = {B}, ddof = {ddof}: the minor = 0 (parallel)", decided))
            steps.append(identity(sum(estimate), 0, f"B = {B}, ddof {ddof}: the estimate sums to 0 over the logits"))
    return combine(steps)


@proof(
    "theory.batch_normalisation_bias",
    statement="""Batch advantage normalisation with the batch's own mean and std is biased, and not only in scale: with
    B draws from pi and A_hat_i = (R_i - mean R) / std_ddof(R) over the same batch, E[sum_i A_hat_i grad log pi(y_i)] is
    not parallel to grad J. The mean alone scales it exactly by (B - 1) (GRPO's group mean: (1 - 1/B) per sample); the
    std's division is what turns it: at pi uniform over three outcomes with R = (0, 1, 3), grad J = (-4, -1, 5)/9 and
    for B = 3 the expected normalised estimate points elsewhere (exact radicals), for ddof 0 and 1.""",
    assumptions="""Categorical pi uniform over K = 3 outcomes, scores R = (0, 1, 3), softmax logits (grad log pi(y) =
    e_y - pi); every batch of B = 2, 3 independent draws enumerated; a constant batch gives 0 (std 0, eps 0).""",
)
def batch_normalisation_bias(normalise=standardise) -> ProofResult:
    return _batch_normalisation(normalise)
