"""Checks for the token-level RLHF chapter (``spec/clauses/80_rlhf.toml``).

Inputs are (B, L) rows: ``mask`` True on a row's real tokens. Every check starts from known
answers measured on verl and OpenRLHF (the same on every seed), then searches drawn rows. Expected numbers come
from the formulas in float64 on the exact inputs the candidate received: for ``token_gae`` the
time-major reference GAE (:func:`rlspec.reference.gae.gae`) run on each row's real tokens alone
(the row compacted, its last real token terminal), which is an independent formulation of the
skip rule; for the losses the exact per-token weights and the clipped objective of the PPO chapter.

Garbage. Masked positions hold large finite numbers (a model's outputs at pad positions), never
NaN or inf: implementations that multiply by the mask (verl, OpenRLHF) turn NaN into NaN, and no
forward pass produces one. Outputs at masked positions are not compared.

Conventions (log_ratio_clamp, seq_mean_token_mean_eps, aggregate_loss_modes) are the contract's
(spec/contract/80_rlhf.toml).

Tolerances (u: the unit roundoff judged; eta: the smallest normal number of that precision, the
absolute loss of one rounding below it):

* token_gae: :func:`rlspec.checks.kit.tolerances.gae_tolerance` on the compacted row. A correct
  implementation on the padded row adds no rounding at masked positions: carrying a value through
  a masked position is a selection or ``x * 1 + y * 0``, both exact for finite x, y.
* assemble_rewards: the coefficient rounded to the candidate's precision (u |b kl|), the product
  (u |b kl|), the score's addition (u (|b kl| + |s|)); doubled for the float64 oracle:
  ``2 u (3 |b kl| + |s|) + 4 eta``.
* aggregate_loss: the loss is ``sum_i w_i l_i`` over N real tokens; each weight is formed with at
  most 3 roundings (a count, one or two divisions), each term with one more product, the input
  rounded once, and any order of summation of N + B terms adds N + B - 1 roundings to each term:
  ``2 u (N + B + 6) sum |w l| + 8 eta``; the gradient at a real token is the weight through the same
  divisions: ``2 u 6 w + 8 eta``; at a masked position it must be exactly 0.
* token_ppo_loss: the PPO chapter's per-sample bounds with the 1/B of a mean removed (a sum):
  ``2 u sum_i (m_i + N + 6) R_i + 16 eta`` and per token ``2 u (m_i + 8) r_i |A_i| + 16 eta``.
"""

from __future__ import annotations

import math

import numpy as np

from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close, matches
from ..kit.clipping import ClipRange, clip_objective, log_derivative_bounds, ratio_relative_error
from ..kit.gradients import leaf_gradient
from ..kit.strategies import normal_floats, rounded
from ..kit.strategies import tokens as draws
from ..kit.strategies.tokens import GaeCase, gae_case
from ..kit.registry import check
from ...spec import contract
from ..kit.tolerances import TINY, gae_tolerance, returns_tolerance, smallest_normal, sum_identity_tolerance, tiny
from ...reference import gae as gae_ref

# ---------------------------------------------------------------------------------------------
# token_gae


def compacted_gae(case: GaeCase, u: float):
    """(advantages, tolerance) at real tokens from the reference GAE on each compacted row (0 elsewhere)."""
    advantages, tol = np.zeros(case.mask.shape), np.zeros(case.mask.shape)
    for b in range(case.mask.shape[0]):
        where = np.flatnonzero(case.mask[b])
        if not len(where):
            continue
        r, v = case.rewards[b, where], case.values[b, where]
        following = np.append(v[1:], 0.0)  # V of the next real token; the last one is terminal
        flags = np.zeros(len(where), dtype=bool)
        terminal = flags.copy()
        terminal[-1] = True
        advantages[b, where], _ = gae_ref.gae(r, v, following, terminal, flags, case.gamma, case.lam)
        tol[b, where] = gae_tolerance(r, v, following, terminal, flags, case.gamma, case.lam, u)
    return advantages, tol


def call_token_gae(ctx, case: GaeCase):
    """The candidate's (advantages, returns, call, case as received)."""
    case = case.rounded(ctx.dtype)
    call = ctx.call("token_gae", case.arguments(), outputs=2, shape=case.mask.shape, allow_nonfinite=True)
    advantages, returns = call.outputs
    return advantages, returns, call, case


# known-wrong computations, for diagnoses only


def _plain_recursion(rewards, values, gamma, lam):
    """GAE over every position of each row, the row end terminal."""
    B, L = rewards.shape
    out, running, next_value = np.zeros((B, L)), np.zeros(B), np.zeros(B)
    for t in reversed(range(L)):
        running = rewards[:, t] + gamma * next_value - values[:, t] + gamma * lam * running
        next_value = values[:, t]
        out[:, t] = running
    return out


def _wrong_gae(case: GaeCase) -> list[tuple[np.ndarray, str]]:
    with np.errstate(all="ignore"):
        zeroed = _plain_recursion(case.rewards * case.mask, case.values * case.mask, case.gamma, case.lam)
        uniform = _plain_recursion(case.rewards, case.values, case.gamma, case.lam)
        right, _ = compacted_gae(case, 1e-16)
        real = right[case.mask]
        whitened = np.where(case.mask, (right - real.mean()) / math.sqrt((real.var(ddof=1) if real.size > 1 else 0.0) + 1e-8), 0.0)
        flat = compacted_gae(GaeCase(case.rewards.reshape(1, -1), case.values.reshape(1, -1), case.mask.reshape(1, -1),
                                     case.gamma, case.lam), 1e-16)[0].reshape(case.mask.shape)
    return [
        (zeroed, "masked positions are zeroed (r = V = 0) instead of skipped: each is a discount step with V = 0 "
                 "(OpenRLHF's get_advantages_and_returns multiplies values and rewards by the mask)"),
        (uniform, "the mask is ignored inside the recursion: masked tokens are steps and their rewards and values "
                  "enter the real tokens' advantages (bugs G1, G2)"),
        (whitened, "the advantages are whitened inside the function (verl's compute_gae_advantage_return returns "
                   "masked_whiten(A)); token_gae returns raw advantages"),
        (flat, "the rows are run as one flattened sequence: the trace runs from one row into the next"),
    ]


def _diagnose_gae(case: GaeCase, real):
    def diagnose(actual):
        actual = actual[real] if actual.shape == real.shape else np.ravel(actual)
        for wrong, cause in _wrong_gae(case):
            wrong = wrong[real]
            if wrong.shape == actual.shape and np.all(np.isfinite(wrong)) and matches(actual, wrong, 1e-6 * (1 + np.abs(wrong))):
                return cause
        return ""

    return diagnose


def at_real(actual, expected, tol, real):
    """(actual, expected, tol) over the whole (B, L) array, masked positions made to agree exactly, so a
    failure names its (row, position) and outputs at masked positions (not part of the meaning) never fail."""
    return np.where(real, actual, 0.0), np.where(real, expected, 0.0), np.where(real, tol, 0.0)


