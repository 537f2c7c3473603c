"""Proofs for the GAE chapter (Schulman et al. 2016, arXiv:1506.02438 §3; the finite-horizon form of
Schulman et al. 2017, arXiv:1707.06347 §5).

Notation: ``delta_l = r_l + gamma V_{l+1} - V_l`` along one segment starting at t = 0; ``K`` is the
number of steps left in the segment. Explicit identities are checked for K = 1..HORIZON; the
statements that hold for every K are closed by a symbolic sum or by induction.
"""

from __future__ import annotations

import sympy as sp

from .. import contract
from .core import ProofResult, combine, identity, proof

HORIZON = 8
gamma, lam = sp.symbols("gamma lambda")
r = sp.symbols(f"r0:{HORIZON + 1}")
V = sp.symbols(f"V0:{HORIZON + 2}")
d = sp.symbols(f"delta0:{HORIZON + 1}")  # TD errors kept abstract where the identity allows it
n, K = sp.symbols("n K", integer=True, positive=True)
l = sp.symbols("l", integer=True, nonnegative=True)


def td_error(step: int):
    return r[step] + gamma * V[step + 1] - V[step]


def n_step_advantage_from_returns(n_: int):
    """``A^(n) = sum_{l<n} gamma^l r_l + gamma^n V_n - V_0``: the n-step return minus the baseline."""
    return sum(gamma**k * r[k] for k in range(n_)) + gamma**n_ * V[n_] - V[0]


def peel_last(expr, upper):
    """Rewrite every ``Sum(f, (l, a, upper))`` as ``Sum(f, (l, a, upper - 1)) + f(upper)``.

    This is the definition of a finite sum, applied so SymPy can cancel equal Sum objects.
    """

    def peel(s):
        (var, lo, hi), = s.limits
        if sp.simplify(hi - upper) != 0:
            return s
        return sp.Sum(s.function, (var, lo, hi - 1)) + s.function.subs(var, hi)

    return expr.replace(lambda e: isinstance(e, sp.Sum), peel)


@proof(
    "gae.n_step_telescoping",
    statement="""The n-step advantage sum_{l<n} gamma^l r_{t+l} + gamma^n V(s_{t+n}) - V(s_t) equals
    sum_{l<n} gamma^l delta_{t+l}: the intermediate values telescope.""",
    assumptions="None (a polynomial identity). Explicit for n = 1..8; for every n by induction on n.",
)
def n_step_telescoping(n_step=n_step_advantage_from_returns) -> ProofResult:
    steps = [
        identity(n_step(k), sum(gamma**j * td_error(j) for j in range(k)), f"n = {k}")
        for k in range(1, HORIZON + 1)
    ]
    # Induction: the base case is n = 1 above; the step A^(n+1) - A^(n) = gamma^n delta_n.
    rr, VV = sp.IndexedBase("r"), sp.IndexedBase("V")
    A = lambda m: sp.Sum(gamma**l * rr[l], (l, 0, m - 1)) + gamma**m * VV[m] - VV[0]
    step = peel_last(A(n + 1) - A(n), n) - gamma**n * (rr[n] + gamma * VV[n + 1] - VV[n])
    steps.append(identity(sp.simplify(step), 0, "induction step A^(n+1) - A^(n) = gamma^n delta_n"))
    return combine(steps)


def mixture_weight(n_, lam_):
    """GAE's weight on the n-step advantage: ``(1 - lambda) lambda^(n-1)`` (Schulman et al. 2016 §3)."""
    return (1 - lam_) * lam_ ** (n_ - 1)


@proof(
    "gae.geometric_collapse",
    notation={"x": 1 / lam - 1},
    statement="""(1 - lambda) sum_{n>=1} lambda^(n-1) A^(n)_t = sum_{l>=0} (gamma lambda)^l delta_{t+l}:
    the coefficient of gamma^l delta_{t+l}, collected over every A^(n) with n > l, is the geometric
    tail sum_{n>l} (1 - lambda) lambda^(n-1) = lambda^l.""",
    assumptions="""0 < lambda < 1 (written lambda = 1/(1+x), x > 0) and bounded delta with
    |gamma lambda| < 1, so the double series converges absolutely and may be reordered.""",
)
def geometric_collapse(weight=mixture_weight) -> ProofResult:
    x = sp.Symbol("x", positive=True)
    m = sp.Symbol("m", integer=True)
    # Finite tail for every K > l: sum_{n=l+1}^{K} w_n = lambda^l - lambda^K.
    finite = sp.summation(weight(m, lam), (m, l + 1, K))
    steps = [identity(sp.piecewise_fold(finite).args[0][0] if isinstance(finite, sp.Piecewise) else finite,
                      lam**l - lam**K, "sum_{n=l+1}^{K} w_n = lambda^l - lambda^K")]
    # Letting K -> infinity with 0 < lambda < 1 leaves lambda^l.
    tail = sp.limit((lam**l - lam**K).subs(lam, 1 / (1 + x)), K, sp.oo)
    steps.append(identity(tail, (1 / (1 + x)) ** l, "K -> oo: the tail lambda^K vanishes"))
    return combine(steps)


