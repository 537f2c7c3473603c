"""Known-answer vectors: the executable spec written out as data any language can run.

``rlspec vectors OUT/`` writes, deterministically, one JSON file per operation (inputs, expected outputs,
expected gradients of the losses, the tolerance of every element for a float64 and a float32
implementation, the clauses the case belongs to, the conventions it assumes, and ``flags``: the named
bugs of rlspec's mutant catalogue that the case catches, found by running every mutant on it) plus a
``manifest.json`` that lists every file with its case count and SHA-256. ``rlspec check --vectors DIR``
runs a Python candidate on them; docs/vectors.md says how another language does.

Where the cases come from: the contract's known answers, and the fixed inputs the clause checks themselves
pass the reference (recorded through :meth:`Context.call`; the examples a property *draws* are left out, so
that the set depends on the catalogue alone, never on an example budget, a core count or how a search went
on one machine), reduced to the few
that catch every mutant a vector of that operation can catch (a greedy cover), every input rounded to
float32 so that one case serves both precisions. Expected values are the reference's float64 outputs;
each element's tolerance is the chapter's own derived bound (the same functions the clause checks use),
evaluated at the unit roundoff of float64 and of float32.

One rule for every element: ``low - tol <= actual <= high + tol``, where ``low = high = expected`` except
at a kink (a clip boundary), where [low, high] spans the one-sided derivatives. ``null`` means the element
is not compared (an output at a masked position); a string ``"nan"``/``"inf"``/``"-inf"`` is that IEEE value,
and an expected NaN is met only by NaN.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..spec import catalogue, contract
from .runner import protocol
from .runner.protocol import Candidate, CandidateError

FORMAT = "rlspec-vectors"
VERSION = 1  # the format's version: docs/vectors.md says what changes it
U = {"float64": 2.0**-53, "float32": 2.0**-24}
MAX_ELEMENTS = 256  # inputs larger than this are left to the clause checks
PER_OPERATION = 12  # at most this many cases of one operation besides its known answers
ROOT = Path(__file__).resolve().parents[1]  # a checkout's root (tests/mutants lives there)
SCHEMA = Path(catalogue.__file__).with_name("vectors.schema.json")  # the format's JSON Schema, copied into every set


# ------------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    id: str
    operation: str
    clauses: list[str]
    inputs: dict[str, Any]  # numpy arrays (float64 or bool), numbers, strings, or a matrix for a callable input
    conventions: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, dict] = field(default_factory=dict)  # name -> {"value", "low", "high", "tol": {float64, float32}}
    flags: list[str] = field(default_factory=list)
    source: str = ""  # "known answer" or the clause whose check passed these inputs


@dataclass(frozen=True)
class Bound:
    """What one output (or gradient) must be: ``low - tol <= actual <= high + tol`` elementwise; NaN in
    ``value`` means the element must be NaN, and ``compared`` False means it is not compared."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    tol: np.ndarray
    compared: np.ndarray
    finite_only: bool = False  # the contract leaves the value free: only finiteness is required

    @classmethod
    def of(cls, value, tol, low=None, high=None, compared=None) -> "Bound":
        value = np.asarray(value, dtype=np.float64)
        shape = value.shape
        fit = lambda a, fill: np.broadcast_to(np.asarray(fill if a is None else a, dtype=np.float64), shape).copy()
        return cls(value, fit(low, value), fit(high, value), fit(tol, 0.0),
                   np.broadcast_to(np.asarray(True if compared is None else compared, dtype=bool), shape).copy())

    @classmethod
    def finite(cls, shape) -> "Bound":
        nan = np.full(shape, np.nan)
        return cls(nan, nan, nan, np.zeros(shape), np.ones(shape, dtype=bool), True)


# Each rule: (inputs as float64 arrays / numbers, the reference's outputs and gradients, u, the case's
# conventions) -> {name: Bound}. A rule that honours a non-default convention must not use the reference's
# outputs (the reference implements the defaults).
RULES: dict[str, Callable[[dict, dict, float, dict], dict[str, Bound]]] = {}


def rule(operation: str):
    def register(function):
        RULES[operation] = function
        return function

    return register


MATRIX_INPUTS = {"conjugate_gradient": ("matvec", "A"), "natural_step": ("fvp", "F")}  # callable -> the matrix behind it


# ------------------------------------------------------------------------------------------------
# the rules: each operation's expected outputs and tolerances, from the chapter's own oracles and
# derived bounds (the functions the clause checks call), at unit roundoff u


def _grad(name: str, output: str | None = None) -> str:
    """The key of a gradient in ``expected``: ``d loss / d logp_new`` (for several outputs, per output)."""
    return f"d {output or 'loss'} / d {name}"


@rule("gae")
def _gae(x, ref, u, conv):
    from .kit.tolerances import gae_tolerance, returns_tolerance

    tol = gae_tolerance(x["rewards"], x["values"], x["next_values"], x["terminated"], x["truncated"], x["gamma"], x["lam"], u)
    return {"advantages": Bound.of(ref["advantages"], tol),
            "returns": Bound.of(ref["returns"], returns_tolerance(tol, ref["advantages"], x["values"], u))}


@rule("rewards_to_go")
def _rewards_to_go(x, ref, u, conv):
    from .kit.tolerances import rewards_to_go_tolerance

    return {"returns": Bound.of(ref["returns"], rewards_to_go_tolerance(x["rewards"], x["gamma"], u))}


@rule("reinforce_loss")
def _reinforce(x, ref, u, conv):
    from .clauses import pg

    T = len(x["logp"])
    s = 1.0 / T  # the contract's default reduction (pg_reduction = mean)
    baseline = x.get("baseline")
    used = np.zeros(T) if baseline is None else baseline
    out = {"loss": Bound.of(ref["loss"], pg.reinforce_value_tolerance(x["logp"], x["returns"], used, s, u)),
           _grad("logp"): Bound.of(ref[_grad("logp")], pg.reinforce_gradient_tolerance(x["returns"], used, s, u)),
           _grad("returns"): Bound.of(np.zeros(T), 0.0)}
    if baseline is not None:
        out[_grad("baseline")] = Bound.of(np.zeros(T), 0.0)
    return out


@rule("actor_critic_losses")
def _actor_critic(x, ref, u, conv):
    from .kit.tolerances import TINY, smallest_normal, td_terms

    T, s, f = len(x["logp"]), 1.0 / len(x["logp"]), 1.0  # the contract's defaults: mean reduction, critic factor 1
    m = td_terms(x["rewards"], x["values"], x["next_values"], x["terminated"], x["gamma"])
    eta = smallest_normal(u)
    zeros = Bound.of(np.zeros(T), 0.0)
    return {
        "actor_loss": Bound.of(ref["actor_loss"], 2 * (T + 8) * (u * s * float(np.sum(np.abs(x["logp"]) * m)) + eta) + TINY),
        "critic_loss": Bound.of(ref["critic_loss"], 2 * (T + 15) * (u * f * s * float(np.sum(m**2)) + eta) + TINY),
        _grad("logp", "actor_loss"): Bound.of(ref[_grad("logp", "actor_loss")], 2 * 8 * (u * s * m + eta) + TINY),
        _grad("values", "actor_loss"): zeros,
        _grad("next_values", "actor_loss"): zeros,
        _grad("logp", "critic_loss"): zeros,
        _grad("values", "critic_loss"): Bound.of(ref[_grad("values", "critic_loss")], 2 * 9 * (u * 2 * f * s * m + eta) + TINY),
        _grad("next_values", "critic_loss"): zeros,
    }


@rule("ppo_clip_loss")
def _ppo_clip(x, ref, u, conv):
    from .kit import clipping

    clip = clipping.ClipRange(conv.get("dual_clip"), conv.get("clip_eps_high"))  # the case's declared clip shape
    lpn, lpo, A, eps = x["logp_new"], x["logp_old"], x["advantages"], x["clip_eps"]
    r, B = np.exp(lpn - lpo), len(A)
    low, high = clipping.log_derivative_bounds(r, A, eps, clip, clipping.ratio_relative_error(lpn, lpo, u))
    # the derivative from the formula: one value off the kinks (low == high), the midpoint of the subgradients at one
    return {"loss": Bound.of(-float(np.mean(clipping.clip_objective(r, A, eps, clip))), clipping.clip_loss_tolerance(lpn, lpo, A, eps, clip, u)),
            _grad("logp_new"): Bound.of(-(low + high) / (2 * B), clipping.clip_gradient_tolerance(lpn, lpo, A, u), low=-high / B, high=-low / B)}


