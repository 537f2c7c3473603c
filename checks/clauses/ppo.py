"""Checks for the PPO chapter (``spec/clauses/30_ppo.toml``).

Every check starts from fixed known-answer inputs (the same on every seed: the clip gradient
table, the log-space ratio, normalisation and value-loss known answers, the bug catalogue's smallest inputs), then searches drawn inputs. Expected
numbers come from the formulas (evaluated in float64 on the exact inputs the candidate received),
from exact values, or from the candidate itself (its own parameters after each optimizer step).

Conventions (dual_clip, clip_eps_high, value_loss_factor, the advantage normalisation's ddof, eps and
form, and ppo_update's normalisation scope and KL stop) are the contract's (spec/contract/30_ppo.toml);
each clause checks the declared value exactly.

``ppo_update``'s protocol. The suite hands the candidate what a collector would have produced,
built so that every property is observable from outside, and watches what the update does to it
(``rlspec.checks.kit.recording``; docs/adapting-real-code.md is the contract for adapter authors):

* ``policy``: a torch module (:class:`rlspec.checks.kit.recording.ObservedActorCritic`, the reference's
  ``LinearActorCritic``) on one-hot observations, one state per sample, so each sample's
  log-probability depends on its own parameters only, bit for bit, whatever minibatch it is evaluated
  in, and each forward's rows are read off its input. ``policy(obs) -> (dist, values)`` (CleanRL style)
  and ``policy.evaluate_actions(obs, actions) -> (values, log_prob, entropy)`` (SB3's method and order).
* ``optimizer``: plain SGD in two parameter groups, the actor's and the critic's
  (:class:`RecordingSGD`, with ``torch.optim``'s surface), recording at every ``step()`` the gradient
  it receives (after the candidate's clipping) and the parameters before and after. With the forwards
  that fed each step, the suite knows every step's minibatch and the whole parameter path.
* ``obs, actions, logp_old, advantages, returns, values_old``: the stored rollout (N samples).
  ``logp_old`` is the policy's own log-probability (or that minus a known offset), ``values_old``
  its own values plus noise (an older critic's), so a clipped value loss clips from the first step.
* ``config``: ``clip_eps, epochs, minibatch_size, vf_coef, ent_coef, max_grad_norm, target_kl``
  (None: never stop), ``normalize_advantages``, ``value_clip_eps`` (None: no value clipping) and
  ``seed`` (the candidate's shuffle; the global generators are seeded from it for the call).

The update may return nothing. Where it returns the protocol's dict (``ratios`` and ``indices`` of
the first minibatch before any step, ``approx_kl``: every value its stop rule compared, ``epochs``),
those are checked against the recording too.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close
from ..kit.clipping import (
    ClipRange, clip_gradient_tolerance, clip_loss_tolerance, clip_objective, log_derivative_bounds, ratio_relative_error,
)
from ..kit.gradients import leaf_gradient
from ..kit.context import CandidateError, NotProvided, captured_output, describe
from ..kit.recording import ObservedActorCritic, Recording, RecordingSGD
from ..kit import standardise
from ..kit.registry import check
from ..kit.strategies import ppo as draws
from ..kit.strategies import normal_floats, rounded
from ..kit.tolerances import TINY, U64, smallest_normal, tiny
from ...reference.ppo import LinearActorCritic
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
# ppo_clip_loss: calling the candidate (the formulas and tolerances are rlspec.checks.kit.clipping's)


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
    """One sample: loss >= -r A (L_clip <= L_IS), equality strictly inside the clip range. With a declared dual
    clip c and A < 0 the objective max(min(r A, clip(r) A), c A) is at most max(r A, c A) = min(r, c) A instead:
    the bound is -min(r, c) A, met with equality once r >= c."""
    loss, _, call, x = call_clip_loss(ctx, [logp_new], [logp_old], [A], clip_eps)
    lpn, lpo, adv = x["logp_new"], x["logp_old"], x["advantages"]
    r = float(np.exp(lpn - lpo)[0])
    tol = clip_loss_tolerance(lpn, lpo, adv, clip_eps, conv, call.unit_roundoff)
    dual = conv.dual_clip is not None and adv[0] < 0
    bound = -min(r, conv.dual_clip) * float(adv[0]) if dual else -r * float(adv[0])
    named = f"the dual-clipped -min(r, c) A = {bound!r} (c = {conv.dual_clip:g})" if dual else f"the unclipped -r A = {bound!r}"
    if loss < bound - tol:
        # min(r A, clip(r) A) <= r A always: above it, the min is gone, or (with a declared dual clip) its floor c A
        # reached a positive advantage
        floor = conv.dual_clip is not None and adv[0] > 0 and abs(loss + conv.dual_clip * float(adv[0])) <= tol
        raise ClauseFailure(
            f"loss {loss!r} is below {named} (r = {r:.6g}, A = {adv[0]:.6g}, "
            f"eps = {clip_eps}): the objective exceeds the importance-sampled surrogate (tol {tol:.3g})",
            call=call.code, ratio=(bound - loss) / tol if tol > 0 else None,  # a rounding error is not a missing min
            diagnosed=floor or conv.dual_clip is None,
            cause=(f"the dual clip reaches a positive advantage: max(min(r A, clip(r) A), c A) lifts A > 0 to c A = "
                   f"{conv.dual_clip * float(adv[0]):.6g} while r < c (bug C4)") if floor
            else "the clipped term is used without the min, or the max of the two terms is taken",
        )
    lo, hi = conv.bounds(clip_eps)
    rel = float(ratio_relative_error(lpn, lpo, call.unit_roundoff)[0])
    if lo * (1 + rel) < r < hi * (1 - rel):
        assert_close(loss, bound, tol, what=f"loss inside the clip range vs {named.split(' = ')[0]}", call=call.code)


@check("PPO-PESSIMISTIC-BOUND")
def pessimistic_bound(ctx):
    """Per sample, loss >= -r A: the four off-centre table points, then drawn single samples."""
    conv = clip_conventions(ctx)
    for A, r in [(2.0, 0.5), (-2.0, 1.5), (2.0, 1.5), (-2.0, 0.5), (3.0, 1.1), (-0.5, 0.95)]:
        _single_sample_bound(ctx, conv, math.log(r), 0.0, A, 0.2)
    for eps in clip_eps_edges():
        for A, r in [(2.0, 0.5), (-2.0, 1.5), (2.0, 1.0 + eps / 2), (-2.0, 2.5)]:
            _single_sample_bound(ctx, conv, math.log(r), 0.0, A, eps)
    if conv.dual_clip is not None:  # past a declared dual clip (A < 0, r > c): the bound is -c A, with equality
        _single_sample_bound(ctx, conv, math.log(1.5 * conv.dual_clip), 0.0, -2.0, 0.2)

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
    """The declared normalisation of ``A`` (float64): ``rlspec.checks.kit.standardise.normalised``."""
    return standardise.normalised(A, conv.advantage_std_ddof, conv.advantage_eps, conv.advantage_eps_form)


def normalisation_tolerance(A, conv: Conventions, u):
    """Per-element bound on |computed - exact| (``rlspec.checks.kit.standardise.normalisation_tolerance``)."""
    return standardise.normalisation_tolerance(A, conv.advantage_std_ddof, conv.advantage_eps, conv.advantage_eps_form, u)


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
# ppo_collected_ratios: the first ratios on the candidate's own collected batch
#
# Tolerance. The expected ratio is exactly 1: the loss and the collector score one stored sample of one
# policy. Each score is a sum of terms computed in precision u from the logits or from z = (x - mu) / sigma,
# log sigma and, for the squashed policy, the Jacobian 2 (log 2 - u - softplus(-2u)) at the pre-tanh sample;
# each term carries at most 8 roundings relative to its magnitude and the sum over the K components K more,
# so one score is within E = (K + 8) u M of exact, M the sum of the terms' magnitudes. The categorical's
# terms: the logit (<= max |l|) and the log-sum-exp; the Gaussian's per component: z^2 / 2, |log sigma| and
# log sqrt(2 pi) < 1; the Jacobian's: 2 (|u| + 2). The suite does not see the draw, so z is bounded by
# COLLECTED_Z = 10 standard deviations (a draw beyond it has probability 1.5e-23) and |u| by |mu| + 10 sigma.
# The two scores differ by <= 2E; the subtraction and the exp round twice more: |r - 1| <= expm1(2E) + 4u.

COLLECTED_Z = 10.0


def collected_tolerance(family: str, loc: np.ndarray, scale: np.ndarray | None, u: float) -> np.ndarray:
    """Per row, the bound on |r - 1| derived above (loc, scale: the (B, K) values the candidate received)."""
    K = loc.shape[1]
    if family == "categorical":
        top = loc.max(1)
        lse = top + np.log(np.exp(loc - top[:, None]).sum(1))
        magnitude = np.abs(loc).max(1) + np.abs(lse) + 1.0
    else:
        terms = COLLECTED_Z**2 / 2 + np.abs(np.log(scale)) + 1.0
        if family == "tanh_gaussian":
            terms = terms + 2 * (np.abs(loc) + COLLECTED_Z * scale + 2.0)
        magnitude = terms.sum(1)
    return np.expm1(2 * (K + 8) * u * magnitude) + 4 * u + TINY


def check_collected_ratios(ctx, families, family: str, loc, scale, dtype, seed: int, what: str) -> None:
    """The candidate's first ratios on its own batch collected from the described policy are 1 (to rounding)."""
    if family not in families:
        return
    args = {"family": family, "loc": rounded(np.asarray(loc, dtype=np.float64), dtype),
            "scale": None if scale is None else rounded(np.asarray(scale, dtype=np.float64), dtype), "seed": int(seed)}
    B = args["loc"].shape[0]
    call = ctx.call("ppo_collected_ratios", args, dtype=dtype, array="torch", shape=(B,), allow_nonfinite=True)
    (ratios,) = call.outputs
    tol = collected_tolerance(family, args["loc"], args["scale"], call.unit_roundoff)

    def diagnose(r):
        finite = r[np.isfinite(r)]
        if finite.size == 0:
            return "every ratio is non-finite: log pi_old or the re-scored log pi is infinite (atanh of a saturated action?)"
        clipped = float(np.mean((r < 0.8) | (r > 1.2)))
        summary = (f"median ratio {np.median(finite):.4g} (min {finite.min():.4g}, max {finite.max():.4g}); {clipped:.0%} of the "
                   f"batch outside [0.8, 1.2], where a clip at 0.2 acts before any update")
        if family == "tanh_gaussian":
            return (summary + ": the loss scores the stored squashed action at another pre-image than the one the collector "
                    "drew (atanh of the action, clamped short of 1, cannot give back a u beyond it)")
        return summary
    assert_close(ratios, np.ones(B), tol, what=f"{what}: first ratios on the collected batch vs 1", call=call.code,
                 cause="the loss re-scores the stored action by another path than the collector's", diagnose=diagnose)


