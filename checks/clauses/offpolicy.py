"""Checks for the off-policy chapter (``spec/clauses/90_offpolicy.toml``): DDPG, TD3 and SAC.

The suite's networks. The network operations receive small torch modules of the run's dtype whose outputs
and gradients have closed forms, so every expected number is computed here in float64 from the formulas
(never by the reference module):

    TanhActor            mu(s) = tanh(s W + b)                                       (B, O) -> (B, D)
    QuadraticCritic      Q(s, a) = s.w + sum_d [a_d (s V)_d - k_d a_d^2 / 2] + c,  k > 0  (concave in a)
    GaussianPolicy       mean = s W_m + b_m,  log_std = s W_s + b_s                   (SAC, tanh-squashed)

A concave critic scores different actions differently, so using the stored action, an unclipped one, or the
action at s instead of s' moves the target; twin critics with different parameters make min and max differ.
Randomness is an input (the noise), so each call is deterministic; the modules' ``repr`` holds their
parameters, so a failing call prints as code (``from rlspec.checks.clauses.offpolicy import *``).

Every check starts from fixed known-answer inputs (the same on every seed; they are what catch the mutants),
then searches drawn ones: Hypothesis draws the sizes, the flags and a seed for the parameter values (drawing
every value through Hypothesis costs more than the chapter's share of a quick run); a failure still shrinks
to the fewest rows and dimensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from hypothesis import strategies as st
from torch import nn

from ..kit import edges
from ..kit.assertions import ClauseFailure, assert_close, matches, mismatch_table
from ..kit.context import CandidateError, NotProvided
from ..kit.registry import check
from ..kit.strategies import rounded
from ..kit.tolerances import TINY, rounding_error, smallest_normal
from ...spec import contract

LOG_2 = math.log(2.0)
LOG_2PI = math.log(2.0 * math.pi)


def torch_dtype(dtype):
    return torch.float64 if np.dtype(dtype) == np.float64 else torch.float32


# ---------------------------------------------------------------------------------------------
# the suite's networks


def _param(value, dtype):
    # A copy: torch.as_tensor would share the case's numpy memory, and a candidate's in-place change would reach the oracle.
    return nn.Parameter(torch.tensor(np.array(value, dtype=np.float64), dtype=dtype))


def _show(t: torch.Tensor):
    return t.detach().cpu().double().numpy().round(12).tolist()


class _Net(nn.Module):
    """A module whose parameters are named arrays (``spec``) and whose repr is its constructor call."""

    NAMES: tuple[str, ...] = ()

    def __init__(self, spec: dict, dtype=torch.float64):
        super().__init__()
        for name in self.NAMES:
            setattr(self, name, _param(spec[name], dtype))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={_show(getattr(self, name))}" for name in self.NAMES)
        return f"{type(self).__name__}(dict({args}))"


class TanhActor(_Net):
    """``mu(s) = tanh(s W + b)``: a deterministic actor with actions in (-1, 1)."""

    NAMES = ("weight", "bias")

    def forward(self, obs):
        return torch.tanh(obs @ self.weight + self.bias)


class QuadraticCritic(_Net):
    """``Q(s, a) = s.w + sum_d [a_d (s V)_d - k_d a_d^2 / 2] + c``, concave in the action (k > 0)."""

    NAMES = ("w", "V", "k", "c")

    def forward(self, obs, action):
        return obs @ self.w + ((obs @ self.V) * action).sum(-1) - 0.5 * (self.k * action * action).sum(-1) + self.c


class GaussianPolicy(_Net):
    """``(mean, log_std) = (s W_m + b_m, s W_s + b_s)``: SAC's actor head, squashed by the candidate."""

    NAMES = ("Wm", "bm", "Ws", "bs")

    def forward(self, obs):
        return obs @ self.Wm + self.bm, obs @ self.Ws + self.bs


MODULES = {"actor": TanhActor, "critic": QuadraticCritic, "policy": GaussianPolicy}


def kind_of(role: str) -> str:
    return "actor" if role.endswith("actor") else "policy" if role == "policy" else "critic"


# closed forms (float64)


def actor_np(p, s):
    return np.tanh(s @ p["weight"] + p["bias"])


def critic_np(p, s, a):
    return s @ p["w"] + np.sum((s @ p["V"]) * a, -1) - 0.5 * np.sum(p["k"] * a * a, -1) + p["c"]


def critic_grad_np(p, s, a):
    """``dQ/da``, (B, D)."""
    return s @ p["V"] - p["k"] * a


def policy_np(p, s):
    return s @ p["Wm"] + p["bm"], s @ p["Ws"] + p["bs"]


def log_sech2(u):
    """``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, stable."""
    return 2.0 * (LOG_2 - u - np.logaddexp(0.0, -2.0 * u))


# ---------------------------------------------------------------------------------------------
# tolerances
#
# First order in the unit roundoff u of the precision judged (Call.unit_roundoff). Inputs and the modules'
# parameters are exact in the run's dtype and the oracle evaluates the same formulas on those exact values in
# float64; every tolerance is twice the candidate's bound (the oracle's own rounding). What the candidate's
# evaluation of the suite's modules costs, with M the same expression evaluated on absolute values:
#
#   actor      z = s W + b takes O + 1 roundings: |dz| <= (O + 1) u M_z, M_z = |s| |W| + |b|; tanh is 1-Lipschitz
#              and rounds once: |d mu| <= (O + 3) u (M_z + 1).
#   critic     each term of Q takes at most O + D + 5 roundings (O products in s V, one with a, two in k a^2 / 2, the
#              sum of O + D + 2 terms): |dQ| <= (O + D + 6) u M_Q + sum_d |dQ/da_d| |da_d| + sum_d k_d da_d^2 / 2,
#              M_Q = |s| |w| + sum_d |a_d| (|s| |V|)_d + sum_d k_d a_d^2 / 2 + |c|, da the error of the action scored.
#   target     y = r + gamma (1 - terminated) v: the product, the sum and a scalar rounded to the dtype (gamma,
#              alpha and noise_clip are Python floats): |dy| <= 3 u (|r| + gamma |v|) + gamma |dv|; the min of two
#              critics is 1-Lipschitz (|dv| <= max of theirs); clipping to [-c, c] or [low, high] is exact and
#              1-Lipschitz except that c itself rounds (u c).
#   SAC sample u = mean + sigma noise: |du| <= |d mean| + sigma |noise| (|d log_std| + 3u) + u |u|; a = tanh(u):
#              |da| <= (1 - a^2) |du| + u. log N(u) as -noise^2/2 - log_std - log(2 pi)/2 or from (u - mean)/sigma,
#              whose rounding dz <= (|du| + |d mean| + u (|u| + |mean|)) / sigma + |noise| (|d log_std| + 2u) moves
#              -z^2/2 by |z| dz; the Jacobian 2 (log 2 - u - softplus(-2u)) by 8 u (log 2 + |u| + softplus(-2u)) +
#              2 |a| |du|; written log(1 - tanh(u)^2) instead it loses 2 u cosh(u)^2 to cancellation, admitted (the
#              drawn |u| stay below 3, where the tanh chapter admits it too). A declared epsilon form
#              log(1 - a^2 + eps) moves by (2 |a| |da| + 4u) / (1 - a^2 + eps). The D terms and their sum add
#              (D + 2) u sum_d |term_d|.
#   gradients  each per-sample factor carries the errors above through the chain rule (derived where each is
#              computed), and the batch mean adds (B + 4) u per term.
#   underflow  below the smallest normal number eta (1.2e-38 in float32) rounding is absolute: each of the at most 32
#              operations on a path may also lose eta (flush to zero included), so every tolerance adds 32 eta (a
#              Python-float gamma of 1e-73 is 0 in float32).


def floor(u) -> float:
    """The absolute slack for underflow: 32 eta for the precision whose unit roundoff is u."""
    return 32 * smallest_normal(u)


def actor_error(p, s, u):
    O = s.shape[1]
    return (O + 3) * u * (np.abs(s) @ np.abs(p["weight"]) + np.abs(p["bias"]) + 1.0)


def critic_error(p, s, a, a_err, u):
    O, D = s.shape[1], a.shape[1]
    magnitude = (np.abs(s) @ np.abs(p["w"]) + np.sum(np.abs(a) * (np.abs(s) @ np.abs(p["V"])), -1)
                 + 0.5 * np.sum(p["k"] * a * a, -1) + abs(float(p["c"])))
    slope = np.abs(critic_grad_np(p, s, a))
    return (O + D + 6) * u * magnitude + np.sum(slope * a_err + 0.5 * p["k"] * a_err * a_err, -1)


def target_error(rewards, gamma, value, value_err, terminal, u):
    bootstrapped = 3 * u * (np.abs(rewards) + gamma * np.abs(value)) + gamma * value_err
    return np.where(terminal, 3 * u * np.abs(rewards), bootstrapped) + floor(u)


@dataclass
class Sample:
    """SAC's squashed sample at each row (float64) and the candidate's error bounds on it."""

    mean: np.ndarray
    log_std: np.ndarray
    pre: np.ndarray  # u = mean + sigma noise
    action: np.ndarray  # tanh(u)
    log_prob: np.ndarray  # (B,)
    pre_err: np.ndarray
    action_err: np.ndarray
    log_prob_err: np.ndarray
    z_err: np.ndarray  # error of (u - mean) / sigma, if the candidate computes it


def squashed_sample(p, s, noise, eps, u):
    """The tanh-Gaussian sample, its log-density (exact, or the declared epsilon form) and their error bounds."""
    O, D = s.shape[1], noise.shape[1]
    mean, log_std = policy_np(p, s)
    sigma = np.exp(log_std)
    pre = mean + sigma * noise
    action = np.tanh(pre)
    mean_err = (O + 2) * u * (np.abs(s) @ np.abs(p["Wm"]) + np.abs(p["bm"]))
    ls_err = (O + 2) * u * (np.abs(s) @ np.abs(p["Ws"]) + np.abs(p["bs"]))
    pre_err = mean_err + sigma * np.abs(noise) * (ls_err + 3 * u) + u * np.abs(pre)
    action_err = (1.0 - action**2) * pre_err + u
    z_err = (pre_err + mean_err + u * (np.abs(pre) + np.abs(mean))) / sigma + np.abs(noise) * (ls_err + 2 * u)
    gauss = -0.5 * noise**2 - log_std - 0.5 * LOG_2PI
    gauss_err = np.abs(noise) * z_err + ls_err + 4 * u * (0.5 * noise**2 + np.abs(log_std) + 1.0)
    if eps is None:
        jac = log_sech2(pre)
        jac_err = 8 * u * (LOG_2 + np.abs(pre) + np.logaddexp(0.0, -2.0 * pre)) + 2 * np.abs(action) * pre_err \
            + 2 * u * np.cosh(np.minimum(np.abs(pre), 300.0)) ** 2
    else:
        inside = 1.0 - action**2 + eps
        jac = np.log(inside)
        jac_err = (2 * np.abs(action) * action_err + 4 * u) / inside + u * np.abs(jac)
    terms = gauss - jac
    log_prob = terms.sum(-1)
    log_prob_err = np.sum(gauss_err + jac_err, -1) + (D + 2) * u * np.sum(np.abs(gauss) + np.abs(jac), -1)
    return Sample(mean, log_std, pre, action, log_prob, pre_err, action_err, log_prob_err, z_err)


# ---------------------------------------------------------------------------------------------
# cases: a replay batch and the networks


