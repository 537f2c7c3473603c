"""Proofs for the offline-RL chapter: CQL(H)'s log-partition penalty and its importance-sampled estimate
(Kumar et al. 2020, arXiv:2006.04779, eq. 4 and Appendix F), IQL's expectile regression (Kostrikov et al.
2021, arXiv:2110.06169, §4.1) and the advantage-weighted target policy (Peng et al. 2019,
arXiv:1910.00177, §3).

Action sets are finite with A = 2..5 actions. A softmax over Q is written with e_a = exp(Q_a) (positive
symbols) and its log-partition with an independent symbol L standing for log sum_a e_a wherever only
log softmax_a = Q_a - L is needed, so that identities are polynomial or rational and SymPy decides them on
a numerator. Distributions are symbolic positive probabilities with the last one 1 - the others.

The registered proofs take no parameters; the module-level functions they call take the formula under
test, so tests/test_offline.py (and tests/test_proofs.py) can show that a wrong formula is refuted.
"""

from __future__ import annotations

import itertools
import math

import sympy as sp

from .. import contract
from .core import INCONCLUSIVE, PROVED, ProofResult, combine, identity, proof
from .pg import all_of, nonzero, rational_identity

EXP_Q = {f"e{i}": sp.exp(sp.Symbol(f"Q{i}")) for i in range(8)}  # the working symbols e_i = exp(Q_i), as the book prints them
ACTION_COUNTS = range(2, 6)


def simplex(n: int, name: str):
    """n positive symbols and the substitution putting them on the simplex (the last = 1 - the others)."""
    free = sp.symbols(f"{name}0:{n}", positive=True)
    return free, {free[-1]: 1 - sum(free[:-1])}


def positive(expr, label: str) -> ProofResult:
    """``expr > 0`` from SymPy's assumptions (positive symbols, sums and products of them); fails closed."""
    if sp.sympify(expr).is_positive:
        return ProofResult(PROVED, [f"{label}: positive"])
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: cannot show {expr} > 0")


# ---------------------------------------------------------------------------------------------
# CQL(H): the log-partition and its bounds


def logsumexp_gradient(Q, L_of_Q):
    """d/dQ_b of the log-partition, differentiated (a formula under test: ``L_of_Q`` maps Q to it)."""
    return [sp.diff(L_of_Q(Q), q) for q in Q]


def exact_log_partition(Q):
    return sp.log(sum(sp.exp(q) for q in Q))


