"""Proofs for the GRPO chapter: group baselines and the KL penalty's gradient as a loss.

Group baselines. A prompt's G responses y_1..y_G are drawn independently from a categorical policy
pi over K outcomes, with scores R(y). The policy-gradient estimator with advantages A_i is
sum_i A_i grad log pi(y_i); for softmax logits theta, grad log pi(a) = e_a - pi (pg.score_zero_mean).
The unbiased target is G grad J = G E[R(y) grad log pi(y)] (the log-derivative trick, pg chapter).
Expectations are exact sums over all K^G joint outcomes, with symbolic probabilities
(pi_{K-1} = 1 - the others) and symbolic scores.

KL penalty. pi = softmax(theta) over n outcomes, pi_ref = q with symbolic probabilities. The
estimators are functions of the log ratio x = log q(y) - l, where l = log pi(y) is the argument the
loss is differentiated in; the sampling weights are held fixed (a training step differentiates the
loss, not the distribution its tokens were drawn from). The targets grad KL(pi || q) and
grad KL(q || pi) are obtained by differentiating the KL definitions in theta.

The registered proofs take no parameters; the module-level functions they call take the formula
under test, so tests/test_grpo.py can show that a wrong formula is refuted.
"""

from __future__ import annotations

import itertools
import math

import sympy as sp

from .core import PROVED, Identity, ProofResult, combine, identity, proof
from .pg import all_of, nonzero, rational_identity

# the working symbols p_i, q_i (probabilities of outcome i) as the clauses write them: pi(y_i), pi_ref(y_i)
POLICY_NOTATION = {**{f"p{i}": sp.Symbol(f"pi_{i}", positive=True) for i in range(8)},
                   **{f"q{i}": sp.Symbol(f"pi^ref_{i}", positive=True) for i in range(8)}}


# ---------------------------------------------------------------------------------------------
# group baselines


def leave_one_out(r, i):
    """The leave-one-out advantage r_i - mean_{j != i} r_j."""
    others = [rj for j, rj in enumerate(r) if j != i]
    return r[i] - sum(others) / len(others)


def group_mean(r, i):
    """The group-mean advantage r_i - mean_j r_j (the sample itself included)."""
    return r[i] - sum(r) / len(r)


def simplex_symbols(n: int, name: str):
    """n positive symbols and the substitution that puts them on the simplex (the last = 1 - the others)."""
    free = sp.symbols(f"{name}0:{n}", positive=True)
    return free, {free[-1]: 1 - sum(free[:-1])}


def expected_estimator(advantage, K: int, G: int):
    """sum over all joint outcomes of P(o) sum_i A_i (e_{y_i} - pi), one entry per logit; and the target
    E[R(y) (e_y - pi)], both with symbolic pi (K outcomes) and scores R."""
    pi, simplex = simplex_symbols(K, "p")
    R = sp.symbols(f"R0:{K}", real=True)
    estimate = [sp.Integer(0)] * K
    for outcome in itertools.product(range(K), repeat=G):
        weight = math.prod(pi[a] for a in outcome)
        scores = [R[a] for a in outcome]
        for i, a in enumerate(outcome):
            A = advantage(scores, i)
            for k in range(K):
                estimate[k] += weight * A * ((1 if a == k else 0) - pi[k])
    target = [sum(pi[a] * R[a] * ((1 if a == k else 0) - pi[k]) for a in range(K)) for k in range(K)]
    # on the simplex (the last probability 1 - the others), expanded: the identities are polynomial
    return [sp.expand(x.subs(simplex)) for x in estimate], [sp.expand(x.subs(simplex)) for x in target]


LOO_CASES = [(2, G) for G in range(2, 6)] + [(3, 2), (3, 3)]


def independence_steps() -> list[ProofResult]:
    """The fact that makes the leave-one-out baseline unbiased for every G, checked for K = 2..4 outcomes:
    a sample paired with another, independent one: E[R(y') grad log pi(y)] = E[R] E[grad log pi] = 0, while a
    sample with its own score gives E[R(y) grad log pi(y)] = grad J (the target). By linearity,
    E[sum_i (r_i - (1/(G-1)) sum_{j != i} r_j) s_i] = sum_i (E[R s] - 0) = G E[R s] for every G >= 2."""
    steps = []
    for K in range(2, 5):  # every K: E[R(y')] E[grad log pi(y)] = J 0 by pg.score_zero_mean
        p, simplex = simplex_symbols(K, "p")
        R = sp.symbols(f"R0:{K}", real=True)
        cross = [sum(p[a] * p[b] * R[b] * ((1 if a == k else 0) - p[k]) for a in range(K) for b in range(K)) for k in range(K)]
        steps.append(all_of((identity(sp.expand(c.subs(simplex)), 0, f"logit {k}") for k, c in enumerate(cross)),
                            f"K = {K}: E[R(y') grad log pi(y)] = 0 for independent y, y' (every G)"))
    return steps