@rule("ppo_value_loss")
def _ppo_value(x, ref, u, conv):
    from .clauses import ppo
    from .kit.tolerances import TINY, smallest_normal

    k = 1.0  # the contract's default value_loss_factor
    V, R, Vo, eps = x["values"], x["returns"], x.get("old_values"), x.get("clip_eps")
    B, eta = len(V), smallest_normal(u)
    loss, low, high = ppo.value_expected(V, R, Vo, eps, k, u)
    m = ppo.value_magnitude(V, R, Vo, eps)
    return {"loss": Bound.of(loss, 2 * k * u * (B + 8) * float(np.mean(m**2)) + 16 * eta + TINY),
            _grad("values"): Bound.of(ref[_grad("values")], 2 * k * u * 10 * m / B + 16 * eta + TINY, low=low, high=high)}


@rule("normalize_advantages")
def _normalize(x, ref, u, conv):
    from .clauses import ppo

    A = x["advantages"]
    if len(A) < 2 or np.ptp(A) == 0:  # one element or constant: the contract asks only for a finite result
        return {"advantages": Bound.finite(A.shape)}
    conv = ppo.Conventions(_CaseContext(conv))  # the case's ddof, eps and eps form (a known answer may declare them)
    return {"advantages": Bound.of(ppo.normalised(A, conv)[0], ppo.normalisation_tolerance(A, conv, u))}


@rule("ppo_entropy_loss")
def _entropy(x, ref, u, conv):
    from .kit.tolerances import TINY, smallest_normal

    H, coef = x["entropy"], x["coef"]
    B, eta = len(H), smallest_normal(u)
    return {"loss": Bound.of(-coef * float(np.mean(H)), 2 * u * (B + 3) * abs(coef) * float(np.mean(np.abs(H))) + 8 * eta + TINY),
            _grad("entropy"): Bound.of(np.full(B, -coef / B), 8 * u * abs(coef) / B + 8 * eta + TINY)}


@rule("kl_estimate")
def _kl_estimate(x, ref, u, conv):
    from .kit import kl_estimators

    a, b, kind = x["logp_sampler"], x["logp_other"], x["kind"]
    return {"estimates": Bound.of(kl_estimators.exact(kind, a, b), kl_estimators.per_sample_tolerance(kind, a, b, u))}


@rule("kl_coefficient_update")
def _kl_coefficient(x, ref, u, conv):
    from .clauses import kl

    factor, threshold = 2.0, 1.5  # the contract's defaults
    expected = kl.expected_update(x["beta"], x["kl"], x["target"], factor, threshold)
    exact_scaling = math.frexp(factor)[0] == 0.5
    return {"beta": Bound.of(expected, ((0.0 if exact_scaling else 2 * u) + (u if u > U["float64"] else 0.0)) * abs(expected))}


@rule("conjugate_gradient")
def _cg(x, ref, u, conv):
    from .clauses import trpo

    A, b = x["matvec"], x["b"]
    n = len(b)
    if x["iters"] < trpo.CG_STEPS_PER_DIM * n or x["tol"] > trpo.CG_TOL:
        # TRPO-CG-STOPPING-RULE: the iterate where CG from 0 stops (r'r <= tol, or after iters steps). The clause judges the
        # residual within a factor 4; here a result nearer that iterate than the next one: half the largest change one more
        # step would make (a solver's start near 0 moves it far less on these systems).
        xs, rr = trpo.cg_iterates(A, b, int(x["iters"]) + 1)
        k = next((j for j in range(int(x["iters"]) + 1) if rr[j] <= x["tol"]), int(x["iters"]))
        return {"x": Bound.of(xs[k], float(np.max(np.abs(xs[k + 1] - xs[k]))) / 2)}
    exact = np.linalg.solve(A, b)
    # The check bounds the residual: |A x - b| <= 2 k u (|A| |x| + |b|) (trpo.cg_residual_bound). Elementwise
    # |x - x*| <= |A^-1| |A x - b| <= bound / lambda_min; |x| <= 2 |x*| inside that bound, hence x* doubled.
    lam_min = float(np.linalg.eigvalsh(A)[0])
    bound = trpo.cg_residual_bound(A, 2 * exact, b, x["iters"], u) / lam_min
    return {"x": Bound.of(exact, bound)}


@rule("natural_step")
def _natural_step(x, ref, u, conv):
    from .clauses import trpo

    F, g, max_kl = x["fvp"], x["grad"], x["max_kl"]
    exact = np.linalg.solve(F, g)
    step = math.sqrt(2 * max_kl / float(g @ exact)) * exact  # damping 0 and an exact CG: the contract's defaults
    lam_min, _, _ = trpo.condition(F)
    eps_dir, eps_kl = trpo.natural_step_errors(F, u, float(np.linalg.norm(g)), 0.0)
    # The checks bound the P-angle (eps_dir) and the quadratic KL (eps_kl, relative); in the F-norm the step is
    # off by at most (eps_dir + eps_kl) |step*|_F with |step*|_F = sqrt(2 max_kl), and elementwise
    # |v|_inf <= |v|_F / sqrt(lambda_min).
    return {"step": Bound.of(step, (eps_dir + eps_kl) * math.sqrt(2 * max_kl) / math.sqrt(lam_min))}


@rule("line_search")
def _line_search(x, ref, u, conv):
    scenario = _scenario(x)
    beta, ratio = conv["backtrack_factor"], conv["line_search_accept_ratio"]
    t, robust = scenario.expected(beta, u, ratio)
    if not robust:  # a decision within rounding of its threshold: the clause checks skip it too
        raise NotAVector("a trial's decision is within rounding of its threshold")
    k = 0 if t is None else round(math.log(t) / math.log(beta))
    t_exp = 0.0 if t is None else t
    tol = (2 * k + 4) * u * (np.abs(scenario.x0) + t_exp * np.abs(scenario.f)) + 1e-300
    if t is None:  # x0 restored by undoing the last trial: two more roundings (as trpo.verify_line_search)
        tol = tol + 4 * u * np.abs(scenario.f)
    return {"x": Bound.of(scenario.x0 + t_exp * scenario.f, tol)}


@rule("diag_gaussian_log_prob")
def _diag_log_prob(x, ref, u, conv):
    from .clauses import gaussian

    mean, log_std, a = x["mean"], x["log_std"], x["action"]
    return {"log_prob": Bound.of(np.sum(gaussian.gaussian_terms(mean, log_std, a), axis=-1), gaussian.diag_tolerance(mean, log_std, a, u))}


@rule("diag_gaussian_entropy")
def _diag_entropy(x, ref, u, conv):
    from .clauses import gaussian

    log_std = x["log_std"]
    D = log_std.shape[1]
    return {"entropy": Bound.of(np.sum(0.5 * (1.0 + gaussian.LOG_2PI) + log_std, axis=-1),
                                2.0 * (D + 4) * u * np.sum(np.abs(log_std) + 1.5, axis=-1) + 1e-300)}


@rule("tanh_gaussian_log_prob")
def _tanh(x, ref, u, conv):
    from .clauses import gaussian

    mean, log_std, pre = x["mean"], x["log_std"], x["pre_tanh"]
    return {"log_prob": Bound.of(gaussian.tanh_log_prob(mean, log_std, pre), gaussian.tanh_tolerance(mean, log_std, pre, u))}


@rule("scaled_tanh_gaussian_log_prob")
def _scaled_tanh(x, ref, u, conv):
    from .clauses import gaussian

    mean, log_std, pre, low, high = x["mean"], x["log_std"], x["pre_tanh"], x["low"], x["high"]
    scale = np.log(0.5 * (high - low))
    affine = np.abs(scale) + (np.abs(low) + np.abs(high)) / (high - low) + 1.0
    tol = gaussian.tanh_tolerance(mean, log_std, pre, u) + 2.0 * (len(low) + 3) * u * np.sum(affine)
    return {"log_prob": Bound.of(gaussian.tanh_log_prob(mean, log_std, pre) - np.sum(scale), tol)}