def _collected_cases():
    """The fixed cases (the same on every seed): the saturated squashed policy the defect needs, then one of each
    family in both precisions. (family, loc, scale, dtype, seed, what)"""
    rng = np.random.default_rng(20261201)
    full = lambda shape, value: np.full(shape, value)
    yield "tanh_gaussian", full((64, 1), 8.0), full((64, 1), 0.5), "float32", 0, "tanh-Gaussian, mean 8, scale 0.5, float32"
    yield "tanh_gaussian", np.tile([[2.0, -2.0]], (16, 1)), full((16, 2), 0.5), "float32", 1, "tanh-Gaussian, mean +-2, float32"
    yield "tanh_gaussian", full((32, 1), 18.0), full((32, 1), 1.0), "float64", 2, "tanh-Gaussian, mean 18, scale 1, float64"
    yield "tanh_gaussian", rng.uniform(-1, 1, (16, 2)), rng.uniform(0.3, 1.5, (16, 2)), "float64", 3, "tanh-Gaussian near 0"
    for dtype in ("float32", "float64"):
        yield "gaussian", rng.uniform(-3, 3, (16, 2)), rng.uniform(0.1, 2.0, (16, 2)), dtype, 4, f"Gaussian, {dtype}"
        yield "categorical", rng.uniform(-5, 5, (16, 4)), None, dtype, 5, f"categorical, {dtype}"


@check("PPO-COLLECTED-RATIOS-ONE")
def collected_ratios_one(ctx):
    """Saturated tanh draws in float32 (mean 8) and float64 (mean 18), then each family in both precisions, then drawn."""
    families = ctx.provided("ppo_collected_families")
    for family, loc, scale, dtype, seed, what in _collected_cases():
        check_collected_ratios(ctx, families, family, loc, scale, dtype, seed, what)
    ctx.property(draws.collected_cases(families=families, dtype=ctx.dtype),
                 lambda c: check_collected_ratios(ctx, families, *c, what="drawn"), label="drawn", tier="call")


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
# ppo_update: the suite's policy, optimizer and batch, and what the update did to them
#
# The candidate receives the suite's module and optimizer (rlspec.checks.kit.recording) and is watched,
# not asked: every forward (the rows it saw), every step (the gradient it applied, the parameters
# before and after). From the recording the suite knows each step's minibatch and recomputes, in
# float64 at the parameters of that moment, the gradient the declared loss gives on those rows.
# Diagnostics the candidate returns (today's dict: ratios, indices, approx_kl, epochs) are optional;
# where given they are checked too.


ACTION_DIM = {"categorical": 3, "gaussian": 2}
ACTOR_PARAMETERS = ("actor.weight", "log_std")


def parameter_groups(kind: str) -> list[list[str]]:
    """The suite optimizer's groups: the actor's and the critic's (one global gradient norm spans both)."""
    return [["actor.weight", "log_std"] if kind == "gaussian" else ["actor.weight"], ["critic.weight"]]


@dataclass(frozen=True)
class UpdateCase:
    """A reproducible ppo_update input: ``n`` one-hot states, one sample in each, drawn from ``seed``.

    ``offset`` d: the stored logp_old is log pi(a|s) - d (a stale behaviour policy); empty means the
    policy's own log-probabilities, as a collector stores them. ``positive`` draws advantages > 0.
    ``value_spread``: the stored values_old are the policy's values plus N(0, spread^2) noise, drawn last
    (a collector's values from an older critic), so a clipped value loss clips from the first step.
    ``idle``: samples whose advantage is 0 (drawn, then zeroed). With ent_coef 0 and a categorical policy their
    states' logits get no gradient, so their k3 stays 0 while the others' grows.
    """

    kind: str = "categorical"
    n: int = 8
    seed: int = 0
    lr: float = 0.5
    offset: tuple = ()
    positive: bool = False
    value_spread: float = 0.5
    idle: tuple = ()

    def build(self, dtype):
        """(policy, optimizer, batch tensors) in ``dtype``, as the candidate receives them."""
        tdtype = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
        g = torch.Generator().manual_seed(self.seed)
        # nn.Linear draws its initial weights from torch's global generator; they are overwritten below, so the
        # draw is undone: the global RNG stays where it was (a verdict reached here then depends on no RNG state,
        # and one seed stands for all in tests/test_mutants.py)
        with torch.random.fork_rng(devices=[]):
            policy = ObservedActorCritic(self.n, ACTION_DIM[self.kind], self.kind)
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
            advantages[list(self.idle)] = 0.0
            returns = values.double() + torch.randn(self.n, generator=g, dtype=torch.float64)
            stale = self.value_spread * torch.randn(self.n, generator=g, dtype=torch.float64)
        batch = {
            "obs": obs,
            "actions": actions,
            "logp_old": (logp.double() - offset).to(tdtype),
            "advantages": advantages.to(tdtype),
            "returns": returns.to(tdtype),
            "values_old": (values.double() + stale).to(tdtype),
        }
        recording = Recording([name for name, _ in policy.named_parameters()])
        optimizer = RecordingSGD(policy.named_parameters(), self.lr, groups=parameter_groups(self.kind), recording=recording)
        return policy.observe(recording), optimizer, batch

    def arguments(self, dtype="float64", config=None) -> dict[str, Any]:
        """Keyword arguments for ``ppo_update`` (a fresh policy and optimizer each time)."""
        policy, optimizer, batch = self.build(np.dtype(dtype))
        return {"policy": policy, "optimizer": optimizer, **batch, "config": dict(config or {})}


BASE_CONFIG = {"clip_eps": 0.2, "epochs": 1, "minibatch_size": 8, "vf_coef": 0.5, "ent_coef": 0.0,
               "max_grad_norm": 1e6, "target_kl": None, "normalize_advantages": True, "value_clip_eps": None, "seed": 0}


@dataclass
class UpdateRun:
    """One ppo_update call: its inputs (float64 copies), the recording, and the diagnostics if it returned any."""

    case: UpdateCase
    config: dict
    optimizer: RecordingSGD
    batch: dict  # float64 numpy copies of what the candidate received
    ratios: np.ndarray | None  # the optional diagnostics (None where not returned)
    indices: np.ndarray | None
    approx_kl: np.ndarray | None
    epochs: int | None
    code: str
    u: float

    @property
    def recording(self) -> Recording:
        return self.optimizer.recording

    @property
    def steps(self) -> int:
        return self.optimizer.steps

    def rows(self, k: int) -> np.ndarray:
        return self.recording.step_rows(k)

    def params(self, k: int) -> dict:
        """The parameters step ``k`` was taken at (those the candidate had when it applied that gradient)."""
        return self.recording.steps[k].before

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


def _diagnostics(result, n: int) -> tuple:
    """(ratios, indices, approx_kl, epochs) from what ppo_update returned: real update loops return nothing
    (or their own logs), so only a dict's protocol keys are read, each validated where present."""
    if not isinstance(result, dict):
        return None, None, None, None
    ratios = indices = approx_kl = epochs = None
    if "ratios" in result or "indices" in result:
        if "ratios" not in result or "indices" not in result:
            raise CandidateError("ppo_update's diagnostics lack " + ("indices" if "ratios" in result else "ratios")
                                 + " (ratios and indices come together)")
        ratios = _as_array(result["ratios"], "ratios")
        indices = _as_array(result["indices"], "indices", integer=True).astype(np.int64)
        if len(ratios) != len(indices) or len(ratios) == 0:
            raise CandidateError(f"ppo_update returned {len(ratios)} ratios and {len(indices)} indices; expected the same number > 0")
        if len(set(indices.tolist())) != len(indices) or indices.min() < 0 or indices.max() >= n:
            raise CandidateError(f"ppo_update's indices {indices.tolist()} are not distinct positions in a batch of {n}")
    if "approx_kl" in result and result["approx_kl"] is not None and np.size(result["approx_kl"]):
        approx_kl = _as_array(result["approx_kl"], "approx_kl")
    if "epochs" in result and result["epochs"] is not None:
        try:
            epochs = int(result["epochs"])
        except (TypeError, ValueError):
            raise CandidateError(f"ppo_update's epochs is {describe(result['epochs'])}; expected an int") from None
    return ratios, indices, approx_kl, epochs


def _seeded_globals(seed: int):
    """Seed torch's, numpy's and Python's global generators from the config's seed (an update loop that
    shuffles with ``torch.randperm`` or ``np.random.permutation`` gets the same order on every run, so a
    verdict depends on the seed alone); returns a function restoring them."""
    import random

    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)

    def restore():
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])

    return restore