@dataclass
class Case:
    """A replay batch and the parameters of every network an operation may take (float64)."""

    obs: np.ndarray  # (B, O)
    actions: np.ndarray  # (B, D)
    rewards: np.ndarray  # (B,)
    next_obs: np.ndarray
    terminated: np.ndarray  # bool (B,)
    truncated: np.ndarray
    nets: dict  # role -> {name: array}
    gamma: float = 0.9
    alpha: float = 0.2
    noise: np.ndarray | None = None  # SAC: standard normal; TD3: smoothing noise epsilon ~ N(0, sigma^2)
    noise_clip: float = 0.3
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    @property
    def B(self) -> int:
        return self.obs.shape[0]

    def in_dtype(self, dtype) -> "Case":
        """The case with every array rounded to ``dtype`` (what the candidate receives, as float64)."""
        r = lambda x: None if x is None else rounded(x, dtype)
        nets = {role: {k: r(v) for k, v in spec.items()} for role, spec in self.nets.items()}
        return replace(self, obs=r(self.obs), actions=r(self.actions), rewards=r(self.rewards), next_obs=r(self.next_obs),
                       nets=nets, noise=r(self.noise), low=r(self.low), high=r(self.high))

    def module(self, role: str, ctx):
        net = MODULES[kind_of(role)](self.nets[role], torch_dtype(ctx.dtype))
        return net.to(ctx.candidate.device) if ctx.candidate.device != "cpu" else net

    def batch(self) -> dict:
        return {"obs": self.obs, "actions": self.actions, "rewards": self.rewards, "next_obs": self.next_obs,
                "terminated": self.terminated.copy(), "truncated": self.truncated.copy()}


def _critic(w, V, k, c):
    return {"w": np.array(w, float), "V": np.array(V, float), "k": np.array(k, float), "c": np.array(float(c))}


def _actor(W, b):
    return {"weight": np.array(W, float), "bias": np.array(b, float)}


KNOWN_NETS = {
    "actor": _actor([[0.8, -0.5], [0.3, 0.9]], [0.2, -0.1]),
    "target_actor": _actor([[0.6, -0.4], [0.5, 0.7]], [0.9, 0.3]),
    "critic": _critic([0.5, -0.3], [[1.0, -0.5], [0.4, 0.8]], [1.5, 0.8], 0.2),
    "critic1": _critic([0.5, -0.3], [[1.0, -0.5], [0.4, 0.8]], [1.5, 0.8], 0.2),
    "critic2": _critic([-0.2, 0.4], [[0.3, 0.6], [-0.7, 0.2]], [0.6, 1.9], -0.1),
    "target_critic": _critic([0.4, -0.2], [[0.9, -0.4], [0.5, 0.7]], [1.2, 1.0], 0.3),
    "target_critic1": _critic([0.4, -0.2], [[0.9, -0.4], [0.5, 0.7]], [1.2, 1.0], 0.3),
    "target_critic2": _critic([-0.1, 0.5], [[0.2, 0.5], [-0.6, 0.3]], [0.7, 1.6], 0.0),
    "policy": {"Wm": np.array([[0.4, -0.3], [0.2, 0.5]]), "bm": np.array([0.1, -0.2]),
               "Ws": np.array([[0.1, 0.0], [-0.1, 0.2]]), "bs": np.array([-0.8, -1.2])},
}

# Four rows: plain, terminated, truncated (bootstraps), both (terminated wins).
KNOWN = Case(
    obs=np.array([[0.5, -1.0], [1.0, 0.25], [-0.5, 0.5], [0.0, 1.0]]),
    actions=np.array([[0.9, -0.6], [-0.3, 0.8], [0.1, 0.1], [-0.7, -0.2]]),
    rewards=np.array([1.0, -0.5, 2.0, 0.25]),
    next_obs=np.array([[0.25, 0.75], [-1.0, 0.5], [0.75, -0.25], [0.5, 0.5]]),
    terminated=np.array([False, True, False, True]),
    truncated=np.array([False, False, True, True]),
    nets=KNOWN_NETS,
    gamma=0.9,
    alpha=0.2,
    noise_clip=0.3,
    low=np.array([-1.0, -0.5]),
    high=np.array([1.0, 0.5]),
)
TD3_KNOWN_NOISE = np.array([[0.4, -0.1], [-0.7, 0.2], [0.05, 0.6], [0.3, -0.3]])
SAC_KNOWN_NOISE = np.array([[0.5, -1.0], [1.2, 0.3], [-0.4, 0.8], [0.0, -1.5]])

# SAC's soft target worked by hand: s' = 0, constant target critics 2 and 3, one action dimension, a pre-tanh sample
# u = 0 with log_std = 1 - log(2 pi)/2, so log pi(a'|s') = -1: y = 1 + 0.5 (2 - 0.1 (-1)) = 2.05 (wrong sign: 1.95,
# max: 2.55).
HAND_SAC = Case(
    obs=np.array([[1.0]]), actions=np.array([[0.5]]), rewards=np.array([1.0]), next_obs=np.array([[0.0]]),
    terminated=np.array([False]), truncated=np.array([False]),
    nets={"critic1": _critic([0.0], [[0.0]], [1.0], 0.0), "critic2": _critic([0.0], [[0.0]], [1.0], 0.0),
          "target_critic1": _critic([0.0], [[0.0]], [0.0], 2.0), "target_critic2": _critic([0.0], [[0.0]], [0.0], 3.0),
          "policy": {"Wm": np.array([[0.7]]), "bm": np.array([0.0]), "Ws": np.array([[0.3]]), "bs": np.array([1.0 - 0.5 * LOG_2PI])}},
    gamma=0.5, alpha=0.1, noise=np.array([[0.0]]),
)


def edge_cases(op: str, case: Case, *names: str) -> list[Case]:
    """``case`` with each scalar argument of ``op`` (gamma; TD3's noise_clip; SAC's alpha; or only ``names``) moved to each
    edge the contract gives it: 0 and 1 (rlspec.checks.kit.edges)."""
    base = {name: getattr(case, name) for name in ("gamma", "alpha", "noise_clip")
            if any(a.name == name for a in contract.operations()[op].inputs)}
    return [replace(case, **{k: args[k] for k in base}) for args, _ in edges.cases(op, base, *names)]


def random_nets(rng, O: int, D: int) -> dict:
    """Parameters in ranges that keep every pre-tanh sample |u| <= 3 (|mean| <= 1.5, sigma |noise| <= 1.5)."""
    def critic():
        return _critic(rng.uniform(-2, 2, O), rng.uniform(-2, 2, (O, D)), rng.uniform(0.25, 3.0, D), rng.uniform(-3, 3))

    def actor():
        return _actor(rng.uniform(-1.5, 1.5, (O, D)), rng.uniform(-1.5, 1.5, D))

    c1, c2, t1, t2 = critic(), critic(), critic(), critic()
    return {
        "actor": actor(), "target_actor": actor(), "critic": c1, "critic1": c1, "critic2": c2,
        "target_critic": t1, "target_critic1": t1, "target_critic2": t2,
        "policy": {"Wm": rng.uniform(-0.5 / O, 0.5 / O, (O, D)) * 1.0, "bm": rng.uniform(-1.0, 1.0, D),
                   "Ws": rng.uniform(-0.2 / O, 0.2 / O, (O, D)), "bs": rng.uniform(-2.2, -0.2, D)},
    }


@st.composite
def cases(draw, kind: str):
    """A drawn replay batch: sizes, flags and a parameter seed from Hypothesis, values from the seed. ``kind`` "td3" adds
    smoothing noise, a noise clip and bounds; "sac" standard-normal noise; "ddpg" none."""
    B = draw(st.integers(1, 4), label="B")
    O = draw(st.integers(1, 3), label="O")
    D = draw(st.integers(1, 2), label="D")
    terminated = np.array(draw(st.lists(st.booleans(), min_size=B, max_size=B), label="terminated"))
    truncated = np.array(draw(st.lists(st.booleans(), min_size=B, max_size=B), label="truncated"))
    gamma = draw(edges.edged(st.sampled_from([0.99, 0.9, 0.5]) | st.floats(0.0, 1.0), "td_target", "gamma"), label="gamma")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
    case = Case(
        obs=rng.uniform(-1, 1, (B, O)), actions=rng.uniform(-1, 1, (B, D)), rewards=rng.uniform(-5, 5, B),
        next_obs=rng.uniform(-1, 1, (B, O)), terminated=terminated, truncated=truncated, nets=random_nets(rng, O, D),
        gamma=float(gamma), alpha=float(rng.choice([0.0, 0.05, 0.2, 1.0])),
    )
    if kind == "td3":
        low = -rng.uniform(0.2, 1.5, D)
        case = replace(case, noise=rng.normal(0.0, 0.3, (B, D)), noise_clip=float(rng.choice([0.0, 0.1, 0.5, 1.0])),
                       low=low, high=low + rng.uniform(0.4, 2.5, D))
    elif kind == "sac":
        case = replace(case, noise=rng.uniform(-1.5, 1.5, (B, D)))
    return case


# ---------------------------------------------------------------------------------------------
# calling a network operation


ROLES = {
    "ddpg_critic_target": ("actor", "critic", "target_actor", "target_critic"),
    "td3_critic_target": ("actor", "critic1", "critic2", "target_actor", "target_critic1", "target_critic2"),
    "sac_critic_target": ("policy", "critic1", "critic2", "target_critic1", "target_critic2"),
    "dpg_actor_loss": ("actor", "critic"),
    "sac_actor_loss": ("policy", "critic1", "critic2"),
}


@dataclass
class NetCall:
    call: object  # protocol.Call
    modules: dict
    case: Case  # the case in the run's dtype (float64 copies of what the candidate received)


def call_network_op(ctx, op: str, case: Case, extra: dict, *, shape) -> NetCall:
    case = case.in_dtype(ctx.dtype)
    modules = {role: case.module(role, ctx) for role in ROLES[op]}
    args = dict(modules)
    if op.endswith("_target"):
        args.update(case.batch())
        args["gamma"] = case.gamma
    else:
        args["obs"] = case.obs
    for key, value in extra.items():
        args[key] = rounded(value, ctx.dtype) if isinstance(value, np.ndarray) else value
    call = ctx.call(op, args, array="torch", shape=shape)
    return NetCall(call, modules, case)


def check_unchanged(net: NetCall):
    """The suite's networks are inputs: a call must not change their parameters."""
    for role, module in net.modules.items():
        for name in module.NAMES:
            now = getattr(module, name).detach().cpu().double().numpy()
            if not np.array_equal(now, net.case.nets[role][name]):
                raise CandidateError(f"{net.call.code.split('(')[0]} changed the parameters of its input `{role}` ({name}) in place")


def first_match(actual, tol, alternatives) -> list[str]:
    """The causes of the known-wrong alternatives ``actual`` matches (``alternatives``: [(values, cause)]), for
    assert_close's ``diagnose``: one is the diagnosis; several are listed, none claimed (the input cannot tell them
    apart: with Q1' >= Q2' on every row the max of the twins is the first critic alone)."""
    return list(dict.fromkeys(cause for values, cause in alternatives if values is not None and matches(actual, values, tol)))


def flag_masks(case: Case) -> dict:
    return {"terminated": case.terminated, "done": case.terminated | case.truncated, "none": np.zeros(case.B, bool)}


def bootstrap(case: Case, value, mask="terminated"):
    return case.rewards + case.gamma * np.where(flag_masks(case)[mask], 0.0, value)


FLAG_CAUSES = {
    "done": "truncated rows are treated as terminal: a time limit cut the episode, the target must still bootstrap from "
            "Q' at the final observation (use terminated, not done = terminated or truncated)",
    "none": "the terminal mask is missing: terminated rows bootstrap from a next state that does not exist",
}