@rule("token_gae")
def _token_gae(x, ref, u, conv):
    from .clauses import rlhf
    from .kit.strategies.tokens import GaeCase

    case = GaeCase(x["rewards"], x["values"], x["mask"], x["gamma"], x["lam"])
    advantages, tol = rlhf.compacted_gae(case, u)
    mask = x["mask"]
    return {"advantages": Bound.of(advantages, tol, compared=mask),
            "returns": Bound.of(advantages + x["values"], 2 * tol + 4 * u * (np.abs(advantages) + np.abs(x["values"])) + 1e-300,
                                compared=mask)}


@rule("assemble_rewards")
def _assemble(x, ref, u, conv):
    from .clauses import rlhf

    s, k, m, c = x["scores"], x["kl"], x["mask"], x["kl_coef"]
    return {"rewards": Bound.of(rlhf.expected_rewards(s, k, m, c), rlhf.rewards_tolerance(s, k, m, c, u), compared=m)}


@rule("group_advantages")
def _groups(x, ref, u, conv):
    from .clauses import grpo

    conv = grpo.group_conventions(_CaseContext(conv))  # the case's conventions (a known answer may declare them)
    scores, groups, kind = x["scores"], x["groups"].astype(np.int64), x["kind"]
    return {"advantages": Bound.of(grpo.expected_advantages(scores, groups, kind, conv), grpo.group_tolerance(scores, groups, kind, conv, u))}


@rule("aggregate_loss")
def _aggregate(x, ref, u, conv):
    from .clauses import rlhf
    from .kit.tolerances import TINY, smallest_normal

    l, m = x["per_token_loss"], x["mask"]
    w = rlhf.aggregation_weights(m, x["mode"], x.get("num_tokens"), x.get("norm_length"), 0.0)
    N, B, eta = int(m.sum()), m.shape[0], smallest_normal(u)
    terms = np.where(m, w * l, 0.0)
    return {"loss": Bound.of(float(terms.sum()), 2 * u * (N + B + 6) * float(np.abs(terms).sum()) + 8 * eta + TINY),
            _grad("per_token_loss"): Bound.of(w, np.where(m, 2 * u * 6 * w + 8 * eta, 0.0))}


@rule("token_ppo_loss")
def _token_ppo(x, ref, u, conv):
    from .clauses import rlhf

    loss, low, high, loss_tol, grad_tol = rlhf.ppo_expected(x, None, u)  # log_ratio_clamp: the default None
    m = x["mask"]
    grad = np.zeros(m.shape)
    grad_low, grad_high, tol = np.zeros(m.shape), np.zeros(m.shape), np.zeros(m.shape)
    grad[m], grad_low[m], grad_high[m], tol[m] = ref[_grad("logp_new")][m], low, high, grad_tol
    return {"loss": Bound.of(loss, loss_tol), _grad("logp_new"): Bound.of(grad, tol, low=grad_low, high=grad_high)}


@rule("kl_penalty")
def _kl_penalty(x, ref, u, conv):
    from .clauses import grpo

    a, b, kind, c = x["logp"], x["logp_ref"], x["kind"], x.get("logp_old")
    return {"kl": Bound.of(grpo.penalty_values(kind, a, b), grpo.value_tolerance(kind, a, b, c, u)),
            _grad("logp", "sum kl"): Bound.of(grpo.token_derivative(kind, a, b, c), grpo.derivative_tolerance(kind, a, b, c, u))}


@rule("td_target")
def _td_target(x, ref, u, conv):
    from .clauses import offpolicy
    from .kit.tolerances import TINY

    r, q, term, g = x["rewards"], x["next_q"], x["terminated"], x["gamma"]
    return {"targets": Bound.of(r + g * np.where(term, 0.0, q), 2 * offpolicy.target_error(r, g, q, 0.0, term, u) + TINY)}


@rule("polyak_update")
def _polyak(x, ref, u, conv):
    from .clauses import offpolicy

    target, online, tau = x["target"], x["online"], x["tau"]
    return {"target": Bound.of(tau * online + (1.0 - tau) * target,
                               8 * u * (np.abs(target) + np.abs(online)) + offpolicy.floor(u))}


@rule("iql_targets")
def _iql_targets(x, ref, u, conv):
    from .kit.tolerances import TINY, smallest_normal

    K, r, v, term, g = x["target_q"], x["rewards"], x["next_values"], x["terminated"], x["gamma"]
    bootstrap = g * np.where(term, 0.0, v)
    q_target = r + bootstrap
    return {"value_target": Bound.of(np.min(K, axis=0), TINY),  # a minimum is exact
            "q_target": Bound.of(q_target, 2 * u * (2 * np.abs(bootstrap) + np.abs(q_target)) + 4 * smallest_normal(u) + TINY)}


@rule("cql_penalty")
def _cql_penalty(x, ref, u, conv):
    from .clauses import offline

    from .kit.tolerances import TINY, smallest_normal

    q, actions, alpha = x["q_values"], x["actions"].astype(np.int64), x["alpha"]
    value, L, _ = offline.cql_oracle(q, actions, alpha)
    # d penalty_b / d Q_b = alpha (softmax(Q_b) - onehot(a_b)), with the bound of offline.check_cql_expected_gradient per row
    soft, onehot = np.exp(q - L[:, None]), np.eye(q.shape[1])[actions]
    e_soft = soft * (u * np.abs(q) + offline.logsumexp_error(q, L, u)[:, None] + (offline.ELEMENTARY + 2) * u)
    tol = 2 * (abs(alpha) * e_soft + 2 * u * abs(alpha) * (soft + onehot)) + 4 * smallest_normal(u) + TINY
    return {"penalty": Bound.of(value, offline.cql_tolerance(q, actions, alpha, u)),
            _grad("q_values", "sum penalty"): Bound.of(alpha * (soft - onehot), tol)}


@rule("cql_sampled_penalty")
def _cql_sampled(x, ref, u, conv):
    from .clauses import offline
    from .kit.tolerances import TINY, smallest_normal

    s = offline.Sampled(x["q_uniform"], x["q_policy"], x["log_pi"], x["q_data"], x["action_low"], x["action_high"],
                        x["alpha"], x["temperature"])
    est = offline.Estimator(conv["cql_sampled_normalisation"], conv["cql_temperature_form"])
    t_, _, _ = offline.sampled_terms(s, est)
    L = offline.logsumexp_rows(t_)
    soft = np.exp(t_ - L[:, None])
    e_soft = soft * (offline.term_errors(s, est, u) + offline.logsumexp_error(t_, L, u)[:, None] + (offline.ELEMENTARY + 2) * u)
    tol = 2 * (abs(s.alpha) * e_soft + 2 * u * abs(s.alpha) * soft) + 4 * smallest_normal(u) + TINY  # as check_sampled_gradient
    N = s.q_uniform.shape[1]
    B = len(s.q_data)
    return {"penalty": Bound.of(offline.sampled_oracle(s, est), offline.sampled_tolerance(s, est, u)),
            _grad("q_uniform", "sum penalty"): Bound.of(s.alpha * soft[:, :N], tol[:, :N]),
            _grad("q_policy", "sum penalty"): Bound.of(s.alpha * soft[:, N:], tol[:, N:]),
            _grad("q_data", "sum penalty"): Bound.of(np.full(B, -s.alpha), 2 * 2 * u * abs(s.alpha) + TINY),
            _grad("log_pi", "sum penalty"): Bound.of(np.zeros(s.log_pi.shape), 0.0)}  # the log-densities are constants


@rule("expectile_loss")
def _expectile(x, ref, u, conv):
    from .clauses import offline

    loss, derivative, tol, dtol = offline.expectile_tolerances(x["target"], x["prediction"], x["tau"], u)
    return {"loss": Bound.of(loss, tol), _grad("prediction", "sum loss"): Bound.of(derivative, dtol)}