def call_update(ctx, case: UpdateCase, config: dict) -> UpdateRun:
    """Run the candidate's ppo_update on ``case``; unusable behaviour raises CandidateError."""
    config = {**BASE_CONFIG, **config}
    policy, optimizer, batch = case.build(ctx.dtype)
    before = {k: v.clone() for k, v in batch.items()}
    shown = ", ".join(f"{k}={v!r}" for k, v in vars(case).items() if v != getattr(UpdateCase, k))
    code = (f"ppo_update(**UpdateCase({shown}).arguments({np.dtype(ctx.dtype).name!r}, config={config!r})) "
            f"with UpdateCase from rlspec.checks.clauses.ppo")
    grad_mode, default_dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    with warnings.catch_warnings(), captured_output(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        restore = _seeded_globals(int(config["seed"]))
        try:
            result = ctx.candidate.operations["ppo_update"](policy=policy, optimizer=optimizer, **batch, config=dict(config))
        except (KeyboardInterrupt, MemoryError):
            raise
        except BaseException as exc:  # a candidate cannot stop the suite
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CandidateError(f"ppo_update raised {type(exc).__name__}" + (f": {message}" if message else "")
                                 + nonfinite_note(optimizer.recording)) from None
        finally:
            changed = torch.is_grad_enabled() != grad_mode or torch.get_default_dtype() != default_dtype
            restore()
            torch.set_grad_enabled(grad_mode)
            torch.set_default_dtype(default_dtype)
    if changed:
        raise CandidateError("ppo_update changed torch's grad mode or default dtype (restored)")
    for name, value in batch.items():
        if not torch.equal(value, before[name]):
            raise CandidateError(f"ppo_update mutated its input `{name}` in place")
    ratios, indices, approx_kl, epochs = _diagnostics(result, case.n)
    recording = optimizer.recording
    if optimizer.steps == 0:
        raise CandidateError("ppo_update took no step with the optimizer it was given")
    for step in recording.steps:
        empty = all(g is None or not np.any(g) for g in step.grads.values())
        if not step.forwards and not empty:
            raise CandidateError(f"ppo_update's optimizer step {step.index} applied a gradient that no forward of the policy it "
                                 "was given produced (a copy of the module, or gradients written by hand?)")
        if recording.step_rows(step.index) is None:
            raise CandidateError(f"ppo_update's policy saw observations that are not rows of the batch's obs (before step "
                                 f"{step.index}); the update must evaluate the stored observations")
    declared = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}.get(ctx.candidate.precision_of("ppo_update") or "", 0.0)
    u = max(float(np.finfo(ctx.dtype).eps) / 2, declared)  # the precision the candidate computes in
    batch64 = {k: v.detach().cpu().double().numpy() if v.is_floating_point() else v.numpy() for k, v in batch.items()}
    return UpdateRun(case, config, optimizer, batch64, ratios, indices, approx_kl, epochs, code, u)


def nonfinite_note(recording: Recording) -> str:
    """Where a recorded step first made a parameter non-finite (what an exception that follows is often about)."""
    for step in recording.steps:
        bad = [n for n, v in step.after.items() if v is not None and not np.all(np.isfinite(v))]
        if bad:
            rows = recording.step_rows(step.index)
            size = "?" if rows is None else len(rows)
            return (f" (before it, optimizer step {step.index} on a minibatch of {size} sample{'s' if size != 1 else ''} made "
                    f"{', '.join(bad)} non-finite" + (": a one-sample minibatch normalised with the unbiased std is 0/0 = NaN)"
                                                       if size == 1 else ")"))
    return ""


def check_finite_parameters(run: UpdateRun) -> None:
    """After the whole update every parameter is finite (the input was): a one-sample minibatch normalised
    with the unbiased std is 0/0, and an update can return normally with every parameter NaN."""
    final = run.recording.steps[-1].after
    for k, step in enumerate(run.recording.steps):
        if any(v is not None and not np.all(np.isfinite(v)) for v in step.after.values()):
            rows = run.rows(k)
            raise CandidateError(
                f"ppo_update left non-finite parameters: step {k} (minibatch rows {rows.tolist()}) made "
                + ", ".join(n for n, v in step.after.items() if v is not None and not np.all(np.isfinite(v)))
                + f" non-finite, and {sum(not np.all(np.isfinite(v)) for v in final.values())} of {len(final)} parameters are "
                "so after the update" + (" (a one-sample minibatch: its unbiased std is 0/0 = NaN)" if len(rows) == 1 else ""))


# ---------------------------------------------------------------------------------------------
# the update's declared conventions


def families(ctx) -> tuple[str, ...]:
    """The policy families the candidate's ppo_update supports (``ppo_update_policy_families``)."""
    return ctx.provided("ppo_update_policy_families")


def of_families(ctx, cases):
    """The cases of a declared family (a Categorical-only update is judged on Categorical batches only)."""
    kinds = families(ctx)
    return [c for c in cases if c[0].kind in kinds]


def drawn_kinds(ctx) -> list[str]:
    return list(families(ctx))


def normalises(ctx, config: dict) -> bool:
    """Whether the update normalises its advantages: as config says, or always (declared: no switch)."""
    if ctx.convention("advantage_normalization_switch") == "always":
        ctx.note("judged with normalize_advantages True only: the candidate normalises always (advantage_normalization_switch)")
        return True
    return bool(config["normalize_advantages"])


def value_clip_of(ctx, config: dict) -> float | None:
    """The eps the update clips its value loss with (None: no value clipping), as declared."""
    mode = ctx.convention("value_clipping")
    if mode == "clip_eps":
        return float(config["clip_eps"])
    if mode == "none":
        return None
    return None if config.get("value_clip_eps") is None else float(config["value_clip_eps"])


def minibatch_sizes(remainder: str, n: int, size: int) -> list[int]:
    """The sizes of one epoch's minibatches when ``size`` does not divide ``n``: the remainder a last, smaller
    minibatch (``kept``), dropped (``dropped``), or joined to the last full one (``merged``: Tianshou's
    ``Batch.split(size, merge_last=True)``), or ceil(n / size) minibatches of sizes differing by at most one
    (``balanced``: skrl's ``np.array_split(indexes, mini_batches)``)."""
    full, rest = divmod(n, size)
    if remainder == "balanced":
        parts = full + (1 if rest else 0)
        return [len(part) for part in np.array_split(np.arange(n), parts)] if parts else []
    if remainder == "kept":
        return [size] * full + ([rest] if rest else [])
    if remainder == "dropped":
        return [size] * full
    return [size] * (full - 1) + [size + rest] if full else [n]


def _other_remainder(run, n: int, size: int, epochs: int, declared: str) -> str:
    """The cause where the steps are another remainder form's: every form other than ``declared`` whose steps per
    epoch and whose first epoch's minibatch sizes are what the candidate did (kept and balanced coincide where the
    remainder is the only short minibatch: both are named then), or "" where none is."""
    forms = []
    for other in ("kept", "dropped", "merged", "balanced"):
        sizes = minibatch_sizes(other, n, size)
        if other == declared or not sizes or run.steps != epochs * len(sizes):
            continue
        if sorted(len(run.rows(k)) for k in range(len(sizes))) == sorted(sizes):
            forms.append(other)
    if not forms:
        return ""
    named = " or ".join(forms)
    return (f"the remainder of {n} samples in minibatches of {size} is {named} (declared: {declared}); declare "
            f"minibatch_remainder = '{forms[0]}' if that is the design")


def _floor_split(run, n: int, size: int, epochs: int) -> str:
    """The cause where each epoch is split evenly into n // size minibatches (``np.array_split(indexes, n // size)``):
    one fewer than ceil(n / size) where size does not divide n, each larger than minibatch_size; "" otherwise."""
    parts = n // size
    if not parts or n % size == 0 or run.steps != epochs * parts:
        return ""
    sizes = sorted(len(part) for part in np.array_split(np.arange(n), parts))
    if sorted(len(run.rows(k)) for k in range(parts)) != sizes:
        return ""
    return (f"each epoch is split evenly into n // minibatch_size = {parts} minibatches of sizes {sizes}, larger than "
            f"{size}: a floor where ceil({n} / {size}) = {parts + 1} minibatches are due")


def minibatches_per_epoch(ctx, n: int, size: int) -> int:
    return len(minibatch_sizes(ctx.convention("minibatch_remainder"), n, size))


# ---------------------------------------------------------------------------------------------
# the gradient each step must apply
#
# tolerances. Per sample j of the step's minibatch (B samples), at the parameters theta_k:
#   the candidate's log-ratio x_j = log pi - logp_old_j is within e_j = 8 u (magnitude_j + |logp_old_j|)
#   (its own evaluation of log pi in its precision, ``module_terms``), so its ratio is off by
#   rho_j = e_j + 4 u relative (the exp); every other factor of the per-sample term -(1/B) A_j r_j
#   d log pi_j / d p (the score through the softmax or the Gaussian log-density, the product with the
#   advantage and the coefficients, the 1/B, summing the B samples) adds at most B + 16 roundings on
#   the magnitudes |A_j| r_j |score_j|, ent_coef |d H_j / d p| and vf_coef k |d (V_j - R_j)^2 / d p|
#   (``contribution_magnitudes``). The normalised advantage is off by dA_j (``normalisation_tolerance``),
#   which moves the policy term by dA_j r_j |score_j| / B. Where the candidate's rounding can put a
#   sample on the other side of a kink (r_j within 2 rho_j of 1 - eps or 1 + eps; a value within
#   rounding of V_old +- eps, or the two squared errors within rounding of each other), either branch
#   is a subgradient: that sample's whole term is allowed. The float64 oracle is as accurate again:
#   every rounding term is doubled. An entry of a state the minibatch does not hold is exactly 0 (its one-hot
#   coordinate multiplies every term by 0), so its tolerance is 0 (TINY): a nonzero there is another step's. The global-norm clip's coefficient c / (||g|| + delta), delta in
#   [0, 1e-6] (torch's clip_grad_norm_ adds 1e-6), moves by <= coefficient (delta + ||dg|| + P u ||g||) / ||g||.


def contribution_magnitudes(kind: str, params: dict, action, i: int, returns_i: float, value_extra: float = 0.0):
    """For the sample in state i at ``params``, per parameter: the magnitudes its score d log pi / d p, its
    entropy gradient and its value-loss gradient d (V - R)^2 / d p are computed from (absolute values of
    the terms before any cancellation), in closed form for the suite's linear module. ``value_extra``:
    |V_old| + eps where the value loss is clipped."""
    score = {k: np.zeros_like(v) for k, v in params.items()}
    entropy = {k: np.zeros_like(v) for k, v in params.items()}
    value = {k: np.zeros_like(v) for k, v in params.items()}
    w = params["actor.weight"][:, i]
    if kind == "categorical":
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
    value["critic.weight"][0, i] = 2 * (abs(v) + abs(returns_i) + value_extra)  # 2 (V - R)
    return score, entropy, value