def flag_alternatives(case, value):
    return [(bootstrap(case, value, mask), cause) for mask, cause in FLAG_CAUSES.items()
            if not np.array_equal(flag_masks(case)[mask], case.terminated)]


# ---------------------------------------------------------------------------------------------
# the one-step TD target


TD_KNOWN = dict(rewards=np.array([1.0, 1.0, 0.5, -2.0]), next_q=np.array([10.0, 10.0, -4.0, 3.0]), gamma=0.9)


def verify_td_target(ctx, rewards, next_q, terminated, truncated, gamma, what):
    rewards, next_q = rounded(rewards, ctx.dtype), rounded(next_q, ctx.dtype)
    call = ctx.call("td_target", {"rewards": rewards, "next_q": next_q, "terminated": np.asarray(terminated, bool),
                                  "truncated": np.asarray(truncated, bool), "gamma": float(gamma)}, shape=(len(rewards),))
    case = Case(obs=np.zeros((len(rewards), 1)), actions=np.zeros((len(rewards), 1)), rewards=rewards, next_obs=None,
                terminated=np.asarray(terminated, bool), truncated=np.asarray(truncated, bool), nets={}, gamma=float(gamma))
    expected = bootstrap(case, next_q)
    tol = 2 * target_error(rewards, gamma, next_q, 0.0, case.terminated, call.unit_roundoff) + TINY
    alternatives = flag_alternatives(case, next_q) + [
        (np.where(case.terminated, 0.0, rewards + gamma * next_q), "the reward of a terminated row is masked too: (1 - terminated) "
                                                                    "(r + gamma Q') drops the last reward of the episode")]
    assert_close(call.outputs[0], expected, tol, what=f"td_target {what} vs r + gamma (1 - terminated) next_q", call=call.code,
                 diagnose=lambda a: first_match(a, tol, alternatives))


def td_flags(draw_truncated: bool):
    @st.composite
    def batch(draw):
        B = draw(st.integers(1, 8), label="B")
        values = st.floats(-100.0, 100.0, allow_subnormal=False)
        rewards = np.array(draw(st.lists(values, min_size=B, max_size=B), label="rewards"))
        next_q = np.array(draw(st.lists(values, min_size=B, max_size=B), label="next_q"))
        terminated = np.array(draw(st.lists(st.booleans(), min_size=B, max_size=B), label="terminated"))
        truncated = (np.array(draw(st.lists(st.booleans(), min_size=B, max_size=B), label="truncated")) if draw_truncated
                     else np.zeros(B, bool))
        gamma = draw(st.sampled_from([0.99, 0.9, 0.0, 1.0]) | st.floats(0.0, 1.0), label="gamma")
        return rewards, next_q, terminated, truncated, gamma

    return batch()


@check("TD-TARGET-TERMINAL-MASK")
def td_target_terminal_mask(ctx):
    """Terminated rows are their reward alone; other rows bootstrap (no truncated rows here)."""
    no = np.zeros(4, bool)
    verify_td_target(ctx, **TD_KNOWN, terminated=np.array([True, False, False, True]), truncated=no, what="(terminated rows)")
    verify_td_target(ctx, **TD_KNOWN, terminated=no, truncated=no, what="(no episode end)")
    for gamma in edges.values("td_target", "gamma"):
        verify_td_target(ctx, **{**TD_KNOWN, "gamma": gamma}, terminated=np.array([True, False, False, True]), truncated=no,
                         what=f"(terminated rows, edge gamma = {gamma:g})")
    ctx.property(td_flags(False), lambda b: verify_td_target(ctx, *b, what="(drawn)"), label="drawn", tier="known-answers-first")


