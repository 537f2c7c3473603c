"""Every proof proves; every proof refutes a realistic wrong version of its identity; the verdict
is three-valued and an inconclusive one fails closed."""

from __future__ import annotations

import pytest
import sympy as sp

from rlspec.spec.proofs import INCONCLUSIVE, PROOFS, PROVED, REFUTED, gae, gridworld
from rlspec.spec.proofs.core import ProofResult, combine, field_sign, identity, rational_zero
from rlspec.spec.proofs import gaussian, trpo
from test_rlhf import WRONG as RLHF_WRONG
from test_offpolicy import WRONG as OFFPOLICY_WRONG
from test_normalisation import WRONG as NORMALISATION_WRONG


@pytest.mark.parametrize("proof_id", sorted(PROOFS))
def test_proof_is_proved(proof_id):
    result = PROOFS[proof_id]()
    assert result.status == PROVED, result.counterexample
    assert result.steps, "a proof must record what it established"


WRONG = {
    # the n-step return bootstrapped one power of gamma short
    "gae.n_step_telescoping": dict(n_step=lambda k: sum(gae.gamma**j * gae.r[j] for j in range(k)) + gae.gamma ** (k - 1) * gae.V[k] - gae.V[0]),
    # weights lambda^n instead of (1 - lambda) lambda^(n-1)
    "gae.geometric_collapse": dict(weight=lambda n, lam: lam**n),
    "gae.finite_horizon_correction": dict(weight=lambda n, lam: lam ** (n - 1)),
    # a trace factor of gamma alone (Brax's advantage)
    "gae.lambda_zero": dict(advantage=lambda k, lam: sum(gae.gamma**j * gae.td_error(j) for j in range(k))),
    "gae.lambda_one": dict(advantage=lambda k, lam: sum((lam) ** j * gae.td_error(j) for j in range(k))),
    # the trace is never cut
    "gae.recursion_unrolls": dict(recursion=lambda k, end: gae.backward_recursion(k, end_at=-1)),
    # every step weighted by the whole-episode return
    "returns.reward_to_go_recursion": dict(returns=lambda t, T: sum(gae.gamma**k * gae.r[k] for k in range(T))),
    # PPO: clipping without the min ("plain clipping")
    "ppo.clip_pessimistic_bound": dict(objective=lambda r, A, eps: sp.Max(1 - eps, sp.Min(r, 1 + eps)) * A),
    # the unclipped surrogate returned (bug C3)
    "ppo.clip_gradient_table": dict(objective=lambda r, A, eps: r * A),
    # the ratio inverted, pi_old / pi
    "ppo.vanilla_gradient_at_ratio_one": dict(ratio=lambda new, old: sp.exp(old - new)),
    # the dual clip applied to every sample, positive advantages too (bug C4)
    "ppo.dual_clip_floor": dict(objective=lambda r, A, eps, c: sp.Max(sp.Min(r * A, sp.Max(1 - eps, sp.Min(r, 1 + eps)) * A), c * A)),
    # the population std whatever ddof is asked for
    "ppo.advantage_normalisation_moments": dict(
        normalise=lambda v, ddof: [(x - sum(v) / len(v)) / sp.sqrt(sum((y - sum(v) / len(v)) ** 2 for y in v) / len(v)) for x in v]),
    # PG: the softmax score without its -pi term
    "pg.score_zero_mean": dict(score=lambda a, b, pi: 1 if a == b else 0),
    # a baseline that depends on the action (half of Q)
    "pg.baseline_unbiased": dict(baseline=lambda a, Q, b: Q[a] / 2),
    # the reward weighting step 1 comes after the action (r depends on a_1)
    "pg.past_rewards_zero_gradient": dict(weight=lambda a0, a1, r0: r0[a1]),
    # the Gaussian log-density without its -log sigma normaliser
    "pg.gaussian_score_zero_mean": dict(log_density=lambda a, mu, s: -((a - mu) ** 2) * sp.exp(-2 * s) / 2),
    # Gauss-Hermite weights that do not match the nodes
    "pg.gauss_hermite_three_nodes": dict(rule=((0, sp.Rational(1, 2)), (sp.sqrt(3), sp.Rational(1, 4)), (-sp.sqrt(3), sp.Rational(1, 4)))),
    # KL: k3 = r - 1 + log r (a sign slip)
    "kl.k3_nonnegative": dict(estimator=lambda x: sp.exp(x) - 1 + x),
    # k3 with the ratio inverted (bug D1)
    "kl.k1_k3_unbiased": dict(k3=lambda x: sp.exp(-x) - 1 + x),
    # k2 without its factor 1/2
    "kl.k2_second_order": dict(k2=lambda x: x**2),
    "kl.known_answer_values": dict(estimators={"k1": lambda x: -x, "k2": lambda x: x**2, "k3": lambda x: sp.exp(x) - 1 - x}),
    # gridworld: the TD error without gamma on the bootstrap
    "gridworld.td_error_is_advantage": dict(td_error=lambda r, v_next, v: r + v_next - v),
    # the time limit treated as terminal: no bootstrap there (bug B4)
    "gridworld.expected_gae_exact_critic": dict(limit=lambda critic: [0, 0]),
    # the trace decays by lambda alone (bug B7's class)
    "gridworld.lambda_one_critic_cancels": dict(trace=lambda: gridworld.lam),
    # TRPO's local surrogate: the old policy's occupancy in place of the new one's
    "gridworld.performance_difference": dict(occupancy=lambda old, new: gridworld.discounted_occupancy(old)),
    # TRPO: the step size without the factor 2 of the quadratic model, sqrt(delta / g'F^-1 g)
    "trpo.step_size_meets_budget": dict(step=lambda g, F, delta: trpo.natural_step_formula(g, F, delta / 2)),
    # the categorical Fisher without its -p p' term
    "trpo.kl_second_order_is_fisher": dict(fisher=lambda p: sp.diag(*p)),
    # a plain gradient step: the identity in place of F^-1
    "trpo.natural_direction_invariance": dict(direction=lambda g, F: g),
    # Gaussian: the per-dimension log-densities averaged instead of summed
    "gaussian.diag_log_density_sum": dict(log_density=lambda a, m, s: gaussian.diag_log_density_closed_form(a, m, s) / len(a)),
    # the entropy with sigma in place of sigma^2
    "gaussian.entropy": dict(entropy_formula=lambda s: sum(sp.log(2 * sp.pi * sp.E * sd) / 2 for sd in s)),
    # tanh squashing without the Jacobian
    "gaussian.tanh_change_of_variables": dict(jacobian=lambda u: 1),
    # the epsilon form log(1 - tanh(u)^2 + 1e-6) (SB3, CleanRL)
    "gaussian.tanh_stable_form": dict(stable=lambda u: sp.log(1 - sp.tanh(u) ** 2 + sp.Rational(1, 10**6))),
    # theory: the reward-to-go form without gamma^t (what most code computes)
    "theory.trajectory_score_function": dict(weight=lambda t, rewards, g: sum(g ** (k - t) * rewards[k] for k in range(t, len(rewards)))),
    # a baseline that is not b*: V = E[G] itself
    "theory.optimal_baseline": dict(baseline=lambda p, Q, sq: sum(pa * qa for pa, qa in zip(p, Q))),
    # a wrong constant C: one power of (1 - gamma) too few
    "theory.trpo_improvement_bound": dict(constant=lambda eps, g: 4 * eps * g / (1 - g)),
    # "the clip bounds the KL": the KL of ratios within [1 - eps, 1 + eps] on every action, eps^2 / (2 (1 - eps))
    "theory.clip_does_not_bound_kl": dict(kl_bound=lambda eps: eps**2 / (2 * (1 - eps))),
    # the k3 variance claim stated as universal
    "theory.k3_variance": dict(holds_where=lambda p, q: True),
    # CQL's push without the division by pi_beta, alpha (mu - pi_beta)
    "theory.cql_fixed_point": dict(push=lambda pi, beta: pi - beta),
    # normalisation by the mean alone: then the estimate is parallel to grad J
    "theory.batch_normalisation_bias": dict(normalise=lambda v, ddof: [x - sum(v) / len(v) for x in v]),
    # RLHF (the wrong versions are defined and explained in tests/test_rlhf.py): masked positions zeroed
    # (OpenRLHF), token-mean over all B * L positions, num_tokens ignored, clip without min, dual clip on A > 0
    **RLHF_WRONG,
    # off-policy (defined and explained in tests/test_offpolicy.py): tau reversed, the entropy sign, the temperature sign,
    # the sample detached, the DPG sign
    **OFFPOLICY_WRONG,
    # normalisation (defined in tests/test_normalisation.py): the merge without its cross term, a prior of variance 0,
    # the accumulator never reset, k3's sign slip, mixed variance divisors, the entropy in bits
    **NORMALISATION_WRONG,
}