@dataclass
class StepLoss:
    """What the declared loss is made of on one step (float64, the step's rows in the recorded order)."""

    advantages: np.ndarray  # (B,) after the declared normalisation
    advantage_tol: np.ndarray  # (B,) its rounding bound
    logp_old: np.ndarray  # (B,)
    values_old: np.ndarray  # (B,)
    value_clip: float | None
    clip: str = "global"  # how the gradient is clipped: "global" (the clause), "group" or "none" (diagnoses)


def declared_advantages(run: UpdateRun, rows: np.ndarray, conv: Conventions, normalise: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The advantages the declared normalisation gives the step's rows, with their tolerance. A one-sample
    minibatch normalised on its own has no spread: the contract's rule (normalize_advantages' degenerate
    case) gives 0, and the guard real updates use (SB3, CleanRL: normalise only when the minibatch has more
    than one sample) leaves it raw; both are finite and both are accepted. NaN is not."""
    A_all = run.batch["advantages"]
    if not normalise:
        return [(A_all[rows], np.zeros(len(rows)))]
    if conv.advantage_normalization == "batch":
        normed, tol = normalised(A_all, conv)[0], normalisation_tolerance(A_all, conv, run.u)
        return [(normed[rows], tol[rows])]
    scope = A_all[rows]
    options = [(normalised(scope, conv)[0], normalisation_tolerance(scope, conv, run.u))]
    if len(rows) == 1:
        options.append((scope, np.zeros(1)))
    return options


def step_losses(ctx, run: UpdateRun, k: int, conv: Conventions) -> list[StepLoss]:
    rows = run.rows(k)
    value_clip = value_clip_of(ctx, run.config)
    return [StepLoss(A, tol, run.batch["logp_old"][rows], run.batch["values_old"][rows], value_clip)
            for A, tol in declared_advantages(run, rows, conv, normalises(ctx, run.config))]


def expected_step_gradient(run: UpdateRun, params: dict, rows: np.ndarray, loss: StepLoss, conv: Conventions):
    """The gradient of the declared loss on ``rows`` at ``params`` (float64), clipped as ``loss.clip`` says,
    and a per-parameter tolerance (the derivation above). Returns (expected, tolerance, unclipped norm)."""
    cfg, B, u = run.config, len(rows), run.u
    kind = run.case.kind
    with torch.random.fork_rng(devices=[]):  # nn.Linear's initial draw, overwritten below, leaves the global RNG as it was
        policy = LinearActorCritic(run.case.n, ACTION_DIM[kind], kind).double()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            p.copy_(torch.from_numpy(params[name]))
    idx = torch.from_numpy(rows)
    obs, actions = torch.eye(run.case.n, dtype=torch.float64)[idx], torch.from_numpy(run.batch["actions"])[idx]
    returns = torch.from_numpy(run.batch["returns"])[idx]
    values, logp, entropy = policy.evaluate_actions(obs, actions)
    ratio = torch.exp(logp - torch.from_numpy(loss.logp_old))
    A = torch.from_numpy(np.asarray(loss.advantages, dtype=np.float64))
    lo, hi = ClipRange(clip_eps_high=conv.clip_eps_high).bounds(cfg["clip_eps"])
    k = conv.value_loss_factor
    plain = (values - returns) ** 2
    if loss.value_clip is None:
        value_loss = plain.mean()
    else:
        V_old = torch.from_numpy(loss.values_old)
        clipped = (V_old + torch.clamp(values - V_old, -loss.value_clip, loss.value_clip) - returns) ** 2
        value_loss = torch.max(plain, clipped).mean()
    total_loss = (-torch.min(ratio * A, torch.clamp(ratio, lo, hi) * A).mean() + cfg["vf_coef"] * k * value_loss
                  - cfg["ent_coef"] * entropy.mean())
    named = list(policy.named_parameters())
    grads = torch.autograd.grad(total_loss, [p for _, p in named], allow_unused=True)
    raw = {n: (np.zeros(p.shape) if g is None else g.numpy()) for (n, p), g in zip(named, grads)}
    names = list(raw)

    logp_np, magnitude_logp = module_terms(kind, params, run.batch["actions"][rows], rows)
    r = np.exp(logp_np - loss.logp_old)
    rho = 8 * u * (magnitude_logp + np.abs(loss.logp_old)) + 4 * u
    V = values.detach().numpy()
    R = returns.numpy()
    rounding = {n: np.zeros_like(raw[n]) for n in names}
    whole = {n: np.zeros_like(raw[n]) for n in names}  # terms a kink may switch on or off, and the advantage's error
    for j, i in enumerate(rows.tolist()):
        extra = 0.0 if loss.value_clip is None else abs(float(loss.values_old[j])) + loss.value_clip
        score, ent, val = contribution_magnitudes(kind, params, run.batch["actions"][i], i, float(R[j]), extra)
        A_j, tol_A = abs(float(loss.advantages[j])), float(loss.advantage_tol[j])
        near_clip = min(abs(r[j] - lo), abs(r[j] - hi)) <= 2 * r[j] * rho[j]
        value_kink = False
        if loss.value_clip is not None:
            move = V[j] - loss.values_old[j]
            m = abs(V[j]) + abs(R[j]) + abs(loss.values_old[j]) + loss.value_clip
            clipped_j = (loss.values_old[j] + np.clip(move, -loss.value_clip, loss.value_clip) - R[j]) ** 2
            value_kink = (abs(abs(move) - loss.value_clip) <= 8 * u * m or abs((V[j] - R[j]) ** 2 - clipped_j) <= 16 * u * m**2)
        for n in names:
            policy_term = A_j * r[j] * score[n]
            rounding[n] += (policy_term * rho[j] + (B + 16) * u * (policy_term + cfg["ent_coef"] * ent[n]
                                                                    + cfg["vf_coef"] * k * val[n])) / B
            whole[n] += 2 * tol_A * r[j] * score[n] / B
            if near_clip:
                whole[n] += (policy_term + tol_A * r[j] * score[n]) / B
            if value_kink:
                whole[n] += cfg["vf_coef"] * k * val[n] / B
    norm = math.sqrt(sum(float(np.sum(g**2)) for g in raw.values()))
    elementwise = {n: 2 * rounding[n] + whole[n] for n in names}
    max_norm = float(cfg["max_grad_norm"])
    if loss.clip == "global":
        coef = {n: min(1.0, max_norm / norm) if norm > 0 else 1.0 for n in names}
        error_norm = math.sqrt(sum(float(np.sum(e**2)) for e in elementwise.values()))
        P = sum(g.size for g in raw.values())
        c = next(iter(coef.values()))
        coef_tol = {n: c * (1e-6 + error_norm + P * u * norm) / norm if c < 1.0 else 0.0 for n in names}
    else:  # diagnoses only: a clip per parameter group, or none
        coef, coef_tol = {}, {}
        for group in parameter_groups(kind):
            g_norm = math.sqrt(sum(float(np.sum(raw[n] ** 2)) for n in group))
            size = sum(raw[n].size for n in group)
            for n in group:
                coef[n] = min(1.0, max_norm / g_norm) if loss.clip == "group" and g_norm > 0 else 1.0
                coef_tol[n] = 4 * coef[n] * (1e-6 + size * u) if coef[n] < 1.0 else 0.0
    expected = {n: raw[n] * coef[n] for n in names}
    tolerance = {n: coef[n] * elementwise[n] + coef_tol[n] * np.abs(raw[n]) + TINY for n in names}
    return expected, tolerance, norm


def flat(values: dict, names) -> np.ndarray:
    return np.concatenate([(np.zeros(1) if values[n] is None else np.asarray(values[n], dtype=np.float64)).reshape(-1) for n in names])


def step_mismatch(run: UpdateRun, k: int, loss: StepLoss, conv: Conventions, names) -> tuple | None:
    """None if step k's recorded gradient equals the declared loss's on its rows within tolerance; else
    (expected, actual, tol, labels, norm) flattened over ``names``."""
    expected, tolerance, norm = expected_step_gradient(run, run.params(k), run.rows(k), loss, conv)
    recorded = run.recording.steps[k].grads
    shapes = {n: expected[n].shape for n in names}
    actual = np.concatenate([(np.zeros(shapes[n]) if recorded[n] is None else recorded[n]).reshape(-1) for n in names])
    exp, tol = flat(expected, names), flat(tolerance, names)
    if np.all(np.abs(actual - exp) <= tol):
        return None
    labels = [f"{n}{list(i)}" for n in names for i in np.ndindex(*shapes[n])]
    return exp, actual, tol, labels, norm


def diagnose_step(ctx, run: UpdateRun, k: int, loss: StepLoss, conv: Conventions, names, actual: np.ndarray) -> str:
    """Which known mistake step k's recorded gradient matches, if any (each alternative recomputed by the
    same oracle with one thing changed)."""
    rows = run.rows(k)

    def same(alternative: StepLoss, params=None) -> bool:
        e, t, _ = expected_step_gradient(run, run.params(k) if params is None else params, rows, alternative, conv)
        return bool(np.all(np.abs(actual - flat(e, names)) <= 4 * flat(t, names)))

    if not np.all(np.isfinite(actual)):
        single = len(rows) == 1 and normalises(ctx, run.config) and conv.advantage_normalization == "minibatch"
        return (f"step {k}'s gradient is non-finite" + (": its minibatch holds one sample, whose unbiased std is 0/0 = NaN (skip "
                "the normalisation of a one-sample minibatch, or use the contract's guarded form)" if single else ""))
    if k > 0:  # gradients accumulated: this step's plus the previous step's (unclipped: the sum; clipped: see the clip)
        e, t, _ = expected_step_gradient(run, run.params(k), rows, replace(loss, clip="none"), conv)
        previous = flat(run.recording.steps[k - 1].grads, names)
        summed = flat(e, names) + previous
        coef = min(1.0, float(run.config["max_grad_norm"]) / max(float(np.linalg.norm(summed)), 1e-300))
        if np.all(np.abs(actual - coef * summed) <= 4 * flat(t, names) + 1e-6 * np.abs(previous)):
            return ("the gradient is this step's plus the previous step's: gradients accumulate across minibatches "
                    "(optimizer.zero_grad() is missing, or called after backward)")
    if same(replace(loss, clip="group")):
        return ("the gradient is clipped to max_grad_norm separately for each parameter group (or module), not to one "
                "norm over every parameter")
    n_mb = minibatches_per_epoch(ctx, run.case.n, int(run.config["minibatch_size"]))
    first = (k // n_mb) * n_mb
    if k > 0 and first < run.steps:
        logp_start, _ = module_terms(run.case.kind, run.params(first), run.batch["actions"][rows], rows)
        if same(replace(loss, logp_old=logp_start)):
            return ("log pi_old is recomputed from the network at the start of each epoch (the ratio restarts at 1), not the "
                    "stored logp_old")
    if normalises(ctx, run.config) and len(rows) > 1:
        other = conv.but(advantage_normalization="minibatch" if conv.advantage_normalization == "batch" else "batch")
        A, tol = declared_advantages(run, rows, other, True)[0]
        if same(replace(loss, advantages=A, advantage_tol=tol)):
            scope = other.advantage_normalization
            return (f"the advantages are normalised over the {'whole batch' if scope == 'batch' else 'minibatch'}, but the "
                    f"candidate declares advantage_normalization = {conv.advantage_normalization!r}")
    if loss.value_clip is not None:  # these can coincide on one step: the one that holds on every step is named
        def everywhere(change) -> bool:
            for j in range(k, run.steps):
                first = step_losses(ctx, run, j, conv)[0]
                e, t, _ = expected_step_gradient(run, run.params(j), run.rows(j), change(first, j), conv)
                if not np.all(np.abs(flat(run.recording.steps[j].grads, names) - flat(e, names)) <= 4 * flat(t, names)):
                    return False
            return True

        critic = lambda j, at: run.params(at)["critic.weight"][0, run.rows(j)]
        unclipped = everywhere(lambda first, j: replace(first, value_clip=None))
        at_start = everywhere(lambda first, j: replace(first, values_old=critic(j, 0)))
        if at_start and not unclipped:
            return ("the value clip is centred on values recomputed from the network at the start of the update, not on the "
                    "stored values_old (bug C9)")
        if unclipped:
            return ("the value loss is not clipped against the stored values_old, though value clipping is on: no clip at all, "
                    "or one centred on values recomputed from the network (bug C9), which these steps cannot tell apart")
    elif same(replace(loss, value_clip=float(run.config["clip_eps"]), values_old=run.batch["values_old"][rows])):
        return ("the value loss is clipped against values_old with clip_eps, though value clipping is off: declare "
                "value_clipping = 'clip_eps' if the update always clips it")
    if same(replace(loss, clip="none")) and float(run.config["max_grad_norm"]) < 1e5:
        return "the gradient is not clipped to max_grad_norm"
    return ""


def judge_step(ctx, run: UpdateRun, k: int, conv: Conventions, *, what: str, names=None, cause="") -> None:
    """Step k's recorded gradient equals the declared loss's gradient on its rows at its parameters; the
    failure names the mistake it matches where it can (``cause``: a default, or a function giving one)."""
    names = list(names or [n for n in run.params(k) if run.params(k)[n] is not None])
    if len(run.rows(k)) == 0:
        raise ClauseFailure(f"{what}: step {k} of {run.steps} applied no gradient (no forward of the policy fed it)", call=run.code,
                            cause="optimizer.step() is called without a backward through a minibatch's loss")
    losses = step_losses(ctx, run, k, conv)
    mismatches = [step_mismatch(run, k, loss, conv, names) for loss in losses]
    if any(m is None for m in mismatches):
        return
    exp, actual, tol, labels, norm = mismatches[0]
    bad = ~(np.abs(actual - exp) <= tol)
    i = int(np.flatnonzero(bad)[0])
    table = "\n".join(f"{labels[j]:>24}  expected {exp[j]: .10g}  actual {actual[j]: .10g}  tol {tol[j]:.3g}"
                      for j in np.flatnonzero(bad)[:6])
    max_norm = float(run.config["max_grad_norm"])
    specific = diagnose_step(ctx, run, k, losses[0], conv, names, actual)
    cause = cause() if callable(cause) else cause
    if not specific and norm > max_norm and np.abs(actual).max() <= max_norm * (1 + 1e-6) and np.linalg.norm(actual) > max_norm * (1 + 1e-3):
        specific = "gradients clamped elementwise (clip_grad_value_), not scaled by one global norm"
    rows = run.rows(k)
    raise ClauseFailure(
        f"{what}: step {k} of {run.steps} (minibatch rows {rows.tolist()}): gradient of {labels[i]} expected {exp[i]:.10g}, "
        f"got {actual[i]:.10g} (tol {tol[i]:.3g}; {int(bad.sum())} of {bad.size} entries off; unclipped norm {norm:.6g}, "
        f"max_grad_norm {max_norm:g}, norm applied {np.linalg.norm(actual):.6g})",
        table=table, call=run.code, cause=specific or cause,
    )


# ---------------------------------------------------------------------------------------------
# ppo_update checks


def ratios_match(run: UpdateRun) -> bool:
    try:
        check_first_ratios(run, what="", cause="")
    except ClauseFailure:
        return False
    return True


def check_first_ratios(run: UpdateRun, *, what: str, cause: str):
    """The reported first-minibatch ratios (where the candidate returns them) equal exp(log pi_theta0 -
    stored logp_old) at their indices, and the indices are the rows the first step used.

    The candidate's log pi is computed by the same module (bit-identical per row) or by its own
    formula from the same parameters: within 8 u of the magnitudes it is computed from; the
    stored value is exact; the subtraction and exp add 4 u relative.
    """
    if run.ratios is None:
        return
    if sorted(run.indices.tolist()) != sorted(run.rows(0).tolist()):
        raise ClauseFailure(f"ppo_update reported indices {run.indices.tolist()} for its first minibatch; its first step used rows "
                            f"{run.rows(0).tolist()}", call=run.code, cause="the diagnostics describe another minibatch than the one stepped")
    logp, magnitude = module_terms(run.case.kind, run.params(0), run.batch["actions"][run.indices], run.indices)
    stored = run.batch["logp_old"][run.indices]
    expected = np.exp(logp - stored)
    tol = expected * (8 * run.u * (magnitude + np.abs(stored)) + 4 * run.u) + TINY
    assert_close(run.ratios, expected, tol, what=what, call=run.code, cause=cause)


RATIO_CONFIG = {"normalize_advantages": False, "ent_coef": 0.0}  # the actor's first gradient then depends on the ratios alone


@check("PPO-UPDATE-FIRST-RATIOS-ONE")
def update_first_ratios_one(ctx):
    """logp_old = the policy's own log-probabilities: the first step's actor gradient is that of ratios 1 (and
    the reported ratios, where returned, are 1), categorical and Gaussian."""
    conv = conventions(ctx)
    cause = ("the learner's log pi differs from the stored one: minibatch rows misaligned with logp_old, or the "
             "Gaussian log-prob averaged instead of summed over action dimensions")

    def verify(case, minibatch_size, seed):
        run = call_update(ctx, case, {**RATIO_CONFIG, "minibatch_size": minibatch_size, "seed": seed})
        check_first_ratios(run, what="first-minibatch ratios with logp_old stored at collection (expected 1)", cause=cause)
        judge_step(ctx, run, 0, conv, names=[n for n in ACTOR_PARAMETERS if n in run.params(0)], cause=cause,
                   what="the first step's actor gradient with logp_old stored at collection (ratios 1: the vanilla gradient)")
        check_finite_parameters(run)

    for case, size, seed in of_families(ctx, [(UpdateCase("categorical", n=8, seed=1), 4, 0), (UpdateCase("gaussian", n=8, seed=2), 3, 1)]):
        verify(case, size, seed)
    ctx.property(draws.first_ratio_cases(kinds=drawn_kinds(ctx)), lambda d: verify(UpdateCase(d[0], n=d[1], seed=d[2]), max(1, d[1] // 2), d[3]),
                 label="drawn", tier="enumeration")


OFFSETS = draws.OFFSETS  # d_i: distinct, never 0


def actor_moved(run: UpdateRun) -> bool:
    """Whether the first recorded step applied a non-zero gradient to an actor parameter."""
    steps = run.recording.steps
    return bool(steps) and any(g is not None and np.any(g) for n, g in steps[0].grads.items() if n in ACTOR_PARAMETERS)


@check("PPO-UPDATE-STORED-LOGP-OLD")
def update_stored_logp_old(ctx):
    """logp_old = log pi - d: the first step's actor gradient is that of ratios exp(d) (clip_eps 10: none is
    clipped); ratios 1 mean log pi_old was recomputed."""
    conv = conventions(ctx)

    def verify(case, minibatch_size, seed):
        run = call_update(ctx, case, {**RATIO_CONFIG, "clip_eps": 10.0, "minibatch_size": minibatch_size, "seed": seed})
        names = [n for n in ACTOR_PARAMETERS if n in run.params(0)]

        def cause():  # on a failure only: no actor gradient at all, or do the ratios look like 1?
            if not actor_moved(run):
                # clip_eps 10 keeps every ratio unclipped; 1 - clip_eps < 0 only leaves the lower end of the clip
                # inactive (a ratio is positive). The same update at clip_eps 1 tells a clip that breaks above 1
                # from a policy loss that never reaches the actor.
                try:
                    at_one = call_update(ctx, case, {**RATIO_CONFIG, "clip_eps": 1.0, "minibatch_size": minibatch_size,
                                                     "seed": seed})
                except Exception:  # noqa: BLE001 - a diagnosis only: the failure stands as reported
                    at_one = None
                if at_one is not None and actor_moved(at_one):
                    return ("the first step's actor gradient is exactly 0 at clip_eps = 10 and not at clip_eps = 1: the clip "
                            "breaks above 1, where its lower end 1 - clip_eps < 0 should only be inactive (a clip taken in "
                            "log space, log(1 - clip_eps), is NaN there, and min(r A, NaN) carries no gradient)")
                return "the first step's actor gradient is exactly 0: the policy loss does not reach the actor"
            rows = run.rows(0)
            own = module_terms(case.kind, run.params(0), run.batch["actions"][rows], rows)[0]
            if step_mismatch(run, 0, replace(step_losses(ctx, run, 0, conv)[0], logp_old=own), conv, names) is None:
                return ("log pi_old is recomputed from the current network (per minibatch or at the start of the update): the "
                        "ratio is 1 and the clip never acts")
            return "the ratios are not taken against the stored logp_old of the same samples"

        if run.ratios is not None:
            check_first_ratios(run, what="first-minibatch ratios with stored logp_old = log pi - d (expected exp(d))",
                               cause=cause() if not ratios_match(run) else "")
        judge_step(ctx, run, 0, conv, names=names, cause=cause,
                   what="the first step's actor gradient with stored logp_old = log pi - d (ratios exp(d))")
        check_finite_parameters(run)

    for case, size, seed in of_families(ctx, [(UpdateCase("categorical", n=8, seed=3, offset=OFFSETS), 4, 0),
                                              (UpdateCase("gaussian", n=8, seed=4, offset=OFFSETS), 8, 1)]):
        verify(case, size, seed)
    ctx.property(draws.stale_cases(kinds=drawn_kinds(ctx)),
                 lambda d: verify(UpdateCase(d[0], n=len(d[1]), seed=d[2], offset=tuple(d[1])), max(1, len(d[1]) // 2), d[2]),
                 label="drawn", tier="enumeration")


@check("PPO-UPDATE-FIRST-STEP-GRADIENT")
def update_first_step_gradient(ctx):
    """The first step's gradient: loss composition, normalisation scope (half-batch minibatches) and global-norm clip."""
    conv = conventions(ctx)
    common = {"vf_coef": 0.5, "ent_coef": 0.05, "epochs": 1}

    def verify(case, config, what):
        run = call_update(ctx, case, {**common, **config})
        judge_step(ctx, run, 0, conv, what=what)
        check_finite_parameters(run)  # a later one-sample minibatch must not leave NaN behind

    cases = [(UpdateCase("categorical", n=8, seed=11), {"minibatch_size": 4, "seed": 0}, "categorical, minibatch 4 of 8, no clipping"),
             (UpdateCase("gaussian", n=8, seed=12), {"minibatch_size": 4, "seed": 1}, "Gaussian, minibatch 4 of 8, no clipping"),
             (UpdateCase("gaussian", n=6, seed=13), {"minibatch_size": 6, "max_grad_norm": 0.05, "seed": 2},
              "Gaussian, whole batch, max_grad_norm 0.05"),
             (UpdateCase("categorical", n=6, seed=14), {"minibatch_size": 6, "max_grad_norm": 0.05, "seed": 3},
              "categorical, whole batch, max_grad_norm 0.05")]
    for case, config, what in of_families(ctx, cases):
        verify(case, config, what)
    ctx.property(draws.first_step_cases(common=common, kinds=drawn_kinds(ctx)),
                 lambda d: verify(UpdateCase(d[0][0], n=d[0][1], seed=d[0][2]), d[1], "drawn"), label="drawn", tier="enumeration")