@check("TD-TARGET-TRUNCATION-BOOTSTRAP")
def td_target_truncation(ctx):
    """Truncated rows bootstrap from Q' at the final observation; terminated wins when both flags are set."""
    verify_td_target(ctx, **TD_KNOWN, terminated=np.array([False, False, False, True]), truncated=np.array([True, False, True, True]),
                     what="(truncated rows)")
    for gamma in edges.values("td_target", "gamma"):
        verify_td_target(ctx, **{**TD_KNOWN, "gamma": gamma}, terminated=np.array([False, False, False, True]),
                         truncated=np.array([True, False, True, True]), what=f"(truncated rows, edge gamma = {gamma:g})")
    ctx.property(td_flags(True), lambda b: verify_td_target(ctx, *b, what="(drawn, truncated rows)"), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# DDPG's target


def ddpg_expected(case: Case, u):
    """The target, its tolerance and the known-wrong alternatives."""
    n = case.nets
    a_next = actor_np(n["target_actor"], case.next_obs)
    value = critic_np(n["target_critic"], case.next_obs, a_next)
    err = critic_error(n["target_critic"], case.next_obs, a_next, actor_error(n["target_actor"], case.next_obs, u), u)
    tol = 2 * target_error(case.rewards, case.gamma, value, err, case.terminated, u) + TINY
    alternatives = flag_alternatives(case, value) + [
        (bootstrap(case, critic_np(n["target_critic"], case.next_obs, case.actions)),
         "the target critic scores the stored action, Q'(s', a), not the target actor's mu'(s')"),
        (bootstrap(case, critic_np(n["target_critic"], case.next_obs, actor_np(n["target_actor"], case.obs))),
         "the target actor is evaluated at s instead of s'"),
        (bootstrap(case, critic_np(n["critic"], case.next_obs, actor_np(n["actor"], case.next_obs))),
         "the online actor and critic compute the target instead of the target networks"),
        (bootstrap(case, critic_np(n["target_critic"], case.next_obs, actor_np(n["actor"], case.next_obs))),
         "the online actor picks the target action instead of the target actor"),
    ]
    return bootstrap(case, value), tol, alternatives


def verify_ddpg(ctx, case: Case, what: str):
    net = call_network_op(ctx, "ddpg_critic_target", case, {}, shape=(case.B,))
    expected, tol, alternatives = ddpg_expected(net.case, net.call.unit_roundoff)
    check_unchanged(net)
    assert_close(net.call.outputs[0], expected, tol, what=f"ddpg_critic_target {what} vs r + gamma (1 - terminated) Q'(s', mu'(s'))",
                 call=net.call.code, diagnose=lambda a: first_match(a, tol, alternatives))


@check("DDPG-TARGET-DETERMINISTIC")
def ddpg_target(ctx):
    """y = r + gamma (1 - terminated) Q'(s', mu'(s')) with the target networks."""
    verify_ddpg(ctx, KNOWN, "(known batch)")
    for case in edge_cases("ddpg_critic_target", KNOWN):
        verify_ddpg(ctx, case, f"(known batch, gamma {case.gamma:g})")
    ctx.property(cases("ddpg"), lambda c: verify_ddpg(ctx, c, "(drawn)"), label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# TD3's target


def smoothed(target_action, noise, clip, low, high, *, clip_noise=True, clip_action=True):
    noisy = target_action + (np.clip(noise, -clip, clip) if clip_noise else noise)
    return np.clip(noisy, low, high) if clip_action else noisy


def td3_value(case: Case, action, reduce=np.minimum, critics=("target_critic1", "target_critic2")):
    values = [critic_np(case.nets[c], case.next_obs, action) for c in critics]
    return values[0] if len(values) == 1 else reduce(*values)


def td3_expected(case: Case, u, focus: str):
    """The TD3 target, its tolerance and the alternatives; ``focus`` orders the diagnosis."""
    n = case.nets
    mu_next = actor_np(n["target_actor"], case.next_obs)
    action = smoothed(mu_next, case.noise, case.noise_clip, case.low, case.high)
    noise_c = np.clip(case.noise, -case.noise_clip, case.noise_clip)
    a_err = actor_error(n["target_actor"], case.next_obs, u) + u * (np.abs(mu_next) + np.abs(noise_c) + case.noise_clip)
    errs = [critic_error(n[c], case.next_obs, action, a_err, u) for c in ("target_critic1", "target_critic2")]
    value = td3_value(case, action)
    tol = 2 * target_error(case.rewards, case.gamma, value, np.maximum(*errs), case.terminated, u) + TINY
    unit = smoothed(mu_next, case.noise, case.noise_clip, -1.0, 1.0)
    alternatives = {
        "double-q": [
            (bootstrap(case, td3_value(case, action, np.maximum)), "max instead of min over the twin target critics (optimistic: the "
                                                                   "over-estimation clipped double Q-learning removes)"),
            (bootstrap(case, td3_value(case, action, critics=("target_critic1",))), "only the first target critic is used, not min(Q1', Q2')"),
            (bootstrap(case, 0.5 * (critic_np(n["target_critic1"], case.next_obs, action) + critic_np(n["target_critic2"], case.next_obs, action))),
             "the mean of the twin target critics is used, not their min"),
        ],
        "noise": [
            (bootstrap(case, td3_value(case, smoothed(mu_next, case.noise, case.noise_clip, case.low, case.high, clip_noise=False))),
             "the smoothing noise is not clipped to [-noise_clip, noise_clip] before it is added"),
            (bootstrap(case, td3_value(case, np.clip(mu_next, case.low, case.high))), "no smoothing noise is added to the target action"),
        ],
        "bounds": [
            (bootstrap(case, td3_value(case, smoothed(mu_next, case.noise, case.noise_clip, case.low, case.high, clip_action=False))),
             "the noisy target action is not clipped to the action bounds [low, high]"),
            (bootstrap(case, td3_value(case, unit)), "the target action is clipped to [-1, 1] instead of the action bounds [low, high]"),
        ],
        "other": flag_alternatives(case, value) + [
            (bootstrap(case, td3_value(case, case.actions)), "the target critics score the stored action"),
            (bootstrap(case, td3_value(case, smoothed(actor_np(n["actor"], case.next_obs), case.noise, case.noise_clip, case.low, case.high))),
             "the online actor picks the target action instead of the target actor"),
        ],
    }
    ordered = alternatives[focus] + [alt for key, alts in alternatives.items() if key != focus for alt in alts]
    return bootstrap(case, value), tol, ordered


def verify_td3(ctx, case: Case, what: str, focus: str, cause: str = ""):
    extra = {"noise": case.noise, "noise_clip": case.noise_clip, "low": case.low, "high": case.high}
    net = call_network_op(ctx, "td3_critic_target", case, extra, shape=(case.B,))
    case = replace(net.case, noise_clip=float(rounded(case.noise_clip, ctx.dtype)))
    expected, tol, alternatives = td3_expected(case, net.call.unit_roundoff, focus)
    check_unchanged(net)
    assert_close(net.call.outputs[0], expected, tol, what=f"td3_critic_target {what} vs r + gamma (1 - terminated) min_i Q_i'(s', a~)",
                 call=net.call.code, cause=cause, diagnose=lambda a: first_match(a, tol, alternatives))


def td3_case(**changes) -> Case:
    return replace(KNOWN, noise=TD3_KNOWN_NOISE, **changes)


@check("TD3-TARGET-CLIPPED-DOUBLE-Q")
def td3_clipped_double_q(ctx):
    """The target bootstraps from min(Q1', Q2') at the smoothed target action, with the terminal mask."""
    verify_td3(ctx, td3_case(), "(known batch)", "double-q")
    verify_td3(ctx, td3_case(noise_clip=0.0), "(known batch, no smoothing noise)", "double-q")
    for case in edge_cases("td3_critic_target", td3_case()):
        verify_td3(ctx, case, f"(known batch, gamma {case.gamma:g}, noise_clip {case.noise_clip:g})", "double-q")
    ctx.property(cases("td3"), lambda c: verify_td3(ctx, c, "(drawn)", "double-q"), label="drawn", tier="known-answers-first")


@check("TD3-TARGET-SMOOTHING-NOISE-CLIPPED")
def td3_noise_clipped(ctx):
    """The smoothing noise is clipped to [-c, c] before it is added (noise_clip = 0: no noise at all)."""
    wide = dict(low=np.array([-3.0, -3.0]), high=np.array([3.0, 3.0]))  # bounds far away: only the noise clip matters
    verify_td3(ctx, td3_case(**wide), "(known batch, wide bounds)", "noise")
    verify_td3(ctx, td3_case(**wide, noise_clip=0.0), "(known batch, noise_clip = 0)", "noise",
               cause="noise_clip = 0 must remove the smoothing noise entirely (clip(noise, 0, 0) = 0)")
    for case in edge_cases("td3_critic_target", td3_case(**wide)):
        verify_td3(ctx, case, f"(known batch, wide bounds, gamma {case.gamma:g}, noise_clip {case.noise_clip:g})", "noise")
    ctx.property(cases("td3"), lambda c: verify_td3(ctx, c, "(drawn)", "noise"), label="drawn", tier="known-answers-first")


@check("TD3-TARGET-ACTION-IN-BOUNDS")
def td3_action_bounds(ctx):
    """The smoothed target action is clipped to [low, high] per dimension."""
    verify_td3(ctx, td3_case(), "(known batch, bounds [-1, 1] x [-0.5, 0.5])", "bounds")
    verify_td3(ctx, td3_case(noise_clip=1.0, low=np.array([-0.6, -0.2]), high=np.array([0.8, 0.25])), "(known batch, narrow bounds)",
               "bounds")
    for case in edge_cases("td3_critic_target", td3_case(low=np.array([-0.6, -0.2]), high=np.array([0.8, 0.25]))):
        verify_td3(ctx, case, f"(known batch, narrow bounds, gamma {case.gamma:g}, noise_clip {case.noise_clip:g})", "bounds")
    ctx.property(cases("td3"), lambda c: verify_td3(ctx, c, "(drawn)", "bounds"), label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# SAC's target


def sac_expected(case: Case, u, eps, focus: str):
    n = case.nets
    sample = squashed_sample(n["policy"], case.next_obs, case.noise, eps, u)
    q = [critic_np(n[c], case.next_obs, sample.action) for c in ("target_critic1", "target_critic2")]
    q_err = [critic_error(n[c], case.next_obs, sample.action, sample.action_err, u) for c in ("target_critic1", "target_critic2")]
    value = np.minimum(*q) - case.alpha * sample.log_prob
    value_err = np.maximum(*q_err) + case.alpha * sample.log_prob_err + 2 * u * (np.abs(np.minimum(*q)) + case.alpha * np.abs(sample.log_prob))
    tol = 2 * target_error(case.rewards, case.gamma, value, value_err, case.terminated, u) + TINY

    def soft(action, log_prob, reduce=np.minimum, obs=None):
        obs = case.next_obs if obs is None else obs
        return reduce(critic_np(n["target_critic1"], obs, action), critic_np(n["target_critic2"], obs, action)) - case.alpha * log_prob

    at_s = squashed_sample(n["policy"], case.obs, case.noise, eps, u)
    at_mean = squashed_sample(n["policy"], case.next_obs, np.zeros_like(case.noise), eps, u)
    stored_lp = np.sum(-0.5 * ((np.arctanh(np.clip(case.actions, -1 + 1e-12, 1 - 1e-12)) - sample.mean) / np.exp(sample.log_std)) ** 2
                       - sample.log_std - 0.5 * LOG_2PI - log_sech2(np.arctanh(np.clip(case.actions, -1 + 1e-12, 1 - 1e-12))), -1)
    alternatives = {
        "soft": [
            (bootstrap(case, np.minimum(*q) + case.alpha * sample.log_prob), "the entropy term has the wrong sign: + alpha log pi(a'|s') "
                                                                              "(the soft value is E[Q - alpha log pi])"),
            (bootstrap(case, np.minimum(*q)), "the entropy term -alpha log pi(a'|s') is missing from the target"),
            (bootstrap(case, soft(sample.action, sample.log_prob, np.maximum)), "max instead of min over the twin target critics"),
            (bootstrap(case, np.minimum(q[0] - case.alpha * sample.log_prob, q[1]) ), "the entropy term is applied to one critic only"),
            (bootstrap(case, np.minimum(*q) - case.alpha * (sample.log_prob + log_sech2(sample.pre).sum(-1))),
             "log pi(a'|s') lacks the tanh Jacobian: the Gaussian density of u is used for a = tanh(u)"),
        ],
        "action": [
            (bootstrap(case, soft(case.actions, sample.log_prob)), "the target critics score the replay buffer's stored action, not a "
                                                                    "fresh sample a' ~ pi(.|s') of the current policy"),
            (bootstrap(case, soft(case.actions, stored_lp)), "the target uses the stored action and its log-density, not a fresh sample "
                                                             "a' ~ pi(.|s')"),
            (bootstrap(case, soft(at_s.action, at_s.log_prob)), "the next action is sampled at s instead of s'"),
            (bootstrap(case, soft(at_mean.action, sample.log_prob)), "the target critics score the policy's mean action tanh(mean(s'))"),
        ],
        "other": flag_alternatives(case, value) + [
            (bootstrap(case, np.where(case.terminated | case.truncated, soft(np.zeros_like(sample.action), 0.0), value)),
             "truncated rows bootstrap from Q'(s', 0) with log pi = 0: the next action is not sampled at done states, which a "
             "truncation is not (TorchRL 0.14.1 SACLoss(skip_done_states=True) skips done = terminated or truncated)"),
        ],
    }
    ordered = alternatives[focus] + [alt for key, alts in alternatives.items() if key != focus for alt in alts]
    return bootstrap(case, value), tol, ordered


def verify_sac_target(ctx, case: Case, what: str, focus: str):
    eps = ctx.convention("tanh_log_prob_eps")
    net = call_network_op(ctx, "sac_critic_target", case, {"alpha": case.alpha, "noise": case.noise}, shape=(case.B,))
    expected, tol, alternatives = sac_expected(net.case, net.call.unit_roundoff, eps, focus)
    check_unchanged(net)
    form = "exact tanh log-density" if eps is None else f"declared log(1 - tanh^2 + {eps:g})"
    assert_close(net.call.outputs[0], expected, tol,
                 what=f"sac_critic_target {what} vs r + gamma (1 - terminated) (min_i Q_i'(s', a') - alpha log pi(a'|s')) ({form})",
                 call=net.call.code, diagnose=lambda a: first_match(a, tol, alternatives))


@check("SAC-SOFT-TARGET")
def sac_soft_target(ctx):
    """y = r + gamma (1 - terminated) (min Q' - alpha log pi) at a' ~ pi(.|s'); 2.05 on the hand-worked case."""
    verify_sac_target(ctx, HAND_SAC, "(worked by hand: 2.05)", "soft")
    verify_sac_target(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE), "(known batch)", "soft")
    for case in edge_cases("sac_critic_target", replace(KNOWN, noise=SAC_KNOWN_NOISE)):
        verify_sac_target(ctx, case, f"(known batch, gamma {case.gamma:g}, alpha {case.alpha:g})", "soft")
    ctx.property(cases("sac"), lambda c: verify_sac_target(ctx, c, "(drawn)", "soft"), label="drawn", tier="known-answers-first")


@check("SAC-TARGET-NEXT-ACTION-FROM-POLICY")
def sac_target_next_action(ctx):
    """a' is a fresh sample of the current policy at s' (not the stored action, not at s, not the mean)."""
    verify_sac_target(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE, alpha=0.0), "(known batch, alpha = 0)", "action")
    verify_sac_target(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE), "(known batch)", "action")
    for case in edge_cases("sac_critic_target", replace(KNOWN, noise=SAC_KNOWN_NOISE)):
        verify_sac_target(ctx, case, f"(known batch, gamma {case.gamma:g}, alpha {case.alpha:g})", "action")
    ctx.property(cases("sac"), lambda c: verify_sac_target(ctx, c, "(drawn)", "action"), label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# the targets carry no graph


def graph_reaches(raw, modules: dict) -> list[str]:
    """The parameters of the suite's networks that a backward pass through ``raw`` (the candidate's targets) reaches."""
    if not isinstance(raw, torch.Tensor) or not raw.requires_grad:
        return []
    named = [(f"{role}.{name}", getattr(module, name)) for role, module in modules.items() for name in module.NAMES]
    grads = torch.autograd.grad(raw.sum(), [p for _, p in named], allow_unused=True)
    return [name for (name, _), g in zip(named, grads) if g is not None]


NO_GRAPH_CAUSES = {
    "ddpg_critic_target": "the target is computed with autograd on: the critic's loss (Q(s, a) - y)^2 sends gradient through y into "
                          "the target networks (compute it under torch.no_grad(), or detach it)",
    "td3_critic_target": "the smoothed target is computed with autograd on: the critics' loss sends gradient through y into the target "
                         "networks (compute it under torch.no_grad(), or detach it)",
    "sac_critic_target": "the soft target is computed with autograd on: the sampled next action and its log-density keep their graph, "
                         "so the critics' loss sends gradient through y into the policy, whose optimizer then steps on the critic's "
                         "error (compute it under torch.no_grad(), or detach it)",
}


def verify_no_graph(ctx, op: str, case: Case, extra: dict, what: str):
    net = call_network_op(ctx, op, case, extra, shape=(case.B,))
    check_unchanged(net)
    reached = graph_reaches(net.call.raw, net.modules)
    if reached:
        raise ClauseFailure(f"{op} {what}: the targets carry an autograd graph; backward through a loss on them reaches "
                            f"{', '.join(reached)} (expected: no network)", call=net.call.code, cause=NO_GRAPH_CAUSES[op])


def no_graph_cases(kind: str):
    """The known batch (all four flag combinations) and the drawn ones, with the extra arguments ``kind`` takes."""
    def extra(case: Case) -> dict:
        if kind == "td3":
            return {"noise": case.noise, "noise_clip": case.noise_clip, "low": case.low, "high": case.high}
        return {"alpha": case.alpha, "noise": case.noise} if kind == "sac" else {}

    known = {"ddpg": KNOWN, "td3": td3_case(), "sac": replace(KNOWN, noise=SAC_KNOWN_NOISE)}[kind]
    return known, extra


@check("DDPG-TARGET-NO-GRAPH")
def ddpg_target_no_graph(ctx):
    """The targets are returned without a graph: nothing is reached through them."""
    known, extra = no_graph_cases("ddpg")
    verify_no_graph(ctx, "ddpg_critic_target", known, extra(known), "(known batch)")
    for case in edge_cases("ddpg_critic_target", known):
        verify_no_graph(ctx, "ddpg_critic_target", case, extra(case), f"(known batch, gamma {case.gamma:g})")
    ctx.property(cases("ddpg"), lambda c: verify_no_graph(ctx, "ddpg_critic_target", c, extra(c), "(drawn)"), label="drawn",
                 tier="known-answers-first")


@check("TD3-TARGET-NO-GRAPH")
def td3_target_no_graph(ctx):
    """The smoothed targets are returned without a graph."""
    known, extra = no_graph_cases("td3")
    verify_no_graph(ctx, "td3_critic_target", known, extra(known), "(known batch)")
    for case in edge_cases("td3_critic_target", known):
        verify_no_graph(ctx, "td3_critic_target", case, extra(case), f"(known batch, gamma {case.gamma:g}, noise_clip {case.noise_clip:g})")
    ctx.property(cases("td3"), lambda c: verify_no_graph(ctx, "td3_critic_target", c, extra(c), "(drawn)"), label="drawn",
                 tier="known-answers-first")


@check("SAC-TARGET-NO-GRAPH")
def sac_target_no_graph(ctx):
    """The soft targets are returned without a graph: the critics' loss does not reach the policy."""
    known, extra = no_graph_cases("sac")
    verify_no_graph(ctx, "sac_critic_target", known, extra(known), "(known batch)")
    verify_no_graph(ctx, "sac_critic_target", HAND_SAC, extra(HAND_SAC), "(worked by hand)")
    for case in edge_cases("sac_critic_target", known):  # alpha = 0: a target with no entropy term still carries no graph
        verify_no_graph(ctx, "sac_critic_target", case, extra(case), f"(known batch, gamma {case.gamma:g}, alpha {case.alpha:g})")
    ctx.property(cases("sac"), lambda c: verify_no_graph(ctx, "sac_critic_target", c, extra(c), "(drawn)"), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# actor losses: gradients


def gradients(call, module, what: str) -> dict:
    """d (candidate's scalar loss) / d module's parameters, float64 (zeros where it does not depend on one)."""
    raw = call.raw
    names = list(module.NAMES)
    params = [getattr(module, n) for n in names]
    if not isinstance(raw, torch.Tensor):
        raise CandidateError(f"{call.code.split('(')[0]} returned {type(raw).__name__}; expected a torch scalar to differentiate")
    if not raw.requires_grad:
        return {n: np.zeros(tuple(p.shape)) for n, p in zip(names, params)}
    try:
        grads = torch.autograd.grad(raw, params, allow_unused=True, retain_graph=True)
    except RuntimeError as exc:
        raise CandidateError(f"{call.code.split('(')[0]} returned a loss autograd cannot differentiate ({what}): {exc}") from None
    return {n: (np.zeros(tuple(p.shape)) if g is None else g.detach().cpu().double().numpy()) for n, p, g in zip(names, params, grads)}


def critic_held_fixed(ctx, net: NetCall, roles, what: str):
    if ctx.convention("actor_loss_critic_gradient") == "discarded":
        raise NotProvided("the candidate declares actor_loss_critic_gradient = 'discarded': its actor loss may reach the critics, "
                          "whose gradients it zeroes before their own step")
    for role in roles:
        grads = gradients(net.call, net.modules[role], what)
        for name, g in grads.items():
            if np.any(g != 0):
                index = tuple(int(i) for i in np.argwhere(g != 0)[0])
                rows = [(str(tuple(int(i) for i in idx)), 0.0, float(g[tuple(idx)]), abs(float(g[tuple(idx)])), 0.0)
                        for idx in np.argwhere(g != 0)[:6]]
                raise ClauseFailure(
                    f"{what}: d loss / d {role}.{name}{list(index)} = {g[index]:.10g}, expected no gradient into the critic",
                    table=mismatch_table("index", rows), call=net.call.code,
                    cause=f"the {role} is called with its live parameters inside the actor loss: backward() writes the actor's objective "
                          f"into the critic's gradient (detach its parameters, e.g. torch.func.functional_call with detached ones, or "
                          f"declare actor_loss_critic_gradient = 'discarded' if the critic's gradients are zeroed before its own step)")


# DPG. With mu = tanh(z), z = s W + b and q = dQ/da at (s, mu(s)), the per-sample factor is t_bd = q_bd (1 - mu_bd^2) and
#   d loss / d W[o, d] = -(1/B) sum_b s_bo t_bd,   d loss / d b[d] = -(1/B) sum_b t_bd.
# The candidate's t carries |dq| <= (O + 3) u ((|s| |V|)_d + k_d |mu_d|) + k_d |d mu_d| (q = s V - k mu, with mu's error),
# |d(1 - mu^2)| <= 2 |mu| |d mu| + 2u, and the product one rounding: |dt| <= |dq| (1 - mu^2) + |q| (2 |mu| |d mu| + 4u);
# autograd's backward through the mean, the sum over d and the product with s adds (B + 4) u |s t| per term.


def dpg_expected(case: Case, u):
    a, c = case.nets["actor"], case.nets["critic"]
    s = case.obs
    mu = actor_np(a, s)
    mu_err = actor_error(a, s, u)
    q = critic_grad_np(c, s, mu)
    slope = 1.0 - mu**2
    t = q * slope
    q_err = (s.shape[1] + 3) * u * (np.abs(s) @ np.abs(c["V"]) + c["k"] * np.abs(mu)) + c["k"] * mu_err
    t_err = q_err * slope + np.abs(q) * (2 * np.abs(mu) * mu_err + 4 * u) + (case.B + 4) * u * np.abs(t)
    B = case.B
    grads = {"weight": -(s.T @ t) / B, "bias": -t.sum(0) / B}
    tols = {"weight": 2 * (np.abs(s).T @ t_err) / B + floor(u), "bias": 2 * t_err.sum(0) / B + floor(u)}
    values = critic_np(c, s, mu)
    loss = -values.mean()
    loss_tol = 2 * (np.mean(critic_error(c, s, mu, mu_err, u)) + (B + 2) * u * np.mean(np.abs(values))) + floor(u)
    return loss, loss_tol, grads, tols


DPG_CAUSES = [
    (lambda g: -g, "the actor loss has the wrong sign: the actor descends Q instead of ascending it"),
    (lambda g: g * 0.0, "no gradient reaches the actor: the action is detached before the critic scores it"),
]


def verify_dpg(ctx, case: Case, what: str):
    net = call_network_op(ctx, "dpg_actor_loss", case, {}, shape=())
    loss, loss_tol, grads, tols = dpg_expected(net.case, net.call.unit_roundoff)
    actual = gradients(net.call, net.modules["actor"], what)
    check_unchanged(net)
    for name in ("weight", "bias"):
        B = net.case.B

        def diagnose(a, name=name):
            for transform, cause in DPG_CAUSES:
                if np.any(grads[name] != 0) and matches(a, transform(grads[name]), tols[name]):
                    return cause
            if B > 1 and matches(a, grads[name] * B, tols[name] * B):
                return "the batch is summed, not averaged: the gradient is B times the mean's"
            return ""

        assert_close(actual[name], grads[name], tols[name], call=net.call.code, diagnose=diagnose,
                     what=f"dpg_actor_loss {what}: d loss / d actor.{name} vs -mean_b grad_a Q(s_b, mu(s_b)) grad_theta mu(s_b)")
    assert_close(net.call.outputs[0], loss, loss_tol, what=f"dpg_actor_loss {what} vs -mean_b Q(s_b, mu(s_b))", call=net.call.code,
                 diagnose=lambda a: "the actor loss has the wrong sign" if matches(a, -loss, loss_tol) else "")
    return net


@check("DPG-ACTOR-GRADIENT")
def dpg_actor_gradient(ctx):
    """The actor's gradient is -mean_b grad_a Q(s_b, mu(s_b)) grad_theta mu(s_b); the loss is -mean Q(s, mu(s))."""
    verify_dpg(ctx, KNOWN, "(known batch)")
    ctx.property(cases("ddpg"), lambda c: verify_dpg(ctx, c, "(drawn)"), label="drawn", tier="known-answers-first")


@check("DPG-ACTOR-CRITIC-HELD-FIXED")
def dpg_critic_fixed(ctx):
    """The deterministic actor loss sends no gradient into the critic's parameters."""
    if ctx.convention("actor_loss_critic_gradient") == "discarded":
        critic_held_fixed(ctx, None, (), "")
    for case in (KNOWN, replace(KNOWN, obs=KNOWN.next_obs)):
        net = call_network_op(ctx, "dpg_actor_loss", case, {}, shape=())
        critic_held_fixed(ctx, net, ("critic",), "dpg_actor_loss (known batch)")


# SAC's actor loss. Per sample l_b = alpha log pi(a_b|s_b) - Q_{i*}(s_b, a_b), i* the smaller critic at a_b (the suite keeps the
# twins apart, |Q1 - Q2| >= 0.05, so the min's derivative is that of one critic). With u_bd = mean + sigma noise, t = tanh(u):
#   d l / d mean_d    = G_d = alpha d log pi / d u_d - q_d (1 - t_d^2),   d log pi / d u_d = 2 t_d   (declared epsilon form:
#                       2 t_d (1 - t_d^2) / (1 - t_d^2 + eps)),  q = dQ_{i*}/da at a_b
#   d l / d log_std_d = H_d = -alpha + G_d sigma_d noise_d
# and d loss / d W_m = (1/B) s^T G, d / d b_m = mean_b G, d / d W_s = (1/B) s^T H, d / d b_s = mean_b H.
# Errors: d log pi / du as 2 tanh(u) (or through log(1 - tanh^2) whose derivative is formed from 1 - tanh^2: 8u / (1 - t^2),
# the cancellation admitted above) carries 2 |dt| + 8u / (1 - t^2); q carries (O + 3) u ((|s| |V|) + k |t|) + k |dt|; 1 - t^2
# carries 2 |t| |dt| + 2u; each product a rounding. H adds G's error times sigma |noise|, |G| sigma |noise| (|d log_std| + 3u),
# and |noise| dz from an autograd path through (u - mean) / sigma (exactly zero in exact arithmetic). The declared epsilon form's
# derivative -2a / (1 - a^2 + eps) carries (2 |da| + 2 |a| (2 |a| |da| + 2u) / (1 - a^2 + eps)) / (1 - a^2 + eps).


def separate_twins(case: Case, eps, u) -> Case:
    """Shift critic2's constant so that |Q1 - Q2| >= 0.05 at the sampled actions (the min is then differentiable)."""
    sample = squashed_sample(case.nets["policy"], case.obs, case.noise, eps, u)
    gap = critic_np(case.nets["critic2"], case.obs, sample.action) - critic_np(case.nets["critic1"], case.obs, sample.action)
    shift = 0.0
    while np.any(np.abs(gap + shift) < 0.05):
        shift += 0.1
    if shift == 0.0:
        return case
    nets = dict(case.nets)
    nets["critic2"] = {**nets["critic2"], "c": np.array(float(nets["critic2"]["c"]) + shift)}
    return replace(case, nets=nets)


def sac_actor_expected(case: Case, u, eps, *, reduce=np.minimum, log_prob_gradient=True, action_gradient=True, jacobian=True,
                       score_only=False):
    """Loss, tolerance, expected gradients and tolerances, and the sample. The keywords give known-wrong versions: the critics'
    pathwise term or log pi's dropped, the tanh Jacobian missing, or a non-reparameterised sample (dist.sample(): only the
    density's own dependence on mean and log_std, d log N(u) / d mean = noise / sigma, d / d log_std = noise^2 - 1)."""
    n, s = case.nets, case.obs
    O, B = s.shape[1], case.B
    sample = squashed_sample(n["policy"], s, case.noise, eps, u)
    t, sigma = sample.action, np.exp(sample.log_std)
    q_values = [critic_np(n[c], s, t) for c in ("critic1", "critic2")]
    smaller = np.where((q_values[0] <= q_values[1]) if reduce is np.minimum else (q_values[0] >= q_values[1]), 0, 1)  # (B,)
    q_grad = np.where(smaller[:, None] == 0, critic_grad_np(n["critic1"], s, t), critic_grad_np(n["critic2"], s, t))
    k = np.where(smaller[:, None] == 0, n["critic1"]["k"], n["critic2"]["k"])
    V_abs = np.where(smaller[:, None] == 0, np.abs(s) @ np.abs(n["critic1"]["V"]), np.abs(s) @ np.abs(n["critic2"]["V"]))
    slope = 1.0 - t**2
    if eps is None:
        dlogp = 2 * t
        dlogp_err = 2 * sample.action_err + 8 * u / slope
    else:
        inside = slope + eps
        dlogp = 2 * t * slope / inside
        dlogp_err = (2 * sample.action_err + 2 * np.abs(t) * (2 * np.abs(t) * sample.action_err + 2 * u) / inside) / inside + 4 * u * np.abs(dlogp)
    if not jacobian:
        dlogp = 0.0 * dlogp
    G = (case.alpha * dlogp if log_prob_gradient else 0.0) - (q_grad * slope if action_gradient else 0.0)
    H = (-case.alpha if log_prob_gradient else 0.0) + G * sigma * case.noise
    if score_only:
        G = case.alpha * case.noise / sigma
        H = case.alpha * (case.noise**2 - 1.0)
    q_err = (O + 3) * u * (V_abs + k * np.abs(t)) + k * sample.action_err
    G_err = case.alpha * dlogp_err + q_err * slope + np.abs(q_grad) * (2 * np.abs(t) * sample.action_err + 2 * u) + 4 * u * (
        case.alpha * np.abs(dlogp) + np.abs(q_grad) * slope)
    ls_err = (O + 2) * u * (np.abs(s) @ np.abs(n["policy"]["Ws"]) + np.abs(n["policy"]["bs"]))
    H_err = G_err * sigma * np.abs(case.noise) + np.abs(G) * sigma * np.abs(case.noise) * (ls_err + 4 * u) + np.abs(case.noise) * sample.z_err \
        + 2 * u * case.alpha
    G_err = G_err + (B + 4) * u * np.abs(G)
    H_err = H_err + (B + 4) * u * np.abs(H)
    grads = {"Wm": s.T @ G / B, "bm": G.sum(0) / B, "Ws": s.T @ H / B, "bs": H.sum(0) / B}
    tols = {"Wm": 2 * (np.abs(s).T @ G_err) / B + floor(u), "bm": 2 * G_err.sum(0) / B + floor(u),
            "Ws": 2 * (np.abs(s).T @ H_err) / B + floor(u), "bs": 2 * H_err.sum(0) / B + floor(u)}
    q_min = reduce(*q_values)
    per_sample = case.alpha * sample.log_prob - q_min
    q_err_rows = [critic_error(n[c], s, t, sample.action_err, u) for c in ("critic1", "critic2")]
    loss_tol = 2 * (np.mean(case.alpha * sample.log_prob_err + np.maximum(*q_err_rows)) + (B + 3) * u * np.mean(
        case.alpha * np.abs(sample.log_prob) + np.abs(q_min))) + floor(u)
    return float(per_sample.mean()), loss_tol, grads, tols, sample


def verify_sac_actor(ctx, case: Case, what: str):
    eps = ctx.convention("tanh_log_prob_eps")
    case = separate_twins(case.in_dtype(ctx.dtype), eps, 0.0)
    net = call_network_op(ctx, "sac_actor_loss", case, {"alpha": case.alpha, "noise": case.noise}, shape=())
    u = net.call.unit_roundoff
    loss, loss_tol, grads, tols, sample = sac_actor_expected(net.case, u, eps)
    actual = gradients(net.call, net.modules["policy"], what)
    check_unchanged(net)
    wrong = {
        "the sample is not reparameterised (dist.sample(), not rsample()): the action is a constant of the graph, so no "
        "gradient reaches the policy through the critics": sac_actor_expected(net.case, u, eps, score_only=True),
        "the tanh Jacobian is missing from log pi: the Gaussian density of u is used for a = tanh(u)":
            sac_actor_expected(net.case, u, eps, jacobian=False),
        "the sampled action is detached: no pathwise gradient through the critics (the reparameterisation trick is lost)":
            sac_actor_expected(net.case, u, eps, action_gradient=False),
        "log pi is detached in the actor loss: only the critics' pathwise gradient reaches the policy":
            sac_actor_expected(net.case, u, eps, log_prob_gradient=False),
        "max instead of min over the twin critics in the actor loss": sac_actor_expected(net.case, u, eps, reduce=np.maximum),
    }
    # A diagnosis must fit every parameter's gradient at once (two mistakes can agree on the mean head alone).
    names = ("Wm", "bm", "Ws", "bs")
    fitting = [cause for cause, (_, _, g, tol, _) in wrong.items()
               if any(np.any(g[n] != grads[n]) for n in names)
               and all(matches(actual[n], g[n], np.maximum(tol[n], tols[n])) for n in names)]
    form = "exact tanh log-density" if eps is None else f"declared log(1 - tanh^2 + {eps:g})"
    for name in names:
        assert_close(actual[name], grads[name], tols[name], call=net.call.code, diagnose=lambda a: fitting[0] if fitting else "",
                     what=f"sac_actor_loss {what}: d loss / d policy.{name} vs the reparameterised gradient of "
                          f"mean_b (alpha log pi(a~|s) - min_i Q_i(s, a~)) ({form})")

    jacobian_free = float(np.mean(case.alpha * (sample.log_prob + log_sech2(sample.pre).sum(-1))
                                  - np.minimum(critic_np(net.case.nets["critic1"], net.case.obs, sample.action),
                                               critic_np(net.case.nets["critic2"], net.case.obs, sample.action))))
    value_causes = [(wrong["max instead of min over the twin critics in the actor loss"][0], "max instead of min over the twin critics"),
                    (jacobian_free, "log pi lacks the tanh Jacobian: the Gaussian density of u is used for a = tanh(u)"),
                    (-loss, "the actor loss has the wrong sign")]
    assert_close(net.call.outputs[0], loss, loss_tol, call=net.call.code,
                 what=f"sac_actor_loss {what} vs mean_b (alpha log pi(a~|s) - min_i Q_i(s, a~)) ({form})",
                 diagnose=lambda a: first_match(a, loss_tol, [(np.array(v), c) for v, c in value_causes if case.alpha or "Jacobian" not in c]))
    return net


@check("SAC-ACTOR-LOSS-REPARAMETERISED")
def sac_actor_loss(ctx):
    """mean_b (alpha log pi(a~|s) - min Q(s, a~)) and its reparameterised gradient in the policy's parameters."""
    verify_sac_actor(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE), "(known batch)")
    verify_sac_actor(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE, alpha=1.0), "(known batch, alpha = 1)")
    for alpha in edges.values("sac_actor_loss", "alpha"):
        verify_sac_actor(ctx, replace(KNOWN, noise=SAC_KNOWN_NOISE, alpha=alpha), f"(known batch, edge alpha = {alpha:g})")
    ctx.property(cases("sac"), lambda c: verify_sac_actor(ctx, c, "(drawn)"), label="drawn", tier="known-answers-first")


