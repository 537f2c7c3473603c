"""Checks for the GAE chapter (``spec/clauses/10_gae.toml``).

Every check starts from fixed known-answer vectors (the same on every seed), then searches drawn
rollouts. Expected numbers come from the formulas, from the contract's hand-computed known answers, from
the reference's independent mixture form, or from the candidate itself (structural properties:
no leak, column independence, linearity), never only from the reference recursion.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close, matches
from ..kit.registry import check
from ..kit.strategies import Rollout, discounts, episodes, rollouts, rounded
from ..kit.tolerances import gae_tolerance, returns_tolerance, rewards_to_go_tolerance, sum_identity_tolerance
from ...reference import gae as ref
from ...spec import contract

# The hand-computed example and its truncated twin: known answers of the contract (spec/contract/10_gae.toml).
_TERMINAL = contract.known_answer("gae.terminal-after-step-1")
_TRUNCATED = contract.known_answer("gae.truncated-after-step-1")
SEED_TERMINAL = Rollout.of(**_TERMINAL.inputs)
SEED_TERMINAL_ADVANTAGES = _TERMINAL.outputs["advantages"]
SEED_TRUNCATED = Rollout.of(**_TRUNCATED.inputs)
SEED_TRUNCATED_ADVANTAGES = _TRUNCATED.outputs["advantages"]


def run_gae(ctx, rollout: Rollout, **options):
    """Call the candidate's ``gae``; returns ``(advantages, returns, call)`` as float64 arrays."""
    rollout = rollout.rounded(ctx.dtype)
    call = ctx.call("gae", rollout.arguments(), outputs=2, shape=rollout.shape, **options)
    advantages, returns = call.outputs
    return advantages, returns, call


def tolerance(rollout: Rollout, u: float) -> np.ndarray:
    r = rollout
    return gae_tolerance(r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam, u)


def td_errors(r: Rollout) -> np.ndarray:
    return ref.td_errors(r.rewards, r.values, r.next_values, r.terminated, r.gamma)


def edge_rollouts(base: Rollout, *names: str) -> list[Rollout]:
    """``base`` with gamma, then lambda (or only ``names``), moved to each edge the contract gives them (0 and 1): the fixed
    cases every GAE clause takes on every seed (rlspec.checks.kit.edges)."""
    return [base.with_(**{k: args[k] for k in ("gamma", "lam")}) for args, _ in
            edges.cases("gae", {"gamma": base.gamma, "lam": base.lam}, *(names or ("gamma", "lam")))]


def draw(ctx, **options):
    """Rollouts in the run's dtype."""
    return rollouts(dtype=ctx.dtype, **options)


# ---------------------------------------------------------------------------------------------
# known answers


def _diagnose_truncated(actual, tol):
    known_wrong = [
        ([0.875, 0.5, 1.125, 1.5], "truncation treated as termination: no bootstrap from next_values at the time limit"),
        ([1.0078125, 1.03125, 1.125, 1.5], "truncation neither ends the trace nor uses next_values: it bootstraps from values[t+1], the next episode's first state"),
        # values are 0.5 everywhere here: V(s_t) (the value before the action) and values[t+1] (the next episode's
        # first state) give the same numbers
        ([0.9375, 0.75, 1.125, 1.5], "the time-limit bootstrap uses a stored value, V(s_t) or values[t+1] (both 0.5 here), "
                                     "instead of next_values[t], the value of the final observation"),
        ([1.125, 1.5, 1.125, 1.5], "the time-limit bootstrap uses values[t+1], the next episode's first state"),
    ]
    for answer, cause in known_wrong:
        if matches(actual, answer, tol):
            return cause
    return ""


def _diagnose_terminal(actual, tol):
    known_wrong = [
        ([1.0, 1.0, 1.125, 1.5], "the terminal step bootstraps from next_values and the trace is not cut (flags read one step late)"),
        ([0.875, 1.0, 1.125, 1.5], "the baseline V(s_t) is dropped at the terminal step"),
        ([1.0, 0.75, 1.125, 1.5], "the terminal step bootstraps from next_values (terminal treated as truncated)"),
    ]
    for answer, cause in known_wrong:
        if matches(actual, answer, tol):
            return cause
    return ""


