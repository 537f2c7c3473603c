"""Checks for the gridworld chapter (``spec/clauses/70_gridworld.toml``).

The candidate's estimator is judged in *expectation*, exactly, with no sampling: every state path
of the gridworld up to its time limit is one column of a single ``gae`` call (terminal ends and
time-limit ends as they fall, then the next episode's start), and the outputs are weighted by
the paths' probabilities. The expected numbers are exact rationals from dynamic programming on the
same MDP (``rlspec.reference.gridworld`` with ``exact=True``), never the output of another GAE.

Conditioning. Rewards and critic values depend on states only, so a column is a path of states
s_0..s_L and the actions are summed out. For a node -- the history s_0..s_t and an action a taken at
s_t -- the probability of a column that shares the history is P(s_{t+1}|s_t, a) times the product
of P_pi(s_{k+1}|s_k) for k > t, so E[A_hat_t | s_0..s_t, a_t = a] is a weighted mean over the
columns below the node. The Markov property makes it depend on (s_t, a, steps left) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from ..kit import edges
from ..kit.assertions import ClauseFailure, mismatch_table
from ..kit.registry import check
from ..kit.strategies import Rollout, rounded
from ..kit.strategies import gridworld as draws
from ..kit.tolerances import U64, gae_tolerance
from ...reference import gridworld as gw

from ..kit.tabular import (  # noqa: F401 - shared with the theory chapter; re-exported for tests and replays
    GREEDY, POLICY_BITS, UNIFORM, WORLD, Policy, dyadic_policy, exact_advantages, exact_float, exact_mdp, exact_values,
    float_mdp, policies,
)


@lru_cache(maxsize=64)
def _paths(key: bytes, horizon: int) -> gw.Paths:
    probs = np.frombuffer(key).reshape(float_mdp().P.shape[:2])
    return gw.enumerate_paths(float_mdp(), probs, horizon)


def paths_of(policy: Policy) -> gw.Paths:
    return _paths(policy.key, WORLD.horizon)


def enumerated_rollout(paths: gw.Paths, critic, lam: float) -> Rollout:
    """Every path as one column of a (H + 1, N) rollout, for the critic V (S,) and trace factor lam.

    Row t < steps: rewards[t] = reward(s_{t+1}), values[t] = V(s_t), next_values[t] = V(s_{t+1}) (the
    critic's value of a terminal cell too, which must be ignored); terminated when s_{t+1} is
    terminal; truncated on the last step of a path that reached the time limit H, terminated or not
    (Gymnasium's TimeLimit sets both flags when the two coincide). After its end every column
    continues as the next episode would, from the start state, with zero rewards, up to row H: so
    every episode end is followed by steps whose values a correct gae must not use.
    """
    mdp = float_mdp()
    H = paths.step_prob.shape[0]
    rows = np.arange(H + 1)[:, None]
    valid = rows < paths.steps[None, :]  # (H + 1, N) the path's own steps
    states = np.vstack([paths.states, np.full((1, paths.states.shape[1]), -1)])
    s = np.where(valid, states[:-1], mdp.start)
    s_next = np.where(valid, states[1:], mdp.start)
    critic = np.asarray(critic, dtype=np.float64)
    terminated = valid & mdp.terminal[s_next]
    return Rollout.of(
        rewards=np.where(valid, mdp.reward[s_next], 0.0),
        values=critic[s],
        next_values=critic[s_next],
        terminated=terminated,
        truncated=valid & (rows == H - 1),
        gamma=WORLD.gamma,
        lam=lam,
    )


def with_terminal_values(values) -> np.ndarray:
    """V^pi on non-terminal cells and, at the goal and the pit, the terminal rewards: what a critic
    that learned 'value = reward on arrival' outputs there. Correct code never bootstraps from them."""
    mdp = float_mdp()
    return np.where(mdp.terminal, mdp.reward, np.asarray(values, dtype=np.float64))


@dataclass(frozen=True)
class Nodes:
    """Every node (t, history s_0..s_t, action a), and every (node, column below it) pair as an entry.

    An entry's weight is P(s_{t+1}|s_t, a) times the product of P_pi(s_{k+1}|s_k) for k > t; a node's
    weights sum to 1 exactly (up to rounding: see the tolerances).
    """

    t: np.ndarray  # (M,) per node
    state: np.ndarray  # (M,) s_t
    action: np.ndarray  # (M,)
    column: np.ndarray  # (M,) one column through the node (for messages)
    size: np.ndarray  # (M,) number of columns below it
    entry_node: np.ndarray  # (E,) per entry
    entry_t: np.ndarray  # (E,)
    entry_column: np.ndarray  # (E,)
    entry_weight: np.ndarray  # (E,)

    def sum(self, values: np.ndarray) -> np.ndarray:
        """(M,) per node, the sum over its entries of ``values`` (E,)."""
        return np.bincount(self.entry_node, weights=values, minlength=len(self.t))

    def mean(self, x: np.ndarray) -> np.ndarray:
        """(M,) the weighted mean of x[t, column] (x is (H, N)) over each node's columns."""
        w = self.entry_weight
        return self.sum(w * x[self.entry_t, self.entry_column]) / self.sum(w)


@lru_cache(maxsize=64)
def _nodes(key: bytes, horizon: int) -> Nodes:
    paths = _paths(key, horizon)
    mdp = float_mdp()
    H, N = paths.step_prob.shape
    A = mdp.P.shape[1]
    # suffix[t, n] = product of P_pi(s_{k+1}|s_k) for k > t: the probability of the rest of the path
    suffix = np.ones((H, N))
    for t in range(H - 2, -1, -1):
        suffix[t] = suffix[t + 1] * paths.step_prob[t + 1]
    per_node = {k: [] for k in ("t", "state", "action", "column", "size")}
    entries = {k: [] for k in ("node", "t", "column", "weight")}
    count = 0
    for t in range(H):
        alive = np.flatnonzero(paths.steps > t)  # columns still running at t
        _, first, group = np.unique(paths.states[: t + 1, alive].T, axis=0, return_index=True, return_inverse=True)
        group = group.reshape(-1)  # the history s_0..s_t of each alive column, as a group id
        G = len(first)
        s, s_next = paths.states[t, alive], paths.states[t + 1, alive]
        for a in range(A):
            weight = mdp.P[s, a, s_next] * suffix[t, alive]
            keep = weight > 0
            entries["node"].append(count + group[keep] * A + a)
            entries["t"].append(np.full(int(keep.sum()), t))
            entries["column"].append(alive[keep])
            entries["weight"].append(weight[keep])
        per_node["t"].append(np.full(G * A, t))
        per_node["state"].append(np.repeat(s[first], A))
        per_node["action"].append(np.tile(np.arange(A), G))
        per_node["column"].append(np.repeat(alive[first], A))
        count += G * A
    node = np.concatenate(entries["node"])
    return Nodes(
        *(np.concatenate(per_node[k]) for k in ("t", "state", "action", "column")),
        size=np.bincount(node, minlength=count),
        entry_node=node,
        entry_t=np.concatenate(entries["t"]),
        entry_column=np.concatenate(entries["column"]),
        entry_weight=np.concatenate(entries["weight"]),
    )


def nodes_of(policy: Policy) -> Nodes:
    return _nodes(policy.key, WORLD.horizon)


# ---------------------------------------------------------------------------------------------
# tolerances
#
# For a node with columns n (weights w_n >= 0, exact sum 1) the suite forms
# E_hat = fl(sum_n w_n x_n) / fl(sum_n w_n) from the candidate's outputs x_n. Against the exact
# expectation E = sum_n w_n x*_n of the exact GAE x* on exact inputs:
#   1. candidate: |x_n - x*_n| <= tau_n, tau = gae_tolerance(column, u) at the precision u of the
#      call, which covers the candidate's rounding and its inputs' rounding to u (rewards, values,
#      gamma, lambda; see checks/kit/tolerances.py), plus gae_tolerance(column, 2^-53) for rounding the
#      exact inputs (V^pi, -0.04, 0.99) to float64 before that. Weighted: sum_n w_n tau_n / sum w.
#   2. weights: each float weight is P(s'|s,a) times at most H - 1 chain factors
#      fl(sum_a pi(a|s) fl(P(s'|s,a))), each within (A + 1) u64 of its exact value (pi is exact);
#      with the products, |w_hat / w - 1| <= eps_w = H (A + 2) u64, and a weighted mean moves by at
#      most 2 eps_w / (1 - eps_w) times the weighted mean of |x|.
#   3. summation: n products, n - 1 additions in each sum and one division: (2 n + 1) u64 times the
#      weighted mean of |x| (first order).
#   4. the exact expected value is rounded once to float64: u64 |E|.


def node_tolerance(nodes: Nodes, rollout: Rollout, x: np.ndarray, u: float) -> np.ndarray:
    """(M,) the bound above at every node for the candidate's outputs x (H, N) at precision u."""
    r = rollout
    args = (r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)
    tau = gae_tolerance(*args, u) + gae_tolerance(*args, U64)  # (H, N)
    A, H = float_mdp().P.shape[1], r.shape[0]
    eps_w = H * (A + 2) * U64
    at = lambda a: a[nodes.entry_t, nodes.entry_column]
    w = nodes.entry_weight
    total = nodes.sum(w)
    mean_abs = nodes.sum(w * np.abs(at(x))) / total
    return nodes.sum(w * at(tau)) / total + (2 * eps_w / (1 - eps_w) + (2 * nodes.size + 1) * U64) * mean_abs


# ---------------------------------------------------------------------------------------------
# calling the candidate and judging


def run_gae(ctx, rollout: Rollout):
    rounded = rollout.rounded(ctx.dtype)
    call = ctx.call("gae", rounded.arguments(), outputs=2, shape=rounded.shape)
    return call.outputs[0], call, rounded


def describe_node(nodes: Nodes, paths: gw.Paths, m: int) -> str:
    mdp = float_mdp()
    t, n = int(nodes.t[m]), int(nodes.column[m])
    history = " -> ".join(str(mdp.cells[s]) for s in paths.states[: t + 1, n])
    return f"t={t} {history} {gw.ACTIONS[nodes.action[m]]}"


def judge(ctx, expected: np.ndarray, actual: np.ndarray, tol: np.ndarray, *, nodes: Nodes, paths: gw.Paths,
          what: str, call: str, cause: str = "") -> None:
    """Fail with the worst nodes if any |actual - expected| > tol."""
    diff = np.abs(actual - expected)
    bad = np.flatnonzero(~(diff <= tol))
    if not len(bad):
        return
    worst = bad[np.argsort(-diff[bad] / np.maximum(tol[bad], 1e-300))]
    m = int(worst[0])
    rows = [(describe_node(nodes, paths, int(k)), expected[k], actual[k], diff[k], tol[k]) for k in worst[:6]]
    message = (f"{what} at {describe_node(nodes, paths, m)}: expected {expected[m]:.10g}, got {actual[m]:.10g} "
               f"(|diff| {diff[m]:.3g} > tol {tol[m]:.3g}; {len(bad)} of {len(expected)} nodes off)")
    table = mismatch_table("node", rows).replace("    node", "node".ljust(8), 1)
    ratio = float(np.max(diff[bad] / np.maximum(tol[bad], 1e-300)))
    # ``cause`` is the clause's usual suspect, not read from these numbers (an expectation over every path
    # cannot say which mistake moved it): never printed as likely on its own (see verdict._evidence)
    raise ClauseFailure(message, table=table, call=call, cause=cause, diagnosed=False,
                        ratio=ratio if np.isfinite(ratio) else None)


def replay_call(policy: Policy, critic: str, lam: float) -> str:
    return (f"gae(**enumerated_rollout(paths_of({policy.name!s}), {critic}, lam={lam!r}).arguments())  "
            f"# from rlspec.checks.clauses.gridworld; one column per path, H = {WORLD.horizon}")


def expected_at_nodes(table_by_steps, nodes: Nodes) -> np.ndarray:
    """Pick E_K(s_t, a) at every node, K = H - t steps left (table_by_steps[K - 1] is (S, A))."""
    H = WORLD.horizon
    return np.array([table_by_steps[H - t - 1][s, a] for t, s, a in zip(nodes.t, nodes.state, nodes.action)])


def check_expectation(ctx, policy: Policy, critic_float, lam: float, expected_fn, *, what: str, critic_label: str,
                      cause: str = "") -> None:
    """Run the candidate on every path of ``policy`` with ``critic_float`` and compare node means."""
    paths, nodes = paths_of(policy), nodes_of(policy)
    advantages, call, rounded = run_gae(ctx, enumerated_rollout(paths, critic_float, lam))
    actual = nodes.mean(advantages)
    expected = expected_fn(nodes)
    tol = node_tolerance(nodes, rounded, advantages, call.unit_roundoff) + U64 * np.abs(expected)
    judge(ctx, expected, actual, tol, nodes=nodes, paths=paths, what=what,
          call=replay_call(policy, critic_label, lam), cause=cause)


# Hypothesis: drawn policies (tabular logits), trace factors and critics

trace_factors, critics = draws.trace_factors, draws.critics


# ---------------------------------------------------------------------------------------------
# GAE in expectation


@check("GRID-GAE-EXPECTATION-EXACT-CRITIC")
def exact_critic(ctx):
    """With V = V^pi, E[A_hat_t | history, a_t] = A^pi(s_t, a_t) at every node, for every lambda."""

    def verify(policy: Policy, lam: float):
        values = exact_values(policy)
        A_exact = exact_float(exact_advantages(policy))  # (S, A)
        check_expectation(
            ctx, policy, with_terminal_values(exact_float(values)), lam,
            lambda nodes: A_exact[nodes.state, nodes.action],
            what=f"E[A_hat_t | history, a_t] with the exact critic, lambda = {lam}, vs A^pi(s_t, a_t)",
            critic_label=f"with_terminal_values(exact_float(exact_values({policy.name})))",
        )

    verify(UNIFORM, 0.5)  # catches every catalogued mutant on its own; drawn lambdas (0 and 1 likely) follow
    verify(GREEDY, 0.95)
    for lam in edges.values("gae", "lam"):  # 0 and 1, on every seed
        verify(GREEDY, lam)
    ctx.property(st.tuples(policies(), trace_factors()), lambda p: verify(*p), label="drawn", tier="enumeration")


def closed_form(policy: Policy, critic_float, lam: float):
    """E_K(s, a) for K = 1..H, exact, for the critic exactly as the candidate receives it (float64)."""
    critic = np.array([Fraction(float(v)) for v in critic_float], dtype=object)
    return [exact_float(E) for E in gw.expected_gae_by_steps(exact_mdp(), policy.exact, critic, Fraction(lam), WORLD.horizon)]


@check("GRID-GAE-EXPECTATION-CLOSED-FORM")
def any_critic(ctx):
    """With any critic V the node means equal the closed form E_K(s_t, a_t), K = H - t (scaled critic c V^pi first)."""

    def verify(policy: Policy, critic_float, lam: float, label: str):
        table = closed_form(policy, critic_float, lam)
        check_expectation(
            ctx, policy, critic_float, lam, lambda nodes: expected_at_nodes(table, nodes),
            what=f"E[A_hat_t | history, a_t] with the critic {label}, lambda = {lam}, vs the closed form",
            critic_label=label,
        )

    c = WORLD.critic_scale
    scaled = with_terminal_values(exact_float(exact_values(UNIFORM)) * c)
    for lam in (0.5, 0.9) + tuple(edges.values("gae", "lam")):  # and the edges 0 and 1, on every seed
        verify(UNIFORM, scaled, lam, f"with_terminal_values({c} * exact_float(exact_values(UNIFORM)))")

    def drawn(example):
        policy, critic, lam = example
        verify(policy, critic, lam, f"np.array({critic.tolist()!r})")

    ctx.property(st.tuples(policies(), critics(), trace_factors()), drawn, label="drawn", tier="enumeration")


def monte_carlo_form(policy: Policy, critic_float):
    """E_K(s, a) at lambda = 1 for K = 1..H without the lambda recursion: the return telescopes, so
    E_K = A^pi(s, a) + (V^pi - V)(s) + gamma^K E[(V - V^pi)(s_{t+K}); no terminal before | s, a]."""
    mdp, H = exact_mdp(), WORLD.horizon
    values, advantages = exact_values(policy), exact_advantages(policy)
    critic = np.array([Fraction(float(v)) for v in critic_float], dtype=object)
    error = np.where(mdp.terminal, 0, critic - values)  # (S,) V - V^pi on non-terminal states
    pi = policy.exact
    out, ahead = [], error  # ahead = E[error(s_{t+K}); alive | s_{t+1}] = P_pi^(K-1) error, alive states
    for K in range(1, H + 1):
        out.append(exact_float(advantages - error[:, None] + mdp.gamma**K * gw.bootstrap(mdp, ahead)))
        ahead = np.where(mdp.terminal, 0, (pi * gw.bootstrap(mdp, ahead)).sum(axis=1))
    return out


@check("GRID-GAE-LAMBDA-ONE-CRITIC-CANCELS")
def lambda_one(ctx):
    """At lambda = 1 only V(s_t) and the time-limit bootstrap of the critic survive in expectation."""

    def verify(policy: Policy, critic_float, label: str):
        table = monte_carlo_form(policy, critic_float)
        check_expectation(
            ctx, policy, critic_float, 1.0, lambda nodes: expected_at_nodes(table, nodes),
            what=f"E[A_hat_t | history, a_t] at lambda = 1 with the critic {label}, vs A^pi + (V^pi - V)(s_t) + the bootstrap term",
            critic_label=label, cause="the trace is not discounted by gamma (at lambda = 1 the critic must telescope away)",
        )

    S = len(float_mdp().terminal)
    verify(UNIFORM, with_terminal_values(exact_float(exact_values(UNIFORM)) * WORLD.critic_scale),
           f"with_terminal_values({WORLD.critic_scale} * exact_float(exact_values(UNIFORM)))")
    verify(GREEDY, np.linspace(-1.0, 1.0, S), f"np.linspace(-1.0, 1.0, {S})")
    ctx.property(st.tuples(policies(), critics()), lambda p: verify(p[0], p[1], f"np.array({p[1].tolist()!r})"),
                 label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# performance difference


def performance_gap(old: Policy, new: Policy) -> tuple[float, Fraction, Fraction]:
    """``(expected, J(new) - J(old), tail)``: E_new[A_hat_0] at lambda = 1 with the critic V^old equals
    J(new) - J(old) - gamma^H E_new[(V^new - V^old)(s_H); alive at H] (the tail the time limit cuts)."""
    mdp, H = exact_mdp(), WORLD.horizon
    v_old, v_new = exact_values(old), exact_values(new)
    difference = v_new[mdp.start] - v_old[mdp.start]
    tail = mdp.gamma**H * (gw.state_distribution(mdp, new.exact, H) * (v_new - v_old)).sum()
    return float(difference - tail), difference, tail


@check("GRID-PERFORMANCE-DIFFERENCE")
def performance_difference(ctx):
    """On paths of pi' with the critic V^pi: E[A_hat_0] (lambda = 1) and E[sum_t gamma^t A_hat_t] (lambda = 0)
    are J(pi') - J(pi) less the gamma^H tail beyond the time limit."""

    def verify(old: Policy, new: Policy):
        paths = paths_of(new)
        prob = paths.prob  # (N,) float; exact up to eps_w relative (see the tolerances)
        critic = with_terminal_values(exact_float(exact_values(old)))
        expected, difference, tail = performance_gap(old, new)
        A, H = float_mdp().P.shape[1], WORLD.horizon
        eps_w = H * (A + 2) * U64
        discount = WORLD.gamma ** np.arange(H + 1)  # (H + 1,) each within H u64 of gamma^t
        for lam, label in ((1.0, "E[A_hat_0] (lambda = 1)"), (0.0, "E[sum_t gamma^t A_hat_t] (lambda = 0)")):
            advantages, call, rounded = run_gae(ctx, enumerated_rollout(paths, critic, lam))
            r = rounded
            args = (r.rewards, r.values, r.next_values, r.terminated, r.truncated, r.gamma, r.lam)
            tau = gae_tolerance(*args, call.unit_roundoff) + gae_tolerance(*args, U64)  # (H, N)
            valid = np.arange(H + 1)[:, None] < paths.steps[None, :]  # the path's own steps
            if lam == 1.0:
                per_path, per_path_tol = advantages[0], tau[0]
            else:  # sum over the path's steps of gamma^t A_hat_t, and of gamma^t tau_t
                weights = np.where(valid, discount[:, None], 0.0)
                per_path, per_path_tol = (weights * advantages).sum(axis=0), (weights * tau).sum(axis=0)
                per_path_tol = per_path_tol + (2 * H + 2) * U64 * (weights * np.abs(advantages)).sum(axis=0)
            actual = float((prob * per_path).sum() / prob.sum())
            mean_abs = float((prob * np.abs(per_path)).sum())
            tol = float((prob * per_path_tol).sum()) + (2 * eps_w / (1 - eps_w) + (2 * len(prob) + 1) * U64) * mean_abs \
                + U64 * abs(expected)
            if not abs(actual - expected) <= tol:
                raise ClauseFailure(
                    f"{label} over every path of {new.name} with the critic V^({old.name}): expected "
                    f"{expected:.10g} = J(pi') - J(pi) - tail = {float(difference):.10g} - {float(tail):.10g}, got "
                    f"{actual:.10g} (|diff| {abs(actual - expected):.3g} > tol {tol:.3g})",
                    table=mismatch_table("quantity", [(label, expected, actual, abs(actual - expected), tol)]),
                    call=replay_call(new, f"with_terminal_values(exact_float(exact_values({old.name})))", lam),
                )

    verify(UNIFORM, GREEDY)
    verify(GREEDY, UNIFORM)
    ctx.property(st.tuples(policies(), policies()), lambda p: verify(*p), label="drawn", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# end to end: train_ppo on the gymnasium env

TRAIN_ITERATIONS = 10  # a fixed budget of 10 iterations
FIRST, LAST = 10, 20  # ... and the mean return of the last 20 episodes beats that of the first 10
MARGIN = 0.1  # by at least this much, on every seed
QUICK_SEEDS = (0,)  # a fixed training seed (about 0.2 s of CPU); ci and thorough add seeds drawn from --seed


@lru_cache(maxsize=None)
def return_anchors() -> tuple[float, float]:
    """``(J_uniform, J_best)``: expected episode returns (undiscounted, cut at the time limit) of the
    uniform policy and of the best policy, by finite-horizon dynamic programming in float64 (its
    rounding, about 1e-14, is nothing beside the sampling noise of 20 episodes)."""
    mdp, T = float_mdp(), WORLD.time_limit
    uniform = np.full(mdp.P.shape[:2], 1.0 / mdp.P.shape[1])
    return float(gw.episode_return(mdp, uniform, T)), float(gw.best_episode_return(mdp, T))


def required_final_return() -> float:
    """Half-way from the uniform policy's expected return to the best one's."""
    uniform, best = return_anchors()
    return uniform + 0.5 * (best - uniform)


def possible_return_range() -> tuple[float, float]:
    """Every episode return the env can pay: k step rewards plus the goal or pit reward, or
    time_limit step rewards when truncated."""
    w = WORLD
    ends = [w.time_limit * w.step_reward] + [k * w.step_reward + b for k in range(1, w.time_limit + 1)
                                             for b in (w.goal_reward, w.pit_reward)]
    return min(ends), max(ends)


def train_seeds(ctx) -> list[int]:
    extra = ctx.examples("training")  # quick 0, ci 3, thorough 30
    return list(QUICK_SEEDS) + [ctx.seed_for(f"train-{i}") % 2**31 for i in range(extra)]


def call_trainer(ctx, seed: int) -> np.ndarray:
    """The candidate's ``train_ppo(env, iterations, seed)`` on a fresh env, with torch on one thread
    (tiny tensors: more threads only add synchronisation; the setting is restored)."""
    import torch

    from ..kit.context import CandidateError, describe
    from ..kit.gridworld_env import GridworldEnv

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result, changes = ctx.invoke("train_ppo", {"env": GridworldEnv(), "iterations": TRAIN_ITERATIONS, "seed": seed})
    finally:
        torch.set_num_threads(threads)
    for change in changes:
        ctx.notes.append(f"train_ppo changed global state (restored): {change}")
    try:
        returns = np.array([float(r) for r in np.ravel(np.asarray(result, dtype=object))])
    except (TypeError, ValueError):
        raise CandidateError(f"train_ppo returned {describe(result)}; expected a sequence of episode returns") from None
    if returns.size < FIRST + LAST:
        raise CandidateError(f"train_ppo returned {returns.size} episode returns; {FIRST + LAST} or more are needed "
                             f"to compare the first {FIRST} with the last {LAST}")
    low, high = possible_return_range()
    outside = np.flatnonzero(~((returns >= low - 1e-9) & (returns <= high + 1e-9)))
    if len(outside):
        raise CandidateError(f"train_ppo returned an episode return of {returns[outside[0]]!r} (index {outside[0]}), "
                             f"outside [{low:g}, {high:g}], the undiscounted returns this env can pay")
    return returns


def reference_rows(seeds) -> list[tuple]:
    """The yardstick for a failure message: the reference trainer on the same seeds."""
    import torch

    from ..kit.gridworld_env import GridworldEnv
    from ...reference.training import train_ppo

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = [np.array(train_ppo(GridworldEnv(), TRAIN_ITERATIONS, seed)) for seed in seeds]
    finally:
        torch.set_num_threads(threads)
    return [(f"reference, seed {seed}", r[:FIRST].mean(), r[-LAST:].mean(), r[-LAST:].mean() - r[:FIRST].mean())
            for seed, r in zip(seeds, runs)]


@check("GRID-TRAIN-PPO-IMPROVES")
def train_ppo_improves(ctx):
    """10 iterations on the gymnasium gridworld: on every seed the last 20 episodes beat the first 10 by
    MARGIN, and on average the last 20 reach half-way from the uniform policy's exact return to the best."""
    seeds = train_seeds(ctx)
    rows, finals = [], []
    for seed in seeds:
        returns = call_trainer(ctx, seed)
        first, last = returns[:FIRST].mean(), returns[-LAST:].mean()
        rows.append((f"seed {seed}", first, last, last - first))
        finals.append(last)
    line = lambda name, a, b, c: f"{name:>22}  {a:10.4f}  {b:10.4f}  {c:8.4f}"
    table = "\n".join([f"{'':>22}  {'first 10':>10}  {'last 20':>10}  {'gain':>8}"] + [line(*row) for row in rows])
    yardstick = lambda: table + "\n" + "\n".join(line(*row) for row in reference_rows(seeds))
    uniform, best = return_anchors()
    call = f"train_ppo(GridworldEnv(), iterations={TRAIN_ITERATIONS}, seed=s) for s in {seeds}  # GridworldEnv from rlspec.checks.kit.gridworld_env"
    stalled = [row for row in rows if not row[3] >= MARGIN]
    if stalled:
        name, first, last, gain = stalled[0]
        raise ClauseFailure(
            f"mean return of the last {LAST} episodes vs the first {FIRST}, {name}: expected a gain of at least {MARGIN}, "
            f"got {gain:.4f} ({first:.4f} -> {last:.4f}; {len(stalled)} of {len(seeds)} seeds)",
            table=yardstick(), call=call, cause="the policy does not improve: no policy gradient reaches the logits "
            "(log pi_old recomputed in the same graph?), or the rewards are misaligned with the actions")
    average, needed = float(np.mean(finals)), required_final_return()
    if not average >= needed:
        raise ClauseFailure(
            f"mean return of the last {LAST} episodes, averaged over {len(seeds)} seeds: expected at least {needed:.4f} "
            f"(half-way from the uniform policy's {uniform:.4f} to the best {best:.4f}, by dynamic programming), got {average:.4f}",
            table=yardstick(), call=call, cause="training improves too little within the budget")


# ---------------------------------------------------------------------------------------------
# one-step actor-critic in expectation


@lru_cache(maxsize=None)
def transitions() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (s, a, s') with s non-terminal and P(s'|s,a) > 0, as arrays (B,) each, plus P(s'|s,a)."""
    mdp = float_mdp()
    s, a, s_next = np.nonzero(np.where(mdp.terminal[:, None, None], 0.0, mdp.P))
    return s, a, s_next, mdp.P[s, a, s_next]


@check("GRID-ACTOR-CRITIC-TD-EXPECTATION")
def actor_critic_expectation(ctx):
    """Every transition of the gridworld in one batch: the actor's weight delta = -d actor_loss / d logp
    (divided by the declared reduction), averaged over s' ~ P(.|s,a), is A^pi(s, a) for the exact critic."""
    from ..kit.gradients import gradients, reduction_scale

    mdp = float_mdp()
    s, a, s_next, prob = transitions()
    B = len(s)

    def verify(policy: Policy, critic_float, expected_sa, label: str):
        critic = np.asarray(critic_float, dtype=np.float64)
        args = {
            "logp": np.log(policy.probs[s, a]),
            "values": critic[s],
            "next_values": critic[s_next],  # the critic's value of a terminal cell too: to be ignored
            "rewards": mdp.reward[s_next],
            "terminated": mdp.terminal[s_next],
            "truncated": np.zeros(B, dtype=bool),  # one transition each: no time limit cuts it
            "gamma": WORLD.gamma,
        }
        received = {k: (rounded(v, ctx.dtype) if isinstance(v, np.ndarray) and v.dtype != bool else v)
                   for k, v in args.items()}
        call = ctx.call("actor_critic_losses", received, array="torch", requires_grad=("logp", "values", "next_values"),
                        outputs=2, shape=())
        grads = gradients(call.raw[0], {n: call.inputs[n] for n in ("logp", "values", "next_values")})
        delta = -grads["logp"] / reduction_scale(ctx, B)  # (B,) the weight each log-probability gets
        # E[delta | s, a] = sum_s' P(s'|s,a) delta(s, a, s'), one entry per (s, a) pair
        pair = s * mdp.P.shape[1] + a
        pairs = np.unique(pair)
        actual = np.bincount(pair, weights=prob * delta)[pairs]
        expected = expected_sa.ravel()[pairs]
        # tolerances, with m = |r| + gamma |V'| (not terminal) + |V| per sample and |delta| <= m:
        # * the candidate's gradient is within 8 u s m of -s delta (checks/clauses/pg.py: 6 roundings in
        #   delta and its inputs' rounding to u, 2 in the gradient); dividing by s = fl(1/B) adds
        #   2 u |delta|: 16 u m covers both;
        # * rounding the exact inputs (V^pi, -0.04, 0.99) to float64 first: 6 u64 m, taken as 8 u64 m;
        # * the suite's P-weighted sum of n <= 3 terms in float64, each P rounded once: (2 n - 1) u64
        #   sum P |delta| <= 5 u64 sum P |delta|; and u64 |E| for rounding the exact expectation.
        m = np.abs(received["rewards"]) + WORLD.gamma * np.where(args["terminated"], 0.0, np.abs(received["next_values"])) \
            + np.abs(received["values"])
        per_sample = (16 * call.unit_roundoff + 8 * U64) * m
        tol = np.bincount(pair, weights=prob * per_sample)[pairs] + 5 * U64 * np.bincount(pair, weights=prob * np.abs(delta))[pairs] \
            + U64 * np.abs(expected)
        bad = np.flatnonzero(~(np.abs(actual - expected) <= tol))
        if len(bad):
            k = int(bad[np.argmax(np.abs(actual - expected)[bad] / tol[bad])])
            where = lambda j: f"{mdp.cells[pairs[j] // mdp.P.shape[1]]} {gw.ACTIONS[pairs[j] % mdp.P.shape[1]]}"
            rows = [(where(j), expected[j], actual[j], abs(actual[j] - expected[j]), tol[j]) for j in bad[:6]]
            raise ClauseFailure(
                f"E[delta | s, a] over s' ~ P(.|s,a) with the critic {label}, at s, a = {where(k)}: expected "
                f"{expected[k]:.10g}, got {actual[k]:.10g} (|diff| {abs(actual[k] - expected[k]):.3g} > tol {tol[k]:.3g}; "
                f"{len(bad)} of {len(pairs)} state-action pairs off)",
                table=mismatch_table("s, a", rows),
                call=f"actor_critic_losses over every gridworld transition: {call.code[:300]}",
            )

    exact_critic = lambda policy: with_terminal_values(exact_float(exact_values(policy)))
    verify(UNIFORM, exact_critic(UNIFORM), exact_float(exact_advantages(UNIFORM)), "V^pi (uniform policy)")
    verify(GREEDY, exact_critic(GREEDY), exact_float(exact_advantages(GREEDY)), "V^pi (greedy policy)")

    def any_critic(example):
        policy, critic = example
        exact = np.array([Fraction(float(v)) for v in critic], dtype=object)
        verify(policy, critic, exact_float(gw.expected_td_errors(exact_mdp(), exact)), f"np.array({critic.tolist()!r})")

    ctx.property(policies(), lambda p: verify(p, exact_critic(p), exact_float(exact_advantages(p)), "V^pi"),
                 label="drawn policy", tier="enumeration")
    ctx.property(st.tuples(policies(), critics()), any_critic, label="drawn critic", tier="enumeration")


# ---------------------------------------------------------------------------------------------
# the numbers `rlspec explain` prints (the clauses' `notes` in spec/clauses/70_gridworld.toml are
# generated from here; tests/test_gridworld.py keeps the two equal)


def gridworld_notes(clause_id: str) -> str:
    """Every number of the gridworld that the clause uses, in words."""
    w, mdp = WORLD, float_mdp()
    S, A = mdp.P.shape[:2]
    rows = " / ".join(w.layout)
    common = (f"The gridworld (rlspec.reference.gridworld.GRIDWORLD): Russell and Norvig's 4x3 world, rows {rows} "
              f"(S start, G goal, P pit, # wall; {S} cells, {A} actions {', '.join(gw.ACTIONS)}); reward {w.step_reward:g} "
              f"per step plus {w.goal_reward:+g} on reaching the goal or {w.pit_reward:+g} the pit, both terminal; a move "
              f"goes at a right angle with probability {w.slip:g} ({w.slip / 2:g} to each side), off the grid or into "
              f"the wall it stays; gamma = {w.gamma:g}.")
    if clause_id == "GRID-TRAIN-PPO-IMPROVES":
        uniform, best = return_anchors()
        return (f"{common} The env (rlspec.checks.kit.gridworld_env.GridworldEnv, a gymnasium.Env) truncates an episode "
                f"after {w.time_limit} steps. Budget {TRAIN_ITERATIONS} iterations; training seeds {list(QUICK_SEEDS)} "
                f"at quick, more at ci and thorough; gain of at least {MARGIN:g} per seed (last {LAST} vs first {FIRST} "
                f"episodes). Expected episode returns over {w.time_limit} steps, by dynamic programming: uniform policy {uniform:.4f}, best "
                f"policy {best:.4f}, so the last {LAST} must average at least {required_final_return():.4f}.")
    if clause_id == "GRID-ACTOR-CRITIC-TD-EXPECTATION":
        return (f"{common} One batch of every transition (s, a, s') with s non-terminal and P(s'|s,a) > 0: "
                f"{len(transitions()[0])} transitions. V^pi(start) = {float(exact_values(UNIFORM)[mdp.start]):.4f} "
                f"under the uniform policy.")
    paths = paths_of(UNIFORM)
    notes = (f"{common} Every path from the start up to the time limit H = {w.horizon}: {paths.states.shape[1]} columns "
             f"under the uniform policy ({int(paths.terminated.sum())} end at a terminal state), each continued from the "
             f"start state with zero rewards up to row {w.horizon + 1}; V^pi(start) = "
             f"{float(exact_values(UNIFORM)[mdp.start]):.4f} under the uniform policy.")
    if clause_id == "GRID-GAE-EXPECTATION-CLOSED-FORM":
        notes += f" Scaled critic c = {w.critic_scale:g}."
    if clause_id == "GRID-PERFORMANCE-DIFFERENCE":
        J = lambda p: float(exact_values(p)[mdp.start])
        notes += (f" Pairs: uniform and greedy (logit 2 on the optimal action) both ways, then drawn policies; "
                  f"J(uniform) = {J(UNIFORM):.4f}, J(greedy) = {J(GREEDY):.4f}.")
    return notes