@check("SAC-ACTOR-CRITIC-HELD-FIXED")
def sac_critic_fixed(ctx):
    """SAC's actor loss sends no gradient into the critics' parameters."""
    if ctx.convention("actor_loss_critic_gradient") == "discarded":
        critic_held_fixed(ctx, None, (), "")
    case = separate_twins(replace(KNOWN, noise=SAC_KNOWN_NOISE).in_dtype(ctx.dtype), ctx.convention("tanh_log_prob_eps"), 0.0)
    net = call_network_op(ctx, "sac_actor_loss", case, {"alpha": case.alpha, "noise": case.noise}, shape=())
    critic_held_fixed(ctx, net, ("critic1", "critic2"), "sac_actor_loss (known batch)")


# ---------------------------------------------------------------------------------------------
# the temperature
#
# loss = -mean_b w (log pi_b + H), w = log_alpha (declared: alpha = exp(log_alpha)); d loss / d log_alpha = -w' m with
# m = mean(log pi) + H and w' = 1 (or alpha). The candidate sums B terms, each a sum and a product: (B + 3) u per term of
# magnitude |w| (|log pi_b| + |H|), plus exp's rounding (u |alpha m|) in the alpha form; doubled for the oracle.


LOG_HALF = math.log(0.5)


def verify_alpha_loss(ctx, log_alpha, log_prob, action_dim, target_entropy, what, *, cause=""):
    log_prob = rounded(log_prob, ctx.dtype)
    log_alpha = rounded(np.array(log_alpha), ctx.dtype)
    call = ctx.call("sac_alpha_loss", {"log_alpha": log_alpha, "log_prob": log_prob, "action_dim": int(action_dim),
                                       "target_entropy": target_entropy}, array="torch",
                    requires_grad=("log_alpha", "log_prob"), shape=())
    raw = call.raw
    leaves = [call.inputs["log_alpha"], call.inputs["log_prob"]]
    if isinstance(raw, torch.Tensor) and raw.requires_grad:
        try:
            g_alpha, g_logp = torch.autograd.grad(raw, leaves, allow_unused=True)
        except RuntimeError as exc:
            raise CandidateError(f"sac_alpha_loss returned a loss autograd cannot differentiate: {exc}") from None
    else:
        g_alpha = g_logp = None
    g_alpha = 0.0 if g_alpha is None else float(g_alpha.detach().cpu().double())
    g_logp = np.zeros(len(log_prob)) if g_logp is None else g_logp.detach().cpu().double().numpy()
    H = float(target_entropy) if target_entropy is not None else ctx.convention("default_target_entropy_per_dim") * action_dim
    if target_entropy is not None:
        H = float(rounded(H, ctx.dtype))
    la = float(log_alpha)
    form = ctx.convention("alpha_loss_parameter")
    weight = la if form == "log_alpha" else math.exp(la)
    slope = 1.0 if form == "log_alpha" else math.exp(la)
    m = float(np.mean(log_prob)) + H
    u = call.unit_roundoff
    magnitude = float(np.mean(np.abs(log_prob))) + abs(H)
    tol_value = 2 * (len(log_prob) + 4) * u * abs(weight) * magnitude + floor(u)
    tol_grad = 2 * (len(log_prob) + 4) * u * slope * magnitude + floor(u)
    return call, g_alpha, g_logp, -weight * m, -slope * m, tol_value, tol_grad, (la, m, H, form)