def _logsumexp_penalty_bounds(log_partition=exact_log_partition) -> ProofResult:
    steps = []
    for A in ACTION_COUNTS:
        Q = sp.symbols(f"Q0:{A}", real=True)
        nu, on_nu = simplex(A, "nu")
        L = sp.Symbol("L", real=True)  # log sum exp Q, where only log softmax = Q - L is needed
        # (1) logsumexp - E_nu Q = KL(nu || softmax Q) + H(nu), with log softmax_a = Q_a - L
        kl = sum(n * (sp.log(n) - (q - L)) for n, q in zip(nu, Q))
        entropy = -sum(n * sp.log(n) for n in nu)
        steps.append(identity(sp.expand((kl + entropy).subs(on_nu)), sp.expand((L - sum(n * q for n, q in zip(nu, Q))).subs(on_nu)),
                              f"A = {A}: logsumexp Q - E_nu Q = KL(nu || softmax Q) + H(nu)"))
        # (2) the expected gradient of logsumexp Q - Q_a over a ~ nu is softmax(Q) - nu (exp(Q_a) -> e_a: rational)
        positive_e = sp.symbols(f"e0:{A}", positive=True)
        to_e = {sp.exp(q): ei for q, ei in zip(Q, positive_e)}
        grad = [g.subs(to_e) for g in logsumexp_gradient(Q, log_partition)]
        soft = [ei / sum(positive_e) for ei in positive_e]
        expected = [sum(nu[a] * (grad[b] - (1 if a == b else 0)) for a in range(A)) for b in range(A)]
        steps.append(all_of((rational_identity(g.subs(on_nu), (sm - n).subs(on_nu), f"component {b}")
                             for b, (g, sm, n) in enumerate(zip(expected, soft, nu))),
                            f"A = {A}: E_nu[d (logsumexp Q - Q_a) / dQ] = softmax(Q) - nu"))
        # (3) shift invariance: logsumexp Q - max Q = log(1 + sum_{a != a*} exp(Q_a - Q_a*)) > 0 with a* the greedy
        gaps = sp.symbols(f"g1:{A}", positive=True)  # Q_a* - Q_a >= 0; strictly positive gaps give the interior
        shifted = sp.log(1 + sum(sp.exp(-g) for g in gaps))
        m = sp.Symbol("m", real=True)
        at = [m] + [m - g for g in gaps]
        factored = log_partition(at).replace(sp.log, lambda arg: sp.log(sp.factor_terms(sp.expand(arg))))  # e^m out
        steps.append(identity(sp.expand_log(factored, force=True) - m, shifted,
                              f"A = {A}: logsumexp Q - max Q = log(1 + sum exp(-(gaps)))"))
        steps.append(positive(shifted, f"A = {A}: logsumexp Q - max Q"))
        if not all(s.ok for s in steps):
            break
    # (4) the bound logsumexp - max <= log A: each exp(-gap) <= 1, so 1 + sum <= A, i.e. A - (1 + sum) = sum (1 - exp(-g))
    # and 1 - exp(-g) = (e^g - 1) / e^g > 0 for g > 0
    g, t = sp.symbols("g t", positive=True)
    steps.append(identity(sp.integrate(sp.exp(-t), (t, 0, g)), 1 - sp.exp(-g), "1 - exp(-g) = integral_0^g exp(-t) dt"))
    steps.append(positive(sp.exp(-t), "exp(-t), so 1 - exp(-g) > 0 for a gap g > 0 and logsumexp - max < log A"))
    # (5) the temperature form T logsumexp(Q / T) - E_nu Q = T (KL(nu || softmax(Q / T)) + H(nu))
    T = sp.Symbol("T", positive=True)
    Q = sp.symbols("Q0:3", real=True)
    nu, on_nu = simplex(3, "nu")
    L = sp.Symbol("L", real=True)  # log sum exp(Q / T)
    kl = sum(n * (sp.log(n) - (q / T - L)) for n, q in zip(nu, Q))
    entropy = -sum(n * sp.log(n) for n in nu)
    steps.append(identity(sp.expand((T * (kl + entropy)).subs(on_nu)), sp.expand((T * L - sum(n * q for n, q in zip(nu, Q))).subs(on_nu)),
                          "A = 3: T logsumexp(Q / T) - E_nu Q = T (KL(nu || softmax(Q / T)) + H(nu))"))
    # (6) without the entropy the linear form E_mu Q - Q(a_data) needs mu greedy: with mu = softmax(Q), Q = (0, 1) and
    # the data on action 1 it is e / (1 + e) - 1 = -1 / (1 + e) < 0
    linear = sp.E / (1 + sp.E) * 1 + 1 / (1 + sp.E) * 0 - 1
    steps.append(identity(linear, -1 / (1 + sp.E), "Q = (0, 1), data action 1: E_softmax(Q) Q - Q(a_data) = -1 / (1 + e)"))
    steps.append(positive(1 / (1 + sp.E), "1 / (1 + e), so the linear form is negative there"))
    return combine(steps)


@proof(
    "offline.logsumexp_penalty_bounds",
    notation=EXP_Q,
    statement="""CQL(H)'s penalty logsumexp_a Q(s, a) - Q(s, a_data): (i) its expectation over dataset actions
    a ~ nu is KL(nu || softmax Q) + H(nu) >= 0, for every nu (no assumption on the data: the soft maximum is
    above every average of Q); (ii) per sample, logsumexp Q - max Q = log(1 + sum_{a != a*} exp(Q_a - max Q)) lies
    in (0, log A], so logsumexp Q > max Q >= Q(s, a_data) for every dataset action; (iii) the expected gradient
    in Q is softmax(Q) - nu, zero exactly when the data's action distribution is softmax(Q), where the expected
    penalty is H(nu); (iv) with a temperature, T logsumexp(Q / T) - E_nu Q = T (KL(nu || softmax(Q / T)) + H(nu)).
    (v) The entropy is what makes it hold for every data distribution: the linear form E_mu Q - Q(s, a_data) of
    CQL's un-regularised family is non-negative for every dataset action only when mu is greedy in Q; with mu =
    softmax(Q), Q = (0, 1) and the data's action 1 it is -1 / (1 + e).""",
    assumptions="""A finite action set, A = 2..5 (the temperature identity for A = 3); Q real and finite; nu a
    distribution with positive symbolic probabilities summing to 1 (an action nu never takes contributes 0 to
    the expectations); the greedy action's gaps to the others positive (ties: the limit, the bounds still hold
    with <= for the strict ones). Logarithms of the softmax are Q_a - L with L = logsumexp Q.""",
)
def logsumexp_penalty_bounds() -> ProofResult:
    return _logsumexp_penalty_bounds()