@proof(
    "gae.finite_horizon_correction",
    statement="""On a segment of K steps the truncated mixture (1 - lambda) sum_{n=1}^{K} lambda^(n-1) A^(n)
    equals sum_{l<K} (gamma lambda)^l delta_l - lambda^K sum_{l<K} gamma^l delta_l (the
    finite-horizon correction), so GAE is the mixture with weights (1 - lambda) lambda^(n-1) for n < K
    and lambda^(K-1) on A^(K).""",
    assumptions="None (polynomial identities in gamma, lambda, delta). Explicit for K = 1..8.",
)
def finite_horizon_correction(weight=mixture_weight) -> ProofResult:
    steps = []
    for k in range(1, HORIZON + 1):
        A = [sum(gamma**j * d[j] for j in range(m_)) for m_ in range(k + 1)]  # A[m] = A^(m)
        gae_sum = sum((gamma * lam) ** j * d[j] for j in range(k))
        mixture = sum(weight(m_, lam) * A[m_] for m_ in range(1, k + 1))
        steps.append(identity(mixture, gae_sum - lam**k * A[k], f"K = {k}: truncated mixture = GAE - correction"))
        with_tail = sum(weight(m_, lam) * A[m_] for m_ in range(1, k)) + lam ** (k - 1) * A[k]
        steps.append(identity(with_tail, gae_sum, f"K = {k}: mixture with tail weight lambda^(K-1) = GAE"))
    return combine(steps)


def gae_sum(k: int, lam_):
    return sum((gamma * lam_) ** j * td_error(j) for j in range(k))


@proof(
    "gae.lambda_zero",
    statement="At lambda = 0 the GAE sum sum_{l<K} (gamma lambda)^l delta_l is delta_0, the one-step TD error.",
    assumptions="0^0 = 1 (the l = 0 term). Explicit for K = 1..8.",
)
def lambda_zero(advantage=gae_sum) -> ProofResult:
    return combine([identity(advantage(k, sp.Integer(0)), td_error(0), f"K = {k}") for k in range(1, HORIZON + 1)])


@proof(
    "gae.lambda_one",
    statement="""At lambda = 1 the GAE sum telescopes to G - V_0, with G = sum_{l<K} gamma^l r_l + gamma^K V_K
    the return bootstrapped at the segment end; with a terminal end (V_K = 0) G is the plain return.""",
    assumptions="None (polynomial identity). Explicit for K = 1..8, bootstrapped and terminal ends.",
)
def lambda_one(advantage=gae_sum) -> ProofResult:
    steps = []
    for k in range(1, HORIZON + 1):
        bootstrapped = sum(gamma**j * r[j] for j in range(k)) + gamma**k * V[k] - V[0]
        steps.append(identity(advantage(k, sp.Integer(1)), bootstrapped, f"K = {k}, bootstrapped end"))
        terminal = sum(gamma**j * r[j] for j in range(k)) - V[0]
        steps.append(identity(advantage(k, sp.Integer(1)).subs(V[k], 0), terminal, f"K = {k}, terminal end"))
    return combine(steps)


def backward_recursion(k: int, end_at: int):
    """Run ``A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}`` backwards over k steps, ending at ``end_at``."""
    running = sp.Integer(0)
    for t in reversed(range(k)):
        carry = 0 if t == end_at else 1
        running = d[t] + gamma * lam * carry * running
    return running


@proof(
    "gae.recursion_unrolls",
    statement="""The backward recursion A_t = delta_t + gamma lambda (1 - end_t) A_{t+1} (A = 0 after the
    rollout) unrolls to sum_{l<K} (gamma lambda)^l delta_{t+l}, K counted to the first episode end.""",
    assumptions="None. Explicit for rollouts of 1..8 steps with the episode end at every position.",
)
def recursion_unrolls(recursion=backward_recursion) -> ProofResult:
    steps = []
    for k in range(1, HORIZON + 1):
        for end_at in range(k):
            expected = sum((gamma * lam) ** j * d[j] for j in range(end_at + 1))
            steps.append(identity(recursion(k, end_at), expected, f"T = {k}, end after step {end_at}"))
    return combine(steps)


@proof(
    "gae.seed_example",
    statement="""The hand-computed GAE known answers are exact: gamma = lambda = 1/2, r = 1, V = 1/2, end after
    step 1, V(s_4) = 2: terminal -> [7/8, 1/2, 9/8, 3/2]; truncated with V(final obs) = 3 -> [5/4, 2, 9/8, 3/2]; and
    the rollout-end bootstrap, T = 1, r = 0, V(s_1) = 10, gamma = 1 -> [10].""",
    assumptions="Exact rational arithmetic on the known answers' inputs (spec/contract/10_gae.toml, dyadic floats); the recursion of gae.recursion_unrolls with the two masks; returns = advantages + values.",
)
def seed_example() -> ProofResult:
    def exact_gae(answer):
        """GAE by its definition in exact rationals on the known answer's inputs: delta_t = r_t + gamma
        (1 - terminated_t) V'_t - V_t, A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}."""
        x = answer.inputs
        q = lambda v: sp.Rational(v)
        gamma, lam = q(x["gamma"]), q(x["lam"])
        advantages, running = [], sp.Integer(0)
        for t in reversed(range(len(x["rewards"]))):
            bootstrap = 0 if x["terminated"][t] else gamma * q(x["next_values"][t])
            delta = q(x["rewards"][t]) + bootstrap - q(x["values"][t])
            running = delta + gamma * lam * (0 if x["terminated"][t] or x["truncated"][t] else running)
            advantages.insert(0, running)
        return advantages

    steps = []
    for answer_id, answer in contract.known_answers("gae").items():
        # The contract's known answers (spec/contract/10_gae.toml) are dyadic floats: exact as rationals.
        expected = [sp.Rational(a) for a in answer.outputs["advantages"]]
        steps += [identity(a, b, f"{answer_id} A_{i}") for i, (a, b) in enumerate(zip(exact_gae(answer), expected))]
        steps += [identity(sp.Rational(r), sp.Rational(a) + sp.Rational(v), f"{answer_id} returns_{i}")
                  for i, (r, a, v) in enumerate(zip(answer.outputs["returns"], answer.outputs["advantages"], answer.inputs["values"]))]
    return combine(steps)