def alpha_diagnosis(actual, expected, tol, la, m, H, form, *, default=False, action_dim=None):
    alt = -math.exp(la) * m if form == "log_alpha" else -m
    if matches(actual, -expected, tol) and expected != 0:
        return "the temperature loss has the wrong sign: descending it raises alpha when the entropy is above the target"
    if abs(alt - expected) > tol and matches(actual, alt, max(tol, 1e-12 * abs(alt))):
        other = "alpha" if form == "log_alpha" else "log_alpha"
        return (f"the loss is taken in {other} (-{other} (log pi + H_target)), not in {form}; declare alpha_loss_parameter = '{other}' "
                f"if that is intended")
    return ""


@check("SAC-TEMPERATURE-LOSS")
def temperature_loss(ctx):
    """d loss / d log_alpha = H_hat - H_target (times alpha in the alpha form): alpha rises when the entropy is below target."""

    def verify(log_alpha, log_prob, action_dim, target, what):
        call, g_alpha, _, value, grad, tol_value, tol_grad, (la, m, H, form) = verify_alpha_loss(ctx, log_alpha, log_prob, action_dim,
                                                                                              target, what)
        formula = "-mean(log_alpha (log_prob + H_target))" if form == "log_alpha" else "-mean(alpha (log_prob + H_target))"
        assert_close(np.array(g_alpha), np.array(grad), tol_grad, what=f"sac_alpha_loss {what}: d loss / d log_alpha vs H_hat - H_target"
                     + ("" if form == "log_alpha" else " times alpha"), call=call.code,
                     diagnose=lambda a: alpha_diagnosis(float(a), grad, tol_grad, la, m, H, form))
        assert_close(call.outputs[0], np.array(value), tol_value, what=f"sac_alpha_loss {what} vs {formula}", call=call.code,
                     diagnose=lambda a: alpha_diagnosis(float(a), value, tol_value, la, m, H, form))

    verify(LOG_HALF, [-1.0, 0.5], 2, -1.0, "(known: gradient 1.25 in the log form)")
    # A batch that enumerates pi = (1/2, 1/4, 1/4): H_hat = H(pi) = 1.5 log 2 below the target 2: the gradient is negative.
    verify(LOG_HALF, [LOG_HALF, LOG_HALF, 2 * LOG_HALF, 2 * LOG_HALF], 1, 2.0, "(enumerated policy: gradient 1.5 log 2 - 2)")
    verify(0.0, [-0.3, -2.0, 0.7], 3, -3.0, "(alpha = 1)")
    for args, label in edges.cases("sac_alpha_loss", {"action_dim": 3, "target_entropy": -3.0}):  # target_entropy 0: not the default
        verify(LOG_HALF, [-0.3, -2.0, 0.7], args["action_dim"], args["target_entropy"], f"({label})")
    drawn = st.tuples(st.floats(-5.0, 2.0), st.lists(st.floats(-20.0, 5.0), min_size=1, max_size=8), st.integers(1, 6),
                      edges.edged(st.floats(-10.0, 10.0), "sac_alpha_loss", "target_entropy", none=True))
    ctx.property(drawn, lambda d: verify(d[0], d[1], d[2], d[3], "(drawn)"), label="drawn", tier="known-answers-first")