@check("GAE-SEED-EXAMPLE")
def seed_example(ctx):
    """The terminal known answer: gamma = lambda = 0.5, r = 1, V = 0.5, terminal after step 1, V(s_4) = 2 -> [0.875, 0.5, 1.125, 1.5]."""
    advantages, returns, call = run_gae(ctx, SEED_TERMINAL)
    tol = tolerance(SEED_TERMINAL, call.unit_roundoff)
    assert_close(advantages, SEED_TERMINAL_ADVANTAGES, tol, what="advantages", call=call.code,
                 diagnose=lambda a: _diagnose_terminal(a, tol))
    assert_close(returns, _TERMINAL.outputs["returns"], returns_tolerance(tol, advantages, 0.5, call.unit_roundoff),
                 what="returns", call=call.code)


@check("GAE-SEED-EXAMPLE-TRUNCATED")
def seed_example_truncated(ctx):
    """The truncated known answer: the same end as a time-limit truncation with V(final obs) = 3 -> [1.25, 2.0, 1.125, 1.5]."""
    advantages, returns, call = run_gae(ctx, SEED_TRUNCATED)
    tol = tolerance(SEED_TRUNCATED, call.unit_roundoff)
    assert_close(advantages, SEED_TRUNCATED_ADVANTAGES, tol, what="advantages", call=call.code,
                 diagnose=lambda a: _diagnose_truncated(a, tol))
    assert_close(returns, _TRUNCATED.outputs["returns"], returns_tolerance(tol, advantages, 0.5, call.unit_roundoff),
                 what="returns", call=call.code)


# ---------------------------------------------------------------------------------------------
# limits and identities


@check("GAE-TD-ERROR-AT-LAMBDA-0")
def lambda_zero(ctx):
    """lambda = 0: A_t = delta_t on the seed examples and on drawn rollouts."""

    def verify(rollout):
        rollout = rollout.with_(lam=0.0)
        advantages, _, call = run_gae(ctx, rollout)
        assert_close(advantages, td_errors(rollout), tolerance(rollout, call.unit_roundoff),
                     what="advantages at lambda = 0 vs TD errors", call=call.code,
                     cause="lambda is not applied to the trace (it decays by gamma alone)")

    verify(SEED_TERMINAL)
    verify(SEED_TRUNCATED)
    for rollout in edge_rollouts(SEED_TRUNCATED, "gamma"):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3)), verify, label="drawn")


def bootstrapped_returns(r: Rollout) -> np.ndarray:
    """G_t: discounted rewards to the segment's end plus gamma^K V(final obs) unless terminal."""
    returns = np.zeros(r.shape)
    following = np.zeros(r.shape[1:])
    for t in reversed(range(r.T)):
        tail = np.where(r.terminated[t], 0.0, np.where(r.truncated[t] | (t == r.T - 1), r.next_values[t], following))
        following = r.rewards[t] + r.gamma * tail
        returns[t] = following
    return returns


@check("GAE-MONTE-CARLO-AT-LAMBDA-1")
def lambda_one(ctx):
    """lambda = 1: A_t = G_t - V(s_t) with G_t bootstrapped at truncations and the rollout's end."""

    def verify(rollout):
        rollout = rollout.with_(lam=1.0)
        advantages, _, call = run_gae(ctx, rollout)
        assert_close(advantages, bootstrapped_returns(rollout) - rollout.values, tolerance(rollout, call.unit_roundoff),
                     what="advantages at lambda = 1 vs G_t - V(s_t)", call=call.code)

    verify(SEED_TERMINAL)
    verify(SEED_TRUNCATED)
    for rollout in edge_rollouts(SEED_TRUNCATED, "gamma"):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3), gamma=discounts(min_value=0.5)), verify, label="drawn")


@check("GAE-LAMBDA-MIXTURE")
def lambda_mixture(ctx):
    """GAE equals the explicit mixture of n-step advantages with the finite-horizon weights."""

    def verify(rollout):
        advantages, _, call = run_gae(ctx, rollout)
        r = rollout
        mixture = ref.lambda_mixture_advantage(r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)
        assert_close(advantages, mixture, tolerance(rollout, call.unit_roundoff),
                     what="advantages vs the lambda-mixture of n-step advantages", call=call.code)

    verify(SEED_TRUNCATED.with_(lam=0.9))
    verify(SEED_TERMINAL.with_(gamma=0.9, lam=0.7))
    for rollout in edge_rollouts(SEED_TRUNCATED.with_(gamma=0.9, lam=0.7)):
        verify(rollout)
    ctx.property(draw(ctx, T=st.integers(1, 12), n_envs=st.none() | st.integers(1, 2)), verify, label="drawn")


