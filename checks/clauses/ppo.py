"""Checks for the PPO chapter (``spec/clauses/30_ppo.toml``).

Every check starts from fixed known-answer inputs (the same on every seed: the clip gradient
table, the log-space ratio, normalisation and value-loss known answers, the bug catalogue's smallest inputs), then searches drawn inputs. Expected
numbers come from the formulas (evaluated in float64 on the exact inputs the candidate received),
from exact values, or from the candidate itself (its own parameters after each optimizer step).

Conventions (dual_clip, clip_eps_high, value_loss_factor, the advantage normalisation's ddof, eps and
form, and ppo_update's normalisation scope and KL stop) are the contract's (spec/contract/30_ppo.toml);
each clause checks the declared value exactly.

``ppo_update``'s protocol. The suite hands the candidate what a collector would have produced,
built so that every property is observable from outside:

* ``policy``: a torch module (:class:`rlspec.reference.ppo.LinearActorCritic`) on one-hot
  observations, one state per sample, so each sample's log-probability depends on its own
  parameters only, bit for bit, whatever minibatch it is evaluated in. ``policy(obs) -> (dist,
  values)`` (CleanRL style) and ``policy.evaluate_actions(obs, actions) -> (values,
  log_prob, entropy)`` (SB3's method and order).
* ``optimizer``: plain SGD over ``policy.parameters()`` (:class:`RecordingSGD`: ``param_groups``,
  ``zero_grad()``, ``step()`` like a ``torch.optim`` optimizer) that records the gradient it receives
  and the parameters it produces at every ``step()``. The candidate takes exactly one step per
  minibatch with it; the suite then knows the whole parameter path without trusting diagnostics.
* ``obs, actions, logp_old, advantages, returns, values_old``: the stored rollout (N samples).
  ``logp_old`` is the policy's own log-probability (or that minus a known offset), ``values_old``
  its own values, so a candidate that clips its value loss sees no clip at the first step.
* ``config``: ``clip_eps, epochs, minibatch_size, vf_coef, ent_coef, max_grad_norm, target_kl``
  (None: never stop), ``normalize_advantages`` and ``seed`` (for the candidate's shuffle).

It returns a dict: ``ratios`` and ``indices`` (the first minibatch's ratios, computed before any
step, and their positions in the batch), ``approx_kl`` (every value its stop rule compared with
target_kl, in order) and ``epochs`` (epochs in which it took at least one step). An adapter for
CleanRL-style code returns ``mb_inds`` and ``ratio`` from its first pass; SB3's ``train()`` has the
same quantities inline.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import edges
from ..assertions import ClauseFailure, assert_close
from ..clipping import (
    ClipRange, clip_gradient_tolerance, clip_loss_tolerance, clip_objective, log_derivative_bounds, ratio_relative_error,
)
from ..gradients import leaf_gradient
from ..protocol import CandidateError, captured_output, describe
from ..registry import check
from ..strategies import ppo as draws
from ..strategies import normal_floats, rounded
from ..tolerances import TINY, smallest_normal, tiny
from ...reference import ppo as ref
from ...spec import contract

# ---------------------------------------------------------------------------------------------
# conventions

class Conventions:
    """The PPO conventions in force (spec/contract/30_ppo.toml), each read through ``ctx.convention``
    when first used, so a verdict lists the conventions it depends on. ``but(key=value)`` is the same
    with some replaced (a diagnosis trying the other ddof)."""

    def __init__(self, ctx, **replaced):
        self._ctx, self._replaced = ctx, replaced

    def __getattr__(self, key: str):
        if key.startswith("_"):
            raise AttributeError(key)
        return self._replaced[key] if key in self._replaced else self._ctx.convention(key)

    def but(self, **replaced) -> "Conventions":
        return Conventions(self._ctx, **{**self._replaced, **replaced})


def conventions(ctx) -> Conventions:
    """The candidate's PPO conventions (validated at load against the contract)."""
    return Conventions(ctx)


def clip_conventions(ctx) -> ClipRange:
    """The conventions of the clipped loss. A declared dual clip c <= 1 is a defect, not a choice:
    c A lies above the clipped objective for every A < 0, so every negative-advantage sample
    would be constant (bug C5)."""
    conv = ClipRange(ctx.convention("dual_clip"), ctx.convention("clip_eps_high"))
    if conv.dual_clip is not None and conv.dual_clip <= 1.0:
        raise ClauseFailure(
            f"the candidate declares dual_clip = {conv.dual_clip}, but a dual-clip constant must exceed 1",
            call=f"RLSPEC_CONVENTIONS = {{'dual_clip': {conv.dual_clip!r}}}",
            cause="with c <= 1 the floor c A is above min(r A, clip(r) A) for every A < 0: every negative-advantage "
            "sample becomes a constant with zero gradient (bug C5)",
        )
    return conv


# ---------------------------------------------------------------------------------------------
# ppo_clip_loss: calling the candidate (the formulas and tolerances are rlspec.checks.clipping's)


def call_clip_loss(ctx, logp_new, logp_old, advantages, clip_eps, *, allow_nonfinite=False):
    """The candidate's loss and d loss / d logp_new (float64), on inputs rounded to the run's dtype.

    Returns ``(loss, grad, call, inputs)``; ``inputs`` are the float64 values the candidate received.
    A loss that does not depend on logp_new has gradient 0.
    """
    inputs = {
        "logp_new": rounded(logp_new, ctx.dtype),
        "logp_old": rounded(logp_old, ctx.dtype),
        "advantages": rounded(advantages, ctx.dtype),
    }
    call = ctx.call("ppo_clip_loss", {**inputs, "clip_eps": float(clip_eps)}, array="torch",
                    requires_grad=("logp_new",), shape=(), allow_nonfinite=allow_nonfinite)
    return float(call.outputs[0]), leaf_gradient(call, "logp_new", len(inputs["logp_new"])), call, inputs


def check_clip_values(ctx, logp_new, logp_old, advantages, clip_eps, *, what="loss", cause="", conv=None):
    """Loss = -mean(objective) and d loss / d logp_new = -(1/B) d objective / d log r (a subgradient at kinks)."""
    conv = conv or clip_conventions(ctx)
    loss, grad, call, x = call_clip_loss(ctx, logp_new, logp_old, advantages, clip_eps)
    u = call.unit_roundoff
    lpn, lpo, A = x["logp_new"], x["logp_old"], x["advantages"]
    r = np.exp(lpn - lpo)
    B = len(A)
    expected = -float(np.mean(clip_objective(r, A, clip_eps, conv)))
    assert_close(loss, expected, clip_loss_tolerance(lpn, lpo, A, clip_eps, conv, u),
                 what=f"{what}: -mean min(r A, clip(r) A)", call=call.code, cause=cause)
    low, high = log_derivative_bounds(r, A, clip_eps, conv, ratio_relative_error(lpn, lpo, u))
    nearest = np.clip(grad, -high / B, -low / B)
    assert_close(grad, nearest, clip_gradient_tolerance(lpn, lpo, A, u),
                 what=f"{what}: d loss / d logp_new vs -(1/B) d min(r A, clip(r) A) / d log r", call=call.code, cause=cause)
    return loss, grad, call, x


def clip_eps_edges() -> list[float]:
    """The edges of clip_eps the contract gives (just above 0, and 1): every clip clause's fixed cases take them."""
    return edges.values("ppo_clip_loss", "clip_eps")


# The known answers (spec/contract/30_ppo.toml).
TABLE = contract.known_answer("ppo.clip-gradient-table")  # Schulman et al. 2017 §3, Figure 1; eps = 0.2
# (A, r, d loss / d logp_new) for each row alone
GRADIENT_TABLE = list(zip(TABLE.inputs["advantages"], TABLE.derived["ratio"], TABLE.derived["d loss / d logp_new, each row alone"]))
LOG_SPACE = contract.known_answer("ppo.log-space-ratio")
FIRST_STEP = contract.known_answer("ppo.first-step")
VALUE = contract.known_answer("ppo.value-loss")
VALUE_CLIPPED = [contract.known_answer(f"ppo.value-loss-clipped-{name}") for name in ("c9", "c10", "max")]
NORMALISATION = contract.known_answer("ppo.normalisation")
ENTROPY = contract.known_answer("ppo.entropy-bonus-c11")