@check("SAC-TEMPERATURE-NO-POLICY-GRADIENT")
def temperature_no_policy_gradient(ctx):
    """The temperature loss sends no gradient into log_prob."""

    def verify(log_alpha, log_prob, action_dim, target, what):
        call, _, g_logp, *_ = verify_alpha_loss(ctx, log_alpha, log_prob, action_dim, target, what)
        if np.any(g_logp != 0):
            i = int(np.flatnonzero(g_logp != 0)[0])
            rows = [(int(j), 0.0, float(g_logp[j]), abs(float(g_logp[j])), 0.0) for j in np.flatnonzero(g_logp != 0)[:6]]
            raise ClauseFailure(f"sac_alpha_loss {what}: d loss / d log_prob[{i}] = {g_logp[i]:.10g}, expected no gradient into the policy",
                                table=mismatch_table("index", rows), call=call.code,
                                cause="log_prob is not detached in the temperature loss: its backward moves the policy towards the "
                                      "target entropy through alpha's objective (use (log_prob + target_entropy).detach())")

    verify(LOG_HALF, [-1.0, 0.5], 2, -1.0, "(known)")
    verify(0.7, [-0.3, -2.0, 0.7], 3, None, "(default target entropy)")
    for args, label in edges.cases("sac_alpha_loss", {"action_dim": 3, "target_entropy": -3.0}):
        verify(0.7, [-0.3, -2.0, 0.7], args["action_dim"], args["target_entropy"], f"({label})")
    drawn = st.tuples(st.floats(-5.0, 2.0).filter(lambda x: abs(x) > 1e-3), st.lists(st.floats(-20.0, 5.0), min_size=1, max_size=8),
                      st.integers(1, 6), st.floats(-10.0, 10.0))
    ctx.property(drawn, lambda d: verify(d[0], d[1], d[2], d[3], "(drawn)"), label="drawn", tier="known-answers-first")


@check("SAC-TARGET-ENTROPY-DEFAULT")
def target_entropy_default(ctx):
    """target_entropy=None means the declared default k |A| (k = -1): action_dim 3, log_prob (-1, 0.5): gradient 3.25."""
    scale = ctx.convention("default_target_entropy_per_dim")

    def verify(log_alpha, log_prob, action_dim, what):
        call, g_alpha, _, _, grad, _, tol_grad, (la, m, H, form) = verify_alpha_loss(ctx, log_alpha, log_prob, action_dim, None, what)

        def diagnose(a):
            mean_lp = m - H
            slope = 1.0 if form == "log_alpha" else math.exp(la)
            for guess, text in ((-scale * action_dim, f"the default target entropy has the wrong sign ({-scale * action_dim:g}, "
                                                       f"not {scale * action_dim:g})"),
                                (scale, f"the default target entropy ignores the action dimension ({scale:g}, not {scale:g} x {action_dim})"),
                                (0.0, "the default target entropy is 0, not k |A|")):
                if guess != H and matches(a, -slope * (mean_lp + guess), tol_grad):
                    return text
            return ""

        assert_close(np.array(g_alpha), np.array(grad), tol_grad, call=call.code, diagnose=diagnose,
                     what=f"sac_alpha_loss {what}, target_entropy=None: d loss / d log_alpha vs H_hat - ({scale:g} x action_dim)")

    verify(LOG_HALF, [-1.0, 0.5], 3, "(known, action_dim = 3)")
    verify(0.3, [-2.0, 1.0, 0.25], 6, "(action_dim = 6)")
    for action_dim in edges.values("sac_alpha_loss", "action_dim"):  # 1: the default is k itself
        verify(0.3, [-2.0, 1.0, 0.25], action_dim, f"(edge action_dim = {action_dim})")
    drawn = st.tuples(st.floats(-5.0, 2.0), st.lists(st.floats(-20.0, 5.0), min_size=1, max_size=8), st.integers(2, 8))
    ctx.property(drawn, lambda d: verify(d[0], d[1], d[2], "(drawn)"), label="drawn", tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# target networks
#
# One soft update tau theta + (1 - tau) theta' (or theta' + tau (theta - theta'), or torch's lerp) rounds at most 4 times on terms
# bounded by |theta| + |theta'| (tau and 1 - tau in [0, 1], tau itself rounded to the dtype): |d| <= 4 u (|theta| + |theta'|),
# doubled for the oracle. Over n updates the errors add, each damped by (1 - tau) <= 1: at most 8 u n M, M the largest |value|.


def verify_polyak(ctx, target, online, tau, what):
    target, online = rounded(target, ctx.dtype), rounded(online, ctx.dtype)
    call = ctx.call("polyak_update", {"target": target, "online": online, "tau": float(tau)}, shape=target.shape)
    t = float(rounded(tau, ctx.dtype))
    expected = t * online + (1.0 - t) * target
    tol = 8 * call.unit_roundoff * (np.abs(target) + np.abs(online)) + floor(call.unit_roundoff)
    if t in (0.0, 1.0):  # tau = 1 copies the online parameters and tau = 0 keeps the target, exactly: 1 x + 0 y = x in floating
        tol = rounding_error(expected, call.unit_roundoff)  # point, and so does lerp; at a declared lower precision, one rounding
    alternatives = [((1.0 - t) * online + t * target, "tau is on the wrong side: (1 - tau) online + tau target, so the target jumps "
                                                       "almost onto the online network (the arguments' roles are swapped)"),
                    (t * target + (1.0 - t) * online, "the arguments are swapped: the online network is moved towards the target"),
                    (target + online * t, "the target is not scaled by (1 - tau): theta' + tau theta")]
    assert_close(call.outputs[0], expected, tol, what=f"polyak_update {what} vs tau online + (1 - tau) target", call=call.code,
                 diagnose=lambda a: first_match(a, tol, [(v, c) for v, c in alternatives if not np.allclose(v, expected)]))


@check("POLYAK-UPDATE")
def polyak_update(ctx):
    """tau online + (1 - tau) target; tau = 1 gives the online parameters, tau = 0 the target."""
    ctx.provided("target_update_kinds", "polyak")
    target, online = np.array([1.0, 2.0, -3.0]), np.array([0.0, 4.0, 1.0])
    verify_polyak(ctx, target, online, 0.25, "(known: (0.75, 2.5, -2))")
    verify_polyak(ctx, target, online, 0.005, "(tau = 0.005)")
    verify_polyak(ctx, target, online, 1.0, "(tau = 1)")
    verify_polyak(ctx, target, online, 0.0, "(tau = 0)")
    pairs = st.integers(1, 6).flatmap(lambda P: st.tuples(
        st.lists(st.floats(-100.0, 100.0, allow_subnormal=False), min_size=P, max_size=P),
        st.lists(st.floats(-100.0, 100.0, allow_subnormal=False), min_size=P, max_size=P),
        edges.edged(st.sampled_from([0.005, 0.01, 0.5]) | st.floats(0.0, 1.0), "polyak_update", "tau")))
    ctx.property(pairs, lambda d: verify_polyak(ctx, np.array(d[0]), np.array(d[1]), d[2], "(drawn)"), label="drawn",
                 tier="known-answers-first")


def due_on(phase: str, offset: int, n_steps: int, period: int) -> np.ndarray:
    """Whether each 1-based gradient step n makes the delayed update when the counter reads offset + n: at the end
    of each period of the counter (``end``: SB3, skrl, the TD3 authors') or at its start (``start``: Tianshou)."""
    counter = offset + np.arange(1, n_steps + 1)
    return counter % period == 0 if phase == "end" else (counter - 1) % period == 0


@check("POLYAK-INPUTS-NOT-CHANGED")
def polyak_inputs_not_changed(ctx):
    """The update is returned; the target and online arrays the candidate was given are left as they were."""
    from ..kit.context import MutatedInput

    ctx.provided("target_update_kinds", "polyak")

    def verify(target, online, tau, what):
        args = {"target": rounded(np.asarray(target, float), ctx.dtype), "online": rounded(np.asarray(online, float), ctx.dtype),
                "tau": float(tau)}
        try:
            ctx.call("polyak_update", args, shape=args["target"].shape)  # its value is POLYAK-UPDATE's
        except MutatedInput as mutated:
            changed = np.argwhere(mutated.before != mutated.after) if mutated.before.shape == mutated.after.shape else []
            rows = ""
            if len(changed):
                key = tuple(int(i) for i in changed[0])
                rows = f"`{mutated.name}`{list(key)}: before {float(mutated.before[key])!r}, after {float(mutated.after[key])!r}"
            raise ClauseFailure(f"polyak_update {what}: {mutated}", table=rows,
                                call=f"polyak_update(target={list(target)}, online={list(online)}, tau={tau!r})") from None

    verify([1.0, 2.0, -3.0], [0.0, 4.0, 1.0], 0.25, "(known)")
    verify([1.0, 2.0, -3.0], [0.0, 4.0, 1.0], 1.0, "(tau = 1)")
    pairs = st.integers(1, 6).flatmap(lambda P: st.tuples(
        st.lists(st.floats(-100.0, 100.0, allow_subnormal=False), min_size=P, max_size=P),
        st.lists(st.floats(-100.0, 100.0, allow_subnormal=False), min_size=P, max_size=P), st.floats(0.0, 1.0)))
    ctx.property(pairs, lambda d: verify(d[0], d[1], d[2], "(drawn)"), label="drawn", tier="known-answers-first")


def phase_due(ctx, n_steps: int, period: int) -> np.ndarray:
    """Whether each 1-based step (counted across calls) makes the delayed update, on the declared phase and offset."""
    return due_on(ctx.convention("update_phase"), ctx.convention("update_step_offset"), n_steps, period)


def phase_alternatives(ctx, n_steps: int, period: int) -> list[tuple[np.ndarray, str]]:
    """Schedules a correct implementation with other declarations would follow: the other phase, or a counter offset by
    a warm-up the candidate did not declare (each with the declaration that describes it)."""
    phase, offset = ctx.convention("update_phase"), ctx.convention("update_step_offset")
    other = "start" if phase == "end" else "end"
    out = [(due_on(other, offset, n_steps, period), f"the updates fall on the other phase of each period ('{other}'); declare "
                                                    f"update_phase = '{other}' if that is intended")]
    for shift in range(1, period):
        out.append((due_on(phase, offset + shift, n_steps, period),
                    f"the updates fall {shift} step{'s' if shift > 1 else ''} early in each period: a step counter that starts at "
                    f"{offset + shift} (mod {period}), as one gated on the environment steps after a warm-up does; declare "
                    f"update_step_offset = learning_starts"))
    return out


def expected_targets(target, online, tau, due):
    out, current = np.empty_like(online), target.copy()
    for n in range(len(online)):
        if due[n]:
            current = tau * online[n] + (1.0 - tau) * current
        out[n] = current
    return out


def per_call_due(gradient_steps, period):
    """The schedule of a counter that restarts in every call (gradient_step in range(k), tested before it advances)."""
    return np.concatenate([np.arange(k) % period == 0 for k in gradient_steps]).astype(bool)


def per_call_count_due(gradient_steps, period):
    """The schedule of a counter of calls, not gradient steps: the last step of every period-th call."""
    due = []
    for i, k in enumerate(gradient_steps, start=1):
        due += [False] * (k - 1) + [i % period == 0]
    return np.array(due, bool)


def verify_target_updates(ctx, target, online, tau, period, gradient_steps, what, *, exact=False, cause=""):
    target, online = rounded(target, ctx.dtype), rounded(online, ctx.dtype)
    call = ctx.call("target_network_updates", {"target": target, "online": online, "tau": float(tau), "period": int(period),
                                               "gradient_steps": tuple(int(k) for k in gradient_steps)}, shape=online.shape)
    t = float(rounded(tau, ctx.dtype))
    N = len(online)
    due = phase_due(ctx, N, period)
    expected = expected_targets(target, online, t, due)
    if exact:
        # A copy is exact at the precision the candidate is judged by: the float64 value itself, or its one rounding to a
        # declared lower precision (a float32 copy of float64 input), nothing further off. (Comparing with the float32
        # rounding at tolerance 0 rejected a float64 copy, more exact than its float32 declaration promised.)
        tol = rounding_error(expected, call.unit_roundoff)
    else:
        scale = np.maximum(np.max(np.abs(online), axis=0), np.abs(target))
        tol = 16 * call.unit_roundoff * np.arange(1, N + 1)[:, None] * scale[None, :] + floor(call.unit_roundoff)

    def uniform_mean():
        out, running = np.empty_like(online), target.copy()
        for n in range(N):
            running = (running * n + online[n]) / (n + 1) if n else (target + online[0]) / 2
            out[n] = running
        return out

    def warmed_up():
        out, current = np.empty_like(online), target.copy()
        for n in range(N):
            decay = min(1.0 - t, (1.0 + n) / (10.0 + n))
            current = (1.0 - decay) * online[n] + decay * current
            out[n] = current
        return out

    steps = np.arange(1, N + 1)
    alternatives = [
        (expected_targets(target, online, t, per_call_due(gradient_steps, period)),
         "the update counter restarts in every call (gradient_step in range(gradient_steps)): with one gradient step per call the "
         "period is ignored (SB3 SAC's target_update_interval, DLR-RM/stable-baselines3 #2158)"),
        (expected_targets(target, online, t, per_call_count_due(gradient_steps, period)),
         "the period counts train() calls (or environment steps), not gradient steps"),
        (expected_targets(target, online, t, np.ones(N, bool)), "the target is updated at every gradient step, ignoring the period"),
        (expected_targets(target, online, t, steps % (period + 1) == 0),
         "the target is updated every period + 1 steps: a counter compared with period before it is reset (TorchRL 0.14.1's "
         "HardUpdate(value_network_update_interval=k) copies on every (k + 1)-th step() call)"),
        *[(expected_targets(target, online, t, d), c) for d, c in phase_alternatives(ctx, N, period)],
        (uniform_mean(), "the target is a uniform running mean of the online parameters (an SWA AveragedModel), not an exponential "
                         "moving average with weight tau"),
        (warmed_up(), "the decay is warmed up ((1 + n) / (10 + n), timm/Flax-style EMA): early weights are not tau (1 - tau)^k"),
        (expected_targets(target, online, 1.0 - t, due), "tau is on the wrong side: (1 - tau) online + tau target"),
    ]
    assert_close(call.outputs[0], expected, tol, call=call.code, cause=cause,
                 what=f"target_network_updates {what} vs theta' <- tau theta + (1 - tau) theta' on steps {np.flatnonzero(due) + 1} of {N}",
                 diagnose=lambda a: first_match(a, np.maximum(tol, 1e-300), [(v, c) for v, c in alternatives if not np.array_equal(v, expected)]))


def unit_history(P: int, N: int):
    """target e_0, online e_1, ..., e_N: the n-th step's weights are read off the columns."""
    target = np.eye(N + 1)[0][:P] if P <= N + 1 else np.eye(P)[0]
    online = np.eye(max(P, N + 1))[1:N + 1, :P]
    return target, online


def soft_kind(ctx) -> float | None:
    """tau for soft updates if the candidate provides them, else None."""
    return 0.5 if "polyak" in ctx.provided("target_update_kinds") else None


@check("POLYAK-AVERAGE-OF-HISTORY")
def polyak_history(ctx):
    """Soft updates every step: theta'_n = (1 - tau)^n theta'_0 + sum_k tau (1 - tau)^(n - k) theta_k (1/8, 1/8, 1/4, 1/2)."""
    ctx.provided("target_update_kinds", "polyak")
    target, online = unit_history(4, 3)
    verify_target_updates(ctx, target, online, 0.5, 1, (3,), "(tau = 1/2, three steps: weights 1/8, 1/8, 1/4, 1/2)")
    target, online = unit_history(7, 6)
    verify_target_updates(ctx, target, online, 0.25, 1, (1, 2, 3), "(tau = 1/4, six steps in three calls)")
    constant = np.array([1.5, -2.0, 4.0])
    verify_target_updates(ctx, constant, np.tile(constant, (5, 1)), 0.1, 1, (5,), "(constant network: a fixed point)")
    for tau in edges.values("target_network_updates", "tau"):  # 0: the target never moves; 1: it copies every step
        verify_target_updates(ctx, target, online, tau, 1, (1, 2, 3), f"(edge tau = {tau:g}, six steps in three calls)")

    @st.composite
    def drawn(draw):
        P = draw(st.integers(1, 4), label="P")
        calls = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4), label="gradient_steps")
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
        tau = draw(edges.edged(st.sampled_from([0.005, 0.5]) | st.floats(0.0, 1.0), "target_network_updates", "tau"), label="tau")
        return rng.uniform(-10, 10, P), rng.uniform(-10, 10, (sum(calls), P)), tau, calls

    ctx.property(drawn(), lambda d: verify_target_updates(ctx, d[0], d[1], d[2], 1, d[3], "(drawn)"), label="drawn",
                 tier="known-answers-first")


