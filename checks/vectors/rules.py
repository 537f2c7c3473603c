"""The rules: each operation's expected outputs and tolerances, from the chapters' own oracles and derived
bounds (the functions the clause checks call), at unit roundoff u."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ...spec import contract
from .format import U, Bound

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
    from ..kit.tolerances import gae_tolerance, returns_tolerance

    tol = gae_tolerance(x["rewards"], x["values"], x["next_values"], x["terminated"], x["truncated"], x["gamma"], x["lam"], u)
    return {"advantages": Bound.of(ref["advantages"], tol),
            "returns": Bound.of(ref["returns"], returns_tolerance(tol, ref["advantages"], x["values"], u))}


@rule("rewards_to_go")
def _rewards_to_go(x, ref, u, conv):
    from ..kit.tolerances import rewards_to_go_tolerance

    return {"returns": Bound.of(ref["returns"], rewards_to_go_tolerance(x["rewards"], x["gamma"], u))}


@rule("reinforce_loss")
def _reinforce(x, ref, u, conv):
    from ..clauses import pg

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
    from ..kit.tolerances import TINY, smallest_normal, td_terms

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
    from ..kit import clipping

    clip = clipping.ClipRange(conv.get("dual_clip"), conv.get("clip_eps_high"))  # the case's declared clip shape
    lpn, lpo, A, eps = x["logp_new"], x["logp_old"], x["advantages"], x["clip_eps"]
    r, B = np.exp(lpn - lpo), len(A)
    low, high = clipping.log_derivative_bounds(r, A, eps, clip, clipping.ratio_relative_error(lpn, lpo, u))
    # the derivative from the formula: one value off the kinks (low == high), the midpoint of the subgradients at one
    return {"loss": Bound.of(-float(np.mean(clipping.clip_objective(r, A, eps, clip))), clipping.clip_loss_tolerance(lpn, lpo, A, eps, clip, u)),
            _grad("logp_new"): Bound.of(-(low + high) / (2 * B), clipping.clip_gradient_tolerance(lpn, lpo, A, u), low=-high / B, high=-low / B)}


@rule("ppo_value_loss")
def _ppo_value(x, ref, u, conv):
    from ..clauses import ppo
    from ..kit.tolerances import TINY, smallest_normal

    k = 1.0  # the contract's default value_loss_factor
    V, R, Vo, eps = x["values"], x["returns"], x.get("old_values"), x.get("clip_eps")
    B, eta = len(V), smallest_normal(u)
    loss, low, high = ppo.value_expected(V, R, Vo, eps, k, u)
    m = ppo.value_magnitude(V, R, Vo, eps)
    return {"loss": Bound.of(loss, 2 * k * u * (B + 8) * float(np.mean(m**2)) + 16 * eta + TINY),
            _grad("values"): Bound.of(ref[_grad("values")], 2 * k * u * 10 * m / B + 16 * eta + TINY, low=low, high=high)}


@rule("normalize_advantages")
def _normalize(x, ref, u, conv):
    from ..clauses import ppo

    A = x["advantages"]
    if len(A) < 2 or np.ptp(A) == 0:  # one element or constant: the contract asks only for a finite result
        return {"advantages": Bound.finite(A.shape)}
    conv = ppo.Conventions(_CaseContext(conv))  # the case's ddof, eps and eps form (a known answer may declare them)
    return {"advantages": Bound.of(ppo.normalised(A, conv)[0], ppo.normalisation_tolerance(A, conv, u))}


@rule("ppo_entropy_loss")
def _entropy(x, ref, u, conv):
    from ..kit.tolerances import TINY, smallest_normal

    H, coef = x["entropy"], x["coef"]
    B, eta = len(H), smallest_normal(u)
    return {"loss": Bound.of(-coef * float(np.mean(H)), 2 * u * (B + 3) * abs(coef) * float(np.mean(np.abs(H))) + 8 * eta + TINY),
            _grad("entropy"): Bound.of(np.full(B, -coef / B), 8 * u * abs(coef) / B + 8 * eta + TINY)}


@rule("kl_estimate")
def _kl_estimate(x, ref, u, conv):
    from ..kit import kl_estimators

    a, b, kind = x["logp_sampler"], x["logp_other"], x["kind"]
    return {"estimates": Bound.of(kl_estimators.exact(kind, a, b), kl_estimators.per_sample_tolerance(kind, a, b, u))}


@rule("kl_coefficient_update")
def _kl_coefficient(x, ref, u, conv):
    from ..clauses import kl

    factor, threshold = 2.0, 1.5  # the contract's defaults
    expected = kl.expected_update(x["beta"], x["kl"], x["target"], factor, threshold)
    exact_scaling = math.frexp(factor)[0] == 0.5
    return {"beta": Bound.of(expected, ((0.0 if exact_scaling else 2 * u) + (u if u > U["float64"] else 0.0)) * abs(expected))}


@rule("conjugate_gradient")
def _cg(x, ref, u, conv):
    from ..clauses import trpo

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
    from ..clauses import trpo

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
    from ..clauses import gaussian

    mean, log_std, a = x["mean"], x["log_std"], x["action"]
    return {"log_prob": Bound.of(np.sum(gaussian.gaussian_terms(mean, log_std, a), axis=-1), gaussian.diag_tolerance(mean, log_std, a, u))}


@rule("diag_gaussian_entropy")
def _diag_entropy(x, ref, u, conv):
    from ..clauses import gaussian

    log_std = x["log_std"]
    D = log_std.shape[1]
    return {"entropy": Bound.of(np.sum(0.5 * (1.0 + gaussian.LOG_2PI) + log_std, axis=-1),
                                2.0 * (D + 4) * u * np.sum(np.abs(log_std) + 1.5, axis=-1) + 1e-300)}


@rule("tanh_gaussian_log_prob")
def _tanh(x, ref, u, conv):
    from ..clauses import gaussian

    mean, log_std, pre = x["mean"], x["log_std"], x["pre_tanh"]
    return {"log_prob": Bound.of(gaussian.tanh_log_prob(mean, log_std, pre), gaussian.tanh_tolerance(mean, log_std, pre, u))}


@rule("scaled_tanh_gaussian_log_prob")
def _scaled_tanh(x, ref, u, conv):
    from ..clauses import gaussian

    mean, log_std, pre, low, high = x["mean"], x["log_std"], x["pre_tanh"], x["low"], x["high"]
    scale = np.log(0.5 * (high - low))
    affine = np.abs(scale) + (np.abs(low) + np.abs(high)) / (high - low) + 1.0
    tol = gaussian.tanh_tolerance(mean, log_std, pre, u) + 2.0 * (len(low) + 3) * u * np.sum(affine)
    return {"log_prob": Bound.of(gaussian.tanh_log_prob(mean, log_std, pre) - np.sum(scale), tol)}


@rule("token_gae")
def _token_gae(x, ref, u, conv):
    from ..clauses import rlhf
    from ..kit.strategies.tokens import GaeCase

    case = GaeCase(x["rewards"], x["values"], x["mask"], x["gamma"], x["lam"])
    advantages, tol = rlhf.compacted_gae(case, u)
    mask = x["mask"]
    return {"advantages": Bound.of(advantages, tol, compared=mask),
            "returns": Bound.of(advantages + x["values"], 2 * tol + 4 * u * (np.abs(advantages) + np.abs(x["values"])) + 1e-300,
                                compared=mask)}


@rule("assemble_rewards")
def _assemble(x, ref, u, conv):
    from ..clauses import rlhf

    s, k, m, c = x["scores"], x["kl"], x["mask"], x["kl_coef"]
    return {"rewards": Bound.of(rlhf.expected_rewards(s, k, m, c), rlhf.rewards_tolerance(s, k, m, c, u), compared=m)}


@rule("group_advantages")
def _groups(x, ref, u, conv):
    from ..clauses import grpo

    conv = grpo.group_conventions(_CaseContext(conv))  # the case's conventions (a known answer may declare them)
    scores, groups, kind = x["scores"], x["groups"].astype(np.int64), x["kind"]
    return {"advantages": Bound.of(grpo.expected_advantages(scores, groups, kind, conv), grpo.group_tolerance(scores, groups, kind, conv, u))}


@rule("aggregate_loss")
def _aggregate(x, ref, u, conv):
    from ..clauses import rlhf
    from ..kit.tolerances import TINY, smallest_normal

    l, m = x["per_token_loss"], x["mask"]
    w = rlhf.aggregation_weights(m, x["mode"], x.get("num_tokens"), x.get("norm_length"), 0.0)
    N, B, eta = int(m.sum()), m.shape[0], smallest_normal(u)
    terms = np.where(m, w * l, 0.0)
    return {"loss": Bound.of(float(terms.sum()), 2 * u * (N + B + 6) * float(np.abs(terms).sum()) + 8 * eta + TINY),
            _grad("per_token_loss"): Bound.of(w, np.where(m, 2 * u * 6 * w + 8 * eta, 0.0))}


@rule("token_ppo_loss")
def _token_ppo(x, ref, u, conv):
    from ..clauses import rlhf

    loss, low, high, loss_tol, grad_tol = rlhf.ppo_expected(x, None, u)  # log_ratio_clamp: the default None
    m = x["mask"]
    grad = np.zeros(m.shape)
    grad_low, grad_high, tol = np.zeros(m.shape), np.zeros(m.shape), np.zeros(m.shape)
    grad[m], grad_low[m], grad_high[m], tol[m] = ref[_grad("logp_new")][m], low, high, grad_tol
    return {"loss": Bound.of(loss, loss_tol), _grad("logp_new"): Bound.of(grad, tol, low=grad_low, high=grad_high)}


@rule("kl_penalty")
def _kl_penalty(x, ref, u, conv):
    from ..clauses import grpo

    a, b, kind, c = x["logp"], x["logp_ref"], x["kind"], x.get("logp_old")
    return {"kl": Bound.of(grpo.penalty_values(kind, a, b), grpo.value_tolerance(kind, a, b, c, u)),
            _grad("logp", "sum kl"): Bound.of(grpo.token_derivative(kind, a, b, c), grpo.derivative_tolerance(kind, a, b, c, u))}


@rule("td_target")
def _td_target(x, ref, u, conv):
    from ..clauses import offpolicy
    from ..kit.tolerances import TINY

    r, q, term, g = x["rewards"], x["next_q"], x["terminated"], x["gamma"]
    return {"targets": Bound.of(r + g * np.where(term, 0.0, q), 2 * offpolicy.target_error(r, g, q, 0.0, term, u) + TINY)}


@rule("polyak_update")
def _polyak(x, ref, u, conv):
    from ..clauses import offpolicy

    target, online, tau = x["target"], x["online"], x["tau"]
    return {"target": Bound.of(tau * online + (1.0 - tau) * target,
                               8 * u * (np.abs(target) + np.abs(online)) + offpolicy.floor(u))}


@rule("iql_targets")
def _iql_targets(x, ref, u, conv):
    from ..kit.tolerances import TINY, smallest_normal

    K, r, v, term, g = x["target_q"], x["rewards"], x["next_values"], x["terminated"], x["gamma"]
    bootstrap = g * np.where(term, 0.0, v)
    q_target = r + bootstrap
    return {"value_target": Bound.of(np.min(K, axis=0), TINY),  # a minimum is exact
            "q_target": Bound.of(q_target, 2 * u * (2 * np.abs(bootstrap) + np.abs(q_target)) + 4 * smallest_normal(u) + TINY)}


@rule("cql_penalty")
def _cql_penalty(x, ref, u, conv):
    from ..clauses import offline

    from ..kit.tolerances import TINY, smallest_normal

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
    from ..clauses import offline
    from ..kit.tolerances import TINY, smallest_normal

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
    from ..clauses import offline

    loss, derivative, tol, dtol = offline.expectile_tolerances(x["target"], x["prediction"], x["tau"], u)
    return {"loss": Bound.of(loss, tol), _grad("prediction", "sum loss"): Bound.of(derivative, dtol)}


@rule("sac_alpha_loss")
def _sac_alpha(x, ref, u, conv):
    from ..clauses import offpolicy

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
    from ..clauses import offline
    from ..kit.tolerances import TINY, smallest_normal

    rule_ = offline.WeightRule(conv["awr_beta"], conv["awr_max_weight"])
    lp, adv, beta = x["log_prob"], x["advantages"], x["beta"]
    w, e_w, eta = rule_.weight(adv, beta), offline.weight_error(rule_, adv, beta, u), smallest_normal(u)
    loss = -w * lp
    return {"loss": Bound.of(loss, 2 * (np.abs(lp) * e_w + u * np.abs(loss)) + 4 * eta + TINY),  # as offline.check_awr
            _grad("log_prob", "sum loss"): Bound.of(-w, 2 * (e_w + u * w) + 4 * eta + TINY),
            _grad("advantages", "sum loss"): Bound.of(np.zeros(adv.shape), 0.0)}  # the weight is detached


def _normaliser(conv, clip_key):
    from ..clauses import normalisation

    decay = conv["moments_decay"]
    return normalisation.Normaliser(float(conv["moments_initial_count"]), float(conv["normalization_eps"]),
                                    conv["normalization_eps_form"], conv[clip_key], conv["normalization_order"],
                                    conv["normalization_scope"], None if decay is None else float(decay))


@rule("running_moments")
def _running_moments(x, ref, u, conv):
    from ..clauses import normalisation

    c0, decay = float(conv["moments_initial_count"]), conv["moments_decay"]
    decay = None if decay is None else float(decay)
    mean, var, count = normalisation.concatenation(x["x"], x["batch_end"], c0, decay)
    bounds = normalisation.moments_bounds(x["x"], x["batch_end"], c0, u, decay=decay).at(-1)
    tol_m, tol_v, tol_n = normalisation.moments_tolerance(mean, var, bounds, count, u)
    return {"mean": Bound.of(mean, tol_m), "var": Bound.of(var, tol_v), "count": Bound.of(count, tol_n)}


@rule("merge_moments")
def _merge_moments(x, ref, u, conv):
    from ..clauses import normalisation

    mean, var, count = normalisation.merge_oracle(x)
    zero = np.zeros(len(x["mean_a"]))
    state = normalisation.Bounds(x["mean_a"], x["var_a"], float(x["count_a"]), zero, zero, 0.0)
    bounds = normalisation.merge_bounds(state, x["mean_b"], x["var_b"], float(x["count_b"]), zero, zero, u)
    tol_m, tol_v, tol_n = normalisation.moments_tolerance(mean, var, bounds, count, u)
    return {"mean": Bound.of(mean, tol_m), "var": Bound.of(var, tol_v), "count": Bound.of(count, tol_n)}


@rule("normalize_observations")
def _normalize_observations(x, ref, u, conv):
    from ..clauses import normalisation

    expected, tol = normalisation.observation_oracle(x["obs"], int(x["train_steps"]), _normaliser(conv, "observation_clip"), u)
    return {"normalized": Bound.of(expected, tol)}


@rule("scale_rewards")
def _scale_rewards(x, ref, u, conv):
    from ..clauses import normalisation

    expected, tol = normalisation.reward_oracle(x["rewards"], x["terminated"], x["truncated"], float(x["gamma"]),
                                                _normaliser(conv, "reward_clip"), u)
    return {"scaled": Bound.of(expected, tol)}


def _minibatches(x, conv):
    mode = conv["diagnostic_average"]
    return (None if mode == "per-call" else x.get("minibatch_end")), mode


@rule("diagnostic_approx_kl")
def _diagnostic_approx_kl(x, ref, u, conv):
    from ..clauses import normalisation
    from ..kit.kl_estimators import exact, per_sample_tolerance

    kind, (ends, mode) = conv["approx_kl_estimator"], _minibatches(x, conv)
    old, new = x["logp_old"], x["logp_new"]
    per_sample = exact(kind, old, new)
    tol = normalisation.averaging_tolerance(per_sample, per_sample_tolerance(kind, old, new, u), ends, u)
    return {"kl": Bound.of(normalisation.averaged(per_sample, ends, mode), tol)}


@rule("diagnostic_clip_fraction")
def _diagnostic_clip_fraction(x, ref, u, conv):
    from ..clauses import normalisation

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
    from ..clauses import normalisation

    eps = float(conv["explained_variance_eps"])
    value, a, b = normalisation.explained_oracle(x["values"], x["returns"], eps)
    if math.isnan(value):
        return {"explained_variance": Bound.of(np.nan, 0.0)}
    return {"explained_variance": Bound.of(value, normalisation.explained_tolerance(x["values"], x["returns"], a, b, u))}


@rule("diagnostic_entropy")
def _diagnostic_entropy(x, ref, u, conv):
    from ..clauses import normalisation

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


def _scenario(x):
    """The line search's surrogate and KL along the full step (polynomials in t, as the TRPO checks build them)."""
    from ..clauses import trpo

    s, k = x["surrogate"], x["kl"]
    return trpo.Scenario(x["x0"], x["fullstep"], s["a"], s["b"], k["c"], k["d"], x["max_kl"], x["max_backtracks"], s["offset"])