# ---------------------------------------------------------------------------------------------
# ppo_clip_loss


@check("PPO-RATIO-LOG-SPACE")
def ratio_log_space(ctx):
    """The log-space known answer: logp_new = -1000, logp_old = -1000.1 gives a finite loss and gradient equal to r = exp(0.1)'s."""
    conv = clip_conventions(ctx)

    def verify(logp_new, logp_old, advantages, clip_eps):
        loss, grad, call, x = call_clip_loss(ctx, logp_new, logp_old, advantages, clip_eps, allow_nonfinite=True)
        if not (math.isfinite(loss) and np.all(np.isfinite(grad))):
            r = np.exp(x["logp_new"] - x["logp_old"])
            raise ClauseFailure(
                f"loss {loss!r}, gradient {grad.tolist()!r} on finite log-probabilities; the ratios are "
                f"{np.round(r, 6).tolist()} (exp of the log-prob differences)",
                call=call.code,
                cause="the ratio is computed as exp(logp_new) / exp(logp_old): both underflow to 0 near -1000 and 0/0 is NaN",
            )
        check_clip_values(ctx, logp_new, logp_old, advantages, clip_eps, what="at log-probabilities near -1000", conv=conv)

    verify(**LOG_SPACE.inputs)
    verify([-1000.0, -2000.0, -745.0], [-1000.1, -2000.05, -745.2], [1.0, -1.0, 0.5], 0.2)
    for eps in clip_eps_edges():
        verify(**{**LOG_SPACE.inputs, "clip_eps": eps})
    ctx.property(draws.clip_batches(dtype=ctx.dtype, log_ratio=normal_floats(-0.5, 0.5), logp_old=normal_floats(-5000.0, -700.0)),
                 lambda b: verify(*b), label="drawn", tier="autograd")


@check("PPO-FIRST-STEP-VANILLA-GRADIENT")
def first_step_vanilla_gradient(ctx):
    """logp_new == logp_old: loss = -mean(A), d loss / d logp_new = -A / B."""
    clip_conventions(ctx)

    def verify(logp, advantages, clip_eps):
        logp = rounded(logp, ctx.dtype)
        loss, grad, call, x = call_clip_loss(ctx, logp, logp, advantages, clip_eps)
        A, u, B = x["advantages"], call.unit_roundoff, len(x["advantages"])
        # x = 0 exactly, so r = exp(0) = 1: only the products with A, the mean and the 1/B round.
        eta = smallest_normal(u)
        assert_close(loss, -float(np.mean(A)), 2 * u * (B + 4) * float(np.mean(np.abs(A))) + 16 * eta + TINY,
                     what="loss at r = 1 vs -mean(A)", call=call.code,
                     cause="the advantages are changed inside the loss (normalised for one branch of the min only?)")
        assert_close(grad, -A / B, 2 * u * 6 * np.abs(A) / B + 16 * eta + TINY,
                     what="d loss / d logp_new at r = 1 vs the vanilla policy gradient -A / B", call=call.code,
                     cause="the advantages are changed inside the loss, or the ratio is inverted")

    x = FIRST_STEP.inputs  # bug C2: mixing raw and normalised advantages gives [-0.707, +10]
    verify(x["logp_new"], x["advantages"], x["clip_eps"])
    verify([-1.0], [2.0], 0.2)
    verify([-1000.0, -3.0, -0.1, -7.5], [1.0, 2.0, 3.0, -4.0], 0.1)
    for eps in clip_eps_edges():
        verify(x["logp_new"], x["advantages"], eps)

    ctx.property(draws.first_step_batches(), lambda d: verify(d[0][:, 0], d[0][:, 1], d[1]), label="drawn",
                 tier="autograd")


@check("PPO-CLIP-LOSS-VALUE")
def clip_loss_value(ctx):
    """-mean min(r A, clip(r) A) with the min per sample, on the six table points and drawn batches."""
    conv = clip_conventions(ctx)
    cause = "the unclipped surrogate is returned, or the min is taken between batch means instead of per sample"
    x = TABLE.inputs
    check_clip_values(ctx, x["logp_new"], x["logp_old"], x["advantages"], x["clip_eps"], what="the six rows as one batch",
                      cause=cause, conv=conv)
    check_clip_values(ctx, [math.log(0.5) - 1.0, math.log(1.5) - 2.0], [-1.0, -2.0], [2.0, 2.0], 0.2, what="A = 2, r = 0.5 and 1.5",
                      cause=cause, conv=conv)
    for eps in clip_eps_edges():
        check_clip_values(ctx, x["logp_new"], x["logp_old"], x["advantages"], eps, what=f"the six rows, edge clip_eps = {eps:g}",
                          cause=cause, conv=conv)
    ctx.property(draws.clip_batches(dtype=ctx.dtype), lambda b: check_clip_values(ctx, *b, what="drawn batch", cause=cause, conv=conv),
                 label="drawn", tier="autograd")


@check("PPO-CLIP-GRADIENT-TABLE")
def clip_gradient_table(ctx):
    """The clip gradient table: the six rows one sample at a time and as one batch, then drawn batches (subgradients at kinks)."""
    conv = clip_conventions(ctx)
    # The table's numbers hold literally unless a declared convention moves a row's region: an upper
    # bound 1 + eps_high >= 1.5, or a dual clip c <= 1.5.
    literal = (conv.clip_eps_high is None or conv.clip_eps_high < 0.5) and (conv.dual_clip is None or conv.dual_clip > 1.5)
    rows, eps = TABLE.inputs, TABLE.inputs["clip_eps"]
    for i, (A, r, expected) in enumerate(GRADIENT_TABLE):
        _, grad, call, x = check_clip_values(ctx, [rows["logp_new"][i]], [rows["logp_old"][i]], [A], eps, what=f"A = {A}, r = {r}", conv=conv)
        if literal:  # r A of the exact r: the candidate's r = exp(rounded log r) is within the gradient bound twice over
            tol = 2 * clip_gradient_tolerance(x["logp_new"], x["logp_old"], x["advantages"], call.unit_roundoff)
            assert_close(grad, [expected], tol, what=f"d loss / d logp_new at A = {A}, r = {r} (clip gradient table)", call=call.code)
    check_clip_values(ctx, [x - 0.25 for x in rows["logp_new"]], [x - 0.25 for x in rows["logp_old"]], rows["advantages"], eps,
                      what="the six rows as one batch",
                      conv=conv)
    for edge in clip_eps_edges():
        check_clip_values(ctx, rows["logp_new"], rows["logp_old"], rows["advantages"], edge, what=f"the six rows, edge clip_eps = {edge:g}",
                          conv=conv)
    ctx.property(draws.clip_batches(dtype=ctx.dtype), lambda b: check_clip_values(ctx, *b, what="drawn batch", conv=conv), label="drawn",
                 tier="autograd")


def _single_sample_bound(ctx, conv, logp_new, logp_old, A, clip_eps):
    """One sample: loss >= -r A (L_clip <= L_IS), equality strictly inside the clip range."""
    loss, _, call, x = call_clip_loss(ctx, [logp_new], [logp_old], [A], clip_eps)
    lpn, lpo, adv = x["logp_new"], x["logp_old"], x["advantages"]
    r = float(np.exp(lpn - lpo)[0])
    if conv.dual_clip is not None and adv[0] < 0 and r >= conv.dual_clip * (1 - 1e-6):
        return  # the declared dual clip lifts the objective above r A here, by design
    tol = clip_loss_tolerance(lpn, lpo, adv, clip_eps, conv, call.unit_roundoff)
    unclipped = -r * float(adv[0])
    if loss < unclipped - tol:
        raise ClauseFailure(
            f"loss {loss!r} is below the unclipped -r A = {unclipped!r} (r = {r:.6g}, A = {adv[0]:.6g}, "
            f"eps = {clip_eps}): the objective exceeds the importance-sampled surrogate (tol {tol:.3g})",
            call=call.code,
            cause="the clipped term is used without the min, or the max of the two terms is taken",
        )
    lo, hi = conv.bounds(clip_eps)
    rel = float(ratio_relative_error(lpn, lpo, call.unit_roundoff)[0])
    if lo * (1 + rel) < r < hi * (1 - rel):
        assert_close(loss, unclipped, tol, what="loss inside the clip range vs -r A", call=call.code)