@pytest.mark.parametrize("proof_id", sorted(WRONG))
def test_a_wrong_identity_is_refuted_with_a_counterexample(proof_id):
    result = PROOFS[proof_id](**WRONG[proof_id])
    assert result.status == REFUTED
    assert " = " in result.counterexample


def test_every_proof_with_a_formula_parameter_has_a_wrong_version_tested():
    import inspect

    parametrised = {pid for pid, p in PROOFS.items() if inspect.signature(p.function).parameters}
    assert parametrised <= set(WRONG)


def test_identity_is_three_valued():
    x = sp.Symbol("x")
    assert identity((x + 1) ** 2, x**2 + 2 * x + 1, "square").status == PROVED
    refuted = identity((x + 1) ** 2, x**2 + 1, "wrong square")
    assert refuted.status == REFUTED and "x =" in refuted.counterexample
    f, g = sp.Function("f"), sp.Function("g")
    unknown = identity(f(x), g(x), "opaque")  # no rational point evaluates to a number
    assert unknown.status == INCONCLUSIVE and not unknown.ok


def test_the_field_arithmetic_fast_paths_decide_only_what_holds():
    """rational_zero and field_sign are shortcuts before simplify: each may say "not shown this way" (False,
    None) where the slower path decides, never "zero" or a sign that does not hold."""
    x, y = sp.symbols("x y", positive=True)
    z = sp.Symbol("z")
    assert rational_zero(sp.exp(z) / (sp.exp(z) + 1) + 1 / (sp.exp(z) + 1) - 1)  # exp(z) taken as one unknown
    assert not rational_zero((x + 1) ** 2 - x**2 - 1)
    assert not rational_zero(sp.sin(z) ** 2 + sp.cos(z) ** 2 - 1)  # true, but not as a rational function
    assert identity(sp.sin(z) ** 2 + sp.cos(z) ** 2, 1, "Pythagoras").status == PROVED  # simplify decides it
    assert not rational_zero(sp.Float(1e-300) * x * y)  # inexact coefficients are never decided here
    assert field_sign(x / (1 + y)) == 1 and field_sign(-x / (1 + y) - 3) == -1 and field_sign(x - x) == 0
    assert field_sign(x - y) is None and field_sign(z) is None  # mixed signs; a symbol of unknown sign
    assert field_sign((x**3 + 1) / (x + 1)) is None  # cancels to x^2 - x + 1: the caller's together-form decides it


def test_combine_fails_closed():
    proved, unknown = ProofResult(PROVED, ["a"]), ProofResult(INCONCLUSIVE, ["b"], "why")
    assert combine([proved, unknown]).status == INCONCLUSIVE
    assert combine([proved, ProofResult(REFUTED, ["c"], "x = 1"), unknown]).counterexample == "x = 1"
    assert combine([proved, proved]).ok


def test_a_proof_that_crashes_is_inconclusive():
    result = PROOFS["gae.lambda_zero"](advantage=lambda k, lam: 1 / 0)
    assert result.status == INCONCLUSIVE and "ZeroDivisionError" in result.counterexample