def _leave_one_out_unbiased(advantage=leave_one_out) -> ProofResult:
    steps = independence_steps()
    for K, G in LOO_CASES:
        estimate, target = expected_estimator(advantage, K, G)
        steps.append(all_of((identity(e, G * t, f"logit {k}") for k, (e, t) in enumerate(zip(estimate, target))),
                            f"K = {K}, G = {G}: E[sum_i A_i grad log pi(y_i)] = G E[R grad log pi] over every joint outcome"))
        if not steps[-1].ok:
            break
    return combine(steps)


@proof(
    "grpo.leave_one_out_unbiased",
    notation=POLICY_NOTATION,
    statement="""The leave-one-out baseline is unbiased: with G independent draws from pi and A_i = r_i -
    mean_{j != i} r_j, E[sum_i A_i grad log pi(y_i)] = G E[R(y) grad log pi(y)] = G grad J exactly, because the
    baseline of sample i is a function of the other samples only, independent of y_i, and the score has mean
    zero. Verified over every joint outcome.""",
    assumptions="""Categorical pi over K outcomes with symbolic probabilities (summing to 1), symbolic real
    scores R, softmax logits (grad log pi(a) = e_a - pi). Every G through linearity and the pairwise
    independence identity (K = 2..4); the whole estimator over every joint outcome for K = 2 with
    G = 2..5 and K = 3 with G = 2, 3.""",
)
def leave_one_out_unbiased() -> ProofResult:
    return _leave_one_out_unbiased()


def _group_mean_scales(advantage=group_mean) -> ProofResult:
    steps = []
    # every G: with S the sum of the other G - 1 scores, r - (r + S) / G = (1 - 1/G)(r - S / (G - 1))
    G = sp.Symbol("G", integer=True, positive=True)
    r, S = sp.symbols("r S", real=True)
    general = r - (r + S) / G if advantage is group_mean else None
    if general is not None:
        steps.append(identity(sp.together(general - (1 - 1 / G) * (r - S / (G - 1))), 0,
                              "every G >= 2: r_i - mean_j r_j = (1 - 1/G)(r_i - mean_{j != i} r_j)"))
    for n in range(2, 7):
        rs = sp.symbols(f"r0:{n}", real=True)
        steps.append(all_of((identity(advantage(list(rs), i), sp.Rational(n - 1, n) * leave_one_out(list(rs), i), f"sample {i}")
                             for i in range(n)), f"G = {n}: the group-mean advantage is (1 - 1/G) times the leave-one-out one"))
        if not steps[-1].ok:
            return combine(steps)
    for K, Gn in [(2, 2), (2, 3), (2, 4), (3, 2)]:
        estimate, target = expected_estimator(advantage, K, Gn)
        steps.append(all_of((identity(e, (Gn - 1) * t, f"logit {k}") for k, (e, t) in enumerate(zip(estimate, target))),
                            f"K = {K}, G = {Gn}: E[sum_i (r_i - mean) grad log pi(y_i)] = (G - 1) grad J"))
        if not steps[-1].ok:
            break
    return combine(steps)


@proof(
    "grpo.group_mean_scales_leave_one_out",
    notation=POLICY_NOTATION,
    statement="""The group mean as a baseline is the leave-one-out baseline scaled: r_i - mean_j r_j =
    (1 - 1/G)(r_i - mean_{j != i} r_j) sample by sample, for every G >= 2, so E[sum_i (r_i - mean_j r_j) grad
    log pi(y_i)] = (G - 1) grad J exactly: the direction is unbiased and the magnitude is (1 - 1/G) times the
    unbiased estimator's. This is the exact size of the 'small bias' of a group-mean baseline: a factor, not
    an additive term, and a different factor for groups of different sizes.""",
    assumptions="""G >= 2 samples; the identity symbolically in G with S the sum of the other samples, and
    explicitly for G = 2..6; the expectation over every joint outcome for K = 2, G = 2..4 and K = 3, G = 2
    (symbolic probabilities and scores).""",
)
def group_mean_scales_leave_one_out() -> ProofResult:
    return _group_mean_scales()


def grpo_advantage_g2(scores, i):
    """kind 'grpo' for G = 2, ddof 1, eps 0 (ties give 0): (r_i - m) / s with s = |r_0 - r_1| / sqrt(2)."""
    r0, r1 = scores
    if r0 == r1:
        return sp.Integer(0)
    return (scores[i] - (r0 + r1) / 2) / (sp.Abs(r0 - r1) / sp.sqrt(2))