@check("PPO-PESSIMISTIC-BOUND")
def pessimistic_bound(ctx):
    """Per sample, loss >= -r A: the four off-centre table points, then drawn single samples."""
    conv = clip_conventions(ctx)
    for A, r in [(2.0, 0.5), (-2.0, 1.5), (2.0, 1.5), (-2.0, 0.5), (3.0, 1.1), (-0.5, 0.95)]:
        _single_sample_bound(ctx, conv, math.log(r), 0.0, A, 0.2)
    for eps in clip_eps_edges():
        for A, r in [(2.0, 0.5), (-2.0, 1.5), (2.0, 1.0 + eps / 2), (-2.0, 2.5)]:
            _single_sample_bound(ctx, conv, math.log(r), 0.0, A, eps)

    ctx.property(draws.single_samples(dtype=ctx.dtype), lambda d: _single_sample_bound(ctx, conv, *d), label="drawn", tier="autograd")


@check("PPO-WRONG-WAY-GRADIENT-LIVE")
def wrong_way_gradient_live(ctx):
    """A > 0 with r < 1 - eps and A < 0 with r > 1 + eps (below a declared dual clip) have gradient -r A / B."""
    conv = clip_conventions(ctx)
    cap = conv.dual_clip if conv.dual_clip is not None else math.inf

    def verify(logp_new, logp_old, A, clip_eps):
        _, grad, call, x = check_clip_values(ctx, logp_new, logp_old, A, clip_eps, what="ratio moved against the advantage",
                                             conv=conv, cause="clipping without the min kills the gradient of ratios that moved the wrong way")
        r = np.exp(x["logp_new"] - x["logp_old"])
        dead = grad == 0
        if dead.any():
            i = int(np.flatnonzero(dead)[0])
            raise ClauseFailure(
                f"d loss / d logp_new is exactly 0 at r = {r[i]:.6g}, A = {x['advantages'][i]:.6g}, eps = {clip_eps}: "
                f"expected the live gradient {-r[i] * x['advantages'][i] / len(r):.6g}",
                call=call.code, cause="clipping without the min kills the gradient of ratios that moved the wrong way")

    _, hi = conv.bounds(0.2)
    high_r = [r for r in (1.5, 2.5) if hi < r < cap] or [(hi + min(cap, 2 * hi)) / 2]
    rows = [(2.0, 0.5), (2.0, 0.25)] + [(-2.0, r) for r in high_r]
    for A, r in rows:
        verify([math.log(r)], [0.0], [A], 0.2)
    verify([math.log(r) - 1.0 for _, r in rows], [-1.0] * len(rows), [A for A, _ in rows], 0.2)
    for eps in clip_eps_edges():  # eps = 1 leaves no ratio below 1 - eps: only A < 0 moves the wrong way there
        lo, hi = conv.bounds(eps)
        edge_rows = [(2.0, lo / 2)] * (lo > 0) + [(-2.0, r) for r in (1.5 * hi, 2.5 * hi) if r < cap]
        if edge_rows:
            verify([math.log(r) for _, r in edge_rows], [0.0] * len(edge_rows), [A for A, _ in edge_rows], eps)

    ctx.property(draws.wrong_way_batches(dtype=ctx.dtype, clip_range=conv), lambda d: verify(*d), label="drawn", tier="autograd")


@check("PPO-CLIP-BOUNDARY")
def clip_boundary(ctx):
    """At r = 1 - eps and r = 1 + eps_high exactly: the loss is continuous and the gradient a subgradient."""
    conv = clip_conventions(ctx)

    def verify(A, clip_eps, logp_old=0.0):
        lo, hi = conv.bounds(clip_eps)
        for r in (lo, hi) if lo > 0 else (hi,):  # clip_eps = 1: the lower boundary is r = 0, log r = -inf
            check_clip_values(ctx, [logp_old + math.log(r)], [logp_old], [A], clip_eps, what=f"at r = {r:.6g} (A = {A})", conv=conv,
                              cause="the clip range is not [1 - eps, 1 + eps]")

    for A in (2.0, -2.0):
        verify(A, 0.2)
        for eps in clip_eps_edges():
            verify(A, eps)
    check_clip_values(ctx, [math.log(0.8), math.log(1.2), math.log(0.8), math.log(1.2)], [0.0] * 4, [2.0, 2.0, -2.0, -2.0], 0.2,
                      what="all four boundary points as one batch", conv=conv, cause="the clip range is not [1 - eps, 1 + eps]")
    ctx.property(draws.boundary_cases(), lambda d: verify(*d), label="drawn",
                 tier="autograd")


@check("PPO-DUAL-CLIP")
def dual_clip(ctx):
    """Undeclared: A = -2, r = 10 keeps the gradient +20. Declared c: A < 0, r > c is the constant -c A, zero gradient."""
    conv = clip_conventions(ctx)
    c = conv.dual_clip
    cause = ("the declared dual clip is not applied (a renamed setting swallowed?)" if c is not None
             else "a dual clip the candidate does not declare: large ratios with A < 0 lose their gradient")
    _, hi = conv.bounds(0.2)
    if c is None:
        rows = [(-2.0, 10.0), (-2.0, 4.0), (-1.0, 100.0), (2.0, 0.5)]
    else:
        rows = [(-2.0, 2 * c), (-2.0, 10 * c), (-2.0, (hi + c) / 2), (2.0, 2 * c), (2.0, 0.5)]
    for A, r in rows:
        check_clip_values(ctx, [math.log(r)], [0.0], [A], 0.2, what=f"A = {A}, r = {r:.6g}", conv=conv, cause=cause)
    check_clip_values(ctx, [math.log(r) - 3.0 for _, r in rows], [-3.0] * len(rows), [A for A, _ in rows], 0.2, what="all rows as one batch",
                      conv=conv, cause=cause)
    for eps in clip_eps_edges():
        check_clip_values(ctx, [math.log(r) for _, r in rows], [0.0] * len(rows), [A for A, _ in rows], eps,
                          what=f"all rows, edge clip_eps = {eps:g}", conv=conv, cause=cause)
    batches = draws.clip_batches(dtype=ctx.dtype, log_ratio=normal_floats(0.0, 6.0), advantage=normal_floats(-100.0, 0.0))
    ctx.property(batches, lambda b: check_clip_values(ctx, *b, what="drawn batch, A <= 0", conv=conv, cause=cause), label="drawn",
                 tier="autograd")


# ---------------------------------------------------------------------------------------------
# ppo_value_loss
#
# tolerances: each squared error (V - R)^2 is within 4 u (|V| + |R|)^2 of exact (a subtraction, a
# square); the clipped branch adds the clip's subtraction and addition: 6 u (|V| + |V_old| + eps +
# |R|)^2. The mean adds (B - 1) u sum and one division, the factor k one rounding. Gradients
# 2 k (V - R) / B carry the same relative errors. Everything doubled for the float64 oracle.


def value_magnitude(values, returns, old_values=None, clip_eps=None):
    m = np.abs(values) + np.abs(returns)
    if old_values is not None:
        m = m + np.abs(old_values) + clip_eps
    return m


def value_expected(values, returns, old_values, clip_eps, k, u):
    """(loss, lo, hi): k mean(max((V - R)^2, (V_clip - R)^2)) and bounds on its derivative per sample.

    Where the candidate's rounding could flip a branch (the two squared errors within rounding of
    each other, or |V - V_old| within rounding of eps) every branch's derivative is a subgradient,
    so the bounds span them; elsewhere lo = hi.
    """
    B = len(values)
    plain = (values - returns) ** 2
    if old_values is None:
        g = 2 * k * (values - returns) / B
        return k * float(np.mean(plain)), g, g
    move = values - old_values
    clipped_values = old_values + np.clip(move, -clip_eps, clip_eps)
    clipped = (clipped_values - returns) ** 2
    loss = k * float(np.mean(np.maximum(plain, clipped)))
    m = value_magnitude(values, returns, old_values, clip_eps)
    near_tie = np.abs(plain - clipped) <= 16 * u * m**2
    near_kink = np.abs(np.abs(move) - clip_eps) <= 8 * u * m
    d_plain = 2 * (values - returns)
    d_clipped_inside = 2 * (clipped_values - returns)
    d_clipped = np.where(np.abs(move) < clip_eps, d_clipped_inside, 0.0)
    options = [np.where(plain > clipped, d_plain, d_clipped)]
    options.append(np.where(near_tie, d_plain, options[0]))
    options.append(np.where(near_tie | (clipped >= plain), np.where(near_kink, d_clipped_inside, d_clipped), options[0]))
    options.append(np.where(near_tie | (clipped >= plain), np.where(near_kink, 0.0, d_clipped), options[0]))
    return loss, k * np.minimum.reduce(options) / B, k * np.maximum.reduce(options) / B


