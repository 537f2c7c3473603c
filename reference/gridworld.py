"""The suite's gridworld: a small tabular MDP solved exactly by dynamic programming.

Russell and Norvig's 4x3 world (AIMA, ch. 17): a step reward on every move, +1 at the goal and -1
at the pit (both terminal), and moves that slip sideways with a fixed probability. The policy is
a softmax over a table of logits, pi(a|s) = exp(z[s, a]) / sum_b exp(z[s, b]).

    P_pi(s'|s) = sum_a pi(a|s) P(s'|s,a)          r(s,a) = sum_s' P(s'|s,a) reward(s')
    V^pi       = (I - gamma P_pi)^-1 r_pi         on non-terminal states; V = 0 at a terminal state
    Q^pi(s,a)  = r(s,a) + gamma sum_s' P(s'|s,a) V^pi(s'),      A^pi = Q^pi - V^pi,   J(pi) = V^pi(s_0)

Performance difference (Kakade & Langford, ICML 2002, Lemma 6.1; Schulman et al. 2015, eq. 1), with the discounted
occupancy d^pi'(s) = sum_t gamma^t Pr_pi'(s_t = s), i.e. d^pi' = e_{s_0}' (I - gamma P_pi')^-1:

    J(pi') - J(pi) = E_pi'[ sum_t gamma^t A^pi(s_t, a_t) ] = sum_s d^pi'(s) sum_a pi'(a|s) A^pi(s, a)

Expected GAE under ANY critic V (Schulman et al., ICLR 2016, arXiv:1506.02438), for a segment that
has K steps left before its time limit (terminal states end it earlier, and there is no bootstrap):

    d(s,a)   = r(s,a) + gamma sum_{s' not terminal} P(s'|s,a) V(s') - V(s)      = E[delta_t | s_t=s, a_t=a]
    E_1      = d,      E_K(s,a) = d(s,a) + gamma lambda sum_{s' not terminal} P(s'|s,a) e_{K-1}(s')
    e_K(s)   = sum_a pi(a|s) E_K(s,a);   with no time limit e = (I - gamma lambda P_pi)^-1 d_pi

so with the exact critic d = A^pi, d_pi = 0 and E_K = A^pi at every lambda and every K; with
V = c V^pi, d_pi = (1 - c) r_pi and, once the action-independent part is removed, the bias vanishes
at lambda = 1 (no time limit). The second moment follows the same recursion on
A_hat = delta + gamma lambda A_hat' (with delta(s,a,s') = reward(s') + gamma V(s') [s' not terminal] - V(s)):

    M_K(s,a) = sum_s' P(s'|s,a) [delta^2 + 2 gamma lambda delta e_{K-1}(s') + (gamma lambda)^2 m_{K-1}(s')]

Every function works on float64 arrays, or exactly on object arrays of ``fractions.Fraction``
(``tabular(exact=True)``): the checks use the exact form as their oracle. Shapes: S states (every
non-wall cell, terminal ones included), A = 4 actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Gridworld:
    """Every number of the suite's gridworld, in one place (``rlspec explain GRID-...`` prints them)."""

    layout: tuple[str, ...] = ("...G", ".#.P", "S...")  # rows, top first: S start, G goal, P pit, # wall
    step_reward: float = -0.04  # on every move, added to the goal or pit reward on arrival
    goal_reward: float = 1.0
    pit_reward: float = -1.0
    slip: float = 0.2  # the move goes at a right angle instead, slip / 2 to each side
    gamma: float = 0.99
    time_limit: int = 50  # the gymnasium env truncates an episode after this many steps
    horizon: int = 6  # the checks enumerate every trajectory up to this time limit
    critic_scale: float = 0.7  # the biased critic c V^pi of the checks and the figure
    lambdas: tuple[float, ...] = (0.0, 0.5, 0.8, 0.9, 0.95, 0.97, 0.99, 1.0)  # the bias/variance table


GRIDWORLD = Gridworld()
ACTIONS = ("up", "right", "down", "left")
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # (row, column) step of each action