@rule("sac_alpha_loss")
def _sac_alpha(x, ref, u, conv):
    from .clauses import offpolicy

    la, lp, D, H = float(x["log_alpha"]), x["log_prob"], int(x["action_dim"]), x.get("target_entropy")
    H = float(H) if H is not None else conv["default_target_entropy_per_dim"] * D
    log_form = conv["alpha_loss_parameter"] == "log_alpha"
    weight, slope = (la, 1.0) if log_form else (math.exp(la), math.exp(la))
    m, magnitude = float(np.mean(lp)) + H, float(np.mean(np.abs(lp))) + abs(H)
    extra = 2 * (len(lp) + 4) * u * magnitude  # as offpolicy.verify_alpha_loss
    return {"loss": Bound.of(-weight * m, extra * abs(weight) + offpolicy.floor(u)),
            _grad("log_alpha"): Bound.of(-slope * m, extra * slope + offpolicy.floor(u)),
            _grad("log_prob"): Bound.of(np.zeros(len(lp)), 0.0)}  # log pi is a constant of the temperature loss


@rule("awr_loss")
def _awr(x, ref, u, conv):
    from .clauses import offline
    from .kit.tolerances import TINY, smallest_normal

    rule_ = offline.WeightRule(conv["awr_beta"], conv["awr_max_weight"])
    lp, adv, beta = x["log_prob"], x["advantages"], x["beta"]
    w, e_w, eta = rule_.weight(adv, beta), offline.weight_error(rule_, adv, beta, u), smallest_normal(u)
    loss = -w * lp
    return {"loss": Bound.of(loss, 2 * (np.abs(lp) * e_w + u * np.abs(loss)) + 4 * eta + TINY),  # as offline.check_awr
            _grad("log_prob", "sum loss"): Bound.of(-w, 2 * (e_w + u * w) + 4 * eta + TINY),
            _grad("advantages", "sum loss"): Bound.of(np.zeros(adv.shape), 0.0)}  # the weight is detached


def _normaliser(conv, clip_key):
    from .clauses import normalisation

    decay = conv["moments_decay"]
    return normalisation.Normaliser(float(conv["moments_initial_count"]), float(conv["normalization_eps"]),
                                    conv["normalization_eps_form"], conv[clip_key], conv["normalization_order"],
                                    conv["normalization_scope"], None if decay is None else float(decay))


@rule("running_moments")
def _running_moments(x, ref, u, conv):
    from .clauses import normalisation

    c0, decay = float(conv["moments_initial_count"]), conv["moments_decay"]
    decay = None if decay is None else float(decay)
    mean, var, count = normalisation.concatenation(x["x"], x["batch_end"], c0, decay)
    bounds = normalisation.moments_bounds(x["x"], x["batch_end"], c0, u, decay=decay).at(-1)
    tol_m, tol_v, tol_n = normalisation.moments_tolerance(mean, var, bounds, count, u)
    return {"mean": Bound.of(mean, tol_m), "var": Bound.of(var, tol_v), "count": Bound.of(count, tol_n)}


@rule("merge_moments")
def _merge_moments(x, ref, u, conv):
    from .clauses import normalisation

    mean, var, count = normalisation.merge_oracle(x)
    zero = np.zeros(len(x["mean_a"]))
    state = normalisation.Bounds(x["mean_a"], x["var_a"], float(x["count_a"]), zero, zero, 0.0)
    bounds = normalisation.merge_bounds(state, x["mean_b"], x["var_b"], float(x["count_b"]), zero, zero, u)
    tol_m, tol_v, tol_n = normalisation.moments_tolerance(mean, var, bounds, count, u)
    return {"mean": Bound.of(mean, tol_m), "var": Bound.of(var, tol_v), "count": Bound.of(count, tol_n)}


@rule("normalize_observations")
def _normalize_observations(x, ref, u, conv):
    from .clauses import normalisation

    expected, tol = normalisation.observation_oracle(x["obs"], int(x["train_steps"]), _normaliser(conv, "observation_clip"), u)
    return {"normalized": Bound.of(expected, tol)}


@rule("scale_rewards")
def _scale_rewards(x, ref, u, conv):
    from .clauses import normalisation

    expected, tol = normalisation.reward_oracle(x["rewards"], x["terminated"], x["truncated"], float(x["gamma"]),
                                                _normaliser(conv, "reward_clip"), u)
    return {"scaled": Bound.of(expected, tol)}


def _minibatches(x, conv):
    mode = conv["diagnostic_average"]
    return (None if mode == "per-call" else x.get("minibatch_end")), mode


@rule("diagnostic_approx_kl")
def _diagnostic_approx_kl(x, ref, u, conv):
    from .clauses import normalisation
    from .kit.kl_estimators import exact, per_sample_tolerance

    kind, (ends, mode) = conv["approx_kl_estimator"], _minibatches(x, conv)
    old, new = x["logp_old"], x["logp_new"]
    per_sample = exact(kind, old, new)
    tol = normalisation.averaging_tolerance(per_sample, per_sample_tolerance(kind, old, new, u), ends, u)
    return {"kl": Bound.of(normalisation.averaged(per_sample, ends, mode), tol)}


@rule("diagnostic_clip_fraction")
def _diagnostic_clip_fraction(x, ref, u, conv):
    from .clauses import normalisation

    (ends, mode), eps = _minibatches(x, conv), float(x["clip_eps"])
    new, old = x["logp_new"], x["logp_old"]
    if np.any(normalisation.near_boundary(new, old, eps, U["float32"]) & (new != old)):
        raise NotAVector("a ratio within rounding of the clip boundary")
    log_r = new - old
    outside = (log_r != 0) & (np.abs(np.expm1(log_r)) > eps)
    value = normalisation.averaged(outside.astype(float), ends, mode)
    M = 1 if ends is None else int(np.count_nonzero(ends))
    return {"fraction": Bound.of(value, 4 * (M + 2) * u * abs(value) + 1e-300)}


@rule("diagnostic_explained_variance")
def _diagnostic_explained_variance(x, ref, u, conv):
    from .clauses import normalisation

    eps = float(conv["explained_variance_eps"])
    value, a, b = normalisation.explained_oracle(x["values"], x["returns"], eps)
    if math.isnan(value):
        return {"explained_variance": Bound.of(np.nan, 0.0)}
    return {"explained_variance": Bound.of(value, normalisation.explained_tolerance(x["values"], x["returns"], a, b, u))}


@rule("diagnostic_entropy")
def _diagnostic_entropy(x, ref, u, conv):
    from .clauses import normalisation

    ends, mode = _minibatches(x, conv)
    H, parts = normalisation.entropies(x["logits"])
    tol = normalisation.averaging_tolerance(H, normalisation.entropy_tolerance(x["logits"], parts, u), ends, u)
    return {"entropy": Bound.of(normalisation.averaged(H, ends, mode), tol)}


# The operations a vector can hold: those with a rule (plain data in and out, in contract order). Operations on
# objects (a policy, an optimizer, an environment) are judged by the clause checks only.
VECTOR_OPERATIONS = tuple(op for op in contract.operations() if op in RULES)
OBJECT_TYPES = ("object", "mapping")


class NotAVector(Exception):
    """These inputs make no vector (the clause checks judge them another way, or skip them)."""


class _CaseContext:
    """A case's conventions (as written in it; the contract's default for the rest), for the chapters' views."""

    def __init__(self, conventions: dict):
        self.conventions = conventions

    def convention(self, key):
        spec = contract.convention(key)
        return spec.validate(self.conventions[key]) if key in self.conventions else spec.default


# ------------------------------------------------------------------------------------------------
# calling an implementation on a case


def _scenario(x):
    """The line search's surrogate and KL along the full step (polynomials in t, as the TRPO checks build them)."""
    from .clauses import trpo

    s, k = x["surrogate"], x["kl"]
    return trpo.Scenario(x["x0"], x["fullstep"], s["a"], s["b"], k["c"], k["d"], x["max_kl"], x["max_backtracks"], s["offset"])


def call_arguments(operation: str, inputs: dict) -> dict:
    """The keyword arguments of the call: matrices become the callables the contract passes (``matvec(v) =
    A v``), a line search's polynomials the surrogate and KL functions of x."""
    from .clauses import trpo

    args = dict(inputs)
    if operation in MATRIX_INPUTS:
        name, label = MATRIX_INPUTS[operation]
        args[name] = trpo.matvec(np.asarray(inputs[name], dtype=np.float64), label)
    if operation == "line_search":
        args["surrogate"], args["kl"] = _scenario(inputs).functions()
    return args


SCALAR_OUTPUTS = ("running_moments", "merge_moments", "diagnostic_approx_kl", "diagnostic_clip_fraction",
                  "diagnostic_explained_variance", "diagnostic_entropy")