def check_value_loss(ctx, values, returns, old_values=None, clip_eps=None, *, what, cause=""):
    conv = conventions(ctx)
    k = conv.value_loss_factor
    args = {"values": rounded(values, ctx.dtype), "returns": rounded(returns, ctx.dtype)}
    if old_values is not None:
        args["old_values"] = rounded(old_values, ctx.dtype)
        args["clip_eps"] = float(clip_eps)
    call = ctx.call("ppo_value_loss", args, array="torch", requires_grad=("values",), shape=())
    loss, grad = float(call.outputs[0]), leaf_gradient(call, "values", len(args["values"]))
    V, R, Vo = args["values"], args["returns"], args.get("old_values")
    u, B = call.unit_roundoff, len(V)
    expected, low, high = value_expected(V, R, Vo, clip_eps, k, u)
    m = value_magnitude(V, R, Vo, clip_eps)
    eta = smallest_normal(u)  # underflow: each operation may also lose eta absolutely
    assert_close(loss, expected, 2 * k * u * (B + 8) * float(np.mean(m**2)) + 16 * eta + TINY,
                 what=f"{what}: value loss (value_loss_factor {k})", call=call.code, cause=cause)
    assert_close(grad, np.clip(grad, low, high), 2 * k * u * 10 * m / B + 16 * eta + TINY,
                 what=f"{what}: d value loss / d values", call=call.code, cause=cause)


@check("PPO-VALUE-LOSS")
def value_loss(ctx):
    """k mean (V - R)^2 and its gradient 2 k (V - R) / B, k the declared value_loss_factor."""
    cause = "an undeclared 0.5 factor, or values of shape (B, 1) broadcast against returns (B,)"
    x = VALUE.inputs
    check_value_loss(ctx, x["values"], x["returns"], what=f"V = {x['values'][0]:g}, R = {x['returns'][0]:g}", cause=cause)
    check_value_loss(ctx, [1.0, 1.0], [2.0, 0.5], what="V = [1, 1], R = [2, 0.5]", cause=cause)
    check_value_loss(ctx, [0.0, 0.0, 0.0], [1.0, 2.0, 3.0], what="V = 0, R = [1, 2, 3]", cause=cause)

    ctx.property(draws.value_batches(), lambda d: check_value_loss(ctx, d[:, 0], d[:, 1], what="drawn", cause=cause), label="drawn",
                 tier="autograd")


@check("PPO-VALUE-LOSS-CLIPPED")
def value_loss_clipped(ctx):
    """The max of the unclipped and clipped squared errors (bugs C9, C10)."""
    cause = "clipped against the current values, min instead of max, the clipped error alone, or the squared error clamped"
    labels = ["C9: stored V_old = {o:g}, V = {v:g}, R = {r:g}, eps {e:g} ({loss:g}, gradient {g:g})",
              "C10: V = V_old = {v:g}, R = {r:g}, eps {e:g} (gradient {g:g})",
              "V_old = {o:g}, V = {v:g}, R = {r:g}, eps {e:g} ({loss:g}, gradient {g:g})"]
    for answer, label in zip(VALUE_CLIPPED, labels):
        x = answer.inputs
        what = label.format(o=x["old_values"][0], v=x["values"][0], r=x["returns"][0], e=x["clip_eps"], loss=answer.outputs["loss"],
                            g=answer.derived["d loss / d values"][0])
        check_value_loss(ctx, x["values"], x["returns"], x["old_values"], x["clip_eps"], what=what, cause=cause)
    check_value_loss(ctx, [1.0, 0.0, 1.0, 0.5], [2.0, 20.0, 0.5, 0.6], [0.0, 0.0, 0.0, 0.45], 0.2,
                     what="V_old = [0, 0, 0, 0.45], V = [1, 0, 1, 0.5], R = [2, 20, 0.5, 0.6], eps 0.2", cause=cause)
    base = {"values": [1.0, 0.0, 1.0, 0.5], "returns": [2.0, 20.0, 0.5, 0.6], "old_values": [0.0, 0.0, 0.0, 0.45], "clip_eps": 0.2}
    for args, label in edges.cases("ppo_value_loss", base, "clip_eps", "old_values"):
        if (args["old_values"] is None) != (args["clip_eps"] is None):  # the clip takes both optional arguments or neither
            args = {**args, "old_values": None, "clip_eps": None}
        check_value_loss(ctx, args["values"], args["returns"], args["old_values"], args["clip_eps"], what=label, cause=cause)

    ctx.property(draws.clipped_value_batches(),
                 lambda d: check_value_loss(ctx, d[0][:, 0], d[0][:, 1], d[0][:, 0] + d[0][:, 2], d[1], what="drawn", cause=cause),
                 label="drawn", tier="autograd")


# ---------------------------------------------------------------------------------------------
# normalize_advantages


def normalised(A, conv: Conventions):
    """The declared normalisation of ``A`` (float64)."""
    n = len(A)
    centred = A - A.mean()
    variance = float(np.sum(centred**2)) / max(n - conv.advantage_std_ddof, 1)
    eps = conv.advantage_eps
    if conv.advantage_eps_form == "var":
        scale = math.sqrt(variance + eps)
    elif conv.advantage_eps_form == "clamp":
        scale = max(math.sqrt(variance), eps)
    else:
        scale = math.sqrt(variance) + eps
    return centred / scale, scale


def normalisation_tolerance(A, conv: Conventions, u):
    """Per-element bound on |computed - exact| for (A - mean) / scale.

    With M = max |A|, n elements and s the exact scale:
      mean: |d mean| <= n u M (any summation order), so each centred value c_i = A_i - mean is off
            by e_c <= (n + 2) u M (the mean's error, the subtraction's rounding);
      variance sum c^2: relative error <= 2 e_c / |c|... bounded absolutely by
            sum (2 |c_i| e_c + e_c^2) + n u sum c_i^2, so the std (a square root halves relative
            errors) is off by <= d_s = (sum (2 |c_i| e_c + e_c^2) / (2 s'^2) + (n + 2) u) s'
            with s' = the exact std (0 if all equal);
      the result c_i / s: <= e_c / s + |c_i / s| (d_s / s + 2 u).
    Doubled for the float64 oracle and first order in u.
    """
    n = len(A)
    M = float(np.max(np.abs(A))) if n else 0.0
    out, scale = normalised(A, conv)
    centred = A - A.mean()
    e_c = (n + 2) * u * M + 4 * smallest_normal(u)  # underflow loses up to eta per operation
    std = math.sqrt(float(np.sum(centred**2)) / max(n - conv.advantage_std_ddof, 1))
    if std > 0:
        d_std = (float(np.sum(2 * np.abs(centred) * e_c + e_c**2)) / (2 * std**2 * max(n - conv.advantage_std_ddof, 1)) + (n + 2) * u) * std
    else:
        d_std = math.sqrt(n * e_c**2)
    d_scale = d_std if conv.advantage_eps_form != "var" else d_std * std / scale if scale > 0 else d_std
    return 2 * (e_c / scale + np.abs(out) * (d_scale / scale + 2 * u)) + TINY