@check("GAE-BACKWARD-RECURSION")
def backward_recursion(ctx):
    """The candidate's own output satisfies A_t - gamma lambda (1 - end_t) A_{t+1} = delta_t."""

    def verify(rollout):
        advantages, _, call = run_gae(ctx, rollout)
        u = call.unit_roundoff
        r = rollout
        following = np.concatenate([advantages[1:], np.zeros((1,) + r.shape[1:])])
        carried = r.gamma * r.lam * np.where(r.episode_end, 0.0, following)
        tol = tolerance(r, u)
        tol_following = np.concatenate([tol[1:], np.zeros((1,) + r.shape[1:])])
        # The residual inherits the error of A_t and of gamma lambda A_{t+1}, plus two roundings.
        bound = tol + tol_following + 2 * u * (np.abs(advantages) + np.abs(carried))
        assert_close(advantages - carried, td_errors(r), bound,
                     what="A_t - gamma lambda (1 - end_t) A_{t+1} vs delta_t", call=call.code,
                     cause="the recursion carries A_{t+1} with the wrong factor (gamma instead of gamma*lambda?)")

    verify(SEED_TERMINAL)
    verify(SEED_TRUNCATED.with_(gamma=0.9, lam=0.8))
    for rollout in edge_rollouts(SEED_TRUNCATED.with_(gamma=0.9, lam=0.8)):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3)), verify, label="drawn")


# ---------------------------------------------------------------------------------------------
# episode ends


@check("GAE-TERMINAL-NO-BOOTSTRAP")
def terminal_no_bootstrap(ctx):
    """At terminated steps A_t = r_t - V(s_t); next_values there is ignored; terminated beats truncated."""
    advantages, _, call = run_gae(ctx, SEED_TERMINAL)
    tol = tolerance(SEED_TERMINAL, call.unit_roundoff)
    assert_close(advantages, SEED_TERMINAL_ADVANTAGES, tol, what="advantages on the seed example", call=call.code,
                 diagnose=lambda a: _diagnose_terminal(a, tol))

    def verify(rollout):
        r = rollout
        advantages, _, call = run_gae(ctx, r)
        tol = tolerance(r, call.unit_roundoff)
        at_terminal = np.where(r.terminated, r.rewards - r.values, advantages)
        assert_close(advantages, at_terminal, tol, what="A_t on terminated steps vs r_t - V(s_t)", call=call.code,
                     cause="terminal steps bootstrap from next_values, or the flags are read one step off")
        garbage = r.with_(next_values=np.where(r.terminated, r.next_values + 1e3 * (1 + np.abs(r.next_values)), r.next_values))
        garbage = garbage.rounded(ctx.dtype)
        again, _, call2 = run_gae(ctx, garbage)
        assert_close(again, advantages, tol + tolerance(garbage, call2.unit_roundoff),
                     what="advantages after changing next_values on terminated steps", call=call2.code,
                     cause="next_values is used on terminated steps (V of a terminal state must not count)")

    both = SEED_TERMINAL.with_(truncated=SEED_TERMINAL.terminated.copy(), next_values=np.array([0.5, 7.0, 0.5, 2.0]))
    verify(both)
    for rollout in edge_rollouts(both):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3), min_episode_ends=1, end_weight=3), verify, label="drawn")


@check("GAE-TRUNCATION-BOOTSTRAP")
def truncation_bootstrap(ctx):
    """At truncated (not terminated) steps A_t = r_t + gamma next_values_t - V(s_t)."""
    advantages, _, call = run_gae(ctx, SEED_TRUNCATED)
    tol = tolerance(SEED_TRUNCATED, call.unit_roundoff)
    assert_close(advantages, SEED_TRUNCATED_ADVANTAGES, tol, what="advantages on the truncated seed example",
                 call=call.code, diagnose=lambda a: _diagnose_truncated(a, tol))

    def verify(rollout):
        r = rollout
        advantages, _, call = run_gae(ctx, r)
        only_truncated = r.truncated & ~r.terminated
        expected = np.where(only_truncated, r.rewards + r.gamma * r.next_values - r.values, advantages)
        assert_close(advantages, expected, tolerance(r, call.unit_roundoff),
                     what="A_t on truncated steps vs r_t + gamma next_values_t - V(s_t)", call=call.code)

    for rollout in edge_rollouts(SEED_TRUNCATED):
        verify(rollout)

    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3), min_episode_ends=1, end_weight=3), verify, label="drawn")


