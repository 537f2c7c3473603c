"""Checks for the policy-gradient chapter (``spec/clauses/20_pg.toml``).

How gradients are taken. ``reinforce_loss`` and ``actor_critic_losses`` receive torch tensors; the
suite passes the log-probabilities (and, where a clause is about where gradient must *not* flow,
the returns, baseline, values and next_values) as leaf tensors that require grad, and differentiates
the candidate's own loss with autograd. For the expectation clauses the leaf gradient
``d loss / d logp_i`` is chained through a small policy's parameters with autograd:

    sum_i (d loss / d logp_i) (d log pi_theta(a_i|s_i) / d theta)

the gradient autograd would give if the policy's output had been passed in directly. The policy,
its log-probabilities and this chain rule are evaluated in float64; the candidate runs in the
run's precision on inputs rounded to it. Feeding every action of a softmax policy (or the
Gauss-Hermite nodes of a Gaussian one) with weights ``omega_i * w_i`` (omega = pi(a|s), or the
quadrature weight) turns the candidate's batch gradient into an exact expectation over actions.

Every check starts from fixed known-answer inputs (the same on every seed), then searches drawn
ones. Expected numbers come from the formulas, from the exact expectation computed a second way
(the pathwise gradient of E[Q]), or from the candidate itself (with and without a baseline).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from hypothesis import strategies as st

from ..kit import edges
from ..kit.assertions import assert_close, matches
from ..kit.gradients import gradients, reduction_scale
from ..kit.registry import check
from ..kit.strategies import policy_gradient as draws
from ..kit.strategies import rounded
from ..kit.strategies.policy_gradient import GaussianCase, LinearCritic, SoftmaxCase, Transitions, transitions
from ..kit.tolerances import TINY, U64, smallest_normal
from ...reference import pg as ref
from ...spec import contract

# ---------------------------------------------------------------------------------------------
# declared conventions


def critic_factor(ctx) -> float:
    """The declared factor on the squared TD error (critic_loss_factor)."""
    return float(ctx.convention("critic_loss_factor"))


def conventions_note(ctx) -> str:
    reduction = ctx.convention("pg_reduction")
    return "" if reduction == ctx.default("pg_reduction") else f" (declared reduction: {reduction})"


def reduced(ctx) -> str:
    """How the formulas in messages write the reduction: ``mean_t`` or ``sum_t``."""
    return f"{ctx.convention('pg_reduction')}_t"


def per_sample(ctx) -> str:
    """The per-sample factor of the reduction in messages: ``/ T`` or nothing."""
    return " / T" if ctx.convention("pg_reduction") == "mean" else ""


# ---------------------------------------------------------------------------------------------
# tolerances
#
# u is the unit roundoff of the candidate's precision (Call.unit_roundoff), s the reduction scale
# (1/T or 1). A correct candidate rounds each input once (to its precision) and then:
#
# * reinforce_loss: w_t = returns_t - baseline_t (1 rounding, relative to |returns_t| + |baseline_t|),
#   the backward of the mean (s, 1 rounding) and of the product (x w_t, 1 rounding):
#       |g_t - (-s w_t)| <= 4 u s (|returns_t| + |baseline_t|)                       (per sample)
#   the loss value adds the product logp_t w_t and a sum of T terms (T + 1 roundings):
#       |L - L_exact| <= (T + 4) u s sum_t |logp_t| (|returns_t| + |baseline_t|).
# * actor_critic_losses: delta_t = r_t + gamma (1 - term_t) V'_t - V_t takes 3 roundings on the
#   terms m_t = |r_t| + gamma |V'_t| (not terminal) + |V_t| (as in GAE), plus input rounding (3 more):
#       |delta_hat_t - delta_t| <= 6 u m_t,  and |delta_t| <= m_t.
#   d actor / d logp_t = -s delta_t:             <= (6 + 2) u s m_t
#   d critic / d V_t = -2 f s delta_t:            <= 2 f s (6 + 3) u m_t
#   actor value -s sum logp_t delta_t:            <= (T + 8) u s sum_t |logp_t| m_t
#   critic value f s sum delta_t^2:               <= f s (2 * 6 + T + 3) u sum_t m_t^2
# The oracle is evaluated by the same formula in float64; when the candidate is float64 too its
# error counts once more, so every tolerance below is twice the candidate's bound. Below the
# smallest normal number eta (1.2e-38 in float32) rounding is absolute, so each rounding may also
# lose eta (flush to zero included): k roundings add k eta.
#
# Expectation checks chain g through the policy in float64: each term g_i J_ij then carries the
# candidate's relative error (4 u, as above, J exact to float64) and the float64 evaluation of the
# policy, its Jacobian, the quadrature nodes and the exact-expectation identity itself. The float64
# part is bounded by C u64 relative to the largest term, C = 1024: fewer than 100 roundings per term
# (log-softmax over <= 4 actions, a 3-feature linear layer, exp, the backward pass, a <= 18-term
# sum) times a conditioning <= 10 (|mu| / sigma of the Gaussian nodes, logits of size <= 6). So
#
#     tol_j = 2 (4 u s sum_i (|r_i| + |b_i|) |J_ij|) + C u64 s sum_i (|r_i| + |b_i|) max_i |J_ij|.
#
# For the four-action softmax network (3 states, 4 actions, |x| <= 1, |b| <= 2) this is at most 6e-8
# in float32 (u = 2^-24) and 4e-14 in float64: the 1e-6 target is met with room to spare, and in
# float64 the check is about eight orders of magnitude stricter (tests/test_pg.py pins both).

FLOAT64_SIDE = 1024


def reinforce_gradient_tolerance(returns, baseline, s, u):
    return 2 * 4 * (u * s * (np.abs(returns) + np.abs(baseline)) + smallest_normal(u)) + TINY


def reinforce_value_tolerance(logp, returns, baseline, s, u):
    T = len(logp)
    magnitude = s * float(np.sum(np.abs(logp) * (np.abs(returns) + np.abs(baseline))))
    return 2 * (T + 4) * (u * magnitude + smallest_normal(u)) + TINY


def expectation_tolerance(weights_abs, jacobian, s, u):
    """``tol_j`` above; ``weights_abs`` (B,) = |r_i| + |b_i|, ``jacobian`` (B, P) = d logp_i / d theta_j."""
    jac = np.abs(jacobian)
    candidate = 2 * 4 * (u * s * (weights_abs @ jac) + smallest_normal(u) * jac.sum(axis=0))
    float64_side = FLOAT64_SIDE * U64 * s * weights_abs.sum() * jac.max(axis=0, initial=0.0)
    return candidate + float64_side + TINY


# ---------------------------------------------------------------------------------------------
# gradients of the candidate's outputs


# ---------------------------------------------------------------------------------------------
# PG-REINFORCE-SURROGATE-GRADIENT


def run_reinforce(ctx, logp, returns, baseline=None, *, pass_baseline=True):
    """Call reinforce_loss with logp, returns (and baseline) as grad-requiring leaves.

    Returns ``(loss, grads, call, (logp, returns, baseline))`` with the inputs as the candidate saw
    them (rounded to the run's precision); ``baseline`` is zeros when none is passed.
    """
    logp, returns = rounded(logp, ctx.dtype), rounded(returns, ctx.dtype)
    args = {"logp": logp, "returns": returns}
    if baseline is not None:
        baseline = rounded(baseline, ctx.dtype)
    if pass_baseline:
        args["baseline"] = baseline
    requires = ("logp", "returns") + (("baseline",) if baseline is not None else ())
    call = ctx.call("reinforce_loss", args, array="torch", requires_grad=requires, shape=())
    leaves = {name: call.inputs[name] for name in requires}
    grads = gradients(call.raw, leaves)
    used = baseline if baseline is not None else np.zeros_like(returns)
    return float(call.outputs[0]), grads, call, (logp, returns, used)


def _diagnose_weights(actual, weights, s, tol):
    if len(weights) > 1 and matches(actual, np.full_like(weights, -s * weights.mean()), tol) and not matches(actual, -s * weights, tol):
        return "every log-probability gets the same weight, mean(returns - baseline): the mean-log-prob form (bug A1, Gymnasium #1336)"
    if matches(actual, s * weights, tol):
        return "the sign is flipped: minimising this loss descends J"
    if matches(actual, -s * weights * len(weights), tol) or matches(actual, -s * weights / len(weights), tol):
        return "the reduction differs from the declared one (mean vs sum): declare RLSPEC_CONVENTIONS['pg_reduction']"
    return ""


REINFORCE_A1 = contract.known_answer("pg.reinforce-a1")  # spec/contract/20_pg.toml
REINFORCE_BASELINE = contract.known_answer("pg.reinforce-baseline")


@check("PG-REINFORCE-SURROGATE-GRADIENT")
def reinforce_surrogate_gradient(ctx):
    """d L / d logp_t = -s (G_t - b_t), L = -s sum logp (G - b), and no gradient into returns or baseline."""

    def verify(logp, returns, baseline=None, pass_baseline=True):
        loss, grads, call, (logp, returns, baseline) = run_reinforce(ctx, logp, returns, baseline, pass_baseline=pass_baseline)
        u, T = call.unit_roundoff, len(logp)
        s = reduction_scale(ctx, T)
        weights = returns - baseline
        tol = reinforce_gradient_tolerance(returns, baseline, s, u)
        assert_close(grads["logp"], -s * weights, tol, what=f"d loss / d logp vs -(returns - baseline){per_sample(ctx)}" + conventions_note(ctx), call=call.code,
                     cause="the gradient is not -(returns - baseline) / T",
                     diagnose=lambda a: _diagnose_weights(a, weights, s, tol))
        assert_close(loss, -s * float(np.sum(logp * weights)), reinforce_value_tolerance(logp, returns, baseline, s, u),
                     what=f"loss vs -{reduced(ctx)} logp_t (returns_t - baseline_t)" + conventions_note(ctx), call=call.code,
                     cause="the surrogate's value is not -mean(logp (returns - baseline))")
        for name in ("returns", "baseline"):
            if name in grads:
                assert_close(grads[name], np.zeros(T), 0.0, what=f"d loss / d {name} (the weights must be detached)",
                             call=call.code,
                             cause=f"gradient flows into `{name}`: the weights are not detached, so autograd differentiates "
                                   f"through them (a learned baseline would be pushed by the policy loss)")

    # bug A1: two steps, r = [1, 0], gamma = 1 -> reward-to-go weights [1, 0]; mean form gives [0.5, 0.5].
    a1, with_baseline = REINFORCE_A1.inputs, REINFORCE_BASELINE.inputs
    verify(a1["logp"], a1["returns"], pass_baseline=False)
    verify(a1["logp"], a1["returns"], None)
    verify(with_baseline["logp"], with_baseline["returns"], with_baseline["baseline"])

    ctx.property(draws.reinforce_batches(), lambda b: verify(*b), label="drawn")


# ---------------------------------------------------------------------------------------------
# policies for the expectation clauses


# Three-node Gauss-Hermite rule for N(0, 1): nodes 0, +-sqrt(3), weights 2/3, 1/6, 1/6.
GH_NODES = np.array([-np.sqrt(3.0), 0.0, np.sqrt(3.0)])
GH_WEIGHTS = np.array([1.0, 4.0, 1.0]) / 6.0


@dataclass(eq=False)
class Batch:
    """Every (state, action) pair of a case as one batch: log pi with its graph, and the weights."""

    logp: torch.Tensor  # (B,) float64, a function of params
    params: list  # leaf tensors theta
    omega: np.ndarray  # (B,) probability (softmax) or quadrature weight (Gaussian)
    q: np.ndarray  # (B,) Q(s_i, a_i)
    b: np.ndarray  # (B,) b(s_i)
    expected_return: torch.Tensor  # scalar: E[Q] summed over states, differentiable in params (pathwise)
    jacobian: np.ndarray  # (B, P) d logp_i / d theta_j in closed form (flattened params, in order)
    pathwise_abs: np.ndarray  # (P,) sum of |terms| of d E[Q] / d theta, for its float64 rounding bound


def softmax_batch(case: SoftmaxCase) -> Batch:
    t = lambda x, grad=False: torch.tensor(x, dtype=torch.float64, requires_grad=grad)
    weight, bias = t(case.weight, True), t(case.bias, True)
    log_pi = ref.softmax_policy_log_probs(weight, bias, t(case.obs))  # (S, A)
    S, A = log_pi.shape
    pi_t = log_pi.exp()
    expected_return = (pi_t * t(case.q)).sum()  # sum_s sum_a pi(a|s) Q(s, a), exact
    pi = pi_t.detach().numpy()
    # d log pi(a|s) / d z_j = [a = j] - pi_j(s); z = obs @ weight + bias.
    dz = np.eye(A)[None, :, :] - pi[:, None, :]  # (S, A, A): [s, a, j]
    d_weight = case.obs[:, None, :, None] * dz[:, :, None, :]  # (S, A, K, A): [s, a, k, j]
    jac = np.concatenate([d_weight.reshape(S * A, -1), dz.reshape(S * A, A)], axis=1)
    omega, q = pi.reshape(-1), case.q.reshape(-1)
    # d E[Q] = sum_a Q_a pi_a d log pi_a: the same terms as the score form.
    pathwise_abs = np.abs(omega * q) @ np.abs(jac)
    return Batch(log_pi.reshape(-1), [weight, bias], omega, q, np.repeat(case.baseline, A), expected_return, jac, pathwise_abs)


def gaussian_q(case: GaussianCase, actions, state_index, derivative=False):
    """``Q(s, a)`` (or ``dQ/da``, (B, D)) for a (B, D) array or tensor of actions in states ``state_index``."""
    coeffs = case.q[state_index]  # (B, 1 + 3D)
    if torch.is_tensor(actions):
        coeffs = torch.from_numpy(coeffs)
    D = actions.shape[1]
    if derivative:
        return np.stack([coeffs[:, 1 + 3 * d] + 2 * coeffs[:, 2 + 3 * d] * actions[:, d] + 3 * coeffs[:, 3 + 3 * d] * actions[:, d] ** 2
                         for d in range(D)], axis=1)
    total = coeffs[:, 0]
    for d in range(D):
        a = actions[:, d]
        total = total + coeffs[:, 1 + 3 * d] * a + coeffs[:, 2 + 3 * d] * a**2 + coeffs[:, 3 + 3 * d] * a**3
    return total


def gaussian_batch(case: GaussianCase) -> Batch:
    t = lambda x, grad=False: torch.tensor(x, dtype=torch.float64, requires_grad=grad)
    weight, bias, log_std = t(case.weight, True), t(case.bias, True), t(case.log_std, True)
    S, K, D = case.obs.shape[0], case.obs.shape[1], case.weight.shape[1]
    grid = np.array(np.meshgrid(*[GH_NODES] * D, indexing="ij")).reshape(D, -1).T  # (N, D) nodes xi
    grid_w = np.prod(np.array(np.meshgrid(*[GH_WEIGHTS] * D, indexing="ij")).reshape(D, -1), axis=0)  # (N,)
    N = len(grid_w)
    state_index = np.repeat(np.arange(S), N)  # (B,)
    obs_np = case.obs[state_index]  # (B, K)
    obs = t(obs_np)
    mean = obs @ weight + bias  # (B, D)
    xi = np.tile(grid, (S, 1))  # (B, D)
    # Pathwise: the actions as functions of theta give the exact gradient of E[Q] (a polynomial in xi).
    actions_path = mean + torch.exp(log_std) * t(xi)  # (B, D)
    omega = np.tile(grid_w, S)
    expected_return = (t(omega) * gaussian_q(case, actions_path, state_index)).sum()
    # Score function: the same actions as data, log pi differentiable in theta.
    actions = actions_path.detach()
    logp = ref.gaussian_policy_log_prob(weight, bias, log_std, obs, actions)  # (B,)
    a = actions.numpy()
    q = gaussian_q(case, a, state_index)
    sigma = np.exp(case.log_std)
    z = (a - (obs_np @ case.weight + case.bias)) / sigma  # (B, D) standardised actions
    # d log pi / d mean_d = z_d / sigma_d; d log pi / d log sigma_d = z_d^2 - 1.
    d_mean = z / sigma
    jac = np.concatenate([(obs_np[:, :, None] * d_mean[:, None, :]).reshape(-1, K * D), d_mean, z**2 - 1], axis=1)
    # The pathwise gradient's terms: omega Q'(a) d a / d theta, d a_d / d (weight_kd, bias_d, log sigma_d) = (x_k, 1, sigma_d xi_d).
    q_prime = np.abs(omega[:, None] * gaussian_q(case, a, state_index, derivative=True))  # (B, D)
    da = np.concatenate([(np.abs(obs_np)[:, :, None] * q_prime[:, None, :]).reshape(-1, K * D), q_prime,
                         q_prime * np.abs(sigma * xi)], axis=1)
    return Batch(logp, [weight, bias, log_std], omega, q, case.baseline[state_index], expected_return, jac, da.sum(axis=0))


def chained(batch: Batch, g: np.ndarray) -> np.ndarray:
    """``sum_i g_i d logp_i / d theta`` by autograd: the candidate's leaf gradient chained through the policy.

    Written as the gradient of the scalar ``sum_i g_i logp_i``: passing ``grad_outputs`` instead makes
    torch import its symbolic-shapes module, and with it SymPy (half a second the checks need not pay).
    """
    grads = torch.autograd.grad((batch.logp * torch.from_numpy(g)).sum(), batch.params, retain_graph=True)
    return torch.cat([x.reshape(-1) for x in grads]).numpy()


def policy_gradient(batch: Batch) -> np.ndarray:
    """``d E[Q] / d theta`` by differentiating the exact expectation: the target, computed a second way."""
    grads = torch.autograd.grad(batch.expected_return, batch.params, retain_graph=True)
    return torch.cat([x.reshape(-1) for x in grads]).numpy()


def expected_gradient(ctx, batch: Batch, returns, baseline=None):
    """The candidate's exact expected gradient for these weights: ``(grad, tol, call)``."""
    returns = rounded(returns, ctx.dtype)
    args = {"logp": rounded(batch.logp.detach().numpy(), ctx.dtype), "returns": returns}
    if baseline is not None:
        baseline = rounded(baseline, ctx.dtype)
        args["baseline"] = baseline
    call = ctx.call("reinforce_loss", args, array="torch", requires_grad=("logp",), shape=())
    g = gradients(call.raw, {"logp": call.inputs["logp"]})["logp"]
    s = reduction_scale(ctx, len(returns))
    weights_abs = np.abs(returns) + (0.0 if baseline is None else np.abs(baseline))
    tol = expectation_tolerance(weights_abs, batch.jacobian, s, call.unit_roundoff)
    return chained(batch, g), tol, call, s


SOFTMAX_SEED_CASE = SoftmaxCase(  # three states, four actions: a small softmax network
    obs=np.array([[1.0, 0.5, -1.0], [0.0, -1.0, 0.25], [0.75, 0.25, 0.5]]),
    weight=np.array([[0.5, -0.25, 1.0, 0.0], [-0.5, 0.75, 0.25, 0.5], [0.25, 0.5, -0.75, 1.0]]),
    bias=np.array([0.1, -0.2, 0.3, 0.0]),
    baseline=np.array([1.5, -0.5, 2.0]),
    q=np.array([[1.0, 0.0, 2.0, -1.0], [0.5, 3.0, -1.0, 0.0], [2.0, 2.0, 1.0, -0.5]]),
)
GAUSSIAN_SEED_CASE = GaussianCase(  # two states, two action dimensions, nine nodes per state
    obs=np.array([[1.0, -0.5], [0.25, 0.75]]),
    weight=np.array([[0.5, -0.25], [0.75, 0.5]]),
    bias=np.array([0.1, -0.3]),
    log_std=np.array([-0.5, 0.25]),
    baseline=np.array([2.0, -1.0]),
    q=np.array([[0.5, 1.0, -0.5, 0.25, 0.5, 0.25, -0.125], [-1.0, 0.5, 0.25, -0.25, 1.0, -0.5, 0.25]]),
)


def policy_cases():
    """Every action of a drawn softmax policy, or every Gauss-Hermite node of a drawn Gaussian one, as one batch."""
    return st.one_of(draws.softmax_cases().map(softmax_batch), draws.gaussian_cases().map(gaussian_batch))


def _describe(batch: Batch) -> str:
    return f"{len(batch.logp)} (state, action) pairs weighted by pi(a|s) or Gauss-Hermite weights"


@check("PG-SCORE-ZERO-MEAN")
def score_zero_mean(ctx):
    """With weights omega_i b(s_i), the candidate's expected gradient over all actions is zero (softmax, Gaussian)."""

    def verify(batch: Batch, label: str):
        grad, tol, call, _ = expected_gradient(ctx, batch, batch.omega * batch.b)
        assert_close(grad, np.zeros_like(grad), tol,
                     what=f"sum_a pi(a|s) b(s) d loss / d theta over {label} (must be 0: the score has zero mean)",
                     call=call.code)

    verify(softmax_batch(SOFTMAX_SEED_CASE), "the four-action softmax network (3 states x 4 actions)")
    verify(gaussian_batch(GAUSSIAN_SEED_CASE), "a diagonal Gaussian policy's Gauss-Hermite nodes (2 states x 9)")
    ctx.property(policy_cases(), lambda b: verify(b, _describe(b)), label="drawn")


@check("PG-BASELINE-NO-BIAS")
def baseline_no_bias(ctx):
    """Expected gradient with b(s) == without == -s x (the exact policy gradient, by the pathwise route)."""

    def verify(batch: Batch, label: str):
        with_b, tol_b, call_b, s = expected_gradient(ctx, batch, batch.omega * batch.q, batch.omega * batch.b)
        without, tol, call, _ = expected_gradient(ctx, batch, batch.omega * batch.q)
        assert_close(with_b, without, tol_b + tol,
                     what=f"expected gradient over {label} with the state baseline b(s) vs without it",
                     call=call_b.code)
        exact = -s * policy_gradient(batch)
        tol_exact = tol + FLOAT64_SIDE * U64 * s * batch.pathwise_abs
        assert_close(without, exact, tol_exact, what=f"expected gradient over {label} vs -grad_theta E[Q]{per_sample(ctx).replace('T', 'B')} (the exact policy gradient)" + conventions_note(ctx),
                     call=call.code, cause="the loss's gradient is not the REINFORCE estimator (see PG-REINFORCE-SURROGATE-GRADIENT)")

    verify(softmax_batch(SOFTMAX_SEED_CASE), "the four-action softmax network (3 states x 4 actions)")
    verify(gaussian_batch(GAUSSIAN_SEED_CASE), "a diagonal Gaussian policy's Gauss-Hermite nodes (2 states x 9)")
    ctx.property(policy_cases(), lambda b: verify(b, _describe(b)), label="drawn")


# ---------------------------------------------------------------------------------------------
# actor-critic


# The known answers (spec/contract/20_pg.toml): bug A3, one transition, r = 1, V(s) = 0, V(s') = 0.5, gamma = 1,
# log pi = -0.7: delta = 1.5; two steps, the second terminal: delta = [1.5, -2.0] (next_values[1] ignored).
A3, TERMINAL = contract.known_answer("pg.actor-critic-a3"), contract.known_answer("pg.actor-critic-terminal")
TRUNCATED = contract.known_answer("pg.actor-critic-truncated")
A3_CASE, TERMINAL_CASE, TRUNCATED_CASE = (transitions(**x.inputs) for x in (A3, TERMINAL, TRUNCATED))


def run_actor_critic(ctx, case: Transitions, grads_of: str | None = None):
    """Call actor_critic_losses; ``grads_of`` = "actor" or "critic": that loss's leaf gradients (else None)."""
    case = case.rounded(ctx.dtype)
    args = {"logp": case.logp, "values": case.values, "next_values": case.next_values, "rewards": case.rewards,
            "terminated": case.terminated, "truncated": case.truncated, "gamma": case.gamma}
    call = ctx.call("actor_critic_losses", args, array="torch", requires_grad=("logp", "values", "next_values"),
                    outputs=2, shape=())
    leaves = {n: call.inputs[n] for n in ("logp", "values", "next_values")}
    outputs = dict(zip(("actor", "critic"), call.raw))
    return case, call, gradients(outputs[grads_of], leaves) if grads_of else None


def _diagnose_td(actor, critic, case: Transitions, s, f, tol_a, tol_c):
    bootstrapped = case.rewards + case.gamma * case.next_values - case.values
    if case.terminated.any() and matches(critic, f * s * np.sum(bootstrapped**2), tol_c):
        return "terminated steps bootstrap from next_values (the (1 - terminated) mask is missing)"
    cut = case.truncated & ~case.terminated
    if cut.any():
        as_terminal = case.rewards + case.gamma * np.where(case.terminated | case.truncated, 0.0, case.next_values) - case.values
        if matches(critic, f * s * np.sum(as_terminal**2), tol_c):
            return "truncated steps are treated as terminal (done = terminated | truncated): no bootstrap at a time limit"
    if matches(actor, s * np.sum(case.logp * case.delta), tol_a) and not matches(actor, -s * np.sum(case.logp * case.delta), tol_a):
        return "the TD error is taken the other way round (V(s) - target): the actor's sign flips"
    return ""


@check("AC-TD-ERROR")
def td_error(ctx):
    """actor_loss = -s sum logp delta and critic_loss = f s sum delta^2 with delta the one-step TD error."""
    f = critic_factor(ctx)

    def verify(case: Transitions):
        case, call, _ = run_actor_critic(ctx, case)
        u, T = call.unit_roundoff, len(case.logp)
        s = reduction_scale(ctx, T)
        actor, critic = (float(x) for x in call.outputs)
        m, delta = case.m, case.delta
        eta = smallest_normal(u)
        tol_a = 2 * (T + 8) * (u * s * float(np.sum(np.abs(case.logp) * m)) + eta) + TINY
        tol_c = 2 * (T + 15) * (u * f * s * float(np.sum(m**2)) + eta) + TINY
        cause = _diagnose_td(actor, critic, case, s, f, tol_a, tol_c)
        assert_close(critic, f * s * float(np.sum(delta**2)), tol_c,
                     what=f"critic_loss vs {f:g} x {reduced(ctx)} delta_t^2" + conventions_note(ctx), call=call.code, cause=cause)
        assert_close(actor, -s * float(np.sum(case.logp * delta)), tol_a,
                     what=f"actor_loss vs -{reduced(ctx)} logp_t delta_t" + conventions_note(ctx), call=call.code, cause=cause)

    verify(A3_CASE)  # actor 1.05, critic 2.25
    verify(TERMINAL_CASE)  # actor -0.775, critic 3.125
    ctx.property(draws.transition_batches(), verify, label="drawn")


@check("AC-TRUNCATION-BOOTSTRAP")
def truncation_bootstrap(ctx):
    """Truncated (not terminated) steps bootstrap from next_values: the losses and the actor's weights are those of
    the one-step TD error with (1 - terminated) only; a step both terminated and truncated is terminal."""
    f = critic_factor(ctx)

    def verify(case: Transitions):
        case, call, grads = run_actor_critic(ctx, case, "actor")
        u, T = call.unit_roundoff, len(case.logp)
        s = reduction_scale(ctx, T)
        actor, critic = (float(x) for x in call.outputs)
        m, delta, eta = case.m, case.delta, smallest_normal(u)
        tol_a = 2 * (T + 8) * (u * s * float(np.sum(np.abs(case.logp) * m)) + eta) + TINY
        tol_c = 2 * (T + 15) * (u * f * s * float(np.sum(m**2)) + eta) + TINY
        cause = _diagnose_td(actor, critic, case, s, f, tol_a, tol_c)
        flags = f"truncated {case.truncated.astype(int).tolist()}, terminated {case.terminated.astype(int).tolist()}"
        assert_close(critic, f * s * float(np.sum(delta**2)), tol_c, what=f"critic_loss with {flags} vs {f:g} x {reduced(ctx)} delta_t^2"
                     + conventions_note(ctx), call=call.code, cause=cause)
        assert_close(grads["logp"], -s * delta, 2 * 8 * (u * s * m + eta) + TINY,
                     what=f"d actor_loss / d logp with {flags} vs -delta{per_sample(ctx)}" + conventions_note(ctx), call=call.code,
                     cause=cause)
        assert_close(actor, -s * float(np.sum(case.logp * delta)), tol_a, what=f"actor_loss with {flags}" + conventions_note(ctx),
                     call=call.code, cause=cause)

    verify(TRUNCATED_CASE)  # delta [1.5, 0.5]: actor 0.475, critic 1.25 (as terminal: [1.5, -1.5])
    for gamma in edges.values("actor_critic_losses", "gamma"):  # 0: truncated and terminal agree; 1: undiscounted bootstrap
        verify(replace(TRUNCATED_CASE, gamma=gamma))
    verify(transitions([-0.5, -1.5, -0.2], [1.0, 0.0, 2.0], [3.0, -2.0, 5.0], [0.5, 1.0, -1.0], [False, True, True],
                       0.9, [True, True, False]))  # truncated, both (terminal), terminated
    ctx.property(draws.transition_batches(), verify, label="drawn")


def known_critic(answer):
    """The known answer's transitions valued by V(s) = phi(s) w + c with phi the values themselves, w = 1, c = 0."""
    x = answer.inputs
    critic = LinearCritic(np.array(x["values"])[:, None], np.array(x["next_values"])[:, None], np.array([1.0]), 0.0)
    return critic, x["logp"], x["rewards"], x["terminated"], x["gamma"], x["truncated"]


A3_CRITIC, TERMINAL_CRITIC = known_critic(A3), known_critic(TERMINAL)


@check("AC-CRITIC-SEMI-GRADIENT")
def critic_semi_gradient(ctx):
    """d critic / d values = -2 f s delta, nothing into next_values or logp; the critic's bias gradient is -2 f mean(delta)."""
    f = critic_factor(ctx)

    def verify(critic: LinearCritic, logp, rewards, terminated, gamma, truncated):
        case, call, grads = run_actor_critic(ctx, critic.transitions(logp, rewards, terminated, gamma, truncated), "critic")
        u, T = call.unit_roundoff, len(case.logp)
        s = reduction_scale(ctx, T)
        delta, m = case.delta, case.m
        tol = 2 * 9 * (u * 2 * f * s * m + smallest_normal(u)) + TINY
        assert_close(grads["next_values"], np.zeros(T), 0.0, what="d critic_loss / d next_values (the TD target is a constant)",
                     call=call.code)
        assert_close(grads["values"], -2 * f * s * delta, tol, what=f"d critic_loss / d values vs -2 x {f:g} x delta{per_sample(ctx)}" + conventions_note(ctx),
                     call=call.code, cause="the critic's gradient is not the semi-gradient -2 delta / T")
        assert_close(grads["logp"], np.zeros(T), 0.0, what="d critic_loss / d logp", call=call.code,
                     cause="the critic loss depends on the log-probabilities")
        bias = critic.bias_gradient(grads["values"], grads["next_values"])
        assert_close(bias, -2 * f * s * float(np.sum(delta)), float(np.sum(tol)),
                     what=f"d critic_loss / d c for the critic V(s) = w . phi(s) + c vs -2 x {f:g} x {reduced(ctx)} delta_t (the critic's bias gradient)",
                     call=call.code)

    verify(*A3_CRITIC)  # d/dV' = 0 (a full gradient gives 2 delta = 3)
    verify(*TERMINAL_CRITIC)
    ctx.property(draws.critic_batches(), lambda c: verify(*c), label="drawn")


@check("AC-ACTOR-WEIGHT-DETACHED")
def actor_weight_detached(ctx):
    """d actor / d logp = -s delta; no actor gradient into values or next_values."""

    def verify(case: Transitions):
        case, call, grads = run_actor_critic(ctx, case, "actor")
        u, T = call.unit_roundoff, len(case.logp)
        s = reduction_scale(ctx, T)
        for name in ("values", "next_values"):
            assert_close(grads[name], np.zeros(T), 0.0, what=f"d actor_loss / d {name} (delta is a weight in the actor loss)",
                         call=call.code)
        assert_close(grads["logp"], -s * case.delta, 2 * 8 * (u * s * case.m + smallest_normal(u)) + TINY,
                     what=f"d actor_loss / d logp vs -delta{per_sample(ctx)}" + conventions_note(ctx), call=call.code,
                     cause="the actor's weight is not the TD error delta (sign or bootstrap wrong)")

    verify(A3_CASE)  # d actor / d V(s) = 0 (not detached: log pi = -0.7)
    verify(TERMINAL_CASE)
    ctx.property(draws.transition_batches(), verify, label="drawn")