def check_normalisation(ctx, advantages, what):
    conv = conventions(ctx)
    A = rounded(advantages, ctx.dtype)
    call = ctx.call("normalize_advantages", {"advantages": A}, shape=A.shape)
    (out,) = call.outputs
    expected, _ = normalised(A, conv)
    ddof = conv.advantage_std_ddof

    def diagnose(actual):
        other = conv.but(advantage_std_ddof=1 - ddof)
        wrong, _ = normalised(A, other)
        tol = normalisation_tolerance(A, other, call.unit_roundoff)
        if np.all(np.abs(actual - wrong) <= tol):
            return f"the result matches ddof = {1 - ddof}, but the candidate declares advantage_std_ddof = {ddof}"
        if abs(float(np.mean(actual)) - float(np.mean(A))) < 1e-6 * (1 + abs(float(np.mean(A)))) and abs(float(np.mean(A))) > 1e-6:
            return "the mean of the result equals the input's mean: the mean is added back (or never subtracted)"
        return ""

    assert_close(out, expected, normalisation_tolerance(A, conv, call.unit_roundoff),
                 what=f"{what}: (A - mean) / std (ddof {ddof}, eps {conv.advantage_eps} as {conv.advantage_eps_form!r})",
                 call=call.code, diagnose=diagnose)


@check("PPO-ADVANTAGE-NORMALISATION")
def advantage_normalisation(ctx):
    """The declared ddof / eps form exactly; [1, 2, 3, 4] and [10, -10], then drawn batches."""
    A = NORMALISATION.inputs["advantages"]
    check_normalisation(ctx, A, f"[{', '.join(f'{a:g}' for a in A)}]")
    check_normalisation(ctx, [10.0, -10.0], "[10, -10]")
    check_normalisation(ctx, [1.0, 3.0], "[1, 3]")  # bug G15a: the mean added back gives [1.293, 2.707]
    ctx.property(draws.advantage_batches(), lambda a: check_normalisation(ctx, a, "drawn"), label="drawn", tier="autograd")


@check("PPO-ADVANTAGE-NORMALISATION-DEGENERATE")
def advantage_normalisation_degenerate(ctx):
    """One element and constant advantages come back finite; constant ones all equal."""

    def verify(advantages):
        A = rounded(advantages, ctx.dtype)
        call = ctx.call("normalize_advantages", {"advantages": A}, shape=A.shape, allow_nonfinite=True)
        (out,) = call.outputs
        if not np.all(np.isfinite(out)):
            raise ClauseFailure(
                f"normalize_advantages returned {out.tolist()} for {len(A)} equal advantage(s) {float(A[0])!r}",
                call=call.code,
                cause="the unbiased std of one element is 0/0 = NaN (skip normalisation or guard it), or the std "
                "is divided by without an epsilon",
            )
        # Equal inputs give equal outputs, each within one ulp (2 u |x|, or eta below the normals) of the same value: an
        # exact ptp of 0 would reject an answer one ulp off (tests/test_bounds.py).
        if np.ptp(out) > 4 * call.unit_roundoff * float(np.max(np.abs(out))) + 2 * tiny(call.unit_roundoff):
            raise ClauseFailure(f"constant advantages came back unequal: {out.tolist()}", call=call.code,
                                cause="the normalisation is not the same function of every element")

    for case in ([3.0], [5.0, 5.0, 5.0], [0.1, 0.1, 0.1], [-2.5, -2.5], [1e6] * 4, [0.0, 0.0]):
        verify(case)
    ctx.property(draws.constant_advantages(), verify, label="drawn", tier="autograd")


# ---------------------------------------------------------------------------------------------
# ppo_entropy_loss


@check("PPO-ENTROPY-BONUS-SIGN")
def entropy_bonus_sign(ctx):
    """-coef mean(H): value and gradient -coef / B (negative: descending the loss raises the entropy)."""

    def verify(entropy, coef):
        H = rounded(entropy, ctx.dtype)
        call = ctx.call("ppo_entropy_loss", {"entropy": H, "coef": float(coef)}, array="torch", requires_grad=("entropy",), shape=())
        loss, grad = float(call.outputs[0]), leaf_gradient(call, "entropy", len(H))
        u, B = call.unit_roundoff, len(H)
        cause = "the entropy enters the minimised loss with a plus sign: training lowers the entropy"
        # mean: (B - 1) u sum |H| + a division, the coefficient one product: doubled for the oracle
        eta = smallest_normal(u)  # a coefficient or entropy below eta may flush to zero
        assert_close(loss, -coef * float(np.mean(H)), 2 * u * (B + 3) * coef * float(np.mean(np.abs(H))) + 8 * eta + TINY,
                     what="entropy loss vs -coef mean(H)", call=call.code, cause=cause)
        assert_close(grad, np.full(B, -coef / B), 8 * u * coef / B + 8 * eta + TINY, what="d entropy loss / d entropy vs -coef / B",
                     call=call.code, cause=cause)

    verify(ENTROPY.inputs["entropy"], ENTROPY.inputs["coef"])  # bug C11: log pi(a) = -1, estimate H = 1
    verify([0.5, 1.5, 2.0], 0.01)
    verify([-0.3, 1.2], 0.5)  # a Gaussian's differential entropy can be negative
    ctx.property(draws.entropy_batches(), lambda d: verify(*d), label="drawn",
                 tier="autograd")


# ---------------------------------------------------------------------------------------------
# ppo_update: the suite's policy, optimizer and batch


class RecordingSGD:
    """Plain SGD, p <- p - lr grad, that records at every ``step()`` the gradients it was given and
    the parameters it produced.

    It has the parts of ``torch.optim.Optimizer`` an update loop uses (``param_groups``,
    ``zero_grad``, ``step``) without being one: the first ``torch.optim`` optimizer built in a
    process imports TorchDynamo, about 4 s here, more than this whole chapter's checks.
    """

    def __init__(self, named_params, lr):
        named = list(named_params)
        self.names = [name for name, _ in named]
        self.param_groups = [{"params": [p for _, p in named], "lr": float(lr)}]
        self.state: dict = {}
        self.grads: list[dict[str, np.ndarray]] = []
        self.snapshots: list[dict[str, np.ndarray]] = [self._record(p for p in self.param_groups[0]["params"])]

    def _record(self, tensors):
        return {name: (None if t is None else t.detach().cpu().double().numpy().copy()) for name, t in zip(self.names, tensors)}

    def zero_grad(self, set_to_none: bool = True):
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self.param_groups[0]["params"]
        self.grads.append(self._record(p.grad for p in params))
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.param_groups[0]["lr"])
        self.snapshots.append(self._record(params))
        return loss

    @property
    def steps(self) -> int:
        return len(self.grads)


ACTION_DIM = {"categorical": 3, "gaussian": 2}


@dataclass(frozen=True)
class UpdateCase:
    """A reproducible ppo_update input: ``n`` one-hot states, one sample in each, drawn from ``seed``.

    ``offset`` d: the stored logp_old is log pi(a|s) - d (a stale behaviour policy); empty means the
    policy's own log-probabilities, as a collector stores them. ``positive`` draws advantages > 0.
    """

    kind: str = "categorical"
    n: int = 8
    seed: int = 0
    lr: float = 0.5
    offset: tuple = ()
    positive: bool = False

    def build(self, dtype):
        """(policy, optimizer, batch tensors) in ``dtype``, as the candidate receives them."""
        tdtype = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
        g = torch.Generator().manual_seed(self.seed)
        policy = ref.LinearActorCritic(self.n, ACTION_DIM[self.kind], self.kind)
        with torch.no_grad():
            policy.actor.weight.copy_(torch.randn(policy.actor.weight.shape, generator=g, dtype=torch.float64))
            policy.critic.weight.copy_(torch.randn(policy.critic.weight.shape, generator=g, dtype=torch.float64))
            if self.kind == "gaussian":
                policy.log_std.copy_(torch.rand(ACTION_DIM[self.kind], generator=g, dtype=torch.float64) - 0.5)
        policy = policy.to(tdtype)
        obs = torch.eye(self.n, dtype=tdtype)
        with torch.no_grad():
            dist, values = policy(obs)
            if self.kind == "categorical":
                actions = torch.multinomial(dist.probs.double(), 1, generator=g).squeeze(-1)
            else:
                actions = (dist.mean.double() + dist.stddev.double() * torch.randn(dist.mean.shape, generator=g, dtype=torch.float64)).to(tdtype)
            _, logp, _ = policy.evaluate_actions(obs, actions)
            offset = torch.tensor(self.offset or [0.0] * self.n, dtype=torch.float64)
            advantages = 2 * torch.randn(self.n, generator=g, dtype=torch.float64)
            if self.positive:
                advantages = advantages.abs() + 0.2
            returns = values.double() + torch.randn(self.n, generator=g, dtype=torch.float64)
        batch = {
            "obs": obs,
            "actions": actions,
            "logp_old": (logp.double() - offset).to(tdtype),
            "advantages": advantages.to(tdtype),
            "returns": returns.to(tdtype),
            "values_old": values.detach().clone(),
        }
        return policy, RecordingSGD(policy.named_parameters(), self.lr), batch

    def arguments(self, dtype="float64", config=None) -> dict[str, Any]:
        """Keyword arguments for ``ppo_update`` (a fresh policy and optimizer each time)."""
        policy, optimizer, batch = self.build(np.dtype(dtype))
        return {"policy": policy, "optimizer": optimizer, **batch, "config": dict(config or {})}