@check("GAE-NO-LEAK-ACROSS-BOUNDARY")
def no_leak(ctx):
    """Changing everything after an episode end leaves every advantage up to that end unchanged."""

    def verify(rollout, j):
        """Perturb every step after the first episode end of column ``j`` (column 0 of a (T,) rollout)."""
        r = rollout
        column = r.episode_end if r.rewards.ndim == 1 else r.episode_end[:, j]
        ends = np.flatnonzero(column[:-1])
        if len(ends) == 0:
            return
        b = int(ends[0])
        later = np.zeros(r.shape, dtype=bool)
        if r.rewards.ndim == 1:
            later[b + 1:] = True
        else:
            later[b + 1:, j] = True
        shift = lambda a: np.where(later, a + 1e3 * (1 + np.abs(a)), a)
        changed = r.with_(rewards=shift(r.rewards), values=shift(r.values), next_values=shift(r.next_values)).rounded(ctx.dtype)
        before, _, call = run_gae(ctx, r)
        after, _, call2 = run_gae(ctx, changed)
        tol = tolerance(r, call.unit_roundoff) + tolerance(changed, call2.unit_roundoff)
        keep = ~later
        assert_close(np.where(keep, after, 0.0), np.where(keep, before, 0.0), tol,
                     what=f"advantages up to the episode end at step {b} after changing every step after it",
                     call=call2.code)

    two_episodes = Rollout.of([1.0, 1.0, 1.0, 1.0], [0.5] * 4, [0.5, 2.0, 0.5, 2.0], [False] * 4,
                              [False, True, False, False], 0.9, 0.9)
    verify(two_episodes, 0)
    verify(two_episodes.with_(terminated=two_episodes.truncated, truncated=two_episodes.terminated), 0)
    for rollout in edge_rollouts(two_episodes):
        verify(rollout, 0)
    ctx.property(
        st.tuples(draw(ctx, T=st.integers(2, 24), n_envs=st.none() | st.integers(1, 2), min_episode_ends=1,
                       gamma=discounts(min_value=0.5), lam=discounts(min_value=0.5)), st.integers(0, 1)),
        lambda drawn: verify(drawn[0], min(drawn[1], (drawn[0].shape + (1,))[1] - 1)),
        label="drawn",
    )


@check("GAE-ROLLOUT-END-BOOTSTRAP")
def rollout_end_bootstrap(ctx):
    """The last step bootstraps from next_values[T-1] unless it terminated."""

    def verify(rollout):
        r = rollout
        advantages, _, call = run_gae(ctx, r)
        last = r.rewards[-1] + r.gamma * np.where(r.terminated[-1], 0.0, r.next_values[-1]) - r.values[-1]
        assert_close(advantages[-1:], last[None], tolerance(r, call.unit_roundoff)[-1:],
                     what="A_{T-1} vs r + gamma next_values[T-1] - V(s_{T-1})", call=call.code)

    # bug B2: T = 1, r = 0, V(s_0) = 0, V(s_1) = 10, gamma = 1: A_0 = 10.
    verify(Rollout.of(**contract.known_answer("gae.rollout-end-bootstrap").inputs))
    verify(Rollout.of([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [5.0, 6.0, 7.0], [False] * 3, [False] * 3, 0.9, 0.95))
    for rollout in edge_rollouts(SEED_TRUNCATED.with_(gamma=0.9, lam=0.95)):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3)), verify, label="drawn")


# ---------------------------------------------------------------------------------------------
# structure