# ---------------------------------------------------------------------------------------------
# CQL(H) for continuous actions: the importance-sampled partition function


def consistent_weight(q, log_p, T):
    """The per-sample term of Z in the consistent form: exp(Q / T - log p)."""
    return sp.exp(q / T) / sp.exp(log_p)


def density_inside_weight(q, log_p, T):
    """The CQL authors' code's term: exp((Q - log p) / T) (the density raised to -1/T)."""
    return sp.exp((q - log_p) / T)


def _importance_sampled_partition(weight=consistent_weight) -> ProofResult:
    steps = []
    T = sp.Symbol("T", positive=True)
    # (1) one sample from a proposal p over K actions (counting measure): E_p[term] = sum_a exp(Q_a / T)
    for K in (2, 3, 4):
        p, on_p = simplex(K, "p")
        Q = sp.symbols(f"Q0:{K}", real=True)
        expectation = sum(pa * weight(qa, sp.log(pa), T) for pa, qa in zip(p, Q))
        target = sum(sp.exp(qa / T) for qa in Q)
        steps.append(identity(sp.simplify(sp.powsimp(sp.expand(expectation - target), force=True).subs(on_p)), 0,
                              f"K = {K}: E_p[exp(Q / T - log p)] = sum_a exp(Q_a / T) for every T > 0 and every proposal p"))
        if not steps[-1].ok:
            return combine(steps)
    # (2) n = 2 samples from two different proposals p and r, Z = (1/2)(term_1 + term_2): unbiased over every
    # joint outcome (the mixture of a uniform and a policy proposal)
    K = 3
    p, on_p = simplex(K, "p")
    r, on_r = simplex(K, "r")
    e = sp.symbols(f"e0:{K}", positive=True)  # exp(Q_a) at T = 1
    Z = sp.Integer(0)
    for a, b in itertools.product(range(K), repeat=2):
        term = lambda ea, pa: weight(sp.log(ea), sp.log(pa), 1)
        Z += p[a] * r[b] * (term(e[a], p[a]) + term(e[b], r[b])) / 2
    steps.append(identity(sp.simplify(sp.expand(Z - sum(e)).subs({**on_p, **on_r})), 0,
                          "two samples from two proposals, each weighted by its own density: E[Z] = sum_a exp(Q_a)"))
    # (3) the uniform density on a box: exp(-sum_d log(h_d - l_d)) integrates to 1 over [l, h], D = 1..3, and a
    # constant Q = c gives log Z = c + log(volume) for every sample
    for D in (1, 2, 3):
        lows = sp.symbols(f"l0:{D}", real=True)
        widths = sp.symbols(f"w0:{D}", positive=True)
        xs = sp.symbols(f"x0:{D}", real=True)
        density = sp.exp(-sum(sp.log(w) for w in widths))
        integral = density
        for x, l, w in zip(xs, lows, widths):
            integral = sp.integrate(integral, (x, l, l + w))
        steps.append(identity(sp.simplify(integral), 1, f"D = {D}: the uniform log-density -sum_d log(h_d - l_d) integrates to 1"))
        c = sp.Symbol("c", real=True)
        log_z = sp.log(weight(c, -sum(sp.log(w) for w in widths), 1))
        steps.append(identity(sp.expand_log(log_z, force=True), c + sum(sp.log(w) for w in widths),
                              f"D = {D}: Q = c gives log Z = c + log(volume)"))
    return combine(steps)