BASE_CONFIG = {"clip_eps": 0.2, "epochs": 1, "minibatch_size": 8, "vf_coef": 0.5, "ent_coef": 0.0,
               "max_grad_norm": 1e6, "target_kl": None, "normalize_advantages": True, "seed": 0}


@dataclass
class UpdateRun:
    """One ppo_update call: its inputs (float64 copies), the optimizer's record and the diagnostics."""

    case: UpdateCase
    config: dict
    optimizer: RecordingSGD
    batch: dict  # float64 numpy copies of what the candidate received
    ratios: np.ndarray
    indices: np.ndarray
    approx_kl: np.ndarray
    epochs: int
    code: str
    u: float

    def terms(self, step: int, indices=None):
        """(logp, magnitude) of the suite's module at the parameters after ``step`` optimizer steps."""
        states = np.arange(self.case.n) if indices is None else np.asarray(indices)
        return module_terms(self.case.kind, self.optimizer.snapshots[step], self.batch["actions"][states], states)


def module_terms(kind, params, actions, states):
    """Log-probability of ``actions`` in one-hot ``states`` under ``LinearActorCritic`` parameters, in
    float64 closed form, and per sample a bound on the magnitudes it is computed from (|logits| and
    the log-sum-exp for a categorical; sum_d z_d^2 / 2 + |log sigma_d| + 1 for a Gaussian)."""
    W = params["actor.weight"][:, states].T  # (B, K) logits or (B, D) means
    if kind == "categorical":
        top = W.max(1)
        lse = top + np.log(np.exp(W - top[:, None]).sum(1))
        logp = W[np.arange(len(states)), actions.astype(np.int64)] - lse
        return logp, np.abs(W).max(1) + np.abs(lse) + 2
    log_std = params["log_std"]
    z = (actions - W) / np.exp(log_std)
    logp = np.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), axis=1)
    return logp, np.sum(z**2 / 2 + np.abs(log_std) + 1, axis=1)


def _as_array(value, name, *, integer=False) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.double().numpy() if value.is_floating_point() else value.numpy()
    try:
        array = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        raise CandidateError(f"ppo_update's {name} is {describe(value)}; expected a 1-D array of numbers") from None
    if array.ndim != 1:
        raise CandidateError(f"ppo_update's {name} has shape {array.shape}; expected 1-D")
    if integer and not np.all(array == np.round(array)):
        raise CandidateError(f"ppo_update's {name} holds non-integers: {array.tolist()[:6]}")
    return array


def call_update(ctx, case: UpdateCase, config: dict) -> UpdateRun:
    """Run the candidate's ppo_update on ``case``; unusable behaviour raises CandidateError."""
    config = {**BASE_CONFIG, **config}
    policy, optimizer, batch = case.build(ctx.dtype)
    before = {k: v.clone() for k, v in batch.items()}
    shown = ", ".join(f"{k}={v!r}" for k, v in vars(case).items() if v != getattr(UpdateCase, k))
    code = (f"ppo_update(**UpdateCase({shown}).arguments({np.dtype(ctx.dtype).name!r}, config={config!r})) "
            f"with UpdateCase from rlspec.checks.clauses.ppo")
    rng, grad_mode, default_dtype = torch.get_rng_state(), torch.is_grad_enabled(), torch.get_default_dtype()
    with warnings.catch_warnings(), captured_output(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            result = ctx.candidate.operations["ppo_update"](policy=policy, optimizer=optimizer, **batch, config=dict(config))
        except (KeyboardInterrupt, MemoryError):
            raise
        except BaseException as exc:  # a candidate cannot stop the suite
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CandidateError(f"ppo_update raised {type(exc).__name__}" + (f": {message}" if message else "")) from None
        finally:
            changed = torch.is_grad_enabled() != grad_mode or torch.get_default_dtype() != default_dtype
            torch.set_rng_state(rng)
            torch.set_grad_enabled(grad_mode)
            torch.set_default_dtype(default_dtype)
    if changed:
        raise CandidateError("ppo_update changed torch's grad mode or default dtype (restored)")
    for name, value in batch.items():
        if not torch.equal(value, before[name]):
            raise CandidateError(f"ppo_update mutated its input `{name}` in place")
    if not isinstance(result, dict):
        raise CandidateError(f"ppo_update returned {describe(result)}; expected a dict with ratios, indices, approx_kl, epochs")
    missing = [k for k in ("ratios", "indices", "approx_kl", "epochs") if k not in result]
    if missing:
        raise CandidateError(f"ppo_update's diagnostics lack {', '.join(missing)}")
    ratios = _as_array(result["ratios"], "ratios")
    indices = _as_array(result["indices"], "indices", integer=True).astype(np.int64)
    approx_kl = _as_array(result["approx_kl"], "approx_kl") if np.size(result["approx_kl"]) else np.zeros(0)
    if len(ratios) != len(indices) or len(ratios) == 0:
        raise CandidateError(f"ppo_update returned {len(ratios)} ratios and {len(indices)} indices; expected the same number > 0")
    if len(set(indices.tolist())) != len(indices) or indices.min() < 0 or indices.max() >= case.n:
        raise CandidateError(f"ppo_update's indices {indices.tolist()} are not distinct positions in a batch of {case.n}")
    if optimizer.steps == 0:
        raise CandidateError("ppo_update took no step with the optimizer it was given")
    try:
        epochs = int(result["epochs"])
    except (TypeError, ValueError):
        raise CandidateError(f"ppo_update's epochs is {describe(result['epochs'])}; expected an int") from None
    declared = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}.get(ctx.candidate.precision or "", 0.0)
    u = max(float(np.finfo(ctx.dtype).eps) / 2, declared)  # the precision the candidate computes in
    batch64 = {k: v.detach().cpu().double().numpy() if v.is_floating_point() else v.numpy() for k, v in batch.items()}
    return UpdateRun(case, config, optimizer, batch64, ratios, indices, approx_kl, epochs, code, u)


# ---------------------------------------------------------------------------------------------
# ppo_update checks


def check_first_ratios(run: UpdateRun, *, what: str, cause: str):
    """The reported first-minibatch ratios equal exp(log pi_theta0 - stored logp_old) at their indices.

    The candidate's log pi is computed by the same module (bit-identical per row) or by its own
    formula from the same parameters: within 8 u of the magnitudes it is computed from; the
    stored value is exact; the subtraction and exp add 4 u relative.
    """
    logp, magnitude = run.terms(0, run.indices)
    stored = run.batch["logp_old"][run.indices]
    expected = np.exp(logp - stored)
    tol = expected * (8 * run.u * (magnitude + np.abs(stored)) + 4 * run.u) + TINY
    assert_close(run.ratios, expected, tol, what=what, call=run.code, cause=cause)


