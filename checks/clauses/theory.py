"""Checks for the theory chapter (``spec/clauses/75_theory.toml``).

The statements an auditor asks about, decided exactly on the suite's gridworld (dynamic programming with
``fractions.Fraction``: ``rlspec.reference.gridworld`` with ``exact=True``) or over every outcome of a small
categorical, with the candidate's own operation in the loop wherever the statement is about a quantity a
candidate computes:

* the score-function estimator over whole trajectories: ``reinforce_loss``'s weights on every state-action
  path, averaged with the paths' probabilities, against the exact gradient of J by the policy-gradient theorem;
* the variance-minimising baseline: the same weights with four baselines, the exact variance of each;
* TRPO's improvement bound: decided exactly on policy pairs; ``line_search`` handed the penalised surrogate
  never lowers J;
* the variance of k1, k2, k3: ``kl_estimate`` over every outcome of categoricals;
* CQL's lower bound: ``cql_penalty``'s gradient on a tabular dataset is the push of the conservative fixed
  point, solved exactly;
* the bias of batch advantage normalisation: ``normalize_advantages`` on every batch of draws.

The pure theory (the bound's constant, the clip and the KL, the claims stated too strongly) is in
``spec/proofs/theory.py``: no candidate computes those quantities.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from ..kit.assertions import ClauseFailure, mismatch_table
from ..kit.gradients import gradients, reduction_scale
from ..kit.kl_estimators import exact as kl_exact
from ..kit.cql import run_cql
from ..kit.kl_estimators import order_note, per_sample_tolerance, run_kl
from ..kit.registry import check
from ..kit.standardise import normalisation_tolerance, normalised
from ..kit.strategies import kl as kl_draws
from ..kit.strategies import rounded
from ..kit.tabular import GREEDY, UNIFORM, WORLD, Policy, exact_float, exact_mdp, exact_values, float_mdp, policies
from ..kit.tolerances import TINY, U64, smallest_normal
from ...reference import gridworld as gw

START_CELL = (1, 2)  # the cell left of the pit, below the goal's neighbour: every return from it can differ
HORIZON = 3  # steps of the enumerated paths (about a thousand state-action paths)


@lru_cache(maxsize=None)
def started(exact: bool = False) -> gw.MDP:
    """The gridworld started at START_CELL (the chapter's samples), float64 or exact."""
    mdp = exact_mdp() if exact else float_mdp()
    return dataclasses.replace(mdp, start=mdp.cells.index(START_CELL))


def score(policy_probs: np.ndarray, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """(n, A) d log pi(a|s) / d z(s, .) = e_a - pi(.|s) for the tabular softmax, one row per sample (exact for dyadic pi)."""
    out = -policy_probs[states].copy()
    out[np.arange(len(states)), actions] += 1.0
    return out


@dataclasses.dataclass(frozen=True)
class Samples:
    """Every (path, step) of the enumerated state-action paths of ``policy`` from START_CELL, flattened."""

    policy: Policy
    prob: np.ndarray  # (n,) the probability of the sample's path
    state: np.ndarray  # (n,) s_t
    action: np.ndarray  # (n,) a_t
    t: np.ndarray  # (n,)
    path: np.ndarray  # (n,)
    whole: np.ndarray  # (n,) R(tau) = sum_k gamma^k r_{k+1}, the whole path's discounted return
    to_go: np.ndarray  # (n,) gamma^t G_t = sum_{k >= t} gamma^k r_{k+1}
    magnitude: np.ndarray  # (n,) sum_k gamma^k |r_{k+1}| over the path: bounds both returns
    paths: int


@lru_cache(maxsize=16)
def _samples(key: bytes) -> Samples:
    mdp = started()
    probs = np.frombuffer(key).reshape(mdp.P.shape[:2])
    paths = gw.enumerate_action_paths(mdp, probs, HORIZON)
    H, N = paths.actions.shape
    valid = np.arange(H)[:, None] < paths.steps[None, :]  # (H, N)
    rewards = np.where(valid, mdp.reward[np.maximum(paths.states[1:], 0)], 0.0)  # r_{t+1} = reward(s_{t+1})
    discounted = (WORLD.gamma ** np.arange(H))[:, None] * rewards  # gamma^t r_{t+1}
    to_go = np.cumsum(discounted[::-1], axis=0)[::-1]  # sum_{k >= t} gamma^k r_{k+1}
    t, n = np.nonzero(valid)
    return Samples(Policy(probs, ""), paths.prob[n], paths.states[t, n], paths.actions[t, n], t, n,
                   discounted.sum(axis=0)[n], to_go[t, n], np.abs(discounted).sum(axis=0)[n], N)


def samples_of(policy: Policy) -> Samples:
    return _samples(policy.key)


@lru_cache(maxsize=16)
def _exact_policy_gradient(key: bytes) -> np.ndarray:
    mdp = started(exact=True)
    return exact_float(gw.policy_gradient(mdp, Policy(np.frombuffer(key).reshape(mdp.P.shape[:2]), "").exact, HORIZON))


def exact_policy_gradient(policy: Policy) -> np.ndarray:
    """(S, A) the exact d J_H / d z of the softmax logits from START_CELL (Fractions, then rounded once)."""
    return _exact_policy_gradient(policy.key)


def candidate_weights(ctx, returns: np.ndarray, baseline: np.ndarray | None, logp: np.ndarray):
    """``-(1/s) d reinforce_loss / d logp``: the weight the candidate gives each sample, and the call."""
    args = {"logp": rounded(logp, ctx.dtype), "returns": rounded(returns, ctx.dtype)}
    requires = ("logp",)
    if baseline is not None:
        args["baseline"] = rounded(baseline, ctx.dtype)
    call = ctx.call("reinforce_loss", args, array="torch", requires_grad=requires, shape=())
    grad = gradients(call.raw, {"logp": call.inputs["logp"]})["logp"]
    return -grad / reduction_scale(ctx, len(logp)), call, args


# tolerances of a candidate's weights
#
# reinforce_loss: each weight w = returns - baseline is off by at most 4 u s (|R| + |b|) in the gradient
# (checks/clauses/pg.py), doubled for the float64 oracle there and counted here once more for rounding the
# inputs to the candidate's precision: 9 u (|R| + |b|) per weight once divided by s. The suite's own returns
# are float64 sums of at most H products gamma^k r: (2 H + 2) u64 times sum_k gamma^k |r|.


def weight_error(samples_magnitude, baseline_abs, u) -> np.ndarray:
    return 9 * u * (samples_magnitude + baseline_abs) + (2 * HORIZON + 2) * U64 * samples_magnitude + 2 * smallest_normal(u) + TINY


# ---------------------------------------------------------------------------------------------
# PG-TRAJECTORY-SCORE-FUNCTION


FORMS = {
    "whole": "(sum_t grad log pi(a_t|s_t)) R(tau)",
    "to_go": "sum_t grad log pi(a_t|s_t) gamma^t G_t",
}


def estimator_expectation(samples: Samples, weights: np.ndarray, S: int, A: int):
    """sum over samples of P(path) w (e_a - pi(s)) at row s: the estimator's exact expectation (S, A), and the same
    sum of absolute values (for the rounding bound)."""
    sc = score(samples.policy.probs, samples.state, samples.action)  # (n, A)
    terms = (samples.prob * weights)[:, None] * sc
    out, size = np.zeros((S, A)), np.zeros((S, A))
    np.add.at(out, samples.state, terms)
    np.add.at(size, samples.state, np.abs(terms))
    return out, size, sc


@check("PG-TRAJECTORY-SCORE-FUNCTION")
def trajectory_score_function(ctx):
    """Every state-action path from START_CELL up to HORIZON steps, each step a sample of reinforce_loss with the
    whole return R(tau) (and, second, gamma^t G_t): the probability-weighted estimator equals the exact grad J."""
    mdp = started()
    S, A = mdp.P.shape[:2]

    def verify(policy: Policy, form: str):
        samples = samples_of(policy)
        returns = samples.whole if form == "whole" else samples.to_go
        logp = np.log(policy.probs[samples.state, samples.action])
        weights, call, args = candidate_weights(ctx, returns, None, logp)
        actual, size, sc = estimator_expectation(samples, weights, S, A)
        expected = exact_policy_gradient(policy)
        # the candidate's weights (weight_error) carried through the weighted sum; the float64 sum of n terms with
        # path probabilities that are products of 2 H roundings: (n + 2 H + 2) u64 times the sum of |terms|; the
        # exact gradient rounded once.
        per = (samples.prob * weight_error(samples.magnitude, 0.0, call.unit_roundoff))[:, None] * np.abs(sc)
        carried = np.zeros((S, A))
        np.add.at(carried, samples.state, per)
        tol = carried + (len(weights) + 2 * HORIZON + 2) * U64 * size + U64 * np.abs(expected)
        bad = np.argwhere(~(np.abs(actual - expected) <= tol))
        if len(bad):
            where = lambda k: f"{mdp.cells[k[0]]} {gw.ACTIONS[k[1]]}"
            k = bad[np.argmax([abs(actual[tuple(j)] - expected[tuple(j)]) / tol[tuple(j)] for j in bad])]
            rows = [(where(j), expected[tuple(j)], actual[tuple(j)], abs(actual[tuple(j)] - expected[tuple(j)]), tol[tuple(j)])
                    for j in bad[:6]]
            raise ClauseFailure(
                f"E[{FORMS[form]}] over every state-action path of {policy.name} from {START_CELL} (H = {HORIZON}, "
                f"{samples.paths} paths, {len(weights)} samples) vs the exact dJ/dz at s, a = {where(k)}: expected "
                f"{expected[tuple(k)]:.10g}, got {actual[tuple(k)]:.10g} ({len(bad)} of {S * A} logits off)",
                table=mismatch_table("s, a", rows),
                call=f"reinforce_loss over every path: {call.code[:240]}",
            )

    for form in ("whole", "to_go"):
        verify(UNIFORM, form)
        verify(GREEDY, form)
    ctx.property(st.tuples(policies(), st.sampled_from(tuple(FORMS))), lambda p: verify(*p), label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# PG-OPTIMAL-BASELINE


@dataclasses.dataclass(frozen=True)
class BaselineMoments:
    """Exact moments at START_CELL of g = (e_a - pi) (G - b), a ~ pi, G the H-step return: Var(b) = C0 - 2 b N + b^2 W - m2."""

    C0: Fraction
    N: Fraction
    W: Fraction
    m2: Fraction
    V: Fraction  # E[G] = V_H(s)

    @property
    def optimal(self) -> Fraction:
        return self.N / self.W

    def variance(self, b: Fraction) -> Fraction:
        return self.C0 - 2 * b * self.N + b * b * self.W - self.m2


@lru_cache(maxsize=16)
def _baseline_moments(key: bytes) -> BaselineMoments:
    mdp = started(exact=True)
    policy = Policy(np.frombuffer(key).reshape(mdp.P.shape[:2]), "").exact
    s = mdp.start
    _, Q = gw.finite_horizon_values(mdp, policy, HORIZON)
    M = gw.return_second_moments(mdp, policy, HORIZON)
    pi, q, m = policy[s], Q[-1][s], M[s]
    A = len(pi)
    sq = [sum(((1 if a == c else 0) - pi[c]) ** 2 for c in range(A)) for a in range(A)]  # ||e_a - pi||^2
    mean = [sum(pi[a] * ((1 if a == c else 0) - pi[c]) * q[a] for a in range(A)) for c in range(A)]
    return BaselineMoments(sum(pi[a] * sq[a] * m[a] for a in range(A)), sum(pi[a] * sq[a] * q[a] for a in range(A)),
                           sum(pi[a] * sq[a] for a in range(A)), sum(x * x for x in mean), sum(pi[a] * q[a] for a in range(A)))


def baseline_moments(policy: Policy) -> BaselineMoments:
    return _baseline_moments(policy.key)


@check("PG-OPTIMAL-BASELINE")
def optimal_baseline(ctx):
    """At START_CELL, every first action and every path after it: the exact variance of the candidate's estimate
    (e_a - pi)(-d loss/d logp) for b = b*, V, 0 (given, and left out) and a drawn b equals C0 - 2 b N + b^2 W - ||E g||^2, least at b*."""
    mdp = started()

    def verify(policy: Policy, extra: float):
        samples = samples_of(policy)
        first = samples.t == 0
        prob, action, G, magnitude = samples.prob[first], samples.action[first], samples.whole[first], samples.magnitude[first]
        moments = baseline_moments(policy)
        named = {"b*": float(moments.optimal), "V": float(moments.V), "0": 0.0, "drawn": extra}
        n = len(prob)
        baseline = np.concatenate([np.full(n, b) for b in named.values()])
        returns, logp = np.tile(G, len(named)), np.tile(np.log(policy.probs[mdp.start, action]), len(named))
        weights, call, args = candidate_weights(ctx, returns, baseline, logp)
        received_b = np.asarray(args["baseline"], dtype=np.float64)
        # each baseline as the candidate received it, with its weights; then the baseline left out (None: b = 0)
        runs = [(name, weights[k * n:(k + 1) * n], Fraction(float(received_b[k * n]))) for k, name in enumerate(named)]
        left_out, _, _ = candidate_weights(ctx, G, None, logp[:n])
        runs.append(("left out (None)", left_out, Fraction(0)))
        sc = score(policy.probs, np.full(n, mdp.start), action)  # (n, A)
        sq = (sc * sc).sum(axis=1)
        rows, bad = [], []
        for name, w, b_used in runs:
            mean = (prob * w) @ sc  # (A,) E[g]
            actual = float((prob * w * w) @ sq - mean @ mean)
            expected = moments.variance(b_used)
            # tolerance: each weight within e (weight_error); E[w^2 ||s||^2] moves by sum p (2 |w| e + e^2) ||s||^2 and
            # ||E g||^2 by 2 ||E g|| d + d^2, d = sum p e ||s||; the float64 sums of n terms add (n + 2 H + 4) u64 of
            # the sums of absolute values; the exact variance rounded once.
            e = weight_error(magnitude, abs(float(b_used)), call.unit_roundoff)
            d = float((prob * e) @ np.sqrt(sq))
            tol = float((prob * (2 * np.abs(w) * e + e * e)) @ sq) + 2 * math.sqrt(mean @ mean) * d + d * d \
                + (n + 2 * HORIZON + 4) * U64 * (float((prob * w * w) @ sq) + float(mean @ mean)) + U64 * abs(float(expected))
            rows.append((f"b = {name} = {float(b_used):.6g}", float(expected), actual, abs(actual - float(expected)), tol))
            if not abs(actual - float(expected)) <= tol:
                bad.append(rows[-1])
        if bad:
            excess = float(moments.variance(Fraction(float(moments.V))) - moments.variance(moments.optimal))
            raise ClauseFailure(
                f"Var of the estimate (e_a - pi)(-d loss / d logp) at {START_CELL} under {policy.name}, {bad[0][0]}: expected "
                f"{bad[0][1]:.10g}, got {bad[0][2]:.10g} ({len(bad)} of {len(rows)} baselines off; the exact minimum is at "
                f"b* = {float(moments.optimal):.10g}, and V = {float(moments.V):.10g} costs {excess:.4g} more)",
                table=mismatch_table("baseline", rows), call=f"reinforce_loss over every first action and path: {call.code[:240]}",
                diagnosed=False,  # the usual suspect: a variance does not say how the weights went wrong
                cause="the baseline does not enter the weight as returns - baseline (ignored, added, or scaled), so the "
                      "variance is not minimised where the theory says")

    verify(GREEDY, 0.5)
    verify(UNIFORM, -0.25)
    ctx.property(st.tuples(policies(), st.floats(-1.0, 1.0, width=32)), lambda p: verify(*p), label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# GRID-TRPO-IMPROVEMENT-BOUND


@dataclasses.dataclass(frozen=True)
class Bound:
    """Both sides of Schulman et al. 2015's Theorem 1 for a policy pair, exact: J(pi'), L_pi(pi'), epsilon, alpha."""

    J_old: Fraction
    J_new: Fraction
    L: Fraction
    eps: Fraction
    alpha: Fraction

    @property
    def C(self) -> Fraction:
        gamma = exact_mdp().gamma
        return 4 * self.eps * gamma / (1 - gamma) ** 2

    @property
    def error(self) -> Fraction:
        """The surrogate's error J(pi') - L_pi(pi') = J(pi') - J(pi) - (L_pi(pi') - L_pi(pi))."""
        return self.J_new - self.L


def exact_bound(old: Policy, new: Policy) -> Bound:
    mdp = exact_mdp()
    alive = mdp.alive
    advantages = np.where(mdp.terminal[:, None], 0, gw.action_values(mdp, exact_values(old)) - exact_values(old)[:, None])
    occupancy = gw.discounted_occupancy(mdp, old.exact)
    J_old = exact_values(old)[mdp.start]
    L = J_old + (occupancy[:, None] * new.exact * advantages).sum()
    eps = max(abs(x) for x in advantages[alive].ravel())
    alpha = max(sum(abs(a - b) for a, b in zip(po, pn)) / 2 for po, pn, live in zip(old.exact, new.exact, alive) if live)
    return Bound(J_old, exact_values(new)[mdp.start], L, eps, alpha)


def max_kl(old_probs, new_probs) -> float:
    """max over non-terminal states of KL(pi(.|s) || pi'(.|s)), float64."""
    alive = float_mdp().alive
    return float(np.max(np.sum(old_probs * (np.log(old_probs) - np.log(new_probs)), axis=1)[alive]))


def verify_bound(old: Policy, new: Policy) -> Bound:
    """|J(pi') - L_pi(pi')| <= C alpha^2 exactly (alpha = max_s TV; alpha^2 <= max_s KL gives the KL form)."""
    bound = exact_bound(old, new)
    if not abs(bound.error) <= bound.C * bound.alpha**2:  # exact rationals: no tolerance
        raise ClauseFailure(
            f"TRPO's bound fails for pi = {old.name}, pi' = {new.name}: |J(pi') - L_pi(pi')| = {float(abs(bound.error)):.10g} > "
            f"C alpha^2 = {float(bound.C * bound.alpha ** 2):.10g} (C = {float(bound.C):.6g}, alpha = {float(bound.alpha):.6g})",
            cause="the exact dynamic programming of the gridworld is wrong (rlspec.reference.gridworld), not the candidate")
    return bound


def logits_policy(x: np.ndarray) -> np.ndarray:
    """The tabular softmax of the parameter vector (cells x actions), float64."""
    S, A = float_mdp().P.shape[:2]
    return gw.softmax_policy(np.reshape(x, (S, A)))


@dataclasses.dataclass
class Penalised:
    """TRPO's minorant M(x) = L_pi(pi_x) - C max_s KL(pi || pi_x) (Schulman et al. 2015, Algorithm 1) in float64, with pi fixed."""

    old: Policy
    C: float

    def __post_init__(self):
        mdp = float_mdp()
        values = gw.state_values(mdp, self.old.probs)
        self.J = float(values[mdp.start])
        self.advantages = gw.advantages(mdp, self.old.probs)
        self.occupancy = gw.discounted_occupancy(mdp, self.old.probs)

    def L(self, x) -> float:
        return self.J + float((self.occupancy[:, None] * logits_policy(x) * self.advantages).sum())

    def M(self, x) -> float:
        return self.L(x) - self.C * max_kl(self.old.probs, logits_policy(x))

    def slope(self, direction) -> float:
        """d M / d t at t = 0 along ``direction`` (the KL term has zero slope there): grad L . direction."""
        pi = self.old.probs
        grad = self.occupancy[:, None] * pi * (self.advantages - (pi * self.advantages).sum(axis=1, keepdims=True))
        return float(grad.ravel() @ np.asarray(direction))


class SuiteFunction:
    """A function of the parameter vector the suite hands the candidate's line search: called in the candidate's array
    kind, answered in it (float64 inside)."""

    def __init__(self, function, text: str):
        self.function, self.text = function, text

    def __repr__(self) -> str:
        return self.text

    def __call__(self, x):
        value = self.function(as_float64(x))
        if hasattr(x, "detach"):  # torch in, torch out
            import torch

            return torch.as_tensor(value, dtype=x.dtype, device=x.device)
        return np.asarray(value, dtype=getattr(x, "dtype", np.float64))[()]


def as_float64(value) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.array(value, dtype=np.float64)


def J_of(x) -> float:
    mdp = float_mdp()
    return float(gw.state_values(mdp, logits_policy(x))[mdp.start])


# tolerance of "J(result) >= J(x0)": the suite's M is a float64 evaluation. The DP solves (I - gamma P_pi) x = b by
# LU with backward error <= n u64 (n = 9 live cells), amplified by cond(I - gamma P_pi) <= (1 + gamma) / (1 - gamma) =
# 199: |J_hat - J| <= 199 n u64 |J|-scale; L adds S A = 44 products and sums of d pi' A; the KL S A logs. So
# |M_hat - M| <= delta = 4 * 199 * (S A) u64 (1 + |J| + |L| + C max KL), and an accepted trial (M_hat(x) > M_hat(x0))
# has J(x) >= M(x) >= M(x0) - 2 delta = J(x0) - 2 delta: the check allows 4 delta (J itself is evaluated the same way).


def penalised_delta(problem: Penalised, x) -> float:
    S, A = float_mdp().P.shape[:2]
    return 4 * 199 * S * A * U64 * (1 + abs(problem.J) + abs(problem.L(x)) + problem.C * max_kl(problem.old.probs, logits_policy(x)))


def run_penalised_search(ctx, old: Policy, direction: np.ndarray, max_kl_allowed: float, label: str):
    """The candidate's line_search on M from x0 = log pi along ``direction``: returns (x, problem, call)."""
    problem = Penalised(old, 0.0)
    eps = float(np.max(np.abs(problem.advantages[float_mdp().alive])))  # epsilon = max |A_pi| (float64 suffices: any C > 0 is a valid penalty)
    bound_C = problem.C = 4 * eps * WORLD.gamma / (1 - WORLD.gamma) ** 2
    x0 = rounded(np.log(old.probs).ravel(), ctx.dtype)
    f = rounded(direction, ctx.dtype)
    surrogate = SuiteFunction(lambda x: problem.M(x), f"<M(x) = L_pi(pi_x) - {bound_C:.6g} max_s KL(pi || pi_x) on the gridworld, pi = {label}>")
    kl = SuiteFunction(lambda x: max_kl(old.probs, logits_policy(x)), f"<max_s KL(pi || pi_x), pi = {label}>")
    args = {"surrogate": surrogate, "kl": kl, "x0": x0, "fullstep": f, "max_kl": max_kl_allowed, "max_backtracks": 10}
    if float(ctx.convention("line_search_accept_ratio")):  # only a candidate that declares the test receives the slope
        args["expected_improve_rate"] = problem.slope(f)
    call = ctx.call("line_search", args, shape=(len(x0),))
    return as_float64(call.outputs[0]), problem, call, x0, f


def verify_search(ctx, old: Policy, direction: np.ndarray, label: str):
    x, problem, call, x0, f = run_penalised_search(ctx, old, direction, 1.0, label)
    # x0 itself, as the candidate returns it: a copy, or restored by undoing the last trial, x0 + t f - t f (t <= 1),
    # which rounds at most 4 times on u (|x0| + |f|) (TRPO-LINE-SEARCH-RESTORES-ON-FAILURE's bound); J is not compared
    # there, since any J(x) off J(x0) would be the rounding of x, not an accepted trial.
    u = call.unit_roundoff
    if np.all(np.abs(x - x0) <= 4 * u * (np.abs(x0) + np.abs(f)) + 4 * smallest_normal(u)):
        return
    J0, J1 = J_of(x0), J_of(x)
    delta = penalised_delta(problem, x) + penalised_delta(problem, x0)
    t = float((x - x0) @ f / (f @ f))
    if not J1 >= J0 - 4 * delta:
        full = problem.M(x0 + f) - problem.M(x0)
        raise ClauseFailure(
            f"line_search on TRPO's penalised surrogate M = L - C max KL from {label} returned x0 + {t:.6g} fullstep with "
            f"J = {J1:.10g} < J(x0) = {J0:.10g} (by {J0 - J1:.4g}; M there moved by {problem.M(x) - problem.M(x0):.4g}, "
            f"at the full step by {full:.4g}): a step the bound guarantees only when M improves was accepted",
            table=mismatch_table("quantity", [("J(result) >= J(x0)", J0, J1, J0 - J1, 4 * delta)]),
            call=call.code[:300], diagnosed=False,  # the usual suspect: TRPO-LINE-SEARCH-* name the rule that broke
            cause="the line search accepts a trial that does not improve the surrogate (no improvement check, or the full step "
                  "always taken), so TRPO's monotone-improvement guarantee (J >= M > M(x0) = J(x0)) is lost")


@check("GRID-TRPO-IMPROVEMENT-BOUND")
def trpo_improvement_bound(ctx):
    """|J(pi') - L_pi(pi')| <= 4 eps gamma alpha^2 / (1 - gamma)^2 exactly on policy pairs; the candidate's line search on
    M = L - C max KL never returns a point with lower J (a descent full step first: it must come back to x0)."""
    verify_bound(UNIFORM, GREEDY)
    verify_bound(GREEDY, UNIFORM)
    for old, label in ((GREEDY, "GREEDY"), (UNIFORM, "UNIFORM")):
        problem = Penalised(old, 1.0)
        pi = old.probs
        grad = problem.occupancy[:, None] * pi * (problem.advantages - (pi * problem.advantages).sum(axis=1, keepdims=True))
        descent = -grad.ravel() / np.linalg.norm(grad) * 2.0  # a step of length 2 down the gradient of J
        verify_search(ctx, old, descent, label)

    def drawn(example):
        old, new, scale = example
        verify_bound(old, new)
        direction = (np.log(new.probs) - np.log(old.probs)).ravel() * scale
        if np.any(direction != 0):
            verify_search(ctx, old, direction, old.name)

    ctx.property(st.tuples(policies(), policies(), st.sampled_from([0.25, 1.0, -1.0])), drawn, label="drawn",
                 tier="enumeration")


# ---------------------------------------------------------------------------------------------
# KL-ESTIMATOR-VARIANCE


def variance_case(p, q):
    """(log p, log q) of two categoricals."""
    return np.log(np.asarray(p, dtype=np.float64)), np.log(np.asarray(q, dtype=np.float64))


VARIANCE_CASES = {
    # q / p = 8 on the rare outcome: k3 varies more than k1 (the counterexample of theory.k3_variance)
    "p = (15/16, 1/16), q = (1/2, 1/2)": variance_case([15 / 16, 1 / 16], [0.5, 0.5]),
    # q / p <= 2 everywhere: k3 varies less
    "p = (1/2, 1/4, 1/4), q = (3/8, 3/8, 1/4)": variance_case([0.5, 0.25, 0.25], [0.375, 0.375, 0.25]),
}


def exact_variance(kind: str, a, b) -> float:
    """Var_p[k] from the formula in float64 on the inputs the candidate received (p = exp(a))."""
    p, values = np.exp(a), kl_exact(kind, a, b)
    mean = math.fsum(p * values)
    return math.fsum(p * values * values) - mean * mean


def variance_of(ctx, kind: str, a, b):
    """The candidate's Var_p[k] over every outcome and its tolerance (with the estimates and the call)."""
    estimates, call, a, b = run_kl(ctx, a, b, kind)
    p = np.exp(a)
    mean = math.fsum(p * estimates)
    actual = math.fsum(p * estimates * estimates) - mean * mean
    # each estimate within tau (per_sample_tolerance): sum p (2 |e| tau + tau^2) + 2 |E| sum p tau + (sum p tau)^2; the
    # float64 sums and the formula's own evaluation, 2 (n + 4) u64 (E[e^2] + E^2) each; p = exp(a) rounded: 2 u64 relative.
    tau = per_sample_tolerance(kind, a, b, call.unit_roundoff)
    d = float(np.sum(p * tau))
    tol = float(np.sum(p * (2 * np.abs(estimates) * tau + tau * tau))) + 2 * abs(mean) * d + d * d \
        + 2 * (len(a) + 6) * U64 * (float(np.sum(p * estimates * estimates)) + mean * mean) + TINY
    return actual, tol, call, a, b


@check("KL-ESTIMATOR-VARIANCE")
def estimator_variance(ctx):
    """Var_p[k] of the candidate's k1, k2, k3 over every outcome against the formulas; at the counterexample k3 varies
    more than k1, where q/p <= 2 less."""
    kinds = ctx.provided("kl_estimate_kinds", "k1", "k2", "k3")

    def verify(label, log_p, log_q, *, claim: bool):
        values = {}
        for kind in kinds:
            actual, tol, call, a, b = variance_of(ctx, kind, log_p, log_q)
            expected = exact_variance(kind, a, b)
            if not abs(actual - expected) <= tol:
                raise ClauseFailure(
                    f"Var_p[{kind}] over every outcome at {label}: expected {expected:.10g}, got {actual:.10g} "
                    f"(|diff| {abs(actual - expected):.3g} > tol {tol:.3g})" + order_note(ctx),
                    table=mismatch_table("quantity", [(f"Var_p[{kind}]", expected, actual, abs(actual - expected), tol)]),
                    call=call.code, cause="the per-sample estimates are not the estimator's values (its spread shows it)",
                    diagnosed=False, ratio=abs(actual - expected) / tol)  # what failed, not why: KL-K*-* clauses say
            values[kind] = (actual, tol)
        if claim and "k1" in values and "k3" in values:
            ratio = float(np.max(np.exp(log_q - log_p)))
            (v1, t1), (v3, t3) = values["k1"], values["k3"]
            if ratio <= 2 and not v3 <= v1 + t1 + t3:
                raise ClauseFailure(f"at {label} (max q/p = {ratio:.4g} <= 2) Var[k3] = {v3:.10g} exceeds Var[k1] = {v1:.10g}")

    for label, (log_p, log_q) in VARIANCE_CASES.items():
        verify(label, log_p, log_q, claim=True)
    ctx.property(kl_draws.categorical_pairs(), lambda pair: verify("a drawn pair", *pair, claim=True), label="drawn",
                 tier="grouped")  # a call per kind


# ---------------------------------------------------------------------------------------------
# GRID-CQL-LOWER-BOUND


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A tabular offline dataset of the gridworld: counts n(s, a, s') of transitions from every non-terminal cell."""

    counts: np.ndarray  # (S, A, S) int
    name: str

    @property
    def pairs(self) -> np.ndarray:
        return self.counts.sum(axis=2)  # (S, A) n(s, a)

    def transitions(self):
        """(s, a, s') of every sample, in a fixed order."""
        s, a, t = np.nonzero(self.counts)
        reps = self.counts[s, a, t]
        return np.repeat(s, reps), np.repeat(a, reps), np.repeat(t, reps)


def draw_dataset(seed: int, low: int = 1, high: int = 4) -> Dataset:
    """n(s, a) uniform in low..high for every non-terminal (s, a), each next state drawn from P(.|s, a)."""
    mdp = float_mdp()
    rng = np.random.default_rng(seed)
    S, A = mdp.P.shape[:2]
    counts = np.zeros((S, A, S), dtype=np.int64)
    for s in np.flatnonzero(mdp.alive):
        for a in range(A):
            n = int(rng.integers(low, high + 1))
            counts[s, a] = rng.multinomial(n, mdp.P[s, a] / mdp.P[s, a].sum())
    return Dataset(counts, f"draw_dataset({seed})")


@dataclasses.dataclass(frozen=True)
class Conservative:
    """The exact quantities of CQL's fixed point for a dataset and a policy (Fractions): the empirical MDP's value
    V0 of pi, the true V^pi, w = (I - gamma P_hat_pi)^-1 Delta, alpha* and the theorem's sufficient alpha."""

    mdp: gw.MDP  # the empirical MDP
    V0: np.ndarray
    V: np.ndarray
    w: np.ndarray
    alpha_star: Fraction
    alpha_theorem: Fraction


def conservative(data: Dataset, policy: Policy, exact: bool = True) -> Conservative:
    """CQL's fixed point quantities; ``exact``: in Fractions (the fixed cases), else float64 (drawn cases, whose
    decisions the check makes only with a margin far above float64's rounding)."""
    truth = exact_mdp() if exact else float_mdp()
    ratio = Fraction if exact else (lambda a, b: a / b)
    zero = Fraction(0) if exact else 0.0
    n_sa = data.pairs
    S, A = n_sa.shape
    P = np.full(truth.P.shape, zero, dtype=object if exact else np.float64)
    for s, a in zip(*np.nonzero(n_sa)):
        for t in np.flatnonzero(data.counts[s, a]):
            P[s, a, t] = ratio(int(data.counts[s, a, t]), int(n_sa[s, a]))
    empirical = gw.MDP(P, truth.reward, truth.terminal, truth.start, truth.gamma, truth.cells)
    pi = policy.exact if exact else policy.probs
    beta = np.array([[ratio(int(n_sa[s, a]), max(int(n_sa[s].sum()), 1)) for a in range(A)] for s in range(S)], dtype=P.dtype)
    unit = np.array([[pi[s, a] / beta[s, a] - 1 if beta[s, a] and not truth.terminal[s] else zero for a in range(A)]
                     for s in range(S)], dtype=P.dtype)  # mu / pi_beta - 1 with mu = pi
    V0 = gw.state_values(empirical, pi)
    V = exact_values(policy) if exact else gw.state_values(truth, pi)
    Delta = (pi * unit).sum(axis=1)
    w = gw.state_values(dataclasses.replace(empirical, reward=np.full(S, zero, dtype=P.dtype)), pi, penalty=-unit)  # (I - gamma P_hat_pi)^-1 Delta
    # the theorem's condition with the realised sampling error: zeta(s) = sum_a pi (B_hat V - B V)(s, a); alpha >= max zeta / Delta
    zeta = (pi * (gw.action_values(empirical, V) - gw.action_values(truth, V))).sum(axis=1)
    live = [s for s in range(S) if truth.alive[s]]
    alpha_star = max([zero] + [(V0[s] - V[s]) / w[s] for s in live if w[s] > 0])
    alpha_theorem = max([zero] + [zeta[s] / Delta[s] for s in live if Delta[s] > 0])
    return Conservative(empirical, V0, V, w, alpha_star, alpha_theorem)


def run_penalty_gradient(ctx, data: Dataset, policy: Policy, alpha: float):
    """The candidate's d (sum_i penalty_i) / d Q at Q(s, .) = log pi(.|s) for every sample; summed per (s, a) and divided by
    n(s, a): the push alpha (pi / pi_beta - 1). Returns (push (S, A) float64, call, alpha as passed)."""
    s, a, _ = data.transitions()
    alpha_passed = float(rounded(np.array([alpha]), ctx.dtype)[0])
    _, call, q = run_cql(ctx, np.log(policy.probs[s]), a, alpha_passed, allow_nonfinite=False)
    import torch

    total = call.raw.sum() if torch.is_tensor(call.raw) and call.raw.requires_grad else None
    grad = gradients(total, {"q": call.inputs["q_values"]})["q"] if total is not None else np.zeros(q.shape)
    S, A = policy.probs.shape
    summed = np.zeros((S, A))
    np.add.at(summed, s, grad)
    n_sa = data.pairs
    push = np.where(n_sa > 0, summed / np.maximum(n_sa, 1), 0.0)
    return push, call, alpha_passed, q, s


def check_conservative(ctx, data: Dataset, policy: Policy, exact_arithmetic: bool = True):
    exact = conservative(data, policy, exact_arithmetic)
    if exact.alpha_star == 0:
        return False  # the empirical MDP under-estimates everywhere already: nothing to decide
    if not exact_arithmetic:  # float64: decide only where the margins dwarf its rounding (1e-9 against values of size 1)
        margin = float(exact.alpha_star) / 2 * float(np.max(exact.w))
        if margin < 1e-6 or float(exact.alpha_theorem - exact.alpha_star) < -1e-9:
            return False
    if not exact.alpha_star <= exact.alpha_theorem * (1 if exact_arithmetic else 1 + 1e-9):  # the theorem's alpha is sufficient
        raise ClauseFailure(f"on {data.name} for {policy.name} the exact threshold alpha* = {float(exact.alpha_star):.6g} exceeds the "
                            f"theorem's alpha = {float(exact.alpha_theorem):.6g}",
                            cause="the exact dynamic programming of the gridworld is wrong (rlspec.reference.gridworld), not the candidate")
    S, A = policy.probs.shape
    truth = exact_mdp()
    for alpha_exact, label, holds in ((exact.alpha_theorem, "the theorem's alpha", True),
                                      (exact.alpha_star / 2, "alpha* / 2", False)):
        push, call, alpha, q, s = run_penalty_gradient(ctx, data, policy, float(alpha_exact))
        empirical = dataclasses.replace(exact.mdp, P=exact_float(exact.mdp.P), reward=float_mdp().reward, gamma=WORLD.gamma)
        alpha_exact = Fraction(alpha) if exact_arithmetic else alpha
        V_hat = gw.state_values(empirical, policy.probs, penalty=np.where(truth.terminal[:, None], 0.0, push))  # float64 LU
        expected = exact.V0 - alpha_exact * exact.w  # the fixed point with the exact push at the alpha passed
        # tolerance: each summed gradient entry is alpha (n(s) softmax(q) - n(s, a)) computed by the candidate: softmax
        # of a row rounded to u (8 u relative, checks/kl_estimators ELEMENTARY) and a sum of n(s) terms (n(s) u); the
        # push's error e(s, a) <= (8 + n(s)) u alpha (n(s) pi / n(s, a) + 1) + q's rounding (2 u) and softmax(log pi) vs
        # pi (2 u64). It reaches V_hat through (I - gamma P_hat_pi)^-1, whose rows sum to at most the expected number of
        # steps before a terminal, <= 1 / (1 - gamma): |dV| <= max_s sum_a pi e / (1 - gamma). The suite solves in float64:
        # LU's backward error n u64 (n = 9 live cells) amplified by cond(I - gamma P_pi) <= (1 + gamma) / (1 - gamma) = 199,
        # on values and rewards of size <= 1 / (1 - gamma): within 1e3 u64 / (1 - gamma) (P_hat's rounding adds 2 u64 relative).
        u = call.unit_roundoff
        n_s = data.pairs.sum(axis=1)
        ratio = np.where(data.pairs > 0, n_s[:, None] * policy.probs / np.maximum(data.pairs, 1), 0.0)
        e = ((10 + n_s[:, None]) * u + 4 * U64) * alpha * (ratio + 1)
        tol = (float(np.max((policy.probs * e).sum(axis=1))) + 2e3 * U64) / (1 - WORLD.gamma)  # twice: a float64 oracle too
        actual, want, V = np.asarray(V_hat, dtype=np.float64), exact_float(expected), exact_float(exact.V)
        live = truth.alive
        off = np.flatnonzero(live & ~(np.abs(actual - want) <= tol))
        if len(off):
            k = int(off[np.argmax(np.abs(actual - want)[off])])
            raise ClauseFailure(
                f"CQL's fixed point on {data.name} for {policy.name} at alpha = {alpha:.6g} ({label}), V_hat at {truth.cells[k]}: "
                f"expected {want[k]:.10g} = V_hat_0 - alpha w, got {actual[k]:.10g} from the candidate's penalty gradient "
                f"({len(off)} of {int(live.sum())} states off; V^pi there {V[k]:.10g})",
                table=mismatch_table("state", [(str(truth.cells[j]), want[j], actual[j], abs(actual[j] - want[j]), tol) for j in off[:6]]),
                call=call.code[:300], diagnosed=False,  # the usual suspect: the fixed point does not say which term is off
                cause="the penalty's gradient in Q is not alpha (softmax(Q) - onehot(a_data)): a term is detached or a max replaces "
                      "the logsumexp, so the push-down that makes the fixed point conservative is wrong")
        over = actual - V
        if holds and np.any(over[live] > tol):
            k = int(np.flatnonzero(live)[np.argmax(over[live])])
            raise ClauseFailure(f"at the theorem's alpha = {alpha:.6g} CQL's fixed point over-estimates V^pi at {truth.cells[k]} by "
                                f"{over[k]:.4g} (> tol {tol:.3g}) on {data.name}", call=call.code[:300])
        if not holds and not np.max(over[live]) > tol:
            raise ClauseFailure(f"at alpha = alpha*/2 = {alpha:.6g} CQL's fixed point still lower-bounds V^pi everywhere on "
                                f"{data.name} (max V_hat - V^pi = {np.max(over[live]):.4g}): alpha* = {float(exact.alpha_star):.6g} "
                                "is not the threshold", call=call.code[:300])
    return True


CQL_DATASET_SEED = 0  # a dataset on which the empirical MDP over-estimates GREEDY's value at some cell


@check("GRID-CQL-LOWER-BOUND")
def cql_lower_bound(ctx):
    """On a tabular dataset of the gridworld: the candidate's penalty gradient gives CQL's fixed point exactly; at the
    theorem's alpha it lower-bounds V^pi at every cell, at half the exact threshold alpha* it over-estimates somewhere."""
    if not check_conservative(ctx, draw_dataset(CQL_DATASET_SEED), GREEDY):
        raise AssertionError(f"draw_dataset({CQL_DATASET_SEED}) does not over-estimate GREEDY anywhere: choose another seed")
    check_conservative(ctx, draw_dataset(4), UNIFORM)
    ctx.property(st.tuples(st.integers(0, 2**16), policies()), lambda p: check_conservative(ctx, draw_dataset(p[0]), p[1], False),
                 label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# PPO-ADVANTAGE-NORMALISATION-BIAS


def batch_expectation(ctx, pi, R, B: int):
    """E[sum_i A_hat_i (e_{y_i} - pi)] over every batch of B independent draws, A_hat from the candidate's
    normalize_advantages; with its exact counterpart under the declared conventions and a tolerance."""
    import itertools

    ddof, eps, form = (ctx.convention("advantage_std_ddof"), ctx.convention("advantage_eps"), ctx.convention("advantage_eps_form"))
    K = len(pi)
    actual, expected, tol, calls = np.zeros(K), np.zeros(K), np.zeros(K), []
    for batch in itertools.product(range(K), repeat=B):
        weight = math.prod(pi[a] for a in batch)
        scores = rounded(np.array([R[a] for a in batch], dtype=np.float64), ctx.dtype)
        call = ctx.call("normalize_advantages", {"advantages": scores}, shape=scores.shape)
        calls.append(call)
        out = np.asarray(call.outputs[0], dtype=np.float64)
        want, _ = normalised(scores, ddof, eps, form)
        tau = normalisation_tolerance(scores, ddof, eps, form, call.unit_roundoff)
        for a, value, exact_value, t in zip(batch, out, want, tau):
            direction = np.eye(K)[a] - pi
            actual += weight * value * direction
            expected += weight * exact_value * direction
            tol += weight * t * np.abs(direction) + 4 * (K ** B + B) * U64 * weight * abs(exact_value) * np.abs(direction)
    return actual, expected, tol, calls


BIAS_CASE = (np.full(3, 1 / 3), np.array([0.0, 1.0, 3.0]), 3)  # pi uniform, R = (0, 1, 3), B = 3 (theory.batch_normalisation_bias)


@check("PPO-ADVANTAGE-NORMALISATION-BIAS")
def normalisation_bias(ctx):
    """Every batch of B draws from a categorical, normalised by the candidate: E[sum_i A_hat_i grad log pi(y_i)] equals its exact
    value under the declared conventions, and is not parallel to grad J = pi (R - J)."""

    def verify(pi, R, B, label):
        actual, expected, tol, calls = batch_expectation(ctx, pi, R, B)
        off = np.flatnonzero(~(np.abs(actual - expected) <= tol))
        if len(off):
            k = int(off[0])
            grad = pi * (R - pi @ R)
            raise ClauseFailure(
                f"E[sum_i A_hat_i grad log pi(y_i)] over every batch of {B} draws at {label}, logit {k}: expected {expected[k]:.10g}, "
                f"got {actual[k]:.10g} (|diff| {abs(actual[k] - expected[k]):.3g} > tol {tol[k]:.3g}; grad J = {np.round(grad, 6).tolist()})",
                table=mismatch_table("logit", [(str(j), expected[j], actual[j], abs(actual[j] - expected[j]), tol[j]) for j in off]),
                call=calls[0].code + f"  # and the other {len(calls) - 1} batches",
                diagnosed=False, ratio=float(np.max(np.abs(actual - expected)[off] / tol[off])),  # the usual suspect
                cause="the batch is not normalised by its own mean and declared std: the mean is added back or the std has "
                      "another ddof or eps form than declared")

    pi, R, B = BIAS_CASE
    verify(pi, R, B, "pi uniform over 3, R = (0, 1, 3)")
    verify(np.array([0.5, 0.25, 0.25]), np.array([1.0, -1.0, 2.0]), 2, "pi = (1/2, 1/4, 1/4), R = (1, -1, 2)")

    def drawn(example):
        logits, R, B = example
        pi = np.exp(np.array(logits)) / np.sum(np.exp(np.array(logits)))
        pi = np.round(pi * 64) / 64
        if np.any(pi == 0) or pi.sum() != 1:
            return
        verify(pi, np.array(R), B, f"pi = {pi.tolist()}, R = {R}")

    ctx.property(st.tuples(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=3, max_size=3),
                           st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]), min_size=3, max_size=3),
                           st.integers(2, 3)), drawn, label="drawn", tier="enumeration")  # a call per batch of draws


# ---------------------------------------------------------------------------------------------
# the numbers `rlspec explain` prints (the clauses' `notes` in spec/clauses/75_theory.toml are generated from
# here; tests/test_theory.py keeps the two equal)


def theory_notes(clause_id: str) -> str:
    """The exact numbers behind each clause of the chapter, in words (``""`` for a clause without)."""
    mdp = started()
    S, A = mdp.P.shape[:2]
    where = (f"From the gridworld cell {START_CELL} (beside the pit) under GREEDY (logit 2 on the optimal action, "
             f"rounded to multiples of 2^-12), every state-action path up to H = {HORIZON}")
    if clause_id == "PG-TRAJECTORY-SCORE-FUNCTION":
        samples = samples_of(GREEDY)
        grad = exact_policy_gradient(GREEDY)
        undiscounted, _, _ = estimator_expectation(samples, samples.to_go / WORLD.gamma ** samples.t, S, A)
        return (f"{where}: {samples.paths} paths, {len(samples.prob)} samples. max |dJ_H/dz| = {np.abs(grad).max():.6f}; "
                f"the reward-to-go form without gamma^t misses it by up to {np.abs(undiscounted - grad).max():.3e} in a logit "
                f"(gamma = {WORLD.gamma:g}).")
    if clause_id == "PG-OPTIMAL-BASELINE":
        m, u = baseline_moments(GREEDY), baseline_moments(UNIFORM)
        return (f"{where}, G the discounted return of the path: b* = {float(m.optimal):.6f}, V = {float(m.V):.6f}; "
                f"Var(b*) = {float(m.variance(m.optimal)):.6f}, Var(V) = {float(m.variance(m.V)):.6f}, "
                f"Var(0) = {float(m.variance(Fraction(0))):.6f}. Under UNIFORM b* = V = {float(u.V):.6f}.")
    if clause_id == "GRID-TRPO-IMPROVEMENT-BOUND":
        b, r = exact_bound(UNIFORM, GREEDY), exact_bound(GREEDY, UNIFORM)
        return (f"The gridworld from its start, gamma = {WORLD.gamma:g}. pi = UNIFORM, pi' = GREEDY: J(pi) = {float(b.J_old):.6f}, "
                f"J(pi') = {float(b.J_new):.6f}, L_pi(pi') = {float(b.L):.6f}, surrogate error J(pi') - L_pi(pi') = "
                f"{float(b.error):.6f}; epsilon = {float(b.eps):.6f}, C = {float(b.C):.1f}, alpha = {float(b.alpha):.6f}, "
                f"C alpha^2 = {float(b.C * b.alpha ** 2):.1f}, max_s KL = {max_kl(UNIFORM.probs, GREEDY.probs):.6f}. The other way "
                f"round the error is {float(r.error):.6f} against C alpha^2 = {float(r.C * r.alpha ** 2):.1f}: the bound holds with "
                f"a factor of about {float(r.C * r.alpha ** 2 / abs(r.error)):.0f} to spare.")
    if clause_id == "KL-ESTIMATOR-VARIANCE":
        parts = []
        for label, (log_p, log_q) in VARIANCE_CASES.items():
            v = {k: exact_variance(k, log_p, log_q) for k in ("k1", "k2", "k3")}
            parts.append(f"at {label}: Var[k1] = {v['k1']:.6f}, Var[k2] = {v['k2']:.6f}, Var[k3] = {v['k3']:.6f}")
        return "; ".join(parts) + "."
    if clause_id == "GRID-CQL-LOWER-BOUND":
        data = draw_dataset(CQL_DATASET_SEED)
        exact = conservative(data, GREEDY)
        over = exact_float(exact.V0 - exact.alpha_star / 2 * exact.w - exact.V)
        k = int(np.flatnonzero(float_mdp().alive)[np.argmax(over[float_mdp().alive])])
        return (f"{data.name}: {int(data.pairs.sum())} transitions, every non-terminal (s, a) 1 to 4 times; pi = GREEDY. The exact "
                f"threshold alpha* = {float(exact.alpha_star):.6f}, the theorem's alpha with the realised sampling error "
                f"{float(exact.alpha_theorem):.6f}; at alpha*/2 the fixed point over-estimates V^pi at {float_mdp().cells[k]} by "
                f"{over[k]:.6f}.")
    if clause_id == "PPO-ADVANTAGE-NORMALISATION-BIAS":
        pi, R, B = BIAS_CASE
        grad = pi * (R - pi @ R)
        parts = []
        for ddof in (0, 1):
            estimate = np.zeros(len(pi))
            import itertools

            for batch in itertools.product(range(len(pi)), repeat=B):
                scores = np.array([R[a] for a in batch])
                out = normalised(scores, ddof, 0.0, "std")[0] if np.ptp(scores) > 0 else np.zeros(B)  # a constant batch: 0
                for a, value in zip(batch, out):
                    estimate += math.prod(pi[b] for b in batch) * value * (np.eye(len(pi))[a] - pi)
            cosine = estimate @ grad / np.linalg.norm(estimate) / np.linalg.norm(grad)
            parts.append(f"ddof {ddof}: ({', '.join(f'{x:.6f}' for x in estimate)}), cosine with grad J {cosine:.6f}")
        return (f"pi uniform over 3, R = (0, 1, 3), B = {B}, eps 0: grad J = ({', '.join(f'{x:.6f}' for x in grad)}); "
                f"E[sum_i A_hat_i grad log pi(y_i)] = " + "; ".join(parts) + ".")
    return ""