@check("TARGET-UPDATE-PERIOD")
def target_update_period(ctx):
    """Updates once every period gradient steps, counted across calls, on the declared phase."""
    tau = soft_kind(ctx) or 1.0
    target, online = unit_history(7, 6)
    verify_target_updates(ctx, target, online, tau, 2, (1,) * 6, "(period 2, one gradient step per call)")
    target, online = unit_history(9, 8)
    verify_target_updates(ctx, target, online, tau, 3, (3, 1, 2, 2), "(period 3, calls of 3, 1, 2, 2 steps)")

    @st.composite
    def drawn(draw):
        calls = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5), label="gradient_steps")
        period = draw(st.integers(1, 4), label="period")
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
        return rng.uniform(-10, 10, 2), rng.uniform(-10, 10, (sum(calls), 2)), period, calls

    ctx.property(drawn(), lambda d: verify_target_updates(ctx, d[0], d[1], tau, d[2], d[3], "(drawn)"), label="drawn",
                 tier="known-answers-first")


@check("TARGET-HARD-UPDATE")
def target_hard_update(ctx):
    """tau = 1: an exact copy every period gradient steps (counted across calls), untouched in between."""
    ctx.provided("target_update_kinds", "hard")
    target, online = unit_history(10, 9)
    verify_target_updates(ctx, target, online, 1.0, 3, (2, 2, 2, 1, 2), "(hard, period 3, calls of 2, 2, 2, 1, 2 steps)", exact=True)
    rng = np.random.default_rng(0)
    verify_target_updates(ctx, rng.uniform(-1e3, 1e3, 3), rng.uniform(-1e3, 1e3, (5, 3)) * 10.0 ** rng.integers(-20, 20, (5, 3)), 1.0, 2,
                          (5,), "(hard, period 2, magnitudes 1e-17 to 1e23: the copy is exact)", exact=True)

    @st.composite
    def drawn(draw):
        calls = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5), label="gradient_steps")
        period = draw(st.integers(1, 4), label="period")
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="values seed"))
        return rng.uniform(-10, 10, 2), rng.uniform(-10, 10, (sum(calls), 2)), period, calls

    ctx.property(drawn(), lambda d: verify_target_updates(ctx, d[0], d[1], 1.0, d[2], d[3], "(drawn)", exact=True), label="drawn",
                 tier="known-answers-first")


# ---------------------------------------------------------------------------------------------
# TD3's delayed updates


def verify_delays(ctx, gradient_steps, delay, what):
    N = sum(gradient_steps)
    call = ctx.call("td3_actor_update_steps", {"gradient_steps": tuple(int(k) for k in gradient_steps), "policy_delay": int(delay)},
                    outputs=2, shape=(N,))
    actor, targets = call.outputs
    due = phase_due(ctx, N, delay).astype(np.float64)
    alternatives = [(per_call_due(gradient_steps, delay), "the step counter restarts in every call (or never advances between "
                                                               "gradient steps): the actor is updated more often than once per policy_delay"),
                    (np.ones(N), "the delay is ignored: the actor is updated at every critic step")]
    alternatives += [(d.astype(np.float64), c) for d, c in phase_alternatives(ctx, N, delay)]
    def cause_of(a, name):
        if name == "target_updates" and np.all(a == 1) and not np.all(due == 1):
            return "the target networks are updated at every critic step, not with the delayed actor"
        return first_match(a, 0.0, [(np.asarray(v, float), c) for v, c in alternatives if not np.array_equal(v, due)])

    for name, values in (("actor_updates", actor), ("target_updates", targets)):
        extra = "" if name == "actor_updates" else " (the target networks are updated with the actor, never on the other steps)"
        assert_close(values, due, 0.0, call=call.code, diagnose=lambda a, name=name: cause_of(a, name),
                     what=f"td3_actor_update_steps {what}: {name} vs once every {delay} critic steps (steps {np.flatnonzero(due) + 1}){extra}")


@check("TD3-DELAYED-UPDATES")
def td3_delayed_updates(ctx):
    """The actor and the target networks are updated together once every policy_delay critic steps, counted across calls."""
    verify_delays(ctx, (1,) * 6, 2, "(one critic step per call, policy_delay 2)")
    verify_delays(ctx, (3, 1, 2), 2, "(calls of 3, 1, 2 steps, policy_delay 2)")
    verify_delays(ctx, (1,) * 7, 3, "(policy_delay 3)")
    drawn = st.tuples(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.integers(1, 4))
    ctx.property(drawn, lambda d: verify_delays(ctx, d[0], d[1], "(drawn)"), label="drawn", tier="known-answers-first")