def verify_gae(ctx, case: GaeCase, *, what: str, cause: str = "", returns_too: bool = True):
    """Advantages (and returns) at real tokens equal the compacted reference GAE."""
    advantages, returns, call, case = call_token_gae(ctx, case)
    u = call.unit_roundoff
    expected, tol = compacted_gae(case, u)
    real = case.mask
    assert_close(*at_real(advantages, expected, tol, real), what=f"{what}: advantages at real tokens", call=call.code,
                 cause=cause, diagnose=_diagnose_gae(case, real))
    if returns_too:
        assert_close(*at_real(returns, expected + case.values, returns_tolerance(tol, expected, case.values, u), real),
                     what=f"{what}: returns at real tokens", call=call.code, cause=cause)
    return advantages, returns, call, case


def gae_edges(case: GaeCase) -> list[GaeCase]:
    """``case`` with gamma, then lambda, moved to each edge the contract gives them (0 and 1; rlspec.checks.kit.edges)."""
    return [GaeCase(case.rewards, case.values, case.mask, args["gamma"], args["lam"])
            for args, _ in edges.cases("token_gae", {"gamma": case.gamma, "lam": case.lam})]


# The known answers (spec/contract/80_rlhf.toml); NaN marks an output at a masked position.
REFERENCE_ROW = contract.known_answer("rlhf.gae-reference-row")
GAE_KNOWN_ROWS = contract.known_answer("rlhf.gae-known-rows")
GAE_KNOWN_ROWS_PADDED = contract.known_answer("rlhf.gae-known-rows-right-padded")
HOLE = contract.known_answer("rlhf.gae-interior-hole")  # OpenRLHF: 0.533203125
G1, G1_PADDED = contract.known_answer("rlhf.gae-g1"), contract.known_answer("rlhf.gae-g1-right-padded")
HOLE_CASE = gae_case(**HOLE.inputs)


@check("RLHF-GAE-KNOWN-ANSWER")
def gae_known_answer(ctx):
    """The reference 3-token row [1.03125, 1.125, 1.5]; the GAE known answer as two rows; both right-padded with garbage."""
    cause = "the advantages are whitened inside the function, or the last real token bootstraps"
    case = gae_case(**REFERENCE_ROW.inputs)
    advantages, returns, call, case = call_token_gae(ctx, case)
    _, tol = compacted_gae(case, call.unit_roundoff)
    assert_close(advantages[0], REFERENCE_ROW.outputs["advantages"][0], tol[0], what="reference 3-token row: advantages", call=call.code,
                 cause=cause, diagnose=_diagnose_gae(case, case.mask))
    assert_close(returns[0], REFERENCE_ROW.outputs["returns"][0], 2 * tol[0] + 4 * call.unit_roundoff,
                 what="reference 3-token row: returns", call=call.code, cause=cause)

    p1 = gae_case(**GAE_KNOWN_ROWS.inputs)
    advantages, _, call, p1 = call_token_gae(ctx, p1)
    _, tol = compacted_gae(p1, call.unit_roundoff)
    assert_close(advantages, GAE_KNOWN_ROWS.outputs["advantages"], tol, what="the GAE known answer as two rows", call=call.code, cause=cause,
                 diagnose=_diagnose_gae(p1, p1.mask))

    padded = gae_case(**GAE_KNOWN_ROWS_PADDED.inputs)
    advantages, _, call, padded = call_token_gae(ctx, padded)
    _, tol = compacted_gae(padded, call.unit_roundoff)
    expected = np.asarray(GAE_KNOWN_ROWS_PADDED.outputs["advantages"])[padded.mask]
    assert_close(advantages[padded.mask], expected, tol[padded.mask], what="the GAE known answer as two rows, right-padded with garbage",
                 call=call.code, cause=cause, diagnose=_diagnose_gae(padded, padded.mask))


@check("RLHF-GAE-ROW-EQUALS-GAE")
def gae_row_equals_gae(ctx):
    """Each row equals the time-major reference GAE on its real tokens, last one terminal (edge padding)."""
    cause = "raw advantages of one episode per row expected: whitened, flattened across rows, or bootstrapped at the end"
    verify_gae(ctx, gae_case(**GAE_KNOWN_ROWS.inputs), what="the GAE known answer as two rows", cause=cause)
    verify_gae(ctx, gae_case([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], [[0.3, -0.2, 1.0], [0.0, 0.5, 0.0]], [[1, 1, 1], [1, 1, 1]], 1.0, 0.95),
               what="two full rows, gamma 1, lambda 0.95", cause=cause)
    for case in gae_edges(gae_case(**GAE_KNOWN_ROWS.inputs)):
        verify_gae(ctx, case, what=f"the GAE known answer as two rows, gamma {case.gamma:g}, lambda {case.lam:g}", cause=cause)
    ctx.property(draws.gae_cases(dtype=ctx.dtype, padding=("right", "none"), garbage=False, min_rows=2),
                 lambda c: verify_gae(ctx, c, what="drawn rows", cause=cause), label="drawn", tier="autograd")


@check("RLHF-GAE-PADDING-INVARIANT")
def gae_padding_invariant(ctx):
    """The same real tokens unpadded, right-padded, left-padded and both give the same advantages and returns."""
    cause = "padding changes the real tokens' numbers: the last real token bootstraps from a pad, or pads are steps"

    def verify(case: GaeCase, width_extra=(2, 2)):
        where = np.flatnonzero(case.mask[0])
        r, v = case.rewards[0, where], case.values[0, where]
        n, (left, right) = len(where), width_extra
        layouts = {"unpadded": (0, 0), "right-padded": (0, right), "left-padded": (left, 0), "padded on both sides": (left, right)}
        for label, (a, b) in layouts.items():
            rewards = np.concatenate([np.full(a, 5.0), r, np.full(b, -4.0)])
            values = np.concatenate([np.full(a, 3e5), v, np.full(b, 1e6)])
            mask = np.concatenate([np.zeros(a, bool), np.ones(n, bool), np.zeros(b, bool)])
            verify_gae(ctx, gae_case([rewards], [values], [mask], case.gamma, case.lam), what=f"{label} row", cause=cause)

    verify(gae_case(**REFERENCE_ROW.inputs))
    verify(gae_case(**G1.inputs))  # bug G1 (ROLL): [0.95, 1.0]
    for case in gae_edges(gae_case(**REFERENCE_ROW.inputs)):
        verify(case)
    ctx.property(draws.padded_rows(dtype=ctx.dtype),
                 lambda d: verify(d[0], (d[1], d[2])), label="drawn", tier="autograd")


