"""Strategies for the normalisation chapter's operations: streams of batches for ``running_moments``
(:func:`streams`), pairs of statistics for ``merge_moments`` (:func:`statistics_pairs`), observation streams for
``normalize_observations`` (:func:`observation_streams`), reward streams with episode ends for
``scale_rewards`` (:func:`reward_streams`), and the diagnostics' batches (:func:`ratio_batches`,
:func:`sampled_categoricals`, :func:`critic_batches`, :func:`logit_batches`). Every number is a float32 value (held as float64), so one
example serves a float64 and a float32 candidate alike."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument


def _positive_int(name: str, value) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise InvalidArgument(f"{name}={value!r} must be a positive int")
    return value


def _magnitude(value) -> float:
    if not (isinstance(value, (int, float)) and 0 < value <= 1e6):
        raise InvalidArgument(f"magnitude={value!r} must be in (0, 1e6]")
    return float(value)


def _floats(magnitude: float):
    bound = float(np.nextafter(np.float32(magnitude), np.float32(0)) if np.float32(magnitude) > magnitude else np.float32(magnitude))
    return st.floats(-bound, bound, width=32, allow_subnormal=False)


def _matrix(draw, rows: int, columns: int, elements, label: str) -> np.ndarray:
    values = draw(st.lists(elements, min_size=rows * columns, max_size=rows * columns), label=label)
    return np.array(values, dtype=np.float64).reshape(rows, columns)


def _ends(draw, size: int, label: str) -> np.ndarray:
    """Segment ends over ``size`` items, the last always true."""
    ends = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size), label=label), dtype=bool)
    ends[-1] = True
    return ends


def _minibatch_ends(draw, size: int, label: str) -> np.ndarray:
    """Minibatches as a PPO update cuts a batch of ``size`` samples: a drawn minibatch size b, the last one smaller."""
    b = draw(st.integers(1, size), label=label)
    ends = np.zeros(size, dtype=bool)
    ends[b - 1::b] = True
    ends[-1] = True
    return ends


def streams(*, max_rows: int = 12, max_features: int = 3, magnitude: float = 1e3):
    """``(x, batch_end)``: 1..max_rows samples of 1..max_features features (an offset, the same for every row,
    plus a spread) cut into batches at random."""
    return _streams(_positive_int("max_rows", max_rows), _positive_int("max_features", max_features), _magnitude(magnitude))


@st.composite
def _streams(draw, max_rows, max_features, magnitude):
    rows = draw(st.integers(1, max_rows), label="rows")
    features = draw(st.integers(1, max_features), label="features")
    offset = np.array(draw(st.lists(_floats(magnitude), min_size=features, max_size=features), label="offset"))
    spread = draw(st.sampled_from([1.0, 1e-2, 10.0]), label="spread")
    x = (offset + _matrix(draw, rows, features, _floats(spread), "x - offset")).astype(np.float32).astype(np.float64)
    return x, _ends(draw, rows, "batch_end")


def statistics_pairs(*, max_features: int = 3, magnitude: float = 1e3):
    """``((mean_a, var_a, count_a), (mean_b, var_b, count_b))``: two samples' statistics, counts positive (integers,
    or a prior's fraction such as 1e-4)."""
    return _statistics_pairs(_positive_int("max_features", max_features), _magnitude(magnitude))


@st.composite
def _statistics_pairs(draw, max_features, magnitude):
    features = draw(st.integers(1, max_features), label="features")
    pair = []
    for name in ("a", "b"):
        mean = np.array(draw(st.lists(_floats(magnitude), min_size=features, max_size=features), label=f"mean_{name}"))
        var = np.array(draw(st.lists(st.floats(0.0, magnitude, width=32), min_size=features, max_size=features), label=f"var_{name}"))
        count = draw(st.integers(1, 10_000).map(float) | st.sampled_from([1e-4, 0.5, 2.5]), label=f"count_{name}")
        pair.append((mean, var, count))
    return tuple(pair)


def observation_streams(*, max_steps: int = 6, max_envs: int = 4, max_features: int = 3, magnitude: float = 100.0):
    """``(obs, train_steps)``: T <= max_steps steps of N <= max_envs environments' observations of D <= max_features
    features (a per-feature offset plus a spread, an occasional outlier), and 1 <= train_steps <= T."""
    return _observation_streams(_positive_int("max_steps", max_steps), _positive_int("max_envs", max_envs),
                                _positive_int("max_features", max_features), _magnitude(magnitude))


@st.composite
def _observation_streams(draw, max_steps, max_envs, max_features, magnitude):
    T = draw(st.integers(1, max_steps), label="T")
    N = draw(st.integers(1, max_envs), label="N")
    D = draw(st.integers(1, max_features), label="D")
    offset = np.array(draw(st.lists(_floats(magnitude), min_size=D, max_size=D), label="offset"))
    spread = draw(st.sampled_from([1.0, 0.1, 10.0]), label="spread")
    obs = offset + _matrix(draw, T * N, D, _floats(spread), "obs - offset").reshape(T, N, D)
    if draw(st.booleans(), label="outlier"):  # far beyond any clip: the statistics must see it raw
        t, j, d = (draw(st.integers(0, k - 1), label=name) for k, name in ((T, "t"), (N, "env"), (D, "feature")))
        obs[t, j, d] += draw(st.sampled_from([-1.0, 1.0]), label="sign") * 100 * spread * (1 + N)
    obs = obs.astype(np.float32).astype(np.float64)
    return obs, draw(st.integers(1, T), label="train_steps")