@dataclass(frozen=True)
class MDP:
    """The gridworld as arrays. ``exact``: object arrays of Fractions instead of float64."""

    P: np.ndarray  # (S, A, S) P(s'|s, a); zero rows at terminal states
    reward: np.ndarray  # (S,) reward for arriving in s' (step reward plus the goal or pit reward)
    terminal: np.ndarray  # (S,) bool
    start: int
    gamma: float | Fraction
    cells: tuple[tuple[int, int], ...]  # (row, column) of each state

    @cached_property
    def r(self) -> np.ndarray:
        """(S, A) expected reward r(s, a) = sum_s' P(s'|s,a) reward(s')."""
        return successor_mean(self, self.reward)

    @cached_property
    def transitions(self) -> tuple:
        """Every (s, a, s', P(s'|s,a)) with P > 0: at most 3 per (s, a) out of S."""
        return tuple((s, a, t, self.P[s, a, t]) for s, a, t in zip(*np.nonzero(self.P != 0)))

    @property
    def alive(self) -> np.ndarray:
        return ~self.terminal


def tabular(world: Gridworld = GRIDWORLD, exact: bool = False) -> MDP:
    """The world's transition and reward arrays; ``exact`` reads every decimal as a Fraction."""
    number = (lambda x: Fraction(str(x))) if exact else float
    dtype = object if exact else np.float64
    cells = tuple((i, j) for i, row in enumerate(world.layout) for j, ch in enumerate(row) if ch != "#")
    index = {cell: k for k, cell in enumerate(cells)}
    kind = [world.layout[i][j] for i, j in cells]
    S, A = len(cells), len(ACTIONS)
    slip, zero = number(world.slip), number(0)
    P = np.full((S, A, S), zero, dtype=dtype)
    for s, (i, j) in enumerate(cells):
        if kind[s] in "GP":
            continue  # terminal: no moves out
        for a in range(A):
            for direction, p in ((a, 1 - slip), ((a + 1) % A, slip / 2), ((a - 1) % A, slip / 2)):
                di, dj = MOVES[direction]
                P[s, a, index.get((i + di, j + dj), s)] += p  # off the grid or into a wall: stay
    bonus = {"G": number(world.goal_reward), "P": number(world.pit_reward)}
    reward = np.array([number(world.step_reward) + bonus.get(k, zero) for k in kind], dtype=dtype)
    terminal = np.array([k in "GP" for k in kind])
    return MDP(P, reward, terminal, kind.index("S"), number(world.gamma), cells)


# ------------------------------------------------------------------------------------------------
# policies and exact dynamic programming


