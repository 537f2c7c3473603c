"""Public Hypothesis strategies for the protocol's inputs, one module per chapter, re-exported here.

Small composable functions with keyword-only arguments that validate them (``InvalidArgument``), in
the style of ``hypothesis.extra.numpy``. Every array they produce is exactly representable in the
requested ``dtype`` (held as float64, so the suite's oracles see the same numbers the candidate does);
:func:`rounded` is that rounding. The clause checks draw from these and nothing else, so a library can
reuse them in its own tests:

>>> from hypothesis import given
>>> from rlspec.checks.kit.strategies import rollouts
>>> @given(rollouts(n_envs=2, min_episode_ends=1))
... def test_my_gae(rollout):
...     advantages, returns = my_gae(**rollout.arguments())
"""

from .base import (
    discounts, finite_floats, flag_arrays, float32_arrays, float_lists, flush, normal_floats, real_arrays, reals, rounded,
    trace_factors,
)
from .returns import BOTH, NONE, TERMINATED, TRUNCATED, Rollout, episode_ends, episodes, rollouts