@check("RLHF-GAE-INTERIOR-MASK-SKIPPED")
def gae_interior_mask_skipped(ctx):
    """Interior masked spans (with garbage) are skipped: the reference GAE on the row with the span removed."""
    cause = "masked positions are zeroed (r = V = 0) instead of skipped: each is a discount step with V = 0"
    verify_gae(ctx, HOLE_CASE, what="reference 3-token row with a 2-token hole (OpenRLHF gives 0.533203125)", cause=cause)
    verify_gae(ctx, gae_case([[0.0, 3.0, -2.0, 1.0], [1.0, 1.0, 2.0, 0.0]], [[0.0, 9.0, 4.0, 0.0], [0.5, 0.5, 0.5, 1e6]],
                             [[1, 0, 0, 1], [1, 1, 1, 0]], 1.0, 0.95),
               what="bug G2: a row [a, obs, obs, b] and a right-padded one, gamma 1, lambda 0.95", cause=cause)
    for case in gae_edges(HOLE_CASE):
        verify_gae(ctx, case, what=f"the 3-token row with a hole, gamma {case.gamma:g}, lambda {case.lam:g}", cause=cause)
    ctx.property(draws.gae_cases(dtype=ctx.dtype, interior=True), lambda c: verify_gae(ctx, c, what="drawn rows with interior spans", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-GAE-MASKED-GARBAGE-IGNORED")
def gae_masked_garbage_ignored(ctx):
    """Garbage rewards and values at left and right padding change nothing: zeros there give the same."""
    cause = "the values (or rewards) at padded positions enter the recursion: the last real token bootstraps from a pad"

    def verify(case: GaeCase):
        clean = GaeCase(np.where(case.mask, case.rewards, 0.0), np.where(case.mask, case.values, 0.0), case.mask, case.gamma, case.lam)
        a0, r0, call0, clean = verify_gae(ctx, clean, what="zeros at padded positions", cause=cause)
        a1, r1, call1, case = verify_gae(ctx, case, what="garbage at padded positions", cause=cause)

    verify(gae_case(**G1_PADDED.inputs))  # bug G1 (ROLL): [5.70, 6.00] when leaked
    garbage = gae_case([[1e6, 1.0, 1.0, 2.0, -1e6], [1.0, 1.0, 2.0, 1e30, 5.0]], [[-1e6, 0.5, 0.5, 0.5, 1e30], [0.5, 0.5, 0.5, 1e6, -3e29]],
                       [[0, 1, 1, 1, 0], [1, 1, 1, 0, 0]], 0.5, 0.5)
    verify(garbage)
    for case in gae_edges(garbage):
        verify(case)
    ctx.property(draws.gae_cases(dtype=ctx.dtype), verify, label="drawn", tier="autograd")


@check("RLHF-GAE-ROWS-INDEPENDENT")
def gae_rows_independent(ctx):
    """Row b of a (B, L) call equals the (1, L) call on row b alone (the candidate against itself)."""

    def verify(case: GaeCase):
        together, _, call, case = call_token_gae(ctx, case)
        for b in range(case.mask.shape[0]):
            row = case.row(b)
            alone, _, call_b, row = call_token_gae(ctx, row)
            real = row.mask[0]
            tol = compacted_gae(row, call.unit_roundoff)[1][0] + compacted_gae(row, call_b.unit_roundoff)[1][0]
            assert_close(*at_real(together[b], alone[0], tol, real), what=f"row {b} in the batch vs row {b} alone", call=call.code,
                         cause="the rows are flattened into one sequence, or a batch statistic (whitening) enters")

    verify(gae_case(**GAE_KNOWN_ROWS.inputs))  # flattened: [1.0078125, 1.03125, ...]
    for case in gae_edges(gae_case(**GAE_KNOWN_ROWS.inputs)):
        verify(case)
    ctx.property(draws.gae_cases(dtype=ctx.dtype, min_rows=2, padding=("right", "left", "none")), verify, label="drawn",
                 tier="autograd")


@check("RLHF-GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES")
def gae_returns_identity(ctx):
    """returns == advantages + values at real tokens, on the candidate's own output."""

    def verify(case: GaeCase):
        advantages, returns, call, case = call_token_gae(ctx, case)
        real = case.mask
        tol = sum_identity_tolerance(advantages, case.values, call.unit_roundoff)
        assert_close(*at_real(returns, advantages + case.values, tol, real), what="returns vs advantages + values", call=call.code,
                     cause="returns are computed from the raw advantages while the advantages returned are whitened")

    verify(gae_case(**GAE_KNOWN_ROWS.inputs))
    verify(HOLE_CASE)
    for case in gae_edges(HOLE_CASE):
        verify(case)
    ctx.property(draws.gae_cases(dtype=ctx.dtype, interior=True), verify, label="drawn", tier="autograd")


# ---------------------------------------------------------------------------------------------
# assemble_rewards


def last_real(mask) -> np.ndarray:
    return mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)


def expected_rewards(scores, kl, mask, kl_coef):
    rewards = np.where(mask, -kl_coef * kl, 0.0)
    rewards[np.arange(len(scores)), last_real(mask)] += scores
    return rewards


def rewards_tolerance(scores, kl, mask, kl_coef, u):
    magnitude = np.abs(kl_coef * kl)
    bonus = np.zeros(mask.shape)
    bonus[np.arange(len(scores)), last_real(mask)] = np.abs(scores)
    return 2 * u * (3 * magnitude + bonus) + 4 * smallest_normal(u) + TINY


def _wrong_placements(scores, kl, mask, kl_coef):
    B, L = mask.shape
    base = np.where(mask, -kl_coef * kl, 0.0)
    trl = base.copy()
    last = last_real(mask)
    for b in range(B):
        trl[b, last[b] + 1 if last[b] + 1 < L else last[b]] += scores[b]
    right = base.copy()
    right[np.arange(B), np.maximum(mask.sum(axis=1) - 1, 0)] += scores
    sequence = np.zeros(mask.shape)
    sequence[np.arange(B), last] = scores - kl_coef * np.sum(np.where(mask, kl, 0.0), axis=1)
    return [
        (trl, "the score lands one step after the last real token when the row has padding (TRL 1.12 PPO: sequence_length + 1): "
              "EOS-terminated and length-truncated rows are treated differently"),
        (right, "the score index assumes right padding (mask.sum() - 1): in a left-padded row it lands on the wrong token"),
        (sequence, "the KL is summed over the row and charged at the last token (a sequence-level penalty)"),
    ]


def verify_rewards(ctx, scores, kl, mask, kl_coef, *, what, cause=""):
    args = {"scores": rounded(scores, ctx.dtype), "kl": rounded(np.atleast_2d(kl), ctx.dtype),
            "mask": np.atleast_2d(np.asarray(mask, dtype=bool)), "kl_coef": float(kl_coef)}
    call = ctx.call("assemble_rewards", args, shape=args["mask"].shape, allow_nonfinite=True)
    (rewards,) = call.outputs
    s, k, m = args["scores"], args["kl"], args["mask"]
    expected = expected_rewards(s, k, m, kl_coef)
    tol = rewards_tolerance(s, k, m, kl_coef, call.unit_roundoff)

    def diagnose(actual):
        for wrong, text in _wrong_placements(s, k, m, kl_coef):
            if matches(actual[m], wrong[m], 1e-6 * (1 + np.abs(wrong[m]))):
                return text
        return ""

    assert_close(*at_real(rewards, expected, tol, m), what=f"{what}: rewards at real tokens", call=call.code, cause=cause,
                 diagnose=diagnose)


REWARDS, REWARDS_G4 = contract.known_answer("rlhf.rewards-openrlhf"), contract.known_answer("rlhf.rewards-g4")


@check("RLHF-REWARDS-KNOWN-ANSWER")
def rewards_known_answer(ctx):
    """OpenRLHF compute_reward: r = 5, kl_coef 0.5, kl [.1, .2, .3, .4], mask [1, 1, 1, 0] -> [-0.05, -0.1, 4.85]."""
    x = REWARDS.inputs
    verify_rewards(ctx, x["scores"], x["kl"], x["mask"], x["kl_coef"], what="OpenRLHF's example",
                   cause="the score is not on the last real token, or the KL term's sign or coefficient is wrong")
    verify_rewards(ctx, [5.0, 1.0], [[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.5, 0.5]], [[1, 1, 1, 0], [0, 1, 1, 1]], 0.5,
                   what="OpenRLHF's example and a left-padded row")


@check("RLHF-REWARDS-SCORE-ON-LAST-REAL-TOKEN")
def rewards_score_on_last_real_token(ctx):
    """Right-padded (EOS-terminated), left-padded and full-width (length-truncated) rows: the score on the last real token."""
    cause = "the score is not on the row's last real token"
    mask = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 1, 0, 1, 0]]
    verify_rewards(ctx, [1.0, 2.0, 3.0, 4.0], np.zeros((4, 5)), mask, 0.1,
                   what="EOS-terminated, length-truncated, left-padded and interior-masked rows (kl 0)", cause=cause)
    x = REWARDS_G4.inputs
    verify_rewards(ctx, x["scores"], x["kl"], x["mask"], x["kl_coef"], what="bug G4: [t0, t1, EOS, PAD]", cause=cause)
    for kl_coef in edges.values("assemble_rewards", "kl_coef"):  # 0: the score alone (where `kl_coef or default` is wrong)
        verify_rewards(ctx, [1.0, 2.0, 3.0, 4.0], np.full((4, 5), 0.25), mask, kl_coef, what=f"the four rows, kl 0.25, edge kl_coef = {kl_coef:g}",
                       cause=cause)
    ctx.property(draws.reward_cases(dtype=ctx.dtype, interior=True), lambda d: verify_rewards(ctx, *d, what="drawn rows", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-REWARDS-KL-PER-TOKEN")
def rewards_kl_per_token(ctx):
    """Each real token carries its own -kl_coef kl_t."""
    cause = "the KL penalty is not per token: summed into the score, or with the wrong sign"
    verify_rewards(ctx, [0.0, 0.0], [[0.5, -0.25, 1.0], [2.0, 0.0, 9.0]], [[1, 1, 1], [1, 1, 0]], 0.1, what="score 0", cause=cause)
    for kl_coef in edges.values("assemble_rewards", "kl_coef"):
        verify_rewards(ctx, [1.0, -1.0], [[0.5, -0.25, 1.0], [2.0, 0.0, 9.0]], [[1, 1, 1], [1, 1, 0]], kl_coef,
                       what=f"edge kl_coef = {kl_coef:g}", cause=cause)
    ctx.property(draws.reward_cases(dtype=ctx.dtype), lambda d: verify_rewards(ctx, *d, what="drawn rows", cause=cause), label="drawn",
                 tier="autograd")


# ---------------------------------------------------------------------------------------------
# aggregate_loss

MODES = contract.convention("aggregate_loss_modes").allowed


def aggregation_modes(ctx, *needed: str) -> tuple[str, ...]:
    """The modes the candidate provides (aggregate_loss_modes), narrowed to ``needed`` when given: a library
    with two modes (OpenRLHF) is judged on those; a clause about a mode it lacks is not-provided."""
    return ctx.provided("aggregate_loss_modes", *needed)


def aggregation_weights(mask, mode, num_tokens=None, norm_length=None, eps=0.0) -> np.ndarray:
    """d loss / d l[b, t] by the definition of each mode (0 at masked positions)."""
    B, L = mask.shape
    n = mask.sum(axis=1).astype(np.float64)
    if mode == "token-mean":
        w = np.full(B, 1.0 / (mask.sum() if num_tokens is None else num_tokens))
    elif mode == "seq-mean-token-mean":
        w = 1.0 / (B * (n + eps))
    elif mode == "seq-mean-token-sum":
        w = np.full(B, 1.0 / B)
    else:
        w = np.full(B, 1.0 / (B * (L if norm_length is None else norm_length)))
    return np.where(mask, w[:, None], 0.0)


def call_aggregate(ctx, losses, mask, mode, num_tokens=None, norm_length=None):
    args = {"per_token_loss": rounded(np.atleast_2d(losses), ctx.dtype), "mask": np.atleast_2d(np.asarray(mask, dtype=bool)),
            "mode": mode}
    if num_tokens is not None:
        args["num_tokens"] = num_tokens
    if norm_length is not None:
        args["norm_length"] = norm_length
    call = ctx.call("aggregate_loss", args, array="torch", requires_grad=("per_token_loss",), shape=(), allow_nonfinite=True)
    shape = args["mask"].shape
    grad = leaf_gradient(call, "per_token_loss", shape[0] * shape[1]).reshape(shape)
    return float(call.outputs[0]), grad, call, args


def _wrong_weights(mask, mode, num_tokens, norm_length, eps):
    B, L = mask.shape
    options = [
        (np.where(mask, 1.0 / (B * L), 0.0), "the mean is taken over all B * L positions ((l * mask).mean()): padding counts in the denominator"),
        (aggregation_weights(mask, "token-mean"), "the token count of this call is used instead of num_tokens / the mode is a plain token mean"),
        (aggregation_weights(mask, "seq-mean-token-mean", eps=eps), "seq-mean-token-mean's weights 1/(B n_b) are used for this mode"),
        (np.where(mask, 1.0 / L, 0.0), "the sum-norm mode divides by the padded width only, not by B * norm_length (verl #3741)"),
    ]
    if norm_length is not None:
        options.append((aggregation_weights(mask, mode), "norm_length is ignored: the padded width L is used"))
    return options


def verify_aggregate(ctx, losses, mask, mode, num_tokens=None, norm_length=None, *, what, cause=""):
    """Loss = sum w l over real tokens and d loss / d l = w (exactly 0 at masked positions)."""
    loss, grad, call, args = call_aggregate(ctx, losses, mask, mode, num_tokens, norm_length)
    l, m = args["per_token_loss"], args["mask"]
    u = call.unit_roundoff
    w = aggregation_weights(m, mode, num_tokens, norm_length, ctx.convention("seq_mean_token_mean_eps"))
    N, B = int(m.sum()), m.shape[0]
    eta = smallest_normal(u)
    terms = np.where(m, w * l, 0.0)

    def diagnose(actual):
        for wrong, text in _wrong_weights(m, mode, num_tokens, norm_length, ctx.convention("seq_mean_token_mean_eps")):
            if np.array_equal(actual.shape, wrong.shape) and matches(actual, wrong, 1e-6 * np.abs(wrong) + 1e-300):
                return text
        return ""

    assert_close(grad, w, np.where(m, 2 * u * 6 * w + 8 * eta, 0.0), what=f"{what} ({mode}): d loss / d l[b, t]",
                 call=call.code, cause=cause, diagnose=diagnose)
    assert_close(loss, float(terms.sum()), 2 * u * (N + B + 6) * float(np.abs(terms).sum()) + 8 * eta + TINY,
                 what=f"{what} ({mode}): loss = sum over real tokens of w l", call=call.code, cause=cause)
    return loss, grad, call, args


# The worked example (verl 0.9.1 agg_loss gives the same): spec/contract/80_rlhf.toml, one known
# answer per mode, and the same padded to width 6.
_WORKED = [contract.known_answer(f"rlhf.aggregation-worked-{mode}") for mode in MODES]
WORKED_LOSSES, WORKED_MASK = _WORKED[0].arrays()["per_token_loss"], _WORKED[0].arrays()["mask"]
WORKED = {a.inputs["mode"]: (a.value("loss"), a.value("d loss / d per_token_loss")) for a in _WORKED}  # mode -> (loss, weights)
WORKED_WIDE = contract.known_answer("rlhf.aggregation-worked-width-6")
G12 = contract.known_answer("rlhf.aggregation-g12")
G10 = [contract.known_answer(f"rlhf.aggregation-g10-{mode}") for mode in ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")]


@check("RLHF-AGG-KNOWN-ANSWER")
def aggregation_known_answer(ctx):
    """The worked example: losses 1, mask [[1, 0, 0], [1, 1, 1]], every mode; sum-norm padded to width 6."""
    modes = aggregation_modes(ctx)
    for mode, (value, weights) in WORKED.items():
        if mode not in modes:
            continue
        loss, grad, call, _ = verify_aggregate(ctx, WORKED_LOSSES, WORKED_MASK, mode, what="worked example")
        u = call.unit_roundoff
        if not (mode == "seq-mean-token-mean" and ctx.convention("seq_mean_token_mean_eps")):
            assert_close(loss, value, 2 * u * 16 * value + TINY, what=f"worked example ({mode}): loss", call=call.code)
            assert_close(grad, weights, 2 * u * 12 * np.abs(weights) + TINY, what=f"worked example ({mode}): d loss / d l", call=call.code)
    if "seq-mean-token-sum-norm" not in modes:
        return
    wide = WORKED_WIDE.arrays()
    loss, grad, call, _ = verify_aggregate(ctx, wide["per_token_loss"], wide["mask"], wide["mode"], what="worked example padded to width 6")
    value = WORKED_WIDE.value("loss")
    assert_close(loss, value, 2 * call.unit_roundoff * 16 * value + TINY, what="width 6, seq-mean-token-sum-norm: loss", call=call.code)


@check("RLHF-AGG-GRADIENT-WEIGHTS")
def aggregation_gradient_weights(ctx):
    """Every mode's exact per-token weights on drawn batches, with and without num_tokens / norm_length."""
    modes = aggregation_modes(ctx)

    def verify(case):
        verify_aggregate(ctx, *case, what="drawn batch")

    for mode in modes:
        verify((np.array([[2.0, -1.0, 0.5, 3.0], [1.0, 4.0, 1e6, -1e6]]), np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool), mode,
                8 if mode == "token-mean" else None, 16 if mode == "seq-mean-token-sum-norm" else None))
    for name, mode in (("num_tokens", "token-mean"), ("norm_length", "seq-mean-token-sum-norm")):
        if mode in modes:
            for value in edges.values("aggregate_loss", name, none=False):  # 1 (None, the default, is drawn above)
                verify((np.array([[2.0, -1.0, 0.5, 3.0], [1.0, 4.0, 1e6, -1e6]]), np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool),
                        mode, *((value, None) if name == "num_tokens" else (None, value))))
    ctx.property(draws.aggregation_cases(dtype=ctx.dtype, modes=modes), verify, label="drawn", tier="autograd-weights")


@check("RLHF-AGG-MICROBATCH-INVARIANT")
def aggregation_microbatch_invariant(ctx):
    """token-mean, num_tokens = the global count: summed micro-batch losses and gradients equal the full batch's."""
    cause = "num_tokens is ignored: each micro-batch is divided by its own token count"
    aggregation_modes(ctx, "token-mean")

    def verify(losses, mask, cuts):
        N = int(mask.sum())
        full, full_grad, call, args = verify_aggregate(ctx, losses, mask, "token-mean", N, what="full batch, num_tokens = N")
        total, grads, tol = 0.0, [], 0.0
        for lo, hi in zip((0,) + cuts, cuts + (len(mask),)):
            part, grad, call_k, args_k = verify_aggregate(ctx, losses[lo:hi], mask[lo:hi], "token-mean", N,
                                                          what=f"micro-batch rows {lo}:{hi}, num_tokens = {N}", cause=cause)
            total += part
            grads.append(grad)
            tol += 2 * call_k.unit_roundoff * (N + len(mask) + 6) * float(np.abs(np.where(args_k["mask"], args_k["per_token_loss"], 0)).sum()) / N
        u = call.unit_roundoff
        tol += 2 * u * (N + len(mask) + 6) * float(np.abs(np.where(args["mask"], args["per_token_loss"], 0)).sum()) / N
        tol += 2 * (len(cuts) + 2) * (N + len(mask) + 6) * tiny(u)  # each of those roundings may also lose eta below the normals
        assert_close(total, full, tol, what="sum of the micro-batch losses vs the full batch's", call=call.code, cause=cause)
        assert_close(np.concatenate(grads), full_grad, 2 * u * 12 / N + TINY, what="accumulated gradients vs the full batch's",
                     call=call.code, cause=cause)

    # bug G12: micro-batch 1 one token with loss 4, micro-batch 2 three tokens with loss 0: full mean 1.
    verify(G12.arrays()["per_token_loss"], G12.arrays()["mask"], (1,))
    ctx.property(draws.microbatch_cases(dtype=ctx.dtype), lambda d: verify(*d), label="drawn", tier="autograd")


@check("RLHF-AGG-WIDTH-INDEPENDENT")
def aggregation_width_independent(ctx):
    """Extra all-masked columns (garbage losses) change nothing with norm_length given; the default scales by L / L'."""
    cause = "the aggregation depends on the padded width: padding counted in a denominator, or norm_length ignored"
    modes = aggregation_modes(ctx)

    def verify(losses, mask, extra, norm_length):
        B, L = mask.shape
        wide_losses = np.concatenate([losses, np.full((B, extra), 1e6)], axis=1)
        wide_mask = np.concatenate([mask, np.zeros((B, extra), dtype=bool)], axis=1)
        for mode in modes:
            given = norm_length if mode == "seq-mean-token-sum-norm" else None
            narrow, g_narrow, call, _ = verify_aggregate(ctx, losses, mask, mode, norm_length=given, what=f"width {L}", cause=cause)
            wide, g_wide, call_w, _ = verify_aggregate(ctx, wide_losses, wide_mask, mode, norm_length=given, what=f"width {L + extra}",
                                                       cause=cause)
        if "seq-mean-token-sum-norm" in modes:
            verify_aggregate(ctx, wide_losses, wide_mask, "seq-mean-token-sum-norm", what=f"width {L + extra}, default norm_length = L'",
                             cause="the default norm_length is not the padded width L (the protocol's declared default)")

    verify(WORKED_LOSSES, WORKED_MASK, 3, 3)
    ctx.property(draws.widened_cases(dtype=ctx.dtype), lambda d: verify(*d), label="drawn", tier="enumeration")


@check("RLHF-AGG-LENGTH-BIAS")
def aggregation_length_bias(ctx):
    """Dr. GRPO: 2 tokens A = +1, 10 tokens A = -1: seq-mean-token-mean weights 1/4 and 1/20, token-mean 1/12, sum-norm 1/32."""
    cause = "seq-mean-token-mean and token-mean are swapped: the length bias (weight 1/(B n_b)) is missing or misplaced"
    aggregation_modes(ctx, "seq-mean-token-mean")  # the clause is about this mode's weights
    modes = aggregation_modes(ctx)
    for answer in G10:  # losses -A per token
        x = answer.arrays()
        losses, mask, mode, norm = x["per_token_loss"], x["mask"], x["mode"], x.get("norm_length")
        weights = answer.value("d loss / d per_token_loss at each row's real tokens")
        if mode not in modes:
            continue
        _, grad, call, _ = verify_aggregate(ctx, losses, mask, mode, norm_length=norm, what="bug G10", cause=cause)
        if mode == "seq-mean-token-sum-norm":
            for edge in edges.values("aggregate_loss", "norm_length", none=False):  # norm_length = 1: every token 1/B
                verify_aggregate(ctx, losses, mask, mode, norm_length=edge, what=f"bug G10, edge norm_length = {edge:g}", cause=cause)
        if mode != "seq-mean-token-mean" or not ctx.convention("seq_mean_token_mean_eps"):
            expected = np.where(mask, np.array([[weights[0]], [weights[1]]]), 0.0)
            assert_close(grad, expected, 2 * call.unit_roundoff * 12 * expected + TINY, what=f"bug G10 weights ({mode})",
                         call=call.code, cause=cause)
    ctx.property(draws.unequal_rows(dtype=ctx.dtype), lambda d: verify_aggregate(ctx, *d, "seq-mean-token-mean", what="drawn rows of different lengths", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-AGG-MASKED-ZERO-GRADIENT")
def aggregation_masked_zero_gradient(ctx):
    """Garbage losses at masked positions: every mode's gradient there is exactly 0 and the loss unchanged."""
    cause = "the mask is applied to the denominator only: padding losses enter the numerator"
    modes = aggregation_modes(ctx)

    def verify(losses, mask):
        for mode in modes:
            verify_aggregate(ctx, losses, mask, mode, what="garbage at masked positions", cause=cause)

    verify(np.array([[1.0, 1e6, -1e6], [1.0, 1.0, 1.0]]), WORKED_MASK)
    ctx.property(draws.loss_cases(dtype=ctx.dtype), lambda d: verify(*d), label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# token_ppo_loss


def _ppo_conv(clip_high, dual_clip) -> ClipRange:
    return ClipRange(dual_clip=dual_clip, clip_eps_high=clip_high)


def call_token_ppo(ctx, logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    args = {
        "logp_new": rounded(np.atleast_2d(logp_new), ctx.dtype),
        "logp_old": rounded(np.atleast_2d(logp_old), ctx.dtype),
        "advantages": rounded(np.atleast_2d(advantages), ctx.dtype),
        "mask": np.atleast_2d(np.asarray(mask, dtype=bool)),
        "clip_low": float(clip_low),
        "clip_high": float(clip_high),
    }
    if dual_clip is not None:
        args["dual_clip"] = float(dual_clip)
    call = ctx.call("token_ppo_loss", args, array="torch", requires_grad=("logp_new",), shape=(), allow_nonfinite=True)
    shape = args["mask"].shape
    return float(call.outputs[0]), leaf_gradient(call, "logp_new", shape[0] * shape[1]).reshape(shape), call, args


def _c_exp(x: float) -> float:
    """``exp(x)`` by the C library, ``inf`` past float64's range as numpy's exp gives (math.exp raises there)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def ppo_expected(args, clamp, u):
    """(loss, gradient lower bound, gradient upper bound, loss tolerance, gradient tolerance) over real tokens."""
    m = args["mask"]
    lpn, lpo, A = args["logp_new"][m], args["logp_old"][m], args["advantages"][m]
    clip_low, clip_high, c = args["clip_low"], args["clip_high"], args.get("dual_clip")
    conv = _ppo_conv(clip_high, c)
    x = lpn - lpo
    x_eff = x if clamp is None else np.clip(x, -clamp, clamp)
    # The C library's exp, not numpy's: numpy picks its kernel by CPU (AVX-512's lands a ratio like 1.5 one ulp
    # from the C library's), and the loss is a sum of +-r A terms that cancel (terms of 3 for a loss of 0.4), so
    # one ulp of a ratio is many of the loss: the vectors written from this loss would then differ by machine
    # beyond vectors.SAME_SET_ULPS (token_ppo_loss, 8 ulps on an AMD EPYC with AVX-512 against the committed set).
    r = np.array([_c_exp(v) for v in x_eff.tolist()], dtype=np.float64).reshape(x_eff.shape)
    objective = clip_objective(r, A, clip_low, conv)
    rel = ratio_relative_error(lpn, lpo, u)
    low, high = log_derivative_bounds(r, A, clip_low, conv, rel)
    if clamp is not None:
        beyond = np.abs(x) > clamp * (1 + rel) + rel
        near = ~beyond & (np.abs(x) >= clamp * (1 - rel) - rel)
        low, high = np.where(beyond, 0.0, low), np.where(beyond, 0.0, high)
        low, high = np.where(near, np.minimum(low, 0.0), low), np.where(near, np.maximum(high, 0.0), high)
    N = len(A)
    bound = np.maximum.reduce([r, np.full_like(r, 1 + clip_high), np.full_like(r, c or 0.0)]) * np.abs(A)
    mag = np.abs(lpn) + np.abs(lpo) + 1
    eta = smallest_normal(u)
    loss_tol = 2 * u * float(np.sum((mag + N + 6) * bound)) + 16 * eta + TINY
    grad_tol = 2 * u * (mag + 8) * r * np.abs(A) + 16 * eta + TINY
    return -float(np.sum(objective)), -high, -low, loss_tol, grad_tol


def _wrong_ppo(args):
    """Known-wrong losses, for diagnoses: a +-20 log-ratio clamp, a dual clip on A > 0, no dual clip, no min."""
    m = args["mask"]
    x = (args["logp_new"] - args["logp_old"])[m]
    A = args["advantages"][m]
    lo, hi, c = 1 - args["clip_low"], 1 + args["clip_high"], args.get("dual_clip")
    options = []
    for clamp, text in [(20.0, "the log-ratio is clamped to +-20 before exp (verl, OpenRLHF) without declaring "
                               "RLSPEC_CONVENTIONS['log_ratio_clamp'] = 20")]:
        r = np.exp(np.clip(x, -clamp, clamp))
        obj = clip_objective(r, A, args["clip_low"], _ppo_conv(args["clip_high"], c))
        options.append((-float(np.sum(obj)), text))
    r = np.exp(x)
    plain = np.minimum(r * A, np.clip(r, lo, hi) * A)
    if c is not None:
        options.append((-float(np.sum(np.maximum(plain, c * A))), "the dual clip is applied to positive advantages too (bug C4)"))
        options.append((-float(np.sum(plain)), "the dual clip is ignored (bug C6)"))
    options.append((-float(np.sum(np.clip(r, lo, hi) * A)), "the clipped term is used without the min (bug C3)"))
    options.append((-float(np.sum(np.minimum(r * A, np.clip(r, lo, 1 + args["clip_low"]) * A))), "clip_high is ignored: the upper bound is 1 + clip_low"))
    return options


def verify_ppo(ctx, logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None, *, what, cause=""):
    """Loss = -sum over real tokens of the clipped objective; per-token gradient (a subgradient at kinks); 0 at masked tokens."""
    loss, grad, call, args = call_token_ppo(ctx, logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip)
    u = call.unit_roundoff
    expected, low, high, loss_tol, grad_tol = ppo_expected(args, ctx.convention("log_ratio_clamp"), u)

    def diagnose(actual):
        for value, text in _wrong_ppo(args):
            if math.isfinite(value) and abs(float(np.asarray(actual).reshape(-1)[0]) - value) <= 1e-6 * (1 + abs(value)):
                return text
        if not math.isfinite(float(np.asarray(actual).reshape(-1)[0])):
            return "the loss is not finite on finite input: the ratio is a quotient of probabilities (0/0), or padding enters"
        return ""

    assert_close(loss, expected, loss_tol, what=f"{what}: loss = -sum over real tokens of min(r A, clip(r) A)", call=call.code,
                 cause=cause, diagnose=diagnose)
    m = args["mask"]
    nearest, tol = np.zeros(m.shape), np.zeros(m.shape)
    nearest[m], tol[m] = np.clip(grad[m], low, high), grad_tol
    assert_close(np.where(m, grad, 0.0), nearest, tol, what=f"{what}: d loss / d logp_new at real tokens", call=call.code, cause=cause)
    assert_close(grad[~m], np.zeros(int((~m).sum())), 0.0, what=f"{what}: d loss / d logp_new at masked tokens (must be 0)",
                 call=call.code, cause="the mask is not applied to the per-token loss: padding tokens have a gradient")
    return loss, grad, call, args


def ppo_edges(base_dual_clip=None) -> list[tuple[tuple, str]]:
    """(arguments, label) at the contract's edges of token_ppo_loss: masked garbage log-probabilities past exp's overflow
    (logp_new 1000 where A < 0: masked by multiplication, inf x 0 = NaN), then clip_low, clip_high and dual_clip moved one at a
    time to each of their edges (rlspec.checks.kit.edges). A (2, 4) batch with r = 0.5, 1, 1.5 at its real tokens."""
    garbage = edges.values("token_ppo_loss", "logp_new")[0]
    logp_new = np.array([[math.log(0.5), 0.0, math.log(1.5), 0.0], [math.log(1.5), math.log(0.5), 0.0, 0.0]]) - 0.25
    logp_new[0, 3] = logp_new[1, 2] = garbage  # the edge value itself, at the two masked tokens
    logp_old = np.array([[0.0, 0.0, 0.0, -1.0], [0.0, 0.0, -1.0, 0.0]]) - 0.25
    advantages = np.array([[2.0, -2.0, 2.0, -3.0], [-2.0, 2.0, -3.0, 1.0]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 1]], dtype=bool)
    base = {"clip_low": 0.2, "clip_high": 0.2, "dual_clip": base_dual_clip}
    found = [((logp_new, logp_old, advantages, mask, 0.2, 0.2, base_dual_clip), f"edge logp_new = {garbage:g} at masked tokens, A < 0")]
    for args, label in edges.cases("token_ppo_loss", base):
        found.append(((logp_new, logp_old, advantages, mask, args["clip_low"], args["clip_high"], args["dual_clip"]), label))
    return found


def token_table(answer_id: str):
    """A known answer of token_ppo_loss (spec/contract/80_rlhf.toml) as rows (A, r, loss, d loss / d logp_new),
    one per token: the loss is a sum, so each token's numbers are its own."""
    answer = contract.known_answer(answer_id)
    x = answer.inputs
    ratio = answer.derived.get("ratio") or np.exp(np.subtract(x["logp_new"], x["logp_old"])).tolist()
    columns = [x["advantages"], ratio, answer.value("loss of each token"), answer.value("d loss / d logp_new")]
    return [row for rows in zip(*columns) for row in zip(*rows)]


TOKEN_TABLE = token_table("rlhf.token-gradient-table")  # the clip gradient table per token, clip 0.2
ASYMMETRIC_TABLE = token_table("rlhf.asymmetric-clip")  # clip_low 0.2, clip_high 0.28
DUAL_TABLE, NO_DUAL_TABLE = token_table("rlhf.dual-clip"), token_table("rlhf.no-dual-clip")  # c = 3
UNCLAMPED = token_table("rlhf.unclamped-log-ratio")


def exact_token(ctx, A, r, loss_value, grad_value, clip_low=0.2, clip_high=0.2, dual_clip=None, *, what):
    """One token (1, 1): the loss and the gradient equal the listed numbers (within the rounding of log r)."""
    loss, grad, call, args = verify_ppo(ctx, [[math.log(r)]], [[0.0]], [[A]], [[True]], clip_low, clip_high, dual_clip, what=what)
    clamp_moves = ctx.convention("log_ratio_clamp") is not None and abs(math.log(r)) >= ctx.convention("log_ratio_clamp")
    if not clamp_moves:
        _, _, _, loss_tol, grad_tol = ppo_expected(args, ctx.convention("log_ratio_clamp"), call.unit_roundoff)
        assert_close(loss, loss_value, 2 * loss_tol, what=f"{what}: loss", call=call.code)
        assert_close(grad.reshape(-1), [grad_value], 2 * grad_tol, what=f"{what}: d loss / d logp_new", call=call.code)


@check("RLHF-PPO-TOKEN-GRADIENT-TABLE")
def ppo_token_gradient_table(ctx):
    """The clip gradient table one token at a time and as one (2, 3) batch (each token's gradient its own), then drawn batches."""
    cause = "the clip is applied without the min, or the loss is averaged over tokens instead of summed"
    for A, r, value, gradient in TOKEN_TABLE:
        exact_token(ctx, A, r, value, gradient, what=f"A = {A}, r = {r}")
    new = np.log([[r for _, r, _, _ in TOKEN_TABLE[:3]], [r for _, r, _, _ in TOKEN_TABLE[3:]]]) - 0.5
    adv = np.array([[A for A, _, _, _ in TOKEN_TABLE[:3]], [A for A, _, _, _ in TOKEN_TABLE[3:]]])
    _, grad, call, args = verify_ppo(ctx, new, np.full((2, 3), -0.5), adv, np.ones((2, 3), bool), 0.2, 0.2, what="the six rows as a (2, 3) batch",
                                     cause=cause)
    expected = np.array([[g for *_, g in TOKEN_TABLE[:3]], [g for *_, g in TOKEN_TABLE[3:]]])
    if ctx.convention("log_ratio_clamp") is None or ctx.convention("log_ratio_clamp") > 1.0:
        assert_close(grad, expected, 1e-6 * (1 + np.abs(expected)), what="the six rows as a (2, 3) batch: per-token gradients (clip gradient table)",
                     call=call.code, cause=cause)
    for case, label in ppo_edges():
        verify_ppo(ctx, *case, what=label, cause=cause)
    ctx.property(draws.ppo_cases(dtype=ctx.dtype), lambda d: verify_ppo(ctx, *d, what="drawn batch", cause=cause), label="drawn",
                 tier="autograd")


@check("RLHF-PPO-ASYMMETRIC-CLIP")
def ppo_asymmetric_clip(ctx):
    """clip_low 0.2, clip_high 0.28: A = 2, r = 1.25 -> -2.5; r = 1.3 -> 0; A = -2, r = 0.79 -> 0; r = 1.25 -> 2.5."""
    cause = "the clip range is not [1 - clip_low, 1 + clip_high]: clip_high ignored or the bounds swapped"
    for A, r, value, gradient in ASYMMETRIC_TABLE:
        exact_token(ctx, A, r, value, gradient, 0.2, 0.28, what=f"clip_low 0.2, clip_high 0.28, A = {A}, r = {r}")
    for case, label in ppo_edges():
        verify_ppo(ctx, *case, what=label, cause=cause)
    ctx.property(draws.ppo_cases(dtype=ctx.dtype, log_ratio=normal_floats(-1.0, 1.0)), lambda d: verify_ppo(ctx, *d, what="drawn batch", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-PPO-DUAL-CLIP")
def ppo_dual_clip(ctx):
    """c = 3: A = -2, r = 3.5 and 4 -> loss 6, gradient 0; r = 2 live; A > 0 untouched; without c, r = 3.5 -> 7, 7."""
    cause = "the dual clip is applied to positive advantages, or not applied"
    for A, r, value, gradient in DUAL_TABLE:
        exact_token(ctx, A, r, value, gradient, 0.2, 0.2, 3.0, what=f"dual_clip 3, A = {A}, r = {r}")
    for A, r, value, gradient in NO_DUAL_TABLE:
        exact_token(ctx, A, r, value, gradient, what=f"no dual_clip, A = {A:g}, r = {r:g}")
    for case, label in ppo_edges(3.0):
        verify_ppo(ctx, *case, what=label, cause=cause)
    ctx.property(draws.ppo_cases(dtype=ctx.dtype, dual=True), lambda d: verify_ppo(ctx, *d, what="drawn batch with a dual clip", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-PPO-MASKED-TOKENS")
def ppo_masked_tokens(ctx):
    """Garbage log-probs and advantages at masked tokens: no effect on loss or real gradients, zero gradient there."""
    cause = "the mask is not applied to the per-token loss: padding tokens enter the sum"
    verify_ppo(ctx, [[math.log(0.5), -30.0, 1.0], [0.0, math.log(1.5), -45.0]], [[0.0, 1.0, -40.0], [0.0, 0.0, 1.0]],
               [[2.0, 900.0, -1e3], [-2.0, -2.0, 3.0]], [[1, 0, 0], [1, 1, 0]], 0.2, 0.2, what="TRL-style padding", cause=cause)
    for case, label in ppo_edges():
        verify_ppo(ctx, *case, what=label, cause=cause)
    ctx.property(draws.ppo_cases(dtype=ctx.dtype, dual=False), lambda d: verify_ppo(ctx, *d, what="drawn batch, garbage at masked tokens", cause=cause),
                 label="drawn", tier="autograd")


@check("RLHF-PPO-RATIO-LOG-SPACE")
def ppo_ratio_log_space(ctx):
    """The log-space known answer: log-probs -1000 and -1000.1: finite loss and gradient equal to r = exp(0.1)'s."""
    cause = "the ratio is a quotient of probabilities: both underflow to 0 and 0/0 is NaN"

    def verify(*case):
        loss, grad, call, _ = verify_ppo(ctx, *case, what="log-probabilities near -1000", cause=cause)
        if not (math.isfinite(loss) and np.all(np.isfinite(grad))):  # pragma: no cover - verify_ppo fails first
            raise ClauseFailure(f"loss {loss!r} on finite log-probabilities", call=call.code, cause=cause)

    verify([[-1000.0]], [[-1000.1]], [[1.0]], [[True]], 0.2, 0.2)
    verify([[-1000.0, -2000.0, -745.0]], [[-1000.1, -2000.05, -745.2]], [[1.0, -1.0, 0.5]], [[1, 1, 1]], 0.2, 0.28)
    for case, _ in ppo_edges():
        verify(*case)
    ctx.property(draws.ppo_cases(dtype=ctx.dtype, log_ratio=normal_floats(-0.5, 0.5), logp_old=normal_floats(-5000.0, -700.0)), lambda d: verify(*d),
                 label="drawn", tier="autograd")


@check("RLHF-PPO-LOG-RATIO-CLAMP")
def ppo_log_ratio_clamp(ctx):
    """Undeclared: A = -2, log r = 25 -> 2 e^25 with gradient 2 e^25. Declared K: constant beyond |log r| > K."""
    K = ctx.convention("log_ratio_clamp")
    cause = ("the declared log_ratio_clamp is not applied as exp(clamp(log r, -K, K))" if K is not None
             else "the log-ratio is clamped before exp without declaring log_ratio_clamp")
    far = 25.0 if K is None else K + 5.0
    rows = [(-2.0, far), (2.0, -far), (-1.0, far / 2), (0.5, -far / 2)]
    for A, x in rows:
        verify_ppo(ctx, [[x]], [[0.0]], [[A]], [[True]], 0.2, 0.2, what=f"A = {A}, log r = {x}", cause=cause)
    if K is None:
        for A, r, value, gradient in UNCLAMPED:
            exact_token(ctx, A, r, value, gradient, what=f"A = {A:g}, log r = {math.log(r):g}")
    verify_ppo(ctx, [[x - 3.0 for _, x in rows]], [[-3.0] * 4], [[A for A, _ in rows]], [[1, 1, 1, 1]], 0.2, 0.2,
               what="all four as one row", cause=cause)
    for case, label in ppo_edges():
        verify_ppo(ctx, *case, what=label, cause=cause)
    span = 40.0 if K is None else K + 10.0
    ctx.property(draws.ppo_cases(dtype=ctx.dtype, log_ratio=normal_floats(-span, span), interior=False),
                 lambda d: verify_ppo(ctx, *d, what="drawn batch, large log-ratios", cause=cause), label="drawn",
                 tier="autograd")