def check_every_step(ctx, case: UpdateCase, config: dict, *, what: str, conv: Conventions | None = None):
    conv = conv or conventions(ctx)
    run = call_update(ctx, case, config)
    for k in range(run.steps):
        judge_step(ctx, run, k, conv, what=what)
    check_finite_parameters(run)
    return run


@check("PPO-UPDATE-STEP-GRADIENTS")
def update_step_gradients(ctx):
    """Every step: the gradient of the declared loss on that step's rows at that step's parameters (zero_grad,
    stored logp_old every epoch, the declared normalisation scope, one global clip norm), parameters finite."""
    common = {"vf_coef": 0.5, "ent_coef": 0.05}
    cases = [
        # 2 minibatches x 3 epochs: accumulation, logp_old refreshed per epoch, normalisation scope
        (UpdateCase("categorical", n=8, seed=21), {"epochs": 3, "minibatch_size": 4, "seed": 0}, "categorical, 3 epochs of 2 minibatches"),
        # the global clip binds on every step (two parameter groups); the last minibatch holds one sample
        (UpdateCase("gaussian", n=7, seed=22, lr=0.2), {"epochs": 2, "minibatch_size": 3, "max_grad_norm": 0.05, "seed": 1},
         "Gaussian, 2 epochs of 7 samples in minibatches of 3 (a remainder of one), max_grad_norm 0.05"),
        (UpdateCase("categorical", n=6, seed=23), {"epochs": 2, "minibatch_size": 3, "max_grad_norm": 0.05, "seed": 2},
         "categorical, 2 epochs of 2 minibatches, max_grad_norm 0.05"),
        (UpdateCase("gaussian", n=8, seed=24, lr=0.2), {"epochs": 3, "minibatch_size": 4, "seed": 3}, "Gaussian, 3 epochs of 2 minibatches"),
    ]
    for case, config, what in of_families(ctx, cases):
        check_every_step(ctx, case, {**common, **config}, what=what)
    ctx.property(draws.update_cases(common=common, kinds=drawn_kinds(ctx)),
                 lambda d: check_every_step(ctx, UpdateCase(d[0][0], n=d[0][1], seed=d[0][2], lr=d[0][3]), d[1], what="drawn"),
                 label="drawn", tier="enumeration")