@proof(
    "offline.importance_sampled_partition",
    statement="""The importance-sampled partition function of CQL(H) (arXiv:2006.04779, Appendix F) is unbiased: for one
    sample a ~ p, E_p[exp(Q(a) / T - log p(a))] = sum_a exp(Q(a) / T) for every proposal p with full support and
    every temperature T > 0; the mean of samples drawn from different proposals (uniform and policy), each weighted
    by its own proposal's density, is unbiased too. The uniform density on a box is exp(-sum_d log(h_d - l_d)), so
    a constant Q = c gives log Z = c + log(volume). The density-inside form exp((Q - log p) / T) is unbiased only
    at T = 1 (for a uniform proposal, up to a constant factor): E_p[...] = sum_a exp(Q_a / T) p_a^(1 - 1/T).""",
    assumptions="""Finite action sets (counting measure) of K = 2..4 actions with symbolic positive proposal
    probabilities summing to 1, symbolic real Q and T > 0; two proposals over 3 actions for the mixture; boxes of
    D = 1..3 dimensions with positive widths (the density and the log-volume by integration). The density-inside
    form is refuted separately (tests/test_offline.py) and shown biased at T = 1/2 by
    offline.density_inside_biased.""",
)
def importance_sampled_partition() -> ProofResult:
    return _importance_sampled_partition()


def _density_inside_biased() -> ProofResult:
    p = [sp.Rational(1, 4), sp.Rational(3, 4)]
    Q = [sp.Integer(0), sp.Integer(1)]
    T = sp.Rational(1, 2)
    expectation = sum(pa * density_inside_weight(qa, sp.log(pa), T) for pa, qa in zip(p, Q))
    target = sum(sp.exp(qa / T) for qa in Q)
    closed = sum(sp.exp(qa / T) * pa ** (1 - 1 / T) for pa, qa in zip(p, Q))
    return combine([
        identity(sp.simplify(expectation - closed), 0, "E_p[exp((Q - log p) / T)] = sum_a exp(Q_a / T) p_a^(1 - 1/T)"),
        nonzero(expectation - target, "p = (1/4, 3/4), Q = (0, 1), T = 1/2: E_p[exp((Q - log p) / T)] - sum exp(Q / T)"),
        identity(sp.simplify(sum(pa * density_inside_weight(qa, sp.log(pa), 1) for pa, qa in zip(p, Q)) - sum(sp.exp(q) for q in Q)), 0,
                 "at T = 1 the two forms agree"),
    ])


@proof(
    "offline.density_inside_biased",
    statement="""The form T logsumexp((Q - log p) / T) of the CQL authors' code weights each sample by p^(-1/T): the inside
    of its log has expectation sum_a exp(Q_a / T) p_a^(1 - 1/T), which differs from the partition function sum_a
    exp(Q_a / T) when T != 1 and p is not uniform: p = (1/4, 3/4), Q = (0, 1), T = 1/2 gives 4 + 4 e^2 / 3 against
    1 + e^2 (biased however many samples are drawn).""",
    assumptions="Two actions, exact rationals and e; the density-inside term exp((Q - log p) / T).",
)
def density_inside_biased() -> ProofResult:
    return _density_inside_biased()


def single_sample_log_estimate(q, log_p):
    """log of one importance-weighted term: Q(a) - log p(a)."""
    return q - log_p


def _sampled_penalty_biased_low(estimate=single_sample_log_estimate) -> ProofResult:
    steps = []
    for K in (2, 3, 4):
        p, on_p = simplex(K, "p")
        Q = sp.symbols(f"Q0:{K}", real=True)
        L = sp.Symbol("L", real=True)  # log sum exp Q
        kl = sum(pa * (sp.log(pa) - (qa - L)) for pa, qa in zip(p, Q))  # KL(p || softmax Q)
        e_log = sum(pa * estimate(qa, sp.log(pa)) for pa, qa in zip(p, Q))
        steps.append(identity(sp.expand((e_log - (L - kl)).subs(on_p)), 0,
                              f"K = {K}: E_p[log(exp(Q) / p)] = logsumexp Q - KL(p || softmax Q)"))
        if not steps[-1].ok:
            return combine(steps)
    z1, z2 = sp.symbols("z1 z2", positive=True)
    steps.append(identity((z1 + z2) / 2 - sp.sqrt(z1 * z2), (sp.sqrt(z1) - sp.sqrt(z2)) ** 2 / 2,
                          "two equally likely values z1, z2 of Z: mean - geometric mean = (sqrt z1 - sqrt z2)^2 / 2 >= 0"))
    return combine(steps)