def _std_normalisation_biased(advantage=grpo_advantage_g2) -> ProofResult:
    pi = [sp.Rational(1, 3)] * 3
    R = [sp.Integer(0), sp.Integer(1), sp.Integer(3)]
    estimate = [sp.Integer(0)] * 3
    for outcome in itertools.product(range(3), repeat=2):
        weight = pi[outcome[0]] * pi[outcome[1]]
        scores = [R[a] for a in outcome]
        for i, a in enumerate(outcome):
            A = advantage(scores, i)
            for k in range(3):
                estimate[k] += weight * A * ((1 if a == k else 0) - pi[k])
    J = sum(p * r for p, r in zip(pi, R))
    grad_J = [pi[k] * (R[k] - J) for k in range(3)]
    # not parallel: some 2x2 minor of [estimate; grad J] is non-zero
    minor = sp.nsimplify(estimate[0] * grad_J[1] - estimate[1] * grad_J[0])
    stated = [-2 * sp.sqrt(2) / 9, sp.Integer(0), 2 * sp.sqrt(2) / 9]
    return combine([
        all_of((identity(e, v, f"logit {k}") for k, (e, v) in enumerate(zip(estimate, stated))),
               "the expected estimate is (2 sqrt(2) / 9)(-1, 0, 1)") if advantage is grpo_advantage_g2 else ProofResult(PROVED, []),
        nonzero(minor, "pi uniform over 3, R = (0, 1, 3), G = 2: estimate_0 gradJ_1 - estimate_1 gradJ_0 (not parallel)"),
        identity(sum(estimate), 0, "the estimate still sums to 0 over the logits (softmax invariance)"),
    ])


@proof(
    "grpo.std_normalisation_biased",
    statement="""Dividing by the group std biases the direction of the estimator in general: for G = 2 the
    'grpo' advantages are +-1/sqrt(2) sign(r_i - r_j) whatever the gap, so the expected update follows a
    rank objective, not J. At pi uniform over three outcomes with R = (0, 1, 3), E[sum_i A_i grad log
    pi(y_i)] = (2 sqrt(2) / 9)(-1, 0, 1) while grad J = (1/9)(-4, -1, 5): not parallel.""",
    assumptions="G = 2, ddof 1, eps 0 (a tie gives advantage 0); softmax logits; exact rationals and sqrt(2).",
)
def std_normalisation_biased() -> ProofResult:
    return _std_normalisation_biased()


# ---------------------------------------------------------------------------------------------
# the KL penalty as a loss

x_, l_ = sp.symbols("x l", real=True)
ESTIMATORS = {"k1": -x_, "k2": x_**2 / 2, "k3": sp.exp(x_) - 1 - x_}


def plain_derivative(kind):
    """d k(log q - l) / d l for the estimator itself."""
    q_, = sp.symbols("lq", real=True),
    derivative = sp.diff(ESTIMATORS[kind].subs(x_, q_ - l_), l_)
    return lambda log_q, log_pi: derivative.subs({q_: log_q, l_: log_pi})


def straight_through_derivative(kind):
    """A '+' kind: the value of ``kind``, the gradient of k2 (the value does not enter the gradient)."""
    return plain_derivative("k2")


def softmax_jacobian(p):
    """d p_a / d theta_b = p_a ([a = b] - p_b) for p = softmax(theta) (the softmax score, pg.score_zero_mean)."""
    n = len(p)
    return [[p[a] * ((1 if a == b else 0) - p[b]) for b in range(n)] for a in range(n)]


def logit_gradient(f, p):
    """grad_theta of f(p_0..p_{n-1}): differentiate in each p_a, then apply the softmax Jacobian."""
    jac = softmax_jacobian(p)
    partial = [sp.diff(f, pa) for pa in p]
    return [sum(partial[a] * jac[a][b] for a in range(len(p))) for b in range(len(p))]


def kl_gradients(n: int):
    """Symbols for pi, q (with their simplex substitution) and grad_theta KL(pi || q), grad_theta
    KL(q || pi), each obtained by differentiating the KL definition."""
    p, on_p = simplex_symbols(n, "p")
    q, on_q = simplex_symbols(n, "q")
    reverse = sum(pa * (sp.log(pa) - sp.log(qa)) for pa, qa in zip(p, q))
    forward = sum(qa * (sp.log(qa) - sp.log(pa)) for pa, qa in zip(p, q))
    return p, q, {**on_p, **on_q}, logit_gradient(reverse, p), logit_gradient(forward, p)