def reward_streams(*, max_steps: int = 8, max_envs: int = 3, magnitude: float = 10.0):
    """``(rewards, terminated, truncated, gamma)``: T <= max_steps steps of N <= max_envs environments, rewards in
    [-magnitude, magnitude], episode ends of either kind or both, gamma in {0, 0.5, 0.9, 0.99, 1} or drawn."""
    return _reward_streams(_positive_int("max_steps", max_steps), _positive_int("max_envs", max_envs), _magnitude(magnitude))


@st.composite
def _reward_streams(draw, max_steps, max_envs, magnitude):
    T = draw(st.integers(1, max_steps), label="T")
    N = draw(st.integers(1, max_envs), label="N")
    rewards = _matrix(draw, T, N, _floats(magnitude), "rewards")
    kinds = np.array(draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3]), min_size=T * N, max_size=T * N), label="episode ends"))
    kinds = kinds.reshape(T, N)  # 1 terminated, 2 truncated, 3 both
    gamma = draw(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]) | st.floats(0.0, 1.0, width=32), label="gamma")
    return rewards, (kinds == 1) | (kinds == 3), kinds >= 2, float(gamma)


def ratio_batches(*, max_samples: int = 12, max_log_ratio: float = 1.0):
    """``(logp_new, logp_old, minibatch_end)``: 1..max_samples samples with log-probabilities in [-10, 0] and log
    ratios in [-max_log_ratio, max_log_ratio] (some exactly 0), cut into minibatches of a drawn size (the last one
    smaller), as a PPO update cuts its batch."""
    if not (isinstance(max_log_ratio, (int, float)) and 0 < max_log_ratio <= 30):
        raise InvalidArgument(f"max_log_ratio={max_log_ratio!r} must be in (0, 30]")
    return _ratio_batches(_positive_int("max_samples", max_samples), float(max_log_ratio))


@st.composite
def _ratio_batches(draw, max_samples, max_log_ratio):
    B = draw(st.integers(1, max_samples), label="B")
    old = np.array(draw(st.lists(st.floats(-10.0, 0.0, width=32), min_size=B, max_size=B), label="logp_old"))
    log_r = draw(st.lists(st.sampled_from([0.0]) | st.floats(-max_log_ratio, max_log_ratio, width=32), min_size=B, max_size=B),
                 label="log r")
    new = (old + np.array(log_r)).astype(np.float32).astype(np.float64)
    return new, old, _minibatch_ends(draw, B, "minibatch size")


def critic_batches(*, max_samples: int = 12, magnitude: float = 100.0):
    """``(values, returns)``: 2..max_samples values and returns (an offset plus a spread; returns never all equal)."""
    return _critic_batches(_positive_int("max_samples", max_samples), _magnitude(magnitude))


@st.composite
def _critic_batches(draw, max_samples, magnitude):
    B = draw(st.integers(2, max(2, max_samples)), label="B")
    offset = draw(_floats(magnitude), label="offset")
    returns = offset + np.array(draw(st.lists(st.floats(-10.0, 10.0, width=32), min_size=B, max_size=B), label="returns - offset"))
    if np.all(returns == returns[0]):
        returns[-1] += 1.0
    noise = np.array(draw(st.lists(st.floats(-10.0, 10.0, width=32), min_size=B, max_size=B), label="values - returns"))
    scale = draw(st.sampled_from([0.0, 0.1, 1.0, 3.0]), label="critic error scale")
    values = returns + scale * noise
    return values.astype(np.float32).astype(np.float64), returns.astype(np.float32).astype(np.float64)


def sampled_categoricals(*, samples: int = 16, max_outcomes: int = 5):
    """``(counts, logits)``: counts of 2..max_outcomes outcomes (each >= 1) summing to ``samples``, the sampler's
    draws in its exact proportions, and the other distribution's logits in [-4, 4]."""
    samples, max_outcomes = _positive_int("samples", samples), _positive_int("max_outcomes", max_outcomes)
    if not 2 <= max_outcomes <= samples:
        raise InvalidArgument(f"need 2 <= max_outcomes={max_outcomes} <= samples={samples}")
    return _sampled_categoricals(samples, max_outcomes)


@st.composite
def _sampled_categoricals(draw, samples, max_outcomes):
    n = draw(st.integers(2, max_outcomes), label="outcomes")
    cuts = sorted(draw(st.lists(st.integers(1, samples - 1), min_size=n - 1, max_size=n - 1, unique=True), label="cuts"))
    counts = np.diff([0] + cuts + [samples])
    logits = np.array(draw(st.lists(st.floats(-4.0, 4.0, width=32), min_size=n, max_size=n), label="logits"))
    return counts, logits


def logit_batches(*, max_samples: int = 8, max_actions: int = 6):
    """``(logits, minibatch_end)``: 1..max_samples rows of 1..max_actions logits in [-20, 20] (sometimes -1000:
    a saturated action), cut into minibatches of a drawn size (the last one smaller)."""
    return _logit_batches(_positive_int("max_samples", max_samples), _positive_int("max_actions", max_actions))


@st.composite
def _logit_batches(draw, max_samples, max_actions):
    B = draw(st.integers(1, max_samples), label="B")
    A = draw(st.integers(1, max_actions), label="A")
    logits = _matrix(draw, B, A, st.sampled_from([-1000.0]) | st.floats(-20.0, 20.0, width=32), "logits")
    return logits, _minibatch_ends(draw, B, "minibatch size")