@proof(
    "offline.sampled_penalty_biased_low",
    statement="""The log of the importance-sampled partition function is biased low (Jensen: E[log Z_hat] <= log E[Z_hat]):
    with one sample from a proposal p the bias is exactly -KL(p || softmax Q), E_p[Q(a) - log p(a)] = logsumexp Q -
    KL(p || softmax Q), zero only when the proposal is softmax(Q) itself; for two equally likely values the gap is
    (sqrt z1 - sqrt z2)^2 / 2 inside the log. So the sampled penalty underestimates the exact CQL(H) penalty in
    expectation (and can be negative for a single state) while its inside is unbiased.""",
    assumptions="""Finite action sets of K = 2..4 actions (counting measure), symbolic positive proposal probabilities
    summing to 1, real Q; L = logsumexp Q where only log softmax = Q - L is needed.""",
)
def sampled_penalty_biased_low() -> ProofResult:
    return _sampled_penalty_biased_low()


# ---------------------------------------------------------------------------------------------
# IQL: the expectile loss


def expectile_weight(u, tau):
    """|tau - 1(u < 0)|: tau where the target is above the prediction (u > 0), 1 - tau below."""
    return (1 - tau) if u < 0 else tau


def piece_loss(x, p, m, tau, j, weight):
    """The expected loss on the piece where the first j targets (sorted) are below m."""
    total = 0
    for k, (xk, pk) in enumerate(zip(x, p)):
        below = k < j  # x_k < m on this piece: u = x_k - m < 0
        w = weight(-1 if below else 1, tau)
        total += pk * w * (xk - m) ** 2
    return total


def _expectile_minimiser(weight=expectile_weight) -> ProofResult:
    steps = []
    s = sp.Symbol("s", positive=True)
    tau = s / (1 + s)  # every tau in (0, 1): tau and 1 - tau = 1 / (1 + s) positive
    m = sp.Symbol("m", real=True)
    for n in (2, 3):
        x = sp.symbols(f"x0:{n}", real=True)
        p, on_p = simplex(n, "p")
        for j in range(n + 1):  # the piece between the j-th and the (j+1)-th sorted target
            loss = piece_loss(x, p, m, tau, j, weight)
            first = sp.diff(loss, m)
            # the first-order condition: dL/dm = -2 (tau E[(X - m)_+] - (1 - tau) E[(m - X)_+]) on this piece
            above = sum(pk * (xk - m) for k, (xk, pk) in enumerate(zip(x, p)) if k >= j)
            below = sum(pk * (m - xk) for k, (xk, pk) in enumerate(zip(x, p)) if k < j)
            steps.append(rational_identity(first, -2 * (tau * above - (1 - tau) * below),
                                           f"n = {n}, piece {j}: dL/dm = -2 (tau E[(X - m)_+] - (1 - tau) E[(m - X)_+])"))
            # the stationary point is the (1 - tau, tau)-weighted mean of the targets below and above
            weights = [(1 - tau) if k < j else tau for k in range(n)]
            star = sum(w * pk * xk for w, pk, xk in zip(weights, p, x)) / sum(w * pk for w, pk in zip(weights, p))
            steps.append(rational_identity(first.subs(m, star), 0, f"n = {n}, piece {j}: dL/dm = 0 at the weighted mean"))
            # strictly convex: the second derivative is 2 sum_k w_k p_k > 0
            steps.append(positive(sp.diff(loss, m, 2), f"n = {n}, piece {j}: d2L/dm2 = 2 sum_k w_k p_k"))
            # tau = 1/2: the mean, on every piece
            steps.append(rational_identity(star.subs(s, 1).subs(on_p), sum(pk * xk for pk, xk in zip(p, x)).subs(on_p),
                                           f"n = {n}, piece {j}: tau = 1/2 gives the mean"))
            if not all(st.ok for st in steps[-4:]):
                return combine(steps)
    # the known answer: targets 0, 1, 3 with probabilities 1/4, 1/4, 1/2 and tau = 3/4: the expectile is 19/8
    answer = contract.known_answer("offline.expectile-minimiser")
    targets = [sp.nsimplify(v) for v in answer.inputs["target"]]
    m_star = sp.nsimplify(answer.inputs["prediction"][0])
    t = sp.nsimplify(answer.inputs["tau"])
    probs = [sp.Rational(1, 4), sp.Rational(1, 4), sp.Rational(1, 2)]
    j = sum(1 for v in targets if v < m_star)
    expected_loss = piece_loss(targets, probs, m, t, j, weight)
    steps.append(identity(sp.diff(expected_loss, m).subs(m, m_star), 0,
                          f"targets {answer.inputs['target']}, probabilities 1/4, 1/4, 1/2, tau = {answer.inputs['tau']}: "
                          f"dE[L]/dm = 0 at m = {m_star} (the known answer offline.expectile-minimiser)"))
    per_target = [weight(v - m_star, t) * (v - m_star) ** 2 for v in targets]
    steps.append(all_of((identity(got, sp.nsimplify(want), f"target {v}") for got, want, v in
                         zip(per_target, answer.outputs["loss"], targets)), "the known answer's losses"))
    mean = sum(pv * v for pv, v in zip(probs, targets))
    steps.append(positive(m_star - mean, "tau = 3/4 > 1/2: the expectile lies above the mean 7/4"))
    return combine(steps)