@check("GAE-COLUMNS-INDEPENDENT")
def columns_independent(ctx):
    """Column j of a (T, N) call equals the (T,) call on column j (two columns with different episode ends, checked against each column alone)."""

    def verify(rollout):
        together, _, call = run_gae(ctx, rollout)
        for j in range(rollout.shape[1]):
            column = rollout.column(j)
            alone, _, call_j = run_gae(ctx, column)
            tol = tolerance(column, call.unit_roundoff) + tolerance(column, call_j.unit_roundoff)
            assert_close(together[:, j], alone, tol, what=f"column {j} of the (T, N) result vs column {j} alone",
                         call=call.code)

    stacked = lambda a, b: np.stack([a, b], axis=1)
    p3 = Rollout.of(*(stacked(getattr(SEED_TERMINAL, k), getattr(SEED_TRUNCATED, k))
                      for k in ("rewards", "values", "next_values", "terminated", "truncated")), 0.5, 0.5)
    verify(p3)
    for rollout in edge_rollouts(p3):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.integers(2, 4), min_episode_ends=1), verify, label="drawn")


@check("GAE-RETURNS-EQUAL-ADVANTAGES-PLUS-VALUES")
def returns_are_advantages_plus_values(ctx):
    """returns == advantages + values, on the candidate's own output."""

    def verify(rollout):
        advantages, returns, call = run_gae(ctx, rollout)
        u = call.unit_roundoff
        tol = sum_identity_tolerance(advantages, rollout.values, u)
        assert_close(returns, advantages + rollout.values, tol, what="returns vs advantages + values", call=call.code)

    verify(SEED_TERMINAL)
    for rollout in edge_rollouts(SEED_TRUNCATED):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3)), verify, label="drawn")


SCALES = [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 4.0]  # powers of two: scaling is exact, so only a + b rounds


@check("GAE-LINEARITY")
def linearity(ctx):
    """gae(a x + b y) == a gae(x) + b gae(y) with shared flags, gamma and lambda."""

    def verify(x, y, a, b):
        z = x.with_(rewards=a * x.rewards + b * y.rewards, values=a * x.values + b * y.values,
                    next_values=a * x.next_values + b * y.next_values).rounded(ctx.dtype)
        gx, _, cx = run_gae(ctx, x)
        gy, _, cy = run_gae(ctx, y)
        gz, _, cz = run_gae(ctx, z)
        u = max(cx.unit_roundoff, cy.unit_roundoff, cz.unit_roundoff)
        # Each call is within its own bound; rounding z = a x + b y moves each input by <= u |z|,
        # which moves the advantage by <= u S1(z) <= tolerance(z).
        tol = abs(a) * tolerance(x, u) + abs(b) * tolerance(y, u) + 2 * tolerance(z, u) + u * (abs(a * gx) + abs(b * gy))
        assert_close(gz, a * gx + b * gy, tol, what=f"gae({a} x + {b} y) vs {a} gae(x) + {b} gae(y)", call=cz.code)

    verify(SEED_TERMINAL, SEED_TRUNCATED.with_(terminated=SEED_TERMINAL.terminated, truncated=SEED_TERMINAL.truncated), 2.0, 0.5)
    for x in edge_rollouts(SEED_TERMINAL):
        verify(x, SEED_TRUNCATED.with_(terminated=x.terminated, truncated=x.truncated, gamma=x.gamma, lam=x.lam), 2.0, 0.5)

    @st.composite
    def pairs(draw_):
        x = draw_(draw(ctx, n_envs=st.none() | st.integers(1, 2)))
        y = draw_(draw(ctx, T=x.T, n_envs=st.just(None if len(x.shape) == 1 else x.shape[1])))
        y = y.with_(terminated=x.terminated, truncated=x.truncated, gamma=x.gamma, lam=x.lam)
        y = y.with_(next_values=np.where(x.episode_end, y.next_values, np.concatenate([y.values[1:], y.next_values[-1:]])))
        return x, y, draw_(st.sampled_from(SCALES)), draw_(st.sampled_from(SCALES))

    ctx.property(pairs(), lambda p: verify(*p), label="drawn")


# ---------------------------------------------------------------------------------------------
# numerics and hygiene

LONG_T = 100_000
TIME_LIMIT = 1000


def long_rollout(seed: int) -> Rollout:
    """T = 100000 float32 steps: Gaussian rewards and values, terminals with probability 1/500 and
    a time limit of 1000 steps (truncation), gamma 0.99, lambda 0.95."""
    rng = np.random.default_rng(seed)
    state_values = rng.normal(0.0, 5.0, LONG_T + 1)
    rewards = rng.normal(0.0, 1.0, LONG_T)
    terminated = rng.random(LONG_T) < 1 / 500
    truncated = np.zeros(LONG_T, dtype=bool)
    age = 0
    for t in range(LONG_T):
        age += 1
        if terminated[t]:
            age = 0
        elif age == TIME_LIMIT:
            truncated[t], age = True, 0
    final_values = rng.normal(0.0, 5.0, LONG_T)
    next_values = np.where(terminated | truncated, final_values, state_values[1:])
    return Rollout.of(rewards, state_values[:-1], next_values, terminated, truncated, 0.99, 0.95).rounded(np.float32)