def _adapted(candidate: Candidate, operation: str) -> Candidate:
    """The candidate as the clause checks call it: group_advantages receives integer ids in its array kind
    (the protocol converts arrays to floats); a scalar operation may return a Python or NumPy scalar."""
    function = candidate.operations[operation]
    if operation == "cql_penalty":
        def adapted(q_values, actions, alpha):  # integer actions, as the offline checks pass them
            return function(q_values=q_values, actions=actions.long(), alpha=alpha)
    elif operation == "group_advantages":
        def adapted(scores, groups, kind):
            if candidate.array == "torch":
                groups = groups.long()
            elif candidate.array == "jax":
                import jax.numpy as jnp

                groups = jnp.asarray(groups).astype(jnp.int32)
            else:
                groups = np.asarray(groups).astype(np.int64)
            return function(scores=scores, groups=groups, kind=kind)
    elif operation == "kl_coefficient_update":
        def adapted(**kwargs):
            result = function(**kwargs)
            if isinstance(result, np.floating):
                return np.asarray(result)
            return np.asarray(float(result)) if isinstance(result, (int, float, np.integer)) and not isinstance(result, bool) else result
    elif operation in SCALAR_OUTPUTS:  # a count or a logged diagnostic may come back as a Python or NumPy number
        from .clauses.normalisation import _as_array

        def adapted(**kwargs):
            result = function(**kwargs)
            return tuple(_as_array(r) for r in result) if isinstance(result, tuple) else _as_array(result)
    else:
        return candidate
    return dataclasses.replace(candidate, operations={**candidate.operations, operation: adapted})


def evaluate(candidate: Candidate, operation: str, inputs: dict, precision: list | None = None) -> dict[str, np.ndarray]:
    """The candidate's outputs on a case (float64), and for a differentiated operation the gradient of each
    output (of its sum, where it is not a scalar) with respect to each differentiated input.
    Raises CandidateError if it raises or returns something unusable."""
    import torch

    spec = contract.operations()[operation]
    args = call_arguments(operation, inputs)
    candidate = _adapted(candidate, operation)
    requires = tuple(n for n in spec.differentiated if args.get(n) is not None)
    call = protocol.call(candidate, operation, args, dtype=np.float64, outputs=len(spec.outputs),
                         array="torch" if spec.arrays == "torch" else None, requires_grad=requires, allow_nonfinite=True)
    result = {out.name: value for out, value in zip(spec.outputs, call.outputs)}
    if precision is not None:
        precision.append("float32" if call.unit_roundoff > U["float64"] else "float64")
    if requires:
        raws = [call.raw] if len(spec.outputs) == 1 else list(call.raw)
        leaves = [call.inputs[n] for n in requires]
        for out, raw in zip(spec.outputs, raws):
            label = out.name if out.shape == "()" else f"sum {out.name}"
            grads = [None] * len(leaves)
            if torch.is_tensor(raw) and raw.requires_grad:
                try:
                    grads = torch.autograd.grad(raw.sum(), leaves, allow_unused=True, retain_graph=True)
                except RuntimeError as exc:
                    raise CandidateError(f"{operation} returned a tensor autograd cannot differentiate: {exc}") from None
            for name, leaf, grad in zip(requires, leaves, grads):
                result[_grad(name, label)] = (np.zeros(tuple(leaf.shape)) if grad is None
                                              else grad.detach().cpu().double().numpy().reshape(tuple(leaf.shape)))
    return result


def bounds(case: Case, reference: dict, u: float) -> dict[str, Bound]:
    x = {k: (np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) and v.dtype != bool else v) for k, v in case.inputs.items()}
    return RULES[case.operation](x, reference, u, case.conventions)


def judge(actual: dict[str, np.ndarray], expected: dict[str, Bound]) -> list[str]:
    """What is wrong with ``actual``, one line per output (empty: it conforms)."""
    problems = []
    for name, bound in expected.items():
        if name not in actual:
            problems.append(f"{name}: not computed")
            continue
        if bound.finite_only:
            a = np.asarray(actual[name], dtype=np.float64)
            if not np.all(np.isfinite(a)):
                problems.append(f"{name}: expected finite values (the contract leaves them free), got {a.tolist()}")
            continue
        a = np.broadcast_to(np.asarray(actual[name], dtype=np.float64), bound.value.shape)
        want_nan = np.isnan(bound.value) & bound.compared
        ok = np.where(want_nan, np.isnan(a), (a >= bound.low - bound.tol) & (a <= bound.high + bound.tol))
        ok |= ~bound.compared
        if not ok.all():
            i = tuple(int(j) for j in np.argwhere(~ok)[0])
            where = f" at index {i}" if a.ndim else ""
            lo, hi = float(bound.low[i]), float(bound.high[i])
            span = f"{float(bound.value[i])!r}" if lo == hi else f"[{lo!r}, {hi!r}]"
            problems.append(f"{name}{where}: expected {span} (tol {float(bound.tol[i]):.3g}), got {float(a[i])!r}; "
                            f"{int((~ok).sum())} of {ok.size} elements off")
    return problems


# ------------------------------------------------------------------------------------------------
# where cases come from


def _plain(value) -> bool:
    return value is None or isinstance(value, (np.ndarray, bool, int, float, str, np.generic))


def _to_float32(value):
    """An array as a float32 implementation would receive it (rounded to float32, kept as float64)."""
    if isinstance(value, np.ndarray) and value.dtype != bool and value.dtype.kind == "f":
        return value.astype(np.float32).astype(np.float64)
    return value  # scalars stay as given: the clause checks pass them so to float32 candidates too


def _finite_like(before, after) -> bool:
    """Rounding to float32 made nothing infinite that was finite (an overflow changes the case's meaning)."""
    a = np.asarray(before, dtype=np.float64) if not isinstance(before, (str, dict, type(None))) else None
    if a is None or a.dtype == bool:
        return True
    return bool(np.all(np.isfinite(np.asarray(after, dtype=np.float64)) | ~np.isfinite(a)))


def recorded_inputs(seed: int = 0) -> list[tuple[str, str, dict]]:
    """``(clause id, operation, arguments)`` of every call the clause checks make to the reference at
    ``--profile quick --seed seed`` with plain-data arguments of at most MAX_ELEMENTS elements, outside a
    property's drawn examples (those vary with the example budget)."""
    from .runner import verdict
    from .runner.engine import run_conformance

    seen: list[tuple[str, str, dict]] = []
    original = verdict.Context.call

    def recording(self, operation, args, **options):
        size = sum(v.size for v in args.values() if isinstance(v, np.ndarray))
        # Only the checks' fixed inputs: what a property draws depends on its example budget (and a search
        # can go another way on another machine), and a vector set must regenerate identically anywhere.
        if not self.drawing and operation in VECTOR_OPERATIONS and operation not in GENERATED and size <= MAX_ELEMENTS \
                and all(_plain(v) for v in args.values()):
            seen.append((self.clause.id, operation, {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}))
        return original(self, operation, args, **options)

    verdict.Context.call = recording
    try:
        run_conformance("reference", profile="quick", seed=seed)
    finally:
        verdict.Context.call = original
    return seen