@check("PPO-UPDATE-VALUE-CLIPPING")
def update_value_clipping(ctx):
    """With value clipping on, every step's value gradient is that of max((V - R)^2, (V_old + clip(V - V_old) - R)^2)
    against the stored values_old; not applicable where the candidate declares it absent."""
    if ctx.convention("value_clipping") == "none":
        raise NotProvided("not-applicable: value clipping declared absent (value_clipping = 'none')")
    common = {"vf_coef": 0.5, "ent_coef": 0.0, "value_clip_eps": 0.2}
    cases = [
        (UpdateCase("categorical", n=8, seed=31, value_spread=0.4), {"epochs": 2, "minibatch_size": 4, "seed": 0},
         "categorical, values_old = V + N(0, 0.4^2), value_clip_eps 0.2"),
        (UpdateCase("gaussian", n=6, seed=32, lr=0.2, value_spread=0.4), {"epochs": 2, "minibatch_size": 3, "seed": 1},
         "Gaussian, values_old = V + N(0, 0.4^2), value_clip_eps 0.2"),
    ]
    if ctx.convention("value_clipping") == "clip_eps":
        ctx.note("judged with the value loss clipped by clip_eps (value_clipping 'clip_eps'); value_clip_eps is not read")
    for case, config, what in of_families(ctx, cases):
        check_every_step(ctx, case, {**common, **config}, what=what)
    ctx.property(draws.value_clip_cases(common=common, kinds=drawn_kinds(ctx)),
                 lambda d: check_every_step(ctx, UpdateCase(d[0][0], n=d[0][1], seed=d[0][2], lr=d[0][3], value_spread=d[0][4]), d[1],
                                            what="drawn"),
                 label="drawn", tier="enumeration")


def check_minibatches(ctx, case: UpdateCase, config: dict, *, what: str):
    """target_kl None: epochs x (minibatches per epoch) steps; each epoch's minibatches of minibatch_size partition
    the batch (the remainder a smaller last one, dropped, or merged into the last, as declared); not the same order
    every epoch."""
    config = {**BASE_CONFIG, **config, "target_kl": None}
    run = call_update(ctx, case, config)
    check_finite_parameters(run)
    n, size, epochs = case.n, int(config["minibatch_size"]), int(config["epochs"])
    per_epoch = minibatches_per_epoch(ctx, n, size)
    expected = epochs * per_epoch
    remainder = ctx.convention("minibatch_remainder")
    if run.steps != expected:
        hint = ""
        if run.steps in ((epochs + 1) * per_epoch, (epochs - 1) * per_epoch):
            hint = f"the update ran {run.steps // per_epoch} epochs of {per_epoch} minibatches: epochs off by one"
        elif run.steps == epochs:
            hint = "one step per epoch: the whole batch in one minibatch"
        else:
            hint = _other_remainder(run, n, size, epochs, remainder) or _floor_split(run, n, size, epochs)
        raise ClauseFailure(
            f"{what}: ppo_update took {run.steps} optimizer steps; {epochs} epochs of {per_epoch} minibatches of {size} "
            f"({n} samples, remainder {remainder}) make {expected}", call=run.code,
            cause=hint or "the update's loop does not run epochs x minibatches steps")
    want = sorted(minibatch_sizes(remainder, n, size))
    orders = []
    for e in range(epochs):
        minibatches = [run.rows(k) for k in range(e * per_epoch, (e + 1) * per_epoch)]
        rows = np.concatenate(minibatches)
        sizes = sorted(len(m) for m in minibatches)
        complete = sorted(rows.tolist()) == list(range(n)) if remainder != "dropped" else len(set(rows.tolist())) == len(rows)
        if sizes != want or not complete:
            partition = sorted(rows.tolist()) == list(range(n))
            cause = (_other_remainder(run, n, size, epochs, remainder) or
                     f"the minibatches partition the batch, but in sizes {sizes}, not the {want} of minibatch_size {size}"
                     if partition else "samples repeated or left out within an epoch (sampling with replacement, or a wrong slice)")
            raise ClauseFailure(
                f"{what}: epoch {e}'s minibatches are {[m.tolist() for m in minibatches]}; they must partition the {n} samples "
                f"into minibatches of sizes {want} (minibatch_size {size}, remainder {remainder})",
                call=run.code, cause=cause)
        orders.append(rows.tolist())
    if epochs >= 2 and all(order == orders[0] for order in orders):
        raise ClauseFailure(
            f"{what}: every one of the {epochs} epochs visits the samples in the same order {orders[0]}; each epoch must draw a "
            f"fresh order (two independent uniform orders of {n} samples coincide with probability 1/{n}!)",
            call=run.code, cause="the batch is shuffled once before the epochs (or never), not at the start of every epoch")


