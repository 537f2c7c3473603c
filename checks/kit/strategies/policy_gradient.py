"""Strategies for the policy-gradient chapter's operations: ``reinforce_loss`` (:func:`reinforce_batches`, and
small linear softmax and Gaussian policies whose every action, or Gauss-Hermite node, forms one batch:
:func:`softmax_cases`, :func:`gaussian_cases`) and ``actor_critic_losses`` (:func:`transition_batches`, and
transitions valued by a linear critic: :func:`critic_batches`).

Values are float32-representable (drawn as float32, or multiples of 1/64), so both precisions see the same case.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from ..tolerances import td_terms
from .base import flag_arrays, rounded
from .base import float32_arrays as float_arrays

# ---------------------------------------------------------------------------------------------
# reinforce_loss


def reinforce_batches():
    """``(logp, returns, baseline or None)``: T in 1..12 steps, logp in [-30, 0], returns and baseline in [-100, 100]
    (float32 values)."""
    return _reinforce_batches()


@st.composite
def _reinforce_batches(draw):
    T = draw(st.integers(1, 12), label="T")
    logp = draw(float_arrays((T,), -30.0, 0.0), label="logp")
    returns = draw(float_arrays((T,), -100.0, 100.0), label="returns")
    baseline = draw(st.booleans(), label="with a baseline") and draw(float_arrays((T,), -100.0, 100.0), label="baseline")
    return logp, returns, baseline if baseline is not False else None


@dataclass(frozen=True)
class SoftmaxCase:
    """A linear softmax policy over ``A`` actions in ``S`` states, a baseline b(s) and action values Q(s, a)."""

    obs: np.ndarray  # (S, K)
    weight: np.ndarray  # (K, A)
    bias: np.ndarray  # (A,)
    baseline: np.ndarray  # (S,)
    q: np.ndarray  # (S, A)


@dataclass(frozen=True)
class GaussianCase:
    """A linear diagonal Gaussian policy over ``D`` action dimensions, a baseline b(s) and a cubic Q(s, a).

    ``Q(s, a) = q0_s + sum_d (q1_sd a_d + q2_sd a_d^2 + q3_sd a_d^3)``: degree <= 3 in each dimension, so
    score x Q has degree <= 5 and the three-node Gauss-Hermite product rule is exact
    (pg.gauss_hermite_three_nodes).
    """

    obs: np.ndarray  # (S, K)
    weight: np.ndarray  # (K, D)
    bias: np.ndarray  # (D,)
    log_std: np.ndarray  # (D,)
    baseline: np.ndarray  # (S,)
    q: np.ndarray  # (S, 1 + 3 D): q0, then (q1, q2, q3) for each dimension


def dyadic(rng, shape, low, high):
    """Uniform values rounded to multiples of 1/64: exact in float32, so both precisions see the same case."""
    return np.round(rng.uniform(low, high, shape) * 64) / 64


@st.composite
def softmax_cases(draw):
    """A linear softmax policy over 2..5 actions in 1..3 states of 1..3 features, a baseline and action values.
    Sizes are drawn (and shrunk); the values come from a drawn seed, to keep each example cheap."""
    S, K, A = draw(st.integers(1, 3), label="S"), draw(st.integers(1, 3), label="K"), draw(st.integers(2, 5), label="A")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
    return SoftmaxCase(dyadic(rng, (S, K), -2, 2), dyadic(rng, (K, A), -2, 2), dyadic(rng, (A,), -2, 2),
                       dyadic(rng, (S,), -10, 10), dyadic(rng, (S, A), -10, 10))


@st.composite
def gaussian_cases(draw):
    """A linear diagonal Gaussian policy over 1..2 dimensions in 1..2 states of 1..2 features, a baseline and a
    cubic Q (values from a drawn seed)."""
    S, K, D = draw(st.integers(1, 2), label="S"), draw(st.integers(1, 2), label="K"), draw(st.integers(1, 2), label="D")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
    return GaussianCase(dyadic(rng, (S, K), -1, 1), dyadic(rng, (K, D), -1, 1), dyadic(rng, (D,), -1, 1),
                        dyadic(rng, (D,), -1, 0.5), dyadic(rng, (S,), -5, 5), dyadic(rng, (S, 1 + 3 * D), -1, 1))


# ---------------------------------------------------------------------------------------------
# actor_critic_losses


@dataclass(frozen=True)
class Transitions:
    logp: np.ndarray
    values: np.ndarray
    next_values: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    gamma: float
    truncated: np.ndarray | None = None  # a time limit: not terminal (bootstraps); None: no step truncated

    def __post_init__(self):
        if self.truncated is None:
            object.__setattr__(self, "truncated", np.zeros(len(self.terminated), dtype=bool))

    def rounded(self, dtype) -> "Transitions":
        r = lambda a: rounded(a, dtype)
        return Transitions(r(self.logp), r(self.values), r(self.next_values), r(self.rewards),
                           np.asarray(self.terminated, dtype=bool), float(self.gamma), np.asarray(self.truncated, dtype=bool))

    @property
    def delta(self) -> np.ndarray:
        return self.rewards + self.gamma * np.where(self.terminated, 0.0, self.next_values) - self.values

    @property
    def m(self) -> np.ndarray:
        return td_terms(self.rewards, self.values, self.next_values, self.terminated, self.gamma)


def transitions(logp, values, next_values, rewards, terminated, gamma, truncated=None) -> Transitions:
    f = lambda a: np.asarray(a, dtype=np.float64)
    flags = None if truncated is None else np.asarray(truncated, dtype=bool)
    return Transitions(f(logp), f(values), f(next_values), f(rewards), np.asarray(terminated, dtype=bool), float(gamma), flags)


GAMMAS = st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]) | st.floats(0.0, 1.0)


@st.composite
def transition_batches(draw):
    """T in 1..10 transitions: logp in [-20, 0], values, next values and rewards in [-50, 50], drawn flags (both may be
    set: terminated wins) and gamma."""
    T = draw(st.integers(1, 10), label="T")
    arr = lambda label: draw(float_arrays((T,), -50.0, 50.0), label=label)
    logp = draw(float_arrays((T,), -20.0, 0.0), label="logp")
    terminated = draw(flag_arrays((T,)), label="terminated")
    truncated = draw(flag_arrays((T,)), label="truncated")
    gamma = draw(GAMMAS, label="gamma")
    return transitions(logp, arr("values"), arr("next_values"), arr("rewards"), terminated, gamma, truncated)


@dataclass(frozen=True)
class LinearCritic:
    """``V(s) = phi(s) . w + c``, the same critic for s_t and s_{t+1}: the critic's bias-gradient check."""

    phi: np.ndarray  # (T, K) features of s_t
    phi_next: np.ndarray  # (T, K) features of s_{t+1}
    w: np.ndarray  # (K,)
    c: float

    def transitions(self, logp, rewards, terminated, gamma, truncated=None) -> Transitions:
        return transitions(logp, self.phi @ self.w + self.c, self.phi_next @ self.w + self.c, rewards, terminated, gamma, truncated)

    def bias_gradient(self, g_values, g_next) -> float:
        """Chain ``d loss / d values`` and ``d loss / d next_values`` through the critic to ``c`` by autograd."""
        t = lambda x, grad=False: torch.tensor(x, dtype=torch.float64, requires_grad=grad)
        w, c = t(self.w, True), t(self.c, True)
        values, next_values = t(self.phi) @ w + c, t(self.phi_next) @ w + c
        chained = (values * t(g_values)).sum() + (next_values * t(g_next)).sum()  # sum_i g_i V_i: its gradient chains g
        return float(torch.autograd.grad(chained, [w, c])[1])


@st.composite
def critic_batches(draw):
    """``(critic, logp, rewards, terminated, gamma, truncated)``: a linear critic on T in 1..8 transitions of K in 1..3
    features."""
    T, K = draw(st.integers(1, 8), label="T"), draw(st.integers(1, 3), label="K")
    arr = lambda shape, label: draw(float_arrays(shape, -3.0, 3.0), label=label)
    critic = LinearCritic(arr((T, K), "phi"), arr((T, K), "phi_next"), arr((K,), "w"), float(arr((), "c")))
    return (critic, draw(float_arrays((T,), -20.0, 0.0), label="logp"), draw(float_arrays((T,), -50.0, 50.0), label="rewards"),
            draw(flag_arrays((T,)), label="terminated"), draw(GAMMAS, label="gamma"), draw(flag_arrays((T,)), label="truncated"))