@check("GAE-FLOAT32-LONG-ROLLOUT")
def float32_long_rollout(ctx):
    """float32, T = 100000: every advantage within the derived bound of the exact (float64) value."""
    rollout = long_rollout(ctx.seed_for("long"))
    call = ctx.call("gae", rollout.arguments(), dtype=np.float32, outputs=2, shape=rollout.shape, allow_nonfinite=True)
    advantages = call.outputs[0]
    bad = ~np.isfinite(advantages)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ClauseFailure(
            f"advantages: {advantages[t]} at step {t} of {LONG_T} on finite float32 input "
            f"({int(bad.sum())} non-finite values)",
            call="gae(**rlspec.checks.clauses.gae.long_rollout(seed).arguments()) in float32",
        )
    r = rollout
    exact = ref.gae(r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)[0]
    tol = tolerance(r, max(call.unit_roundoff, 2.0**-24))
    if not np.all(np.abs(advantages - exact) <= tol):
        in_float64 = ctx.call("gae", rollout.arguments(), dtype=np.float64, outputs=2, shape=r.shape, allow_nonfinite=True)
        if not np.all(np.abs(in_float64.outputs[0] - exact) <= tolerance(r, in_float64.unit_roundoff)):
            # what is known, not a cause: which mistake it is, the other GAE clauses say
            ctx.note("the result is wrong in float64 as well, so this is not a precision problem: see the other GAE clauses")
    assert_close(advantages, exact, tol, what="float32 advantages vs exact values",
                 call="gae(**long_rollout(seed).arguments()) in float32, long_rollout from rlspec.checks.clauses.gae")


@check("GAE-INPUTS-NOT-MUTATED")
def inputs_not_mutated(ctx):
    """gae leaves every input array exactly as it was (checked on the seed examples and drawn rollouts)."""
    from ..kit.context import MutatedInput

    def verify(rollout):
        try:
            run_gae(ctx, rollout)
        except MutatedInput as mutated:
            index = np.argwhere(mutated.before != mutated.after) if mutated.before.shape == mutated.after.shape else []
            rows = ""
            if len(index):
                key = tuple(int(i) for i in index[0])
                rows = f"`{mutated.name}`{list(key)}: before {float(mutated.before[key])!r}, after {float(mutated.after[key])!r}"
            raise ClauseFailure(str(mutated), table=rows, call=f"gae(**{rollout.arguments()!r})"[:400]) from None

    verify(SEED_TERMINAL)
    verify(SEED_TRUNCATED)
    for rollout in edge_rollouts(SEED_TRUNCATED):
        verify(rollout)
    ctx.property(draw(ctx, n_envs=st.none() | st.integers(1, 3), min_episode_ends=1), verify, label="drawn")


# ---------------------------------------------------------------------------------------------
# rewards_to_go


@check("RETURNS-REWARD-TO-GO")
def reward_to_go(ctx):
    """G_t = sum_k gamma^k r_{t+k}: known answers, the direct sum, and the recursion on the output."""

    def verify(rewards, gamma):
        rewards = rounded(rewards, ctx.dtype)
        call = ctx.call("rewards_to_go", {"rewards": rewards, "gamma": gamma}, shape=rewards.shape)
        (returns,) = call.outputs
        T = len(rewards)
        direct = np.array([sum(gamma**k * rewards[t + k] for k in range(T - t)) for t in range(T)])
        tol = rewards_to_go_tolerance(rewards, gamma, call.unit_roundoff)
        assert_close(returns, direct, tol, what="rewards_to_go vs sum_k gamma^k r_{t+k}", call=call.code)

    for answer in contract.known_answers("rewards_to_go").values():  # [1, 2, 3] at 1/2 -> [2.75, 3.5, 3.0]; bugs A1, A2
        verify(**answer.inputs)

    ctx.property(episodes(dtype=ctx.dtype), lambda e: verify(*e), label="drawn")