@check("PPO-UPDATE-MINIBATCHES")
def update_minibatches(ctx):
    """Epochs x ceil(B / minibatch) steps, each epoch's minibatches a partition of the batch, a fresh order every epoch."""
    cases = [
        (UpdateCase("categorical", n=8, seed=41), {"epochs": 4, "minibatch_size": 3, "seed": 0}, "categorical, 8 samples, minibatch 3, 4 epochs"),
        (UpdateCase("gaussian", n=9, seed=42, lr=0.2), {"epochs": 3, "minibatch_size": 4, "seed": 1}, "Gaussian, 9 samples, minibatch 4, 3 epochs"),
    ]
    for case, config, what in of_families(ctx, cases):
        check_minibatches(ctx, case, config, what=what)
    ctx.property(draws.minibatch_cases(kinds=drawn_kinds(ctx)),
                 lambda d: check_minibatches(ctx, UpdateCase(d[0], n=d[1], seed=d[2], lr=0.2), d[3], what="drawn"),
                 label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# the KL early stop
#
# tolerances. The candidate's k3 term for sample i is k3(x_i + e_i) with |e_i| <= 8 u (magnitude_i +
# |logp_old_i|) (its log-ratio, as above) evaluated in its precision. Exactly,
#   k3(x + e) - k3(x) = expm1(x) e + e^x (e^e - 1 - e),  |e^e - 1 - e| <= e^2 e^|e| / 2,
# so the first-order term |expm1(x)| e is not enough where x = 0 (logp_old the policy's own: a float32-
# stored logp_old, or log-probabilities through re-normalised logits, put x a rounding away from 0 while
# the exact k3 is 0): the second-order term e^(x + |e|) e^2 / 2 stays. Evaluating k3 adds 4 u (e^x + |x|
# + |expm1 x|): the naive (exp(x) - 1) - x rounds exp(x) ~ 1 to u, which at |x| ~ 1e-16 is the whole
# value. The mean over B adds B u times it. Doubled for the oracle.


def k3(x):
    return np.expm1(x) - x


def minibatch_kl(run: UpdateRun, params: dict, rows: np.ndarray) -> tuple[float, float]:
    """k3 of the rows at ``params`` against the stored logp_old, and its tolerance (above)."""
    if len(rows) == 0:  # a step no forward fed (it applied no gradient)
        return 0.0, TINY
    logp, magnitude = module_terms(run.case.kind, params, run.batch["actions"][rows], rows)
    stored = run.batch["logp_old"][rows]
    x = logp - stored
    e = 8 * run.u * (magnitude + np.abs(stored))
    terms = (np.abs(np.expm1(x)) * e + np.exp(x + e) * e**2 / 2 + 4 * run.u * (np.exp(x) + np.abs(x) + np.abs(np.expm1(x))))
    value = float(np.mean(k3(x)))
    return value, 2 * float(np.mean(terms) + len(x) * run.u * abs(value)) + TINY


def kl_and_tolerance(run: UpdateRun, step: int) -> tuple[float, float]:
    """k3 over the whole batch at the parameters after ``step`` steps, and its tolerance."""
    return minibatch_kl(run, run.optimizer.snapshots[step], np.arange(run.case.n))


def step_kls(run: UpdateRun) -> list[tuple[float, float]]:
    """Each step's minibatch KL, measured on its rows before its step (what a stop rule reads)."""
    return [minibatch_kl(run, run.params(k), run.rows(k)) for k in range(run.steps)]


def trailing_kl(run: UpdateRun) -> tuple[np.ndarray, float, float] | None:
    """The minibatch evaluated after the last step (the one whose KL stopped the update before its step)."""
    trailing = [f for f in run.recording.trailing() if f.rows is not None]
    if not trailing:
        return None
    rows = trailing[-1].rows
    params = run.recording.steps[-1].after
    return (rows, *minibatch_kl(run, params, rows))


@dataclass(frozen=True)
class StopRule:
    place: str  # "epoch" (tested after each epoch) or "minibatch" (before each minibatch's step)
    statistic: str  # "last-minibatch" or "epoch-mean"
    u: float = U64  # the candidate's unit roundoff: its mean of m minibatch KLs adds m u relative

    def text(self) -> str:
        where = "after each epoch" if self.place == "epoch" else "before each minibatch's step"
        what = "the last minibatch's KL" if self.statistic == "last-minibatch" else "the mean of the epoch's minibatch KLs"
        if self.place == "minibatch" and self.statistic == "last-minibatch":
            what = "that minibatch's KL"
        elif self.place == "minibatch":
            what = "the mean of the epoch's minibatch KLs so far"
        return f"{what}, tested {where} (kl_stop {self.place!r}, kl_stop_statistic {self.statistic!r})"

    def statistics(self, kls, per_epoch: int):
        """(index, value, tol) of each comparison the rule makes on a path of per-step minibatch KLs (value,
        tol): after each complete epoch, or at each step. The index is the step count when it is made."""
        out = []
        for s, (value, tol) in enumerate(kls):
            epoch_start = (s // per_epoch) * per_epoch
            window = kls[epoch_start : s + 1]
            if self.statistic == "epoch-mean":
                value = float(np.mean([v for v, _ in window]))
                tol = float(np.mean([t for _, t in window])) + 2 * len(window) * self.u * abs(value) + TINY
            if self.place == "minibatch":
                out.append((s, value, tol))
            elif (s + 1) % per_epoch == 0:
                out.append((s + 1, value, tol))
        return out

    def stop(self, kls, per_epoch: int, threshold: float) -> int | None:
        """The number of steps the rule allows before stopping (None: it never stops on this path)."""
        for index, value, _ in self.statistics(kls, per_epoch):
            if value > threshold:
                return index
        return None


KL_EPOCHS = 8
KL_LR = {"categorical": 0.5, "gaussian": 0.02}  # KL grows about quadratically over the steps


def place_threshold(rule: StopRule, kls, per_epoch: int, step_at: int) -> float | None:
    """A threshold between two of the declared rule's statistics with a clear gap (at least 1.5x) that lets at
    least ``step_at`` of the rule's tests pass before it stops, preferring one where the other statistic at the
    same place stops elsewhere (so an update that reads the other statistic is caught), then one where the
    other place does."""
    stats = rule.statistics(kls, per_epoch)
    values = sorted({v for _, v, _ in stats})
    gaps = [math.sqrt(a * b) for a, b in zip(values, values[1:]) if b > 1.5 * a and b > 1e-6 and a > 0]
    # a threshold within a statistic's rounding tolerance cannot be called: a candidate in float32 (logp_old and
    # actions stored in float32) measures k3 ~ 1e-15 where the exact one is ~0, and would stop before any step
    gaps = [t for t in gaps if all(abs(v - t) > tol for _, v, tol in stats)]

    def tests_passed(t):
        return next((p for p, (_, v, _) in enumerate(stats) if v > t), None)

    usable = [t for t in gaps if tests_passed(t) is not None and tests_passed(t) >= min(step_at, len(stats) - 1)]
    others = [StopRule(rule.place, "epoch-mean" if rule.statistic == "last-minibatch" else "last-minibatch", rule.u),
              StopRule("minibatch" if rule.place == "epoch" else "epoch", rule.statistic, rule.u)]
    for other in others:
        telling = [t for t in usable if other.stop(kls, per_epoch, t) != rule.stop(kls, per_epoch, t)]
        if telling:
            return telling[0]
    return usable[0] if usable else None


def check_kl_stop(ctx, case: UpdateCase, seed: int, step_at: int = 2, *, minibatch_size: int | None = None, epochs: int = KL_EPOCHS):
    """A free run (target_kl None) gives the candidate's own parameter path and each step's minibatch KL. A
    threshold between two of the declared statistic's values (placed where the other statistics would stop
    elsewhere) must then stop the update exactly where the declared rule, applied to the second run's own
    recording, says: no step after it, none missing before it."""
    conv = conventions(ctx)
    rule = StopRule(conv.kl_stop, conv.kl_stop_statistic)
    size = minibatch_size or case.n
    per_epoch = minibatches_per_epoch(ctx, case.n, size)
    # clip_eps 10: with positive advantages every ratio grows, and a clip at 1.2 would freeze the
    # policy (and its KL) after a step or two; the stop rule does not depend on the clip.
    config = {"epochs": epochs, "minibatch_size": size, "normalize_advantages": False, "seed": seed, "clip_eps": 10.0}
    free = call_update(ctx, case, {**config, "target_kl": None})
    check_finite_parameters(free)
    rule = replace(rule, u=free.u)
    if free.steps != epochs * per_epoch:
        off_by_one = free.steps in ((epochs + 1) * per_epoch, (epochs - 1) * per_epoch)
        raise ClauseFailure(
            f"with target_kl None and {epochs} epochs of {per_epoch} minibatches, ppo_update took {free.steps} optimizer steps; "
            f"expected {epochs * per_epoch}", call=free.code, diagnosed=off_by_one,  # else the usual suspects, unread
            cause=f"the update ran {free.steps // per_epoch} epochs of {per_epoch} minibatch{'es' if per_epoch > 1 else ''}: epochs off "
                  "by one" if off_by_one else
            "the update stops early without a KL target, or steps more than once per minibatch")
    kls = step_kls(free)
    threshold = place_threshold(rule, kls, per_epoch, step_at)
    if threshold is None:
        whole = kl_and_tolerance(free, free.steps)[0]
        if whole <= 1e-12:
            raise ClauseFailure(f"{free.steps} steps did not move the policy: exact KL(old || new) after them is {whole:.3g}",
                                call=free.code, cause="the update does not change the policy")
        return False  # a drawn case whose KL does not grow clearly enough to place a threshold
    factor = conv.kl_stop_factor
    target = threshold / factor if factor > 0 else threshold
    run = call_update(ctx, case, {**config, "target_kl": target})
    return verify_stop(run, rule, per_epoch, threshold, target, factor, epochs)


def untaken_minibatches(run: UpdateRun):
    """(steps before it, rows, k3, tol) of each minibatch evaluated during the update whose forward fed no step and
    after which steps still followed: where kl_stop is "minibatch", a test that fired leaves exactly such a
    forward. Forwards of more rows than a minibatch (a collector's or a logger's pass over the batch) and repeats
    of the next step's own rows (a separate no-grad forward for the KL) are not minibatches left untaken."""
    fed = {i for step in run.recording.steps for i in step.forwards}
    size, seen, out = run.config["minibatch_size"], set(), []
    for f in run.recording.forwards:
        if f.index in fed or f.rows is None or len(f.rows) == 0 or f.version >= run.steps or len(f.rows) > size:
            continue
        key = (f.version, frozenset(f.rows.tolist()))
        if key in seen or key[1] == frozenset(run.rows(f.version).tolist()):
            continue
        seen.add(key)
        out.append((f.version, f.rows, *minibatch_kl(run, run.params(f.version), f.rows)))
    return out


def check_no_step_after_fired_test(run: UpdateRun, rule: StopRule, kls, per_epoch: int, threshold: float, where: str) -> None:
    """Under kl_stop "minibatch", a minibatch evaluated and not stepped on, whose test (the declared statistic with
    it as the latest minibatch) clearly exceeds the threshold, is a stop that fired: no step may follow it. Its
    own recording's step KLs cannot show it (every step taken passed its test), so the untaken forward is read."""
    if rule.place != "minibatch":
        return
    untaken = untaken_minibatches(run)
    if untaken:  # the first: up to it every minibatch was stepped on, so the epochs' windows are the steps'
        before, rows, value, tol = untaken[0]
        stats = rule.statistics(kls[:before] + [(value, tol)], per_epoch)
        if any(v > threshold for _, v, _ in stats[:-1]):
            return  # an earlier test fired on the steps themselves: the step count says so
        _, statistic, stat_tol = stats[-1]
        if statistic > threshold + stat_tol:
            raise ClauseFailure(
                f"with {where} ppo_update evaluated the minibatch of rows {rows.tolist()} after {before} optimizer steps, "
                f"where {rule.text()} was {statistic:.4g} > {threshold:.4g}, took no step on it (the stop fired), and then "
                f"took {run.steps - before} more optimizer step{'s' if run.steps - before > 1 else ''}", call=run.code,
                cause="a step after the stop fired: the break leaves only the minibatch loop, and the next epoch tests its "
                "first minibatch again and steps while that minibatch's KL is below the target")


def other_rule_stopping_at(steps: int, rule: StopRule, path, per_epoch: int, threshold: float, epochs: int) -> str:
    """The cause where exactly one other rule (place x statistic), applied to the same recorded KLs, stops after
    ``steps``, clear of the threshold at every test it makes up to there; else "" (the numbers single out none)."""
    found = []
    for place in ("minibatch", "epoch"):
        for statistic in ("last-minibatch", "epoch-mean"):
            other = replace(rule, place=place, statistic=statistic)
            if other == rule:
                continue
            stats = other.statistics(path, per_epoch)
            decided = [(i, v, t) for i, v, t in stats if i <= steps]
            if any(abs(v - threshold) <= t for _, v, t in decided):
                continue  # too close to call
            stops = other.stop(path, per_epoch, threshold)  # 0: before any step, None: never
            if (epochs * per_epoch if stops is None else stops) == steps:
                found.append(other)
    if len(found) != 1:
        return ""
    other = found[0]
    return (f"the stop reads {other.text()}, not the declared rule; declare kl_stop = {other.place!r} and "
            f"kl_stop_statistic = {other.statistic!r} if that is the design")


def verify_stop(run: UpdateRun, rule: StopRule, per_epoch: int, threshold: float, target: float, factor: float, epochs: int) -> bool:
    kls = step_kls(run)
    trailing = trailing_kl(run)
    path = kls + ([(trailing[1], trailing[2])] if trailing is not None and rule.place == "minibatch" else [])
    stats = rule.statistics(path, per_epoch)
    described = ", ".join(f"{v:.4g}" for _, v, _ in stats[:10])
    where = f"target_kl = {target:.4g} (x factor {factor:g}: threshold {threshold:.4g})"
    check_no_step_after_fired_test(run, rule, kls, per_epoch, threshold, where)
    for index, value, tol in stats:
        if abs(value - threshold) <= tol:
            return False  # too close to call
        if value > threshold:
            expected = index
            break
    else:
        expected = epochs * per_epoch
    # k3 is never negative; k1 is, once the sampled actions gained probability (all zero: a ratio of 1 says nothing)
    k1_like = run.approx_kl is not None and len(run.approx_kl) > 0 and bool(np.all(run.approx_kl <= 0)) \
        and bool(np.any(run.approx_kl < 0))
    other = other_rule_stopping_at(run.steps, rule, path, per_epoch, threshold, epochs)
    if run.steps > expected and not other:  # what the step count alone singles out
        if run.steps == epochs * per_epoch:
            other = "the update never stopped: target_kl is not read (a renamed setting), or its test never fires"
        elif run.steps == expected + 1:
            other = "one optimizer step follows the stop: the test (or the break) takes effect only after the next step"
    if run.steps > expected:
        raise ClauseFailure(
            f"with {where} ppo_update took {run.steps} optimizer steps; the stop rule fired after {expected}: {rule.text()} was "
            f"{described} at its successive tests (exact k3 of each minibatch, measured before its step), and no step may follow",
            call=run.code, diagnosed=k1_like or bool(other),  # otherwise the usual suspects, not read from the numbers
            cause="approx_kl is k1 = mean(-log r), which is <= 0 when the sampled actions gained probability" if k1_like else
            other or "a step is taken after the stop fired, target_kl is not read, or the rule reads another statistic or tests at "
            "another place than declared")
    if run.steps < expected:
        if rule.place == "minibatch" and trailing is None:
            reason = "without evaluating the minibatch it stopped before"
        else:
            reason = f"although {rule.text()} was {described} at its tests"
        raise ClauseFailure(
            f"with {where} ppo_update stopped after {run.steps} optimizer steps {reason}; the declared rule stops after {expected}",
            call=run.code, diagnosed=bool(other),  # otherwise the usual suspects, not read from the numbers
            cause=other or "the rule reads another statistic (the last minibatch's KL or the epoch mean), tests at another "
            "place than declared, or compares another quantity with target_kl")
    compared = [s for s in stats if s[0] <= expected]
    if run.approx_kl is not None:
        if len(run.approx_kl) != len(compared):
            raise ClauseFailure(f"ppo_update reported {len(run.approx_kl)} approx_kl values; its stop rule made {len(compared)} "
                                f"comparisons (one per test up to and including the one that stopped it)", call=run.code,
                                cause="approx_kl must list every value the stop rule compared with target_kl")
        assert_close(run.approx_kl, [v for _, v, _ in compared], [t for _, _, t in compared],
                     what=f"reported approx_kl vs {rule.text()}", call=run.code,
                     cause="approx_kl is not the k3 estimate of KL(old || new), measured before the step",
                     diagnose=lambda a: "the values are <= 0: they look like k1 = mean(-log r)" if np.all(a <= 0) and np.any(a < 0) else "")
    stepped = len({k // per_epoch for k in range(run.steps)})
    if run.epochs is not None and run.epochs != stepped:
        raise ClauseFailure(f"ppo_update reported epochs = {run.epochs}; it took a step in {stepped} epochs",
                            call=run.code, cause="epochs must count the epochs in which the update took a step")
    return True


KL_CASES = [  # (case, minibatch size, epochs, shuffle seed)
    # one minibatch per epoch: k1 goes negative while k3 grows; a target never read; a step after the stop
    (UpdateCase("categorical", n=6, seed=5, lr=KL_LR["categorical"], positive=True), 6, KL_EPOCHS, 0),
    # two and three minibatches per epoch: thresholds where the last minibatch's KL and the epoch mean stop at
    # different epochs, both ways (tests/test_ppo.py pins that they exist)
    (UpdateCase("categorical", n=8, seed=6, lr=0.3, positive=True), 4, 6, 1),
    (UpdateCase("gaussian", n=9, seed=8, lr=0.01, positive=True), 3, 5, 3),
    # per-row KLs far apart: six of eight rows have advantage 0 and keep k3 = 0, so after a test fires a later
    # epoch soon opens with a minibatch of them that passes it; a loop whose break leaves only the minibatch
    # loop then steps again (under kl_stop "minibatch"), and the statistics' windows differ strongly
    (UpdateCase("categorical", n=8, seed=6, lr=0.5, positive=True, idle=(0, 1, 2, 3, 4, 5)), 2, 8, 0),
]


@check("PPO-UPDATE-KL-EARLY-STOP")
def update_kl_early_stop(ctx):
    """Positive advantages (k1 goes negative while k3 grows): stop exactly where the declared rule says,
    on one and on several minibatches per epoch (where the last minibatch's KL and the epoch mean differ)."""
    for case, size, epochs, seed in of_families(ctx, KL_CASES):
        check_kl_stop(ctx, case, seed, minibatch_size=size, epochs=epochs)
    ctx.property(draws.kl_stop_cases(kinds=drawn_kinds(ctx)),
                 lambda d: check_kl_stop(ctx, UpdateCase(d[0], n=d[1], seed=d[2], lr=KL_LR[d[0]], positive=True), seed=d[2],
                                         step_at=d[3], minibatch_size=max(2, d[1] // d[4]), epochs=6),
                 label="drawn", tier="kl-stop")