def expected_loss_gradient(derivative, p, q, weights=None, importance=None):
    """sum_y s(y) w(y) dk/dl(y) d log pi_y / d theta_b, with d log pi_y / d theta_b = [y = b] - pi_b: s the
    sampling weights (pi by default), w an importance weight held fixed (1 by default)."""
    n = len(p)
    s = weights or p
    w = importance or [1] * n
    weighted = [s[a] * w[a] * derivative(sp.log(q[a]), sp.log(p[a])) for a in range(n)]
    return [sum(weighted[a] * ((1 if a == b else 0) - p[b]) for a in range(n)) for b in range(n)]


def _same(lhs, rhs, simplex, label):
    """lhs == rhs for expressions rational in p, q, s and their logs, on the simplex: every log is replaced by
    an independent symbol (so the identity is checked in more variables, which implies it for the actual
    logs), then the last probability of each distribution by 1 - the others."""
    difference = sp.expand(lhs - rhs)
    logs = sorted(difference.atoms(sp.log), key=sp.default_sort_key)
    atoms = {lg: sp.Symbol(f"L{i}", real=True) for i, lg in enumerate(logs)}
    difference = sp.expand(difference.xreplace(atoms).subs(simplex))
    if difference == 0:  # a polynomial identity (the usual case): no common denominator needed
        return ProofResult(PROVED, [f"{label}: proved"], identities=[Identity(label, lhs, rhs)])
    result = rational_identity(difference, 0, label)
    result.identities = [Identity(label, lhs, rhs)]
    return result


def _kl_penalty_gradients(derivatives=None) -> ProofResult:
    derivatives = derivatives or {
        "k1": plain_derivative("k1"), "k2": plain_derivative("k2"), "k3": plain_derivative("k3"),
        "k1+": straight_through_derivative("k1"), "k2+": straight_through_derivative("k2"),
        "k3+": straight_through_derivative("k3"),
    }
    steps = []
    for n in range(2, 6):
        p, q, simplex, rev, fwd = kl_gradients(n)
        zero = [0] * n
        targets = {"k1": (zero, "0"), "k2": (rev, "grad KL(pi || q)"), "k3": (fwd, "grad KL(q || pi)"),
                   "k1+": (rev, "grad KL(pi || q)"), "k2+": (rev, "grad KL(pi || q)"), "k3+": (rev, "grad KL(pi || q)")}
        for kind, (target, name) in targets.items():
            got = expected_loss_gradient(derivatives[kind], p, q)
            steps.append(all_of((_same(g, t, simplex, f"logit {b}") for b, (g, t) in enumerate(zip(got, target))),
                                f"n = {n}: on-policy E[grad {kind}] = {name}"))
            if not steps[-1].ok:
                return combine(steps)
        # off-policy: tokens from s, the '+' gradient weighted by pi / s
        s, on_s = simplex_symbols(n, "s")
        for kind in ("k1+", "k2+", "k3+"):
            got = expected_loss_gradient(derivatives[kind], p, q, weights=s, importance=[pa / sa for pa, sa in zip(p, s)])
            steps.append(all_of((_same(g, t, {**simplex, **on_s}, f"logit {b}") for b, (g, t) in enumerate(zip(got, rev))),
                                f"n = {n}: tokens from s, E_s[(pi / s) grad k2] = grad KL(pi || q)"))
            if not steps[-1].ok:
                return combine(steps)
    return combine(steps)


@proof(
    "grpo.kl_penalty_gradients",
    notation=POLICY_NOTATION,
    statement="""Each estimator of KL(pi || pi_ref) used as a loss on tokens drawn from pi = softmax(theta),
    with the sampling weights held fixed: sum_y pi(y) grad_theta k(y) is 0 for k1, grad KL(pi || pi_ref) for
    k2 (d k2 / d log pi = log pi - log pi_ref), and grad KL(pi_ref || pi) = pi - pi_ref for k3
    (d k3 / d log pi = 1 - pi_ref / pi); the straight-through kinds take k2's gradient, hence the reverse
    KL's. With tokens drawn from another policy s, weighting k2's gradient by pi / s restores the reverse
    KL's gradient exactly.""",
    assumptions="""n = 2..5 outcomes; pi, pi_ref and s categorical with symbolic positive probabilities
    summing to 1, pi = softmax(theta); the targets differentiate the KL definitions in the probabilities
    and apply the softmax Jacobian d pi_a / d theta_b = pi_a ([a = b] - pi_b); d log pi_y / d theta_b =
    [y = b] - pi_b. Logs of probabilities are independent symbols in the identity check (stronger).""",
)
def kl_penalty_gradients() -> ProofResult:
    return _kl_penalty_gradients()