@check("PPO-UPDATE-FIRST-RATIOS-ONE")
def update_first_ratios_one(ctx):
    """logp_old = the policy's own log-probabilities: the first minibatch's ratios are 1 (categorical and Gaussian)."""
    cause = ("the learner's log pi differs from the stored one: minibatch rows misaligned with logp_old, or the "
             "Gaussian log-prob averaged instead of summed over action dimensions")

    def verify(case, minibatch_size, seed):
        run = call_update(ctx, case, {"minibatch_size": minibatch_size, "seed": seed})
        check_first_ratios(run, what="first-minibatch ratios with logp_old stored at collection (expected 1)", cause=cause)

    verify(UpdateCase("categorical", n=8, seed=1), 4, 0)
    verify(UpdateCase("gaussian", n=8, seed=2), 3, 1)
    ctx.property(draws.first_ratio_cases(), lambda d: verify(UpdateCase(d[0], n=d[1], seed=d[2]), max(1, d[1] // 2), d[3]), label="drawn",
                 tier="enumeration")


OFFSETS = draws.OFFSETS  # d_i: distinct, never 0


@check("PPO-UPDATE-STORED-LOGP-OLD")
def update_stored_logp_old(ctx):
    """logp_old = log pi - d: the first ratios must be exp(d) per sample; 1 means log pi_old was recomputed."""

    def verify(case, minibatch_size, seed):
        run = call_update(ctx, case, {"minibatch_size": minibatch_size, "seed": seed})
        ones = np.all(np.abs(run.ratios - 1) <= 1e-6)
        check_first_ratios(run, what="first-minibatch ratios with stored logp_old = log pi - d (expected exp(d))",
                           cause="log pi_old is recomputed from the current network (per minibatch or at the start of the "
                           "update): the ratio is 1 and the clip never acts" if ones
                           else "the ratios are not taken against the stored logp_old of the same samples")

    verify(UpdateCase("categorical", n=8, seed=3, offset=OFFSETS), 4, 0)
    verify(UpdateCase("gaussian", n=8, seed=4, offset=OFFSETS), 8, 1)
    ctx.property(draws.stale_cases(), lambda d: verify(UpdateCase(d[0], n=len(d[1]), seed=d[2], offset=tuple(d[1])), max(1, len(d[1]) // 2), d[2]),
                 label="drawn", tier="enumeration")


def k3(x):
    return np.expm1(x) - x


def kl_and_tolerance(run: UpdateRun, step: int) -> tuple[float, float]:
    """Exact k3 = mean(expm1(x) - x), x = log pi_theta_step - logp_old over the batch, and a bound on
    a candidate's value of it. x_i is off by e_i <= 8 u (magnitude_i + |logp_old_i|) (the
    candidate's own evaluation in its precision), so each term by <= |expm1(x_i)| e_i + 4 u
    (|expm1(x_i)| + |x_i|); the mean adds n u times the mean term. Doubled for the oracle."""
    logp, magnitude = run.terms(step)
    stored = run.batch["logp_old"]
    x = logp - stored
    e = 8 * run.u * (magnitude + np.abs(stored))
    terms = np.abs(np.expm1(x)) * e + 4 * run.u * (np.abs(np.expm1(x)) + np.abs(x))
    return float(np.mean(k3(x))), 2 * float(np.mean(terms) + len(x) * run.u * np.mean(k3(x))) + TINY


KL_EPOCHS = 8
KL_LR = {"categorical": 0.5, "gaussian": 0.02}  # KL grows about quadratically over the 8 steps


def check_kl_stop(ctx, case: UpdateCase, seed: int, step_at: int = 2):
    """One minibatch per epoch, so the 'last minibatch' and 'epoch mean' statistics coincide.

    A free run (target_kl None) gives the candidate's own parameter path theta_0..theta_E and the
    exact KL_k at each. A threshold between KL_j and KL_{j+1} (j = ``step_at``, or the next j with a
    clear gap) must then stop the update at the step the declared rule implies: after epoch j + 1
    ("epoch": j + 2 steps) or before step j + 1 ("minibatch": j + 1 steps).
    """
    conv = conventions(ctx)
    # clip_eps 10: with positive advantages every ratio grows, and a clip at 1.2 would freeze the
    # policy (and its KL) after a step or two; the stop rule does not depend on the clip.
    config = {"epochs": KL_EPOCHS, "minibatch_size": case.n, "normalize_advantages": False, "seed": seed, "clip_eps": 10.0}
    free = call_update(ctx, case, {**config, "target_kl": None})
    if free.optimizer.steps != KL_EPOCHS:
        raise ClauseFailure(
            f"with target_kl None and {KL_EPOCHS} epochs of one minibatch, ppo_update took {free.optimizer.steps} optimizer steps; "
            f"expected {KL_EPOCHS}", call=free.code, cause="the update stops early without a KL target, or steps more than once per minibatch")
    kl = np.array([kl_and_tolerance(free, k)[0] for k in range(KL_EPOCHS + 1)])
    gaps = [j for j in range(step_at, KL_EPOCHS - 1) if kl[j + 1] > 1.5 * max(kl[: j + 1]) and kl[j + 1] > 1e-6]
    if not gaps:
        if kl[-1] <= 1e-12:
            raise ClauseFailure(f"{KL_EPOCHS} steps did not move the policy: exact KL(old || new) after them is {kl[-1]:.3g}",
                                call=free.code, cause="the update does not change the policy")
        return  # a drawn case whose KL does not grow clearly enough to place a threshold
    j = gaps[0]
    threshold = math.sqrt(max(kl[: j + 1]) * kl[j + 1])  # the rule compares KL with factor * target_kl
    target = threshold / conv.kl_stop_factor if conv.kl_stop_factor > 0 else threshold
    run = call_update(ctx, case, {**config, "target_kl": target})
    expected_steps = j + 2 if conv.kl_stop == "epoch" else j + 1
    where = "after the epoch whose KL exceeds it" if conv.kl_stop == "epoch" else "before the step whose KL exceeds it"
    if run.optimizer.steps != expected_steps:
        path = ", ".join(f"{v:.4g}" for v in kl[: j + 3])
        reported = ", ".join(f"{v:.4g}" for v in run.approx_kl[:8])
        k1_like = len(run.approx_kl) > 0 and bool(np.all(run.approx_kl <= 0))
        raise ClauseFailure(
            f"with target_kl = {target:.4g} (x factor {conv.kl_stop_factor}) ppo_update took {run.optimizer.steps} optimizer "
            f"steps; expected {expected_steps}: it must stop {where} (kl_stop {conv.kl_stop!r}). Exact k3 KL(old || new) "
            f"before steps 0, 1, ...: {path}; the candidate reported approx_kl {reported or 'nothing'}",
            call=run.code,
            cause="approx_kl is k1 = mean(-log r), which is <= 0 when the sampled actions gained probability" if k1_like
            else "target_kl is not read, or the KL is compared at another time than the declared kl_stop",
        )
    if len(run.approx_kl) != j + 2:
        raise ClauseFailure(f"ppo_update reported {len(run.approx_kl)} approx_kl values; its stop rule made {j + 2} comparisons "
                            f"(one per check up to and including the one that stopped it)", call=run.code,
                            cause="approx_kl must list every value the stop rule compared with target_kl")
    exact, tol = zip(*(kl_and_tolerance(run, k) for k in range(j + 2)))
    assert_close(run.approx_kl, exact, tol, what="reported approx_kl vs k3 = mean(r - 1 - log r) before each check",
                 call=run.code, cause="approx_kl is not the k3 estimate of KL(old || new), measured before the step",
                 diagnose=lambda a: "the values are <= 0: they look like k1 = mean(-log r)" if np.all(a <= 0) else "")
    if run.epochs != expected_steps:
        raise ClauseFailure(f"ppo_update reported epochs = {run.epochs}; it took a step in {expected_steps} epochs",
                            call=run.code, cause="epochs must count the epochs in which the update took a step")


@check("PPO-UPDATE-KL-EARLY-STOP")
def update_kl_early_stop(ctx):
    """Positive advantages (k1 goes negative while k3 grows): stop exactly where the declared rule says."""
    check_kl_stop(ctx, UpdateCase("categorical", n=6, seed=5, lr=KL_LR["categorical"], positive=True), seed=0)
    ctx.property(draws.kl_stop_cases(), lambda d: check_kl_stop(ctx, UpdateCase(d[0], n=d[1], seed=d[2], lr=KL_LR[d[0]], positive=True),
                                                seed=d[2], step_at=d[3]),
                 label="drawn", tier="kl-stop")


def contribution_magnitudes(run: UpdateRun, i: int) -> tuple[dict, dict, dict]:
    """For sample i (state i) at theta_0, per parameter: the magnitudes its score d log pi / d p, its
    entropy gradient and its value-loss gradient d (V - R)^2 / d p are computed from (absolute
    values of the terms before any cancellation), in closed form for the suite's linear module."""
    params = run.optimizer.snapshots[0]
    score = {k: np.zeros_like(v) for k, v in params.items()}
    entropy = {k: np.zeros_like(v) for k, v in params.items()}
    value = {k: np.zeros_like(v) for k, v in params.items()}
    w = params["actor.weight"][:, i]
    action = run.batch["actions"][i]
    if run.case.kind == "categorical":
        pi = np.exp(w - w.max())
        pi /= pi.sum()
        taken = np.zeros_like(pi)
        taken[int(action)] = 1.0
        H = -float(np.sum(pi * np.log(pi)))
        score["actor.weight"][:, i] = taken + pi  # [k = a] - pi_k
        entropy["actor.weight"][:, i] = pi * (np.abs(np.log(pi)) + abs(H) + 1)  # -pi_k (log pi_k + H)
    else:
        log_std = params["log_std"]
        std = np.exp(log_std)
        z = (action - w) / std
        score["actor.weight"][:, i] = (np.abs(action) + np.abs(w)) / std**2  # (a - mu) / sigma^2
        score["log_std"] += z**2 + 1  # z^2 - 1
        entropy["log_std"] += 1.0  # d H / d log sigma = 1
    v = params["critic.weight"][0, i]
    value["critic.weight"][0, i] = 2 * (abs(v) + abs(run.batch["returns"][i]))  # 2 (V - R)
    return score, entropy, value


def expected_first_gradient(run: UpdateRun, conv: Conventions):
    """The gradient of the stated loss on the candidate's first minibatch at theta_0 (float64),
    scaled by the global-norm clip, and a per-parameter tolerance.

    Tolerance, first order in u (the candidate's precision). Each per-sample contribution to a
    parameter's gradient passes through at most 16 roundings (the log-density or softmax, the
    ratio, the product with the advantage, the coefficients, the 1/B), and summing the B samples
    of the minibatch adds B - 1 more, all relative to the magnitudes the terms are computed from:
    (B + 16) u M_p with M_p = sum_i (|A_i| r_i score_i + ent_coef entropy_i + vf_coef k value_i) / B
    (``contribution_magnitudes``). The normalised advantage is off by dA_i
    (``normalisation_tolerance``), which moves the policy term by dA_i score_i / B. The clip
    coefficient c / (||g|| + delta), delta in [0, 1e-6] (torch's clip_grad_norm_ adds 1e-6), moves
    by <= coefficient (delta + ||dg|| + P u ||g||) / ||g|| for P parameters.
    """
    cfg, idx = run.config, run.indices
    B = len(idx)
    A_all = run.batch["advantages"]
    adv_tol = np.zeros(B)
    if cfg["normalize_advantages"]:
        batch_scope = conv.advantage_normalization == "batch"
        scope = A_all if batch_scope else A_all[idx]
        normed, tol_scope = normalised(scope, conv)[0], normalisation_tolerance(scope, conv, run.u)
        A, adv_tol = (normed[idx], tol_scope[idx]) if batch_scope else (normed, tol_scope)
    else:
        A = A_all[idx]
    policy = ref.LinearActorCritic(run.case.n, ACTION_DIM[run.case.kind], run.case.kind).double()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            p.copy_(torch.from_numpy(run.optimizer.snapshots[0][name]))
    b = {k: torch.from_numpy(v[idx]) for k, v in run.batch.items()}
    values, logp, entropy = policy.evaluate_actions(b["obs"], b["actions"])
    ratio = torch.exp(logp - b["logp_old"])
    A_t = torch.from_numpy(np.asarray(A, dtype=np.float64))
    lo, hi = ClipRange(clip_eps_high=conv.clip_eps_high).bounds(cfg["clip_eps"])
    k = conv.value_loss_factor
    loss = (-torch.min(ratio * A_t, torch.clamp(ratio, lo, hi) * A_t).mean()
            + cfg["vf_coef"] * k * ((values - b["returns"]) ** 2).mean()
            - cfg["ent_coef"] * entropy.mean())
    names = [name for name, _ in policy.named_parameters()]
    grads = torch.autograd.grad(loss, [p for _, p in policy.named_parameters()], allow_unused=True)
    total = {n: (np.zeros(p.shape) if g is None else g.numpy()) for (n, p), g in zip(policy.named_parameters(), grads)}

    magnitude = {n: np.zeros_like(total[n]) for n in names}
    shift = {n: np.zeros_like(total[n]) for n in names}
    r = ratio.detach().numpy()
    for j, i in enumerate(idx.tolist()):
        score, ent, val = contribution_magnitudes(run, i)
        weight = abs(float(A[j])) * max(float(r[j]), 1.0)
        for n in names:
            magnitude[n] += (weight * score[n] + cfg["ent_coef"] * ent[n] + cfg["vf_coef"] * k * val[n]) / B
            shift[n] += float(adv_tol[j]) * score[n] / B
    norm = math.sqrt(sum(float(np.sum(g**2)) for g in total.values()))
    coef = min(1.0, float(cfg["max_grad_norm"]) / norm) if norm > 0 else 1.0
    elementwise = {n: (B + 16) * run.u * magnitude[n] + shift[n] for n in names}
    error_norm = math.sqrt(sum(float(np.sum(e**2)) for e in elementwise.values()))
    P = sum(g.size for g in total.values())
    coef_tol = coef * (1e-6 + error_norm + P * run.u * norm) / norm if coef < 1.0 else 0.0
    expected = {n: total[n] * coef for n in names}
    tolerance = {n: coef * elementwise[n] + coef_tol * np.abs(total[n]) + TINY for n in names}
    return expected, tolerance, norm


def check_first_step(ctx, case: UpdateCase, config: dict, *, what: str):
    conv = conventions(ctx)
    run = call_update(ctx, case, config)
    expected, tolerance, norm = expected_first_gradient(run, conv)
    recorded = run.optimizer.grads[0]
    names = list(expected)
    actual = np.concatenate([(np.zeros_like(expected[n]) if recorded[n] is None else recorded[n]).reshape(-1) for n in names])
    exp = np.concatenate([expected[n].reshape(-1) for n in names])
    tol = np.concatenate([tolerance[n].reshape(-1) for n in names])
    labels = [f"{n}{list(i)}" for n in names for i in np.ndindex(*expected[n].shape)]
    bad = np.abs(actual - exp) > tol
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        table = "\n".join(f"{labels[i]:>24}  expected {exp[i]: .10g}  actual {actual[i]: .10g}  tol {tol[i]:.3g}"
                          for i in np.flatnonzero(bad)[:6])
        max_norm = float(run.config["max_grad_norm"])
        elementwise_clip = norm > max_norm and np.abs(actual).max() <= max_norm * (1 + 1e-6) and np.linalg.norm(actual) > max_norm * (1 + 1e-3)
        raise ClauseFailure(
            f"{what}: first-step gradient of {labels[k]} expected {exp[k]:.10g}, got {actual[k]:.10g} (tol {tol[k]:.3g}; "
            f"{int(bad.sum())} of {bad.size} entries off; unclipped norm {norm:.6g}, max_grad_norm {max_norm:g}, "
            f"norm taken {np.linalg.norm(actual):.6g})",
            table=table, call=run.code,
            cause="gradients clamped elementwise (clip_grad_value_) or per parameter, not scaled by one global norm"
            if elementwise_clip else "",
        )


@check("PPO-UPDATE-FIRST-STEP-GRADIENT")
def update_first_step_gradient(ctx):
    """The first step's gradient: loss composition, normalisation scope (half-batch minibatches) and global-norm clip."""
    common = {"vf_coef": 0.5, "ent_coef": 0.05, "epochs": 1}
    check_first_step(ctx, UpdateCase("categorical", n=8, seed=11), {**common, "minibatch_size": 4, "seed": 0},
                     what="categorical, minibatch 4 of 8, no clipping")
    check_first_step(ctx, UpdateCase("gaussian", n=8, seed=12), {**common, "minibatch_size": 4, "seed": 1},
                     what="Gaussian, minibatch 4 of 8, no clipping")
    check_first_step(ctx, UpdateCase("gaussian", n=6, seed=13), {**common, "minibatch_size": 6, "max_grad_norm": 0.05, "seed": 2},
                     what="Gaussian, whole batch, max_grad_norm 0.05")

    ctx.property(draws.first_step_cases(common=common),
                 lambda d: check_first_step(ctx, UpdateCase(d[0][0], n=d[0][1], seed=d[0][2]), d[1], what="drawn"), label="drawn",
                 tier="enumeration")