def softmax_policy(logits) -> np.ndarray:
    """(S, A) logits -> (S, A) probabilities, pi(a|s) = exp(z) / sum exp(z) (max subtracted first)."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def solve(M: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``M x = b``: LAPACK for floats, Gauss-Jordan elimination for Fractions (exact)."""
    if M.dtype != object:
        return np.linalg.solve(M, b)
    n = len(b)
    rows = [list(M[i]) + [b[i]] for i in range(n)]  # augmented matrix, row by row
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)  # M is non-singular here
        rows[col], rows[pivot] = rows[pivot], rows[col]
        head = rows[col][col]
        rows[col] = [x / head for x in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [x - factor * y for x, y in zip(rows[r], rows[col])]
    return np.array([row[n] for row in rows], dtype=object)


def successor_mean(mdp: MDP, values) -> np.ndarray:
    """(S, A) sum_s' P(s'|s,a) values(s'). For Fractions only the non-zero transitions are visited:
    exact arithmetic pays per operation, and P is sparse (the dense product does 5x the work)."""
    if mdp.P.dtype != object:
        return mdp.P @ values
    out = np.zeros(mdp.P.shape[:2], dtype=object)
    for s, a, t, p in mdp.transitions:
        out[s, a] += p * values[t]
    return out


def policy_chain(mdp: MDP, policy) -> np.ndarray:
    """(S, S) P_pi(s'|s) = sum_a pi(a|s) P(s'|s,a)."""
    if mdp.P.dtype != object:
        return (policy[:, :, None] * mdp.P).sum(axis=1)
    chain = np.zeros(mdp.P.shape[::2], dtype=object)  # (S, S); sparse loop as in successor_mean
    for s, a, t, p in mdp.transitions:
        chain[s, t] += policy[s, a] * p
    return chain


def _on_alive(mdp: MDP, chain, vector) -> np.ndarray:
    """x = (I - chain)^-1 v on non-terminal states, 0 at terminal ones (``chain`` is f P_pi, f < 1)."""
    alive = np.flatnonzero(mdp.alive)
    block = chain[np.ix_(alive, alive)]
    out = np.zeros(len(vector), dtype=block.dtype)  # an object array holds int 0: exact too
    out[alive] = solve(np.eye(len(alive), dtype=block.dtype) - block, vector[alive])
    return out


def state_values(mdp: MDP, policy, penalty=None) -> np.ndarray:
    """(S,) V^pi = (I - gamma P_pi)^-1 r_pi on non-terminal states; 0 at terminal states. ``penalty`` (S, A), if
    given, is subtracted from r(s, a) (CQL's push-down: the fixed point of Q = r - penalty + gamma P^pi Q)."""
    reward = mdp.r if penalty is None else mdp.r - penalty
    r_pi = (policy * reward).sum(axis=1)  # (S,)
    return _on_alive(mdp, mdp.gamma * policy_chain(mdp, policy), r_pi)


def bootstrap(mdp: MDP, critic) -> np.ndarray:
    """(S, A) sum_{s' not terminal} P(s'|s,a) V(s'): the expected next value, nothing past a terminal state."""
    return successor_mean(mdp, np.where(mdp.terminal, 0, critic))


def action_values(mdp: MDP, values) -> np.ndarray:
    """(S, A) Q(s,a) = r(s,a) + gamma sum_s' P(s'|s,a) V(s')."""
    return mdp.r + mdp.gamma * bootstrap(mdp, values)


def advantages(mdp: MDP, policy) -> np.ndarray:
    """(S, A) A^pi = Q^pi - V^pi (rows of terminal states are 0: nothing is decided there)."""
    values = state_values(mdp, policy)
    return np.where(mdp.terminal[:, None], 0, action_values(mdp, values) - values[:, None])


def expected_td_errors(mdp: MDP, critic) -> np.ndarray:
    """(S, A) d(s,a) = E[delta_t | s_t=s, a_t=a] for the critic V: r(s,a) + gamma E[V(s')] - V(s)
    (rows of terminal states are 0: no step is taken from them)."""
    return np.where(mdp.terminal[:, None], 0, action_values(mdp, critic) - critic[:, None])


def gae_moments(mdp: MDP, policy, critic, lam, steps: int | None = None):
    """First and second moments of the GAE advantage given (s_t, a_t): ``(E, M)``, each (S, A).

    ``steps``: K, the steps left before the time limit (the segment is truncated after K steps and
    bootstraps from the critic there); None: no time limit. Terminal states end the segment with no
    bootstrap. See the module docstring for the recursions.
    """
    gl = mdp.gamma * lam
    alive_next = np.where(mdp.terminal, 0, 1)  # (S,) a terminal s' carries no continuation
    # delta(s, a, s') on every transition: reward(s') + gamma V(s') [s' not terminal] - V(s)
    delta = mdp.reward[None, None, :] + mdp.gamma * (critic * alive_next)[None, None, :] - critic[:, None, None]
    d = (mdp.P * delta).sum(axis=2)  # (S, A) E[delta | s, a]
    d_sq = (mdp.P * delta * delta).sum(axis=2)  # (S, A) E[delta^2 | s, a]
    P_alive = mdp.P * alive_next[None, None, :]  # (S, A, S) transitions that continue the segment
    if steps is None:
        e = _on_alive(mdp, gl * policy_chain(mdp, policy), (policy * d).sum(axis=1))  # (S,) e_infinity
        E = d + gl * (P_alive @ e)
        # M = b + gl^2 P_alive pi M, one linear system over the (s, a) pairs
        b = d_sq + 2 * gl * (mdp.P * delta * (e * alive_next)[None, None, :]).sum(axis=2)
        S, A = d.shape
        K = (P_alive[:, :, :, None] * policy[None, None, :, :]).reshape(S * A, S * A)  # (s,a) -> (s',a')
        M = solve(np.eye(S * A, dtype=K.dtype) - gl * gl * K, b.reshape(-1)).reshape(S, A)
        return E, M
    E, M = d, d_sq  # K = 1: the segment ends after this step
    for _ in range(steps - 1):
        e, m = (policy * E).sum(axis=1), (policy * M).sum(axis=1)  # (S,) e_{K-1}, m_{K-1}
        E, M = (
            d + gl * (P_alive @ e),
            d_sq + (mdp.P * (2 * gl * delta * e[None, None, :] + gl * gl * m[None, None, :]) * alive_next[None, None, :]).sum(axis=2),
        )
    return E, M


def expected_gae(mdp: MDP, policy, critic, lam, steps: int | None = None, moments: bool = True) -> np.ndarray:
    """(S, A) E[A_hat_t | s_t, a_t] for the critic V, with K = ``steps`` left (None: no time limit)."""
    if steps is not None:
        return expected_gae_by_steps(mdp, policy, critic, lam, steps)[-1]
    if moments:
        return gae_moments(mdp, policy, critic, lam)[0]
    d = expected_td_errors(mdp, critic)  # first moment only: e = (I - gamma lambda P_pi)^-1 d_pi
    e = _on_alive(mdp, mdp.gamma * lam * policy_chain(mdp, policy), (policy * d).sum(axis=1))
    return d + mdp.gamma * lam * bootstrap(mdp, e)


def expected_gae_by_steps(mdp: MDP, policy, critic, lam, horizon: int) -> list:
    """[E_1, ..., E_H]: E[A_hat_t | s_t, a_t] with K = 1..H steps left, each (S, A) (first moments only)."""
    d = expected_td_errors(mdp, critic)  # (S, A) E_1
    out = [d]
    for _ in range(horizon - 1):
        e = (policy * out[-1]).sum(axis=1)  # (S,) e_{K-1}
        out.append(d + mdp.gamma * lam * bootstrap(mdp, e))  # nothing continues past a terminal state
    return out


def start_state_bias(mdp: MDP, policy, critic, lam) -> float:
    """The bias at the start state: E[A_hat_0 | s_0, a] minus its policy mean over a, against
    A^pi(s_0, a); summarised as the policy-weighted root mean square over actions. No time limit."""
    s0, pi0 = mdp.start, policy[mdp.start]
    mean = expected_gae(mdp, policy, critic, lam)[s0]  # (A,)
    error = mean - (pi0 * mean).sum() - advantages(mdp, policy)[s0]
    return float(np.sqrt((pi0 * error * error).sum()))


def start_state_variance(mdp: MDP, policy, critic, lam) -> float:
    """Var[A_hat_0 | s_0] with a_0 ~ pi (the per-episode estimate at the start state), no time limit."""
    s0, pi0 = mdp.start, policy[mdp.start]
    E, M = gae_moments(mdp, policy, critic, lam)
    return float((pi0 * M[s0]).sum() - (pi0 * E[s0]).sum() ** 2)


def discounted_occupancy(mdp: MDP, policy) -> np.ndarray:
    """(S,) d^pi(s) = sum_t gamma^t Pr(s_t = s): the row e_{s_0}' (I - gamma P_pi)^-1."""
    alive = np.flatnonzero(mdp.alive)
    block = (mdp.gamma * policy_chain(mdp, policy))[np.ix_(alive, alive)]
    unit = (alive == mdp.start).astype(int).astype(block.dtype)  # e_{s_0} on the non-terminal states
    out = np.zeros(len(mdp.terminal), dtype=block.dtype)
    out[alive] = solve((np.eye(len(alive), dtype=block.dtype) - block).T, unit)  # d' (I - gamma P_pi) = e_{s_0}'
    return out


def performance_difference(mdp: MDP, policy, new_policy):
    """``(J(pi') - J(pi), sum_s d^pi'(s) sum_a pi'(a|s) A^pi(s,a))``: both sides of the identity."""
    s0 = mdp.start
    by_values = state_values(mdp, new_policy)[s0] - state_values(mdp, policy)[s0]
    by_advantages = (discounted_occupancy(mdp, new_policy)[:, None] * new_policy * advantages(mdp, policy)).sum()
    return by_values, by_advantages


def surrogate(mdp: MDP, policy, new_policy):
    """TRPO's local surrogate L_pi(pi') = J(pi) + sum_s d^pi(s) sum_a pi'(a|s) A^pi(s, a) (Schulman et al. 2015,
    eq. 3; Kakade & Langford 2002): the performance difference with pi's occupancy in place of pi''s."""
    occupancy = discounted_occupancy(mdp, policy)
    return state_values(mdp, policy)[mdp.start] + (occupancy[:, None] * new_policy * advantages(mdp, policy)).sum()


def finite_horizon_values(mdp: MDP, policy, horizon: int) -> tuple[list, list]:
    """``([V_0 .. V_H], [Q_1 .. Q_H])``: the values of pi with K steps left, V_0 = 0,
    Q_K(s, a) = r(s, a) + gamma sum_{s' not terminal} P(s'|s,a) V_{K-1}(s'), V_K = sum_a pi Q_K."""
    V = [np.zeros(len(mdp.terminal), dtype=mdp.P.dtype)]
    Q = []
    for _ in range(horizon):
        Q.append(action_values(mdp, V[-1]))
        V.append(np.where(mdp.terminal, 0, (policy * Q[-1]).sum(axis=1)))
    return V, Q


def return_second_moments(mdp: MDP, policy, horizon: int) -> np.ndarray:
    """(S, A) E[G^2 | s_0 = s, a_0 = a] for the K-step return G = sum_{t<K} gamma^t r_{t+1} (K = ``horizon``;
    a terminal state ends it): M_K(s, a) = sum_s' P(s'|s,a) [r(s')^2 + 2 gamma r(s') V_{K-1}(s') + gamma^2 m_{K-1}(s')],
    m_K = sum_a pi M_K, nothing after a terminal s'."""
    V, _ = finite_horizon_values(mdp, policy, horizon)
    alive_next = np.where(mdp.terminal, 0, 1)
    m = np.zeros(len(mdp.terminal), dtype=mdp.P.dtype)
    for K in range(1, horizon + 1):
        after = mdp.reward**2 + (2 * mdp.gamma * mdp.reward * V[K - 1] + mdp.gamma**2 * m) * alive_next  # (S,) per s'
        M = successor_mean(mdp, after)
        m = np.where(mdp.terminal, 0, (policy * M).sum(axis=1))
    return M


def policy_gradient(mdp: MDP, policy, horizon: int) -> np.ndarray:
    """(S, A) d J_H / d z(s, a) for the softmax policy pi = softmax(z), J_H = E[sum_{t<H} gamma^t r_{t+1}] from
    the start state (Sutton et al. 2000, the policy-gradient theorem, finite horizon):
    sum_t gamma^t Pr(s_t = s, alive) pi(a|s) (Q_{H-t}(s, a) - V_{H-t}(s))."""
    V, Q = finite_horizon_values(mdp, policy, horizon)
    grad = np.zeros(mdp.P.shape[:2], dtype=mdp.P.dtype)
    for t in range(horizon):
        K = horizon - t
        weight = mdp.gamma**t * state_distribution(mdp, policy, t)  # (S,)
        grad = grad + weight[:, None] * policy * (Q[K - 1] - V[K][:, None])
    return np.where(mdp.terminal[:, None], 0, grad)


def state_distribution(mdp: MDP, policy, t: int) -> np.ndarray:
    """(S,) Pr(s_t = s, no terminal state before) under pi from the start state; 0 at terminal states."""
    chain = np.where(mdp.terminal[:, None], 0, policy_chain(mdp, policy))  # nothing leaves a terminal state
    dist = (np.arange(len(chain)) == mdp.start).astype(int).astype(chain.dtype)
    for _ in range(t):
        dist = dist @ chain
    return np.where(mdp.terminal, 0, dist)


def episode_return(mdp: MDP, policy, time_limit: int) -> float:
    """Expected undiscounted return of an episode from the start state, cut at ``time_limit`` steps:
    v_k = r_pi + P_pi v_{k-1} on non-terminal states, v_0 = 0 (the return a trainer reports)."""
    v = np.zeros(len(mdp.terminal), dtype=mdp.P.dtype)
    for _ in range(time_limit):
        v = (policy * (mdp.r + bootstrap(mdp, v))).sum(axis=1)
    return v[mdp.start]


def best_episode_return(mdp: MDP, time_limit: int) -> float:
    """The most any policy can expect, by finite-horizon value iteration: v_k = max_a [r + P v_{k-1}]."""
    v = np.zeros(len(mdp.terminal), dtype=mdp.P.dtype)
    for _ in range(time_limit):
        v = np.where(mdp.terminal, 0, (mdp.r + bootstrap(mdp, v)).max(axis=1))
    return v[mdp.start]


# ------------------------------------------------------------------------------------------------
# exhaustive enumeration


@dataclass(frozen=True)
class Paths:
    """Every state path from the start state up to a time limit, one column each.

    Rewards and values depend on states only, so the actions are summed out: a path's probability is
    the product of P_pi(s_{t+1}|s_t). A path ends at a terminal state or, alive, at the time limit.
    """

    states: np.ndarray  # (H + 1, N) s_0..s_H; -1 after the path's end
    step_prob: np.ndarray  # (H, N) P_pi(s_{t+1}|s_t); 1 after the end
    steps: np.ndarray  # (N,) number of transitions (1..H)
    terminated: np.ndarray  # (N,) bool: the last transition entered a terminal state

    @property
    def prob(self) -> np.ndarray:
        """(N,) probability of each path; they sum to 1."""
        return np.prod(self.step_prob, axis=0)


def enumerate_paths(mdp: MDP, policy, horizon: int) -> Paths:
    """Grow every path breadth first; a path stops at a terminal state or after ``horizon`` steps."""
    chain = policy_chain(mdp, policy)  # (S, S)
    growing, done = [((mdp.start,), ())], []
    for _ in range(horizon):
        grown = []
        for states, probs in growing:
            s = states[-1]
            for s_next in np.flatnonzero(chain[s] != 0):
                path = (states + (int(s_next),), probs + (chain[s, s_next],))
                (done if mdp.terminal[s_next] else grown).append(path)
        growing = grown
    done += growing  # alive at the time limit
    H, N = horizon, len(done)
    states = np.full((H + 1, N), -1)
    step_prob = np.ones((H, N), dtype=chain.dtype)
    steps = np.zeros(N, dtype=np.int64)
    for n, (path_states, probs) in enumerate(done):
        states[: len(path_states), n] = path_states
        step_prob[: len(probs), n] = probs
        steps[n] = len(probs)
    terminated = mdp.terminal[states[steps, np.arange(N)]]
    return Paths(states, step_prob, steps, terminated)


@dataclass(frozen=True)
class ActionPaths:
    """Every state-action path from a start state up to a time limit, one column each: the samples of
    the score-function estimator (actions are not summed out)."""

    states: np.ndarray  # (H + 1, N) s_0..s_H; -1 after the path's end
    actions: np.ndarray  # (H, N) a_0..a_{H-1}; -1 after the end
    step_prob: np.ndarray  # (H, N) pi(a_t|s_t) P(s_{t+1}|s_t, a_t); 1 after the end
    steps: np.ndarray  # (N,) transitions taken (1..H)

    @property
    def prob(self) -> np.ndarray:
        return np.prod(self.step_prob, axis=0)


def enumerate_action_paths(mdp: MDP, policy, horizon: int, start: int | None = None) -> ActionPaths:
    """Grow every (state, action) path breadth first from ``start`` (the start state by default); a path stops at
    a terminal state or after ``horizon`` steps. A path's probability is prod_t pi(a_t|s_t) P(s_{t+1}|s_t, a_t)."""
    first = mdp.start if start is None else start
    growing, done = [((first,), (), ())], []
    for _ in range(horizon):
        grown = []
        for states, actions, probs in growing:
            s = states[-1]
            for a in np.flatnonzero(policy[s] != 0):
                for s_next in np.flatnonzero(mdp.P[s, a] != 0):
                    path = (states + (int(s_next),), actions + (int(a),), probs + (policy[s, a] * mdp.P[s, a, s_next],))
                    (done if mdp.terminal[s_next] else grown).append(path)
        growing = grown
    done += growing
    H, N = horizon, len(done)
    states, actions = np.full((H + 1, N), -1), np.full((H, N), -1)
    step_prob = np.ones((H, N), dtype=mdp.P.dtype if mdp.P.dtype == object else np.float64)
    steps = np.zeros(N, dtype=np.int64)
    for n, (path_states, path_actions, probs) in enumerate(done):
        states[: len(path_states), n] = path_states
        actions[: len(path_actions), n] = path_actions
        step_prob[: len(probs), n] = probs
        steps[n] = len(probs)
    return ActionPaths(states, actions, step_prob, steps)