@proof(
    "offline.expectile_minimiser",
    notation={"s": sp.Symbol("tau", positive=True) / (1 - sp.Symbol("tau", positive=True))},  # tau = s / (1 + s)
    statement="""The expected expectile loss E[|tau - 1(X - m < 0)| (X - m)^2] over a discrete distribution of targets X is
    piecewise quadratic and strictly convex in the prediction m, with derivative -2 (tau E[(X - m)_+] - (1 - tau)
    E[(m - X)_+]); its unique minimiser is the tau-expectile, on its piece the weighted mean of the targets with
    weight tau above m and 1 - tau below. tau = 1/2 gives the mean on every piece; the known answer (targets 0, 1, 3
    with probabilities 1/4, 1/4, 1/2, tau = 3/4) has its expectile at 19/8 = 2.375, above the mean 7/4. A reversed
    weight exchanges tau and 1 - tau.""",
    assumptions="""n = 2, 3 targets, sorted, with symbolic positive probabilities summing to 1; tau = s / (1 + s) with
    s > 0 (every tau in (0, 1)); m on each of the n + 1 pieces between consecutive targets (the derivative is
    continuous across them, so a stationary point on its own piece is the global minimiser).""",
)
def expectile_minimiser() -> ProofResult:
    return _expectile_minimiser()


# ---------------------------------------------------------------------------------------------
# AWR / IQL's actor: the advantage-weighted target policy


def weighted_target(mu, w):
    """pi*(a) = mu(a) w(a) / sum_b mu(b) w(b)."""
    total = sum(m * x for m, x in zip(mu, w))
    return [m * x / total for m, x in zip(mu, w)]


def _weighted_regression_fixed_point(target=weighted_target) -> ProofResult:
    steps = []
    for K in (2, 3, 4):
        mu, on_mu = simplex(K, "mu")
        w = sp.symbols(f"w0:{K}", positive=True)
        pi = target(mu, w)
        # d/dtheta_b of E_mu[-w(a) log softmax(theta)_a] = -mu_b w_b + pi_b sum_a mu_a w_a
        gradient = [-mu[b] * w[b] + pi[b] * sum(m * x for m, x in zip(mu, w)) for b in range(K)]
        steps.append(all_of((rational_identity(g.subs(on_mu), 0, f"logit {b}") for b, g in enumerate(gradient)),
                            f"K = {K}: the expected actor loss is stationary at pi* = mu w / sum mu w"))
        steps.append(identity(sp.simplify(sum(pi)), 1, f"K = {K}: pi* sums to 1"))
        equal = {x: w[0] for x in w[1:]}
        steps.append(all_of((rational_identity(a.subs(equal).subs(on_mu), m.subs(on_mu), f"action {k}") for k, (a, m) in enumerate(zip(pi, mu))),
                            f"K = {K}: equal weights (A = 0, or every weight clipped) give pi* = mu"))
        if not all(st.ok for st in steps[-3:]):
            break
    return combine(steps)


@proof(
    "offline.weighted_regression_fixed_point",
    statement="""Advantage-weighted regression's target: over a categorical policy pi = softmax(theta), the expected loss
    E_{a ~ mu}[-w(a) log pi(a)] with positive weights w has logit gradient -mu_b w_b + pi_b sum_a mu_a w_a, which vanishes
    exactly at pi*(a) = mu(a) w(a) / sum_b mu(b) w(b) (the loss is convex in theta, so this is its minimum). With
    w = exp(beta A) this is the KL-regularised improvement pi* proportional to mu exp(beta A); equal weights give
    pi* = mu; a clip changes the target to mu min(exp(beta A), w_max), normalised.""",
    assumptions="""K = 2..4 actions; mu with symbolic positive probabilities summing to 1; symbolic positive weights;
    d log softmax(theta)_a / d theta_b = [a = b] - pi_b.""",
)
def weighted_regression_fixed_point() -> ProofResult:
    return _weighted_regression_fixed_point()