def generated_inputs() -> list[tuple[str, str, dict]]:
    """The TRPO operations take callables: their cases are the chapter's known problems with the matrix (or
    the line search's polynomials) written out."""
    from .clauses import trpo

    cases = []
    for A, b in trpo.CG_KNOWN:
        cases.append(("TRPO-CG-SOLVES-SPD", "conjugate_gradient",
                      {"matvec": A, "b": b, "iters": trpo.CG_STEPS_PER_DIM * len(b), "tol": trpo.CG_TOL}))
    A, b = trpo.CG_KNOWN[0]  # r'r 5, 0.3125, 0: one step, by iters and by tol (0.4 lies between r_1'r_1 and its norm 0.559)
    for iters, tol in ((1, trpo.CG_TOL), (10, 0.4)):
        cases.append(("TRPO-CG-STOPPING-RULE", "conjugate_gradient", {"matvec": A, "b": b, "iters": iters, "tol": tol}))
    for F, g, max_kl in trpo.STEP_KNOWN:
        for clause in ("TRPO-NATURAL-STEP-DIRECTION", "TRPO-NATURAL-STEP-KL-BUDGET"):
            cases.append((clause, "natural_step", {"grad": g, "fvp": F, "max_kl": max_kl, "cg_iters": trpo.CG_STEPS_PER_DIM * len(g)}))
    for clause, scenarios in (("TRPO-LINE-SEARCH-RULE", trpo.LINE_SEARCH_KNOWN),
                              ("TRPO-LINE-SEARCH-RESTORES-ON-FAILURE", trpo.LINE_SEARCH_FAILURES)):
        for s in scenarios:
            cases.append((clause, "line_search", {
                "x0": s.x0, "fullstep": s.f, "max_kl": s.max_kl, "max_backtracks": s.max_backtracks,
                "surrogate": {"offset": s.offset, "a": s.a, "b": s.b}, "kl": {"c": s.c, "d": s.d}}))


    # above 1.5 target, below target / 1.5, in between (on both sides of the target itself)
    for beta, kl_, target in ((1.0, 0.02, 0.01), (1.0, 0.005, 0.01), (1.0, 0.008, 0.01), (1.0, 0.012, 0.01), (0.3, 4.0, 1.0)):
        cases.append(("KL-ADAPTIVE-PENALTY", "kl_coefficient_update", {"beta": beta, "kl": kl_, "target": target}))
    return cases


GENERATED = ("conjugate_gradient", "natural_step", "line_search", "kl_coefficient_update")
# Conventions whose other values the vectors also cover (with a rule that does not need the reference):
# each recorded case of the operation is repeated under each of these declarations.
CONVENTION_CASES = {"ppo_clip_loss": [{"dual_clip": 3.0}], "line_search": [{"line_search_accept_ratio": 0.5}]}


def _key(inputs: dict) -> str:
    return json.dumps(_encode(inputs), sort_keys=True)


def case_name(operation: str, clause_id: str, inputs: dict) -> str:
    """A recorded case's id, a function of the case alone: its operation, the clause that passed the inputs,
    and a short hash of the inputs (never a count of what a search recorded before it, which differs between
    machines and example budgets)."""
    digest = hashlib.sha256(f"{operation}\n{clause_id}\n{_key(inputs)}".encode()).hexdigest()[:8]
    return f"{operation}/{clause_id.lower()}-{digest}"


def _conventions_of(operation: str) -> dict[str, Any]:
    """The conventions in force for an operation's cases: the contract's defaults, named (never implied)."""
    return contract.plain({k.key: k.default for k in contract.conventions().values() if operation in k.operations})


def candidate_cases(seed: int = 0) -> dict[str, list[Case]]:
    """Every case a vector file may hold, per operation: known answers first, then the recorded and generated
    inputs (rounded to float32, deduplicated), with their expected bounds at both precisions."""
    from .runner.reference_candidate import __name__ as reference_module  # noqa: F401 - the oracle is loaded below
    from .runner.loader import load

    reference = load("reference")
    pool: dict[str, list[Case]] = {op: [] for op in VECTOR_OPERATIONS}
    keys: dict[str, dict[str, Case]] = {op: {} for op in VECTOR_OPERATIONS}

    def add(case: Case):
        key = _key({"inputs": case.inputs, "conventions": case.conventions})
        if key in keys[case.operation]:
            known = keys[case.operation][key]
            known.clauses = sorted(set(known.clauses) | set(case.clauses))
            return
        defaults = case.conventions == _conventions_of(case.operation)
        try:
            outputs = evaluate(reference, case.operation, case.inputs) if defaults else {}
        except CandidateError:
            return  # an input outside the reference's domain (e.g. a deliberate overflow probe): not a vector
        try:
            case.expected = {"float64": bounds(case, outputs, U["float64"]), "float32": bounds(case, outputs, U["float32"])}
        except NotAVector:
            return
        if defaults and judge(outputs, case.expected["float64"]):
            return  # the reference's own output outside its derived bound: the case belongs to the clause checks
        keys[case.operation][key] = case
        pool[case.operation].append(case)

    for answer in contract.known_answers().values():
        if answer.operation in VECTOR_OPERATIONS:
            inputs = answer.arrays()
            if answer.operation in MATRIX_INPUTS:  # the callable's data: the matrix behind it
                name = MATRIX_INPUTS[answer.operation][0]
                inputs[name] = np.asarray(inputs[name], dtype=np.float64)
            add(Case(f"{answer.operation}/{answer.id.split('.', 1)[-1]}", answer.operation, list(answer.clauses),
                     inputs, {**_conventions_of(answer.operation), **contract.plain(answer.conventions)},
                     source="known answer"))
    for clause_id, operation, args in recorded_inputs(seed) + generated_inputs():
        rounded = {k: _to_float32(v) for k, v in args.items()}
        if not all(_finite_like(args[k], rounded[k]) for k in args):
            continue
        case_id = case_name(operation, clause_id, rounded)
        add(Case(case_id, operation, [clause_id], rounded, _conventions_of(operation), source=clause_id))
        for declared in CONVENTION_CASES.get(operation, []):
            suffix = "-".join(f"{k.replace('_', '-')}-{v:g}" for k, v in declared.items())
            inputs = dict(rounded)
            if declared.get("line_search_accept_ratio"):  # the slope the sufficient-increase test needs (trpo.run_line_search)
                inputs["expected_improve_rate"] = inputs["surrogate"]["a"]
            add(Case(f"{case_id}-{suffix}", operation, [clause_id], inputs, {**_conventions_of(operation), **declared},
                     source=clause_id))
    return pool


# ------------------------------------------------------------------------------------------------
# flags: which named bugs each case catches


@dataclass(frozen=True)
class Mutant:
    name: str  # the file's stem: the bug's name
    bug: str
    clauses: tuple[str, ...]
    candidate: Candidate


def mutants(folder: Path) -> list[Mutant]:
    """The mutant catalogue (tests/mutants/*.py in a checkout): each a candidate with one named bug."""
    from .runner.loader import load

    found = []
    for path in sorted(Path(folder).glob("*.py")):
        meta = runpy.run_path(str(path)).get("RLSPEC_MUTANT")
        if meta:
            found.append(Mutant(path.stem, meta["bug"], tuple(meta["clauses"]), load(str(path))))
    return found


def _in_force(declared: dict, keys) -> dict:
    """The values of ``keys`` a candidate is judged under: its declarations, else the contract's defaults."""
    declared = contract.plain(declared)
    return {k: declared.get(k, contract.plain({k: contract.convention(k).default})[k]) for k in keys}


def comparable(mutant: Mutant, case: Case) -> bool:
    """A mutant judged under other values of the conventions the case assumes is judged by the clauses, not here."""
    return _in_force(mutant.candidate.conventions, case.conventions) == case.conventions


def catches(mutant: Mutant, case: Case) -> bool:
    """The mutant fails the case, judged (as any candidate) at the precision of its outputs."""
    precision: list[str] = []
    try:
        actual = evaluate(mutant.candidate, case.operation, case.inputs, precision)
    except CandidateError:
        return True  # an error on valid input is caught too: the verdict would be `error`
    return bool(judge(actual, case.expected[precision[0]]))


def select(cases: list[Case], caught: dict[str, set[str]]) -> list[Case]:
    """The known answers, then greedily the case that catches the most mutants not yet caught (ties: fewer
    elements, then the earlier case), at most PER_OPERATION of them."""
    chosen = [c for c in cases if c.source == "known answer"]
    covered = set().union(*(caught[c.id] for c in chosen)) if chosen else set()
    rest = [c for c in cases if c.source != "known answer"]
    size = lambda c: sum(np.asarray(v).size for v in c.inputs.values() if isinstance(v, np.ndarray))
    while rest and len(chosen) < PER_OPERATION + sum(c.source == "known answer" for c in cases):
        best = max(rest, key=lambda c: (len(caught[c.id] - covered), -size(c), -rest.index(c)))
        if not caught[best.id] - covered:
            break
        chosen.append(best)
        covered |= caught[best.id]
        rest.remove(best)
    if len(chosen) == 0 and cases:  # an operation no mutant names still gets a case to run
        chosen.append(min(cases, key=size))
    return chosen


# ------------------------------------------------------------------------------------------------
# the files


