"""Tabular policies on the suite's gridworld and their exact values: what the gridworld and theory chapters share.

A drawn policy is a softmax of tabular logits rounded to multiples of 2^-12 (``dyadic_policy``): exact in
float64 and small as Fractions, so the exact dynamic programming of ``rlspec.reference.gridworld`` (with
``exact=True``) is the oracle and the candidate receives the same numbers in floating point.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ...reference import gridworld as gw
from .strategies import gridworld as draws

WORLD = gw.GRIDWORLD
POLICY_BITS = 12  # drawn policies are multiples of 2^-12: exact in float64 and small as Fractions


@lru_cache(maxsize=None)
def float_mdp() -> gw.MDP:
    return gw.tabular(WORLD)


@lru_cache(maxsize=None)
def exact_mdp() -> gw.MDP:
    return gw.tabular(WORLD, exact=True)


# ---------------------------------------------------------------------------------------------
# policies and their exact values


@dataclass(frozen=True)
class Policy:
    """A tabular softmax policy whose probabilities are multiples of 2^-POLICY_BITS."""

    probs: np.ndarray  # (S, A) float64, exact
    name: str

    @property
    def exact(self) -> np.ndarray:
        return np.array([[Fraction(p) for p in row] for row in self.probs], dtype=object)

    @property
    def key(self) -> bytes:
        return self.probs.tobytes()


def dyadic_policy(logits, name: str = "drawn") -> Policy:
    """softmax(logits) rounded to multiples of 2^-12, every action keeping at least 2^-12, rows summing to 1."""
    scale = 2**POLICY_BITS
    probs = gw.softmax_policy(logits)
    counts = np.maximum(np.floor(probs * scale), 1)
    counts[np.arange(len(counts)), counts.argmax(axis=1)] += scale - counts.sum(axis=1)  # remainder to the likeliest
    return Policy(counts / scale, name)


UNIFORM = dyadic_policy(np.zeros(float_mdp().P.shape[:2]), "UNIFORM")


def _greedy_logits(strength: float) -> np.ndarray:
    """Logits ``strength`` on the action that is optimal with no time limit (value iteration), 0 elsewhere."""
    mdp = float_mdp()
    values = np.zeros(len(mdp.terminal))
    for _ in range(2000):
        values = np.where(mdp.terminal, 0.0, gw.action_values(mdp, values).max(axis=1))
    logits = np.zeros(mdp.P.shape[:2])
    logits[np.arange(len(values)), gw.action_values(mdp, values).argmax(axis=1)] = strength
    return logits


GREEDY = dyadic_policy(_greedy_logits(2.0), "GREEDY")  # logit 2 on the optimal action


@lru_cache(maxsize=64)
def _exact_dp(key: bytes):
    policy = Policy(np.frombuffer(key).reshape(float_mdp().P.shape[:2]), "").exact
    values = gw.state_values(exact_mdp(), policy)
    advantages = np.where(exact_mdp().terminal[:, None], 0, gw.action_values(exact_mdp(), values) - values[:, None])
    return values, advantages


def exact_values(policy: Policy) -> np.ndarray:
    """(S,) V^pi as Fractions (exact DP)."""
    return _exact_dp(policy.key)[0]


def exact_advantages(policy: Policy) -> np.ndarray:
    """(S, A) A^pi as Fractions (exact DP)."""
    return _exact_dp(policy.key)[1]


def exact_float(values) -> np.ndarray:
    """Fractions (any shape) as float64, each rounded once."""
    return np.array([float(v) for v in np.ravel(values)]).reshape(np.shape(values))


def policies():
    """Drawn tabular policies: drawn logits rounded to a dyadic softmax (the name is the replay expression)."""
    S, A = float_mdp().P.shape[:2]
    return draws.policy_logits().map(lambda z: dyadic_policy(np.reshape(z, (S, A)), f"dyadic_policy(np.reshape({z!r}, ({S}, {A})))"))