def _number(x: float):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _encode(value):
    """JSON-ready: arrays as nested lists (bools stay bools), non-finite floats as strings, floats as the
    shortest decimal that reads back to the same float64."""
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return value.tolist()
        return _encode(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _number(float(value))
    return value


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def _masked(values: np.ndarray, compared: np.ndarray):
    out = np.asarray(values, dtype=object)
    encoded = _encode(np.asarray(values, dtype=np.float64))
    if compared.all():
        return encoded
    flat_mask = compared.ravel().tolist()
    flat = np.asarray(encoded, dtype=object).ravel().tolist() if out.ndim else [encoded]
    return np.array([v if keep else None for v, keep in zip(flat, flat_mask)], dtype=object).reshape(values.shape).tolist()


def case_json(case: Case) -> dict:
    expected = {}
    for name, bound in case.expected["float64"].items():
        b32 = case.expected["float32"][name]
        if bound.finite_only:
            expected[name] = {"finite": True}
            continue
        entry = {"value": _masked(bound.value, bound.compared)}
        if not (np.array_equal(bound.low, bound.value, equal_nan=True) and np.array_equal(bound.high, bound.value, equal_nan=True)):
            entry["low"], entry["high"] = _masked(bound.low, bound.compared), _masked(bound.high, bound.compared)
            entry["low_float32"], entry["high_float32"] = _masked(b32.low, b32.compared), _masked(b32.high, b32.compared)
        entry["tol"] = {"float64": _masked(bound.tol, bound.compared), "float32": _masked(b32.tol, b32.compared)}
        expected[name] = entry
    return {"id": case.id, "operation": case.operation, "clauses": case.clauses, "source": case.source,
            "conventions": case.conventions, "inputs": _encode(case.inputs), "expected": expected, "flags": case.flags}


def dumps(data) -> str:
    """Deterministic JSON: one key per line down to the arrays, each array of numbers on one line."""

    def fmt(value, indent: int) -> str:
        pad, inner = " " * indent, " " * (indent + 1)
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {fmt(v, indent + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(value, list) and value and any(isinstance(v, dict) for v in value):
            return "[\n" + ",\n".join(f"{inner}{fmt(v, indent + 1)}" for v in value) + f"\n{pad}]"
        return json.dumps(value, separators=(", ", ": "), allow_nan=False)

    return fmt(data, 0) + "\n"


def generate(out: Path, *, mutant_folder: Path, seed: int = 0, progress: Callable[[str], None] = lambda _: None) -> dict:
    """Write the vector set into ``out`` (one file per operation, manifest.json); returns the manifest."""
    from .runner.engine import VERSION as RLSPEC_VERSION

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress("recording the clause checks' inputs (reference, quick, seed 0)")
    pool = candidate_cases(seed)
    catalogue_ = mutants(mutant_folder)
    manifest = {"format": FORMAT, "version": VERSION, "rlspec": RLSPEC_VERSION, "contract": contract.load().version,
                "files": [], "mutants": {}}
    for operation in VECTOR_OPERATIONS:
        cases = pool[operation]
        relevant = [m for m in catalogue_ if m.candidate.provides(operation)]
        progress(f"{operation}: {len(cases)} candidate cases x {len(relevant)} mutants")
        caught = {c.id: {m.name for m in relevant if comparable(m, c) and catches(m, c)} for c in cases}
        chosen = select(cases, caught)
        for c in chosen:
            c.flags = sorted(caught[c.id])
        data = {"format": FORMAT, "version": VERSION, "operation": operation,
                "signature": f"{operation}{contract.operations()[operation].signature}",
                "cases": [case_json(c) for c in chosen]}
        text = dumps(data)
        (out / f"{operation}.json").write_text(text, encoding="utf-8")
        manifest["files"].append({"file": f"{operation}.json", "operation": operation, "cases": len(chosen),
                                  "sha256": hashlib.sha256(text.encode()).hexdigest()})
        for m in relevant:
            entry = manifest["mutants"].setdefault(m.name, {"bug": m.bug, "operations": [], "caught_by": []})
            entry["operations"].append(operation)
            entry["caught_by"] += [c.id for c in chosen if m.name in c.flags]
    for m in catalogue_:
        entry = manifest["mutants"].setdefault(m.name, {"bug": m.bug, "operations": [], "caught_by": []})
        if not entry["caught_by"]:
            entry["not_caught"] = not_caught_reason(m, entry["operations"])
    (out / "manifest.json").write_text(dumps(manifest), encoding="utf-8")
    (out / "schema.json").write_bytes(SCHEMA.read_bytes())
    return manifest


def not_caught_reason(mutant: Mutant, operations: list[str]) -> str:
    provided = sorted(set(mutant.candidate.operations) - set(VECTOR_OPERATIONS))
    if not operations:
        spec = contract.operations()
        objects = [op for op in provided if any(a.type in OBJECT_TYPES or (a.type == "callable" and op not in MATRIX_INPUTS)
                                                for a in spec[op].inputs)]
        if objects == provided:
            return f"its operation ({', '.join(provided) or '?'}) takes objects (networks, a policy, an optimizer, an environment, a schedule): judged by the clause checks only"
        return f"no vector rule is written for {', '.join(provided)} yet (checks/vectors.py RULES)"
    declared = contract.plain(mutant.candidate.conventions)
    if declared:
        covered = [d for op in operations for d in CONVENTION_CASES.get(op, [])]
        why = " (a dual clip c <= 1 fails the clauses by declaration)" if (declared.get("dual_clip") or 2) <= 1 else ""
        return f"it declares {declared}, and the vectors cover the contract's defaults" + (f" and {covered}" if covered else "") + f" only{why}"
    return "no case of its operation separates it from the reference within tolerance (its bug shows only in a statistical or drawn property)"


# ------------------------------------------------------------------------------------------------
# comparing two generated sets (the staleness test)

# Two machines may write a few expected numbers one or two units in the last place apart: numpy and torch pick
# their exp, log, tanh ... kernels by CPU (AVX-512, AVX2, NEON, or the C library's), each accurate to about one
# ulp but none correctly rounded, so a value close to a rounding tie lands on either neighbour (2 e^25 is
# 144009798674.77173 or ...77176). Every tolerance in a set is many ulps of its value, so such a difference
# cannot change what a vector accepts; anything else (ids, inputs, flags, clauses, a number further apart) is
# a stale set.
SAME_SET_ULPS = 4


def _ulps(a: float, b: float) -> float:
    """How many float64 steps lie between ``a`` and ``b`` (inf when one is not finite and they differ)."""
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / math.ulp(max(abs(a), abs(b)))


def _same(a, b, path: str, out: list[str], ulps: int, computed: bool = False) -> None:
    """Append to ``out`` where ``a`` (committed) and ``b`` (regenerated) differ. Numbers under ``expected`` (the
    computed values, bounds and tolerances) may be ``ulps`` apart; everything else must be equal."""
    if len(out) >= 10:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        bounds = "value" in a and "value" in b  # an expected output: [low, high] = [value, value] when absent
        for k in dict.fromkeys([*a, *b]):
            inner = computed or k == "expected"
            if bounds and k in ("low", "high", "low_float32", "high_float32") and (k not in a or k not in b):
                _same(a.get(k, a["value"]), b.get(k, b["value"]), f"{path}.{k}", out, ulps, inner)
            elif k not in a or k not in b:
                out.append(f"{path}: key {k!r} only in the {'committed' if k in a else 'regenerated'} set")
            elif k != "sha256":  # a file's hash follows its bytes; the files themselves are compared
                _same(a[k], b[k], f"{path}.{k}", out, ulps, inner)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items committed, {len(b)} regenerated")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", out, ulps, computed)
    elif computed and isinstance(a, float) and isinstance(b, float):
        if _ulps(a, b) > ulps:
            out.append(f"{path}: committed {a!r}, regenerated {b!r} ({_ulps(a, b):.3g} ulps apart)")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: committed {a!r}, regenerated {b!r}")


def differences(committed: Path, regenerated: Path, *, ulps: int = SAME_SET_ULPS) -> list[str]:
    """What differs between two vector sets, beyond numbers at most ``ulps`` float64 steps apart (see
    SAME_SET_ULPS): an empty list means the committed set is what the generator writes."""
    committed, regenerated = Path(committed), Path(regenerated)
    names = sorted(p.name for p in committed.iterdir())
    other = sorted(p.name for p in regenerated.iterdir())
    if names != other:
        return [f"files differ: committed {names}, regenerated {other}"]
    out: list[str] = []
    for name in names:
        a, b = (committed / name).read_bytes(), (regenerated / name).read_bytes()
        if a == b:
            continue
        if name == "schema.json":
            out.append("schema.json differs")
            continue
        _same(json.loads(a), json.loads(b), name, out, ulps)
    return out


# ------------------------------------------------------------------------------------------------
# reading a vector set, and running a Python candidate on it


class VectorError(ValueError):
    """A vector set that cannot be read (missing, changed or of another format version): one line."""


def read(folder: Path) -> tuple[dict, dict[str, dict]]:
    """``(manifest, {operation: file's data})``; every file the manifest lists must be there, unchanged."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VectorError(f"cannot read {folder / 'manifest.json'}: {exc}") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise VectorError(f"{folder}: format {manifest.get('format')!r} version {manifest.get('version')!r}; "
                          f"this rlspec reads {FORMAT!r} version {VERSION}")
    files = {}
    for entry in manifest["files"]:
        path = folder / entry["file"]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            raise VectorError(f"{path}: listed in the manifest but missing") from None
        if hashlib.sha256(text.encode()).hexdigest() != entry["sha256"]:
            raise VectorError(f"{path}: its SHA-256 differs from the manifest's (edited by hand, or a stale manifest)")
        files[entry["operation"]] = _decode(json.loads(text))
    return manifest, files


def case_from_json(data: dict) -> Case:
    spec = contract.operations()[data["operation"]]
    kinds = {a.name: a.type for a in spec.inputs}
    inputs = {}
    for name, value in data["inputs"].items():
        if kinds.get(name) in ("array", "bool") and not isinstance(value, dict):  # a 0-d array is written as a number
            value = np.asarray(value, dtype=bool if kinds.get(name) == "bool" else np.float64)
        elif isinstance(value, list):
            value = np.asarray(value, dtype=np.float64)  # a matrix behind a callable
        inputs[name] = value
    expected = {}
    for precision in U:
        expected[precision] = {}
        for name, e in data["expected"].items():
            if e.get("finite"):
                expected[precision][name] = Bound.finite(())
                continue
            value = np.asarray(_nulls(e["value"]), dtype=np.float64)
            compared = np.asarray(_not_null(e["value"]), dtype=bool)
            suffix = "" if precision == "float64" else "_float32"
            low = np.asarray(_nulls(e.get("low" + suffix, e["value"])), dtype=np.float64)
            high = np.asarray(_nulls(e.get("high" + suffix, e["value"])), dtype=np.float64)
            tol = np.asarray(_nulls(e["tol"][precision]), dtype=np.float64)
            expected[precision][name] = Bound(value, low, high, np.nan_to_num(tol), compared)
    return Case(data["id"], data["operation"], data["clauses"], inputs, data["conventions"], expected, data["flags"], data["source"])


def _nulls(value, marker=float("nan")):
    if isinstance(value, list):
        return [_nulls(v, marker) for v in value]
    return marker if value is None else value


def _not_null(value):
    if isinstance(value, list):
        return [_not_null(v) for v in value]
    return value is not None


@dataclass
class VectorResult:
    id: str
    operation: str
    status: str  # pass, fail, error, skip (not applicable: another convention), not-provided
    message: str = ""
    clauses: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "operation": self.operation, "status": self.status, "message": self.message,
                "clauses": self.clauses, "flags": self.flags}


def run_case(candidate: Candidate, case: Case) -> VectorResult:
    result = VectorResult(case.id, case.operation, "pass", clauses=case.clauses, flags=case.flags)
    if not candidate.provides(case.operation):
        result.status, result.message = "not-provided", f"the candidate does not provide {case.operation}"
        return result
    in_force = _in_force(candidate.conventions, case.conventions)
    differs = {k: v for k, v in in_force.items() if v != case.conventions[k]}
    if differs:
        result.status = "skip"
        result.message = f"not applicable: the case assumes {case.conventions}, the candidate's conventions are {differs}"
        return result
    precision: list[str] = []
    try:
        actual = evaluate(candidate, case.operation, case.inputs, precision)
    except CandidateError as exc:
        result.status, result.message = "error", str(exc)
        return result
    problems = judge(actual, case.expected[precision[0]])
    if problems:
        result.status = "fail"
        result.message = "; ".join(problems) + (f" (judged as {precision[0]}; this case catches {', '.join(case.flags)})"
                                                 if case.flags else f" (judged as {precision[0]})")
    return result


def run(candidate: Candidate, folder: Path, on_result: Callable[[VectorResult], None] | None = None) -> list[VectorResult]:
    """Every case of every file in the set, in manifest order."""
    manifest, files = read(folder)
    results = []
    for entry in manifest["files"]:
        for data in files[entry["operation"]]["cases"]:
            outcome = run_case(candidate, case_from_json(data))
            results.append(outcome)
            if on_result:
                on_result(outcome)
    return results


def _child(conn, spec: str, folder: str, parent: int) -> None:
    """The worker of an isolated vector run: load the candidate, then answer one case index at a time. It dies
    with the run that started it, however that ends (the clause workers' set-up, checks/runner/worker.py)."""
    from .runner import worker
    from .runner.lifetime import die_with_parent
    from .runner.loader import LoadError, load

    die_with_parent(parent)
    worker._quiet_process(None)
    try:
        candidate = load(spec)
        manifest, files = read(Path(folder))
    except (LoadError, VectorError) as exc:
        conn.send(("load-error", str(exc)))
        return
    cases = [data for entry in manifest["files"] for data in files[entry["operation"]]["cases"]]
    conn.send(("loaded", len(cases)))
    while True:
        try:
            index = conn.recv()
        except (EOFError, OSError):
            return
        if index is None:
            return
        conn.send(("result", run_case(candidate, case_from_json(cases[index]))))


def run_isolated(spec: str, folder: Path, *, time_limit: float = 30.0, load_limit: float = 120.0,
                 on_result: Callable[[VectorResult], None] | None = None) -> list[VectorResult]:
    """``run`` in a worker process the suite can kill: a case that hangs or crashes the worker costs its own
    time limit and gets ``error``, and the later cases of that operation get an immediate ``error`` (not
    retried); a fresh worker takes the next case. LoadError/VectorError if the candidate or the set cannot be
    loaded. The worker dies with this process, whatever ends it."""
    import multiprocessing
    import os

    from .runner.loader import LoadError

    manifest, files = read(folder)  # the set is checked here first: a bad set is one clear line, not a worker's
    cases = [data for entry in manifest["files"] for data in files[entry["operation"]]["cases"]]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    results: list[VectorResult] = []
    blamed: dict[str, str] = {}  # operation -> what happened on which case

    def start():
        parent, child = context.Pipe()
        process = context.Process(target=_child, args=(child, spec, str(folder), os.getpid()), daemon=True)
        process.start()
        child.close()
        if not parent.poll(load_limit):
            process.kill()
            raise LoadError(f"cannot load candidate: timed out after {load_limit:g} s while importing it")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):
            raise LoadError("cannot load candidate: the worker died while importing it") from None
        if kind == "load-error":
            process.join(1)
            raise LoadError(payload)
        return parent, process

    conn = process = None
    try:
        for index, data in enumerate(cases):
            operation = data["operation"]
            if operation in blamed:
                outcome = VectorResult(data["id"], operation, "error", f"{blamed[operation]}; not retried", data["clauses"], data["flags"])
            else:
                if process is None:
                    conn, process = start()
                conn.send(index)
                message = None
                if conn.poll(time_limit):
                    try:
                        _, outcome = conn.recv()
                    except (EOFError, OSError):
                        process.join(2)
                        message = f"the candidate crashed the worker process (exit code {process.exitcode})"
                else:
                    message = f"timed out after {time_limit:g} s"
                if message is not None:
                    process.kill()
                    process.join(2)
                    conn = process = None
                    blamed[operation] = f"{operation} {message.replace('the candidate ', '')} on {data['id']}"
                    outcome = VectorResult(data["id"], operation, "error", f"{operation}: {message}", data["clauses"], data["flags"])
            results.append(outcome)
            if on_result:
                on_result(outcome)
    finally:
        if process is not None:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
            process.join(1)
            if process.is_alive():
                process.kill()
    return results
