"""Built-in adapter ``rlax``: DeepMind's rlax 0.1.9 on JAX (CPU, x64), through its real functions.

    rlspec check --candidate rlax                                    # the calls below
    rlspec check --candidate rlax:stream_truncation_as_termination   # a VARIANT

JAX runs with ``jax_enable_x64`` (set when this adapter loads) so float64 inputs stay float64;
float32 inputs stay float32.

- ``gae``: ``rlax.truncated_generalized_advantage_estimation(r_t, discount_t, lambda_, values)``.
  rlax's GAE is "truncated" in its own sense: a trajectory cut after its last step and bootstrapped
  from ``values[-1]``, with termination expressed as ``discount_t = 0``. It has no truncation flag
  and no next-value input, and its inputs must be rank 1. So every episode segment of the rollout
  (ending at a termination, a truncation or the rollout's end) becomes one such trajectory, its
  values followed by its own bootstrap ``next_values[end]`` (V of the final observation), with
  ``discount = gamma * (1 - terminated)``. The segments are padded to one length with steps whose
  TD error is exactly 0 (reward 0, discount 1, value = the bootstrap value), and ``jax.vmap`` runs
  them in one call. (Feeding the whole rollout as one stream cannot express a truncation: with
  ``discount = 0`` it is a termination -- the variant below -- and with ``discount = gamma`` the
  trace and the bootstrap run into the next episode.)
- ``ppo_clip_loss``: ``rlax.clipped_surrogate_pg_loss(prob_ratios_t, adv_t, epsilon)`` with the ratio
  built in log space, ``exp(logp_new - logp_old)``, as rlax's users must (the function takes
  ratios). Its value and ``jax.vjp`` gradient are handed to torch through an autograd function,
  so the suite differentiates rlax's own gradient.
- ``diag_gaussian_log_prob`` / ``diag_gaussian_entropy``: ``rlax.gaussian_diagonal()``.
- ``tanh_gaussian_log_prob`` / ``scaled_tanh_gaussian_log_prob``: the distribution ``rlax.squashed_gaussian`` builds,
  ``distrax.Transformed(MultivariateNormalDiag(loc, scale), Block(Tanh(), 1))``, scoring
  ``tanh(u)`` (distrax inverts it with atanh). rlax's own wrapper also squashes its parameters
  (``loc = tanh(mu)``, a bounded scale) and deprecates itself in favour of this distrax form, which
  takes the mean and scale as given; the variant ``squashed_gaussian`` drives the wrapper itself.

rlax has no advantage normalisation, value-loss clipping, per-sample KL estimators or natural
gradient code: those operations are not provided. Declared deviations: ``rlax.xfail``.
"""

from __future__ import annotations

from importlib.metadata import version as _version
from types import SimpleNamespace

import jax

jax.config.update("jax_enable_x64", True)  # exact comparisons in float64 (JAX defaults to float32)

import distrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import rlax  # noqa: E402
import torch  # noqa: E402

RLSPEC_ARRAY = "numpy"  # rlax's functions take jax arrays; the adapter converts per segment
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "rlax",
    "range": ">=0.1.5",
    "why": "provisional",
}
# the installed distributions' versions (an rlax release without __version__ must not read as another one)
RLSPEC_VERSION = f"rlax {_version('rlax')}, jax {jax.__version__}, distrax {_version('distrax')}"
RLSPEC_CONVENTIONS = {"dual_clip": None}  # clipped_surrogate_pg_loss has a symmetric clip, no dual clip

_vmapped_gae = jax.jit(jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(0, 0, None, 0)))


# ---------------------------------------------------------------------------------------------
# gae


def _segments(end: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each episode segment of one column: it stops after an end or at T."""
    stops = list(np.flatnonzero(end[:-1]) + 1) + [len(end)]
    return list(zip([0] + stops[:-1], stops))


def _bucket(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    column = lambda x: x[:, None] if x.ndim == 1 else x
    r, v, nv, term, trunc = (column(np.asarray(x)) for x in (rewards, values, next_values, terminated, truncated))
    T, N = r.shape
    pieces = [(j, a, b) for j in range(N) for a, b in _segments(term[:, j] | trunc[:, j])]
    # Shapes rounded up to powers of two: JAX compiles once per shape, not once per rollout.
    width, rows = _bucket(max(b - a for _, a, b in pieces)), _bucket(len(pieces))
    dtype = r.dtype
    # padding: reward 0, discount 1, value = the bootstrap value -> TD error exactly 0 after the end
    # (spare rows: all zeros, discarded)
    rows_r = np.zeros((rows, width), dtype)
    rows_discount = np.ones((rows, width), dtype)
    rows_values = np.zeros((rows, width + 1), dtype)
    for i, (j, a, b) in enumerate(pieces):
        n = b - a
        rows_r[i, :n] = r[a:b, j]
        rows_discount[i, :n] = gamma * (1.0 - term[a:b, j].astype(dtype))  # terminated: no bootstrap, trace cut
        rows_values[i, :n] = v[a:b, j]
        rows_values[i, n:] = nv[b - 1, j]  # V(final observation): the segment's bootstrap value
    advantage = np.asarray(_vmapped_gae(jnp.asarray(rows_r), jnp.asarray(rows_discount), jnp.asarray(lam, dtype),
                                        jnp.asarray(rows_values)))
    out = np.empty((T, N), dtype=advantage.dtype)
    for i, (j, a, b) in enumerate(pieces):
        out[a:b, j] = advantage[i, : b - a]
    returns = out + v
    return (out[:, 0], returns[:, 0]) if rewards.ndim == 1 else (out, returns)


def _stream_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Each column as one rlax stream: values V(s_0..s_{T-1}) then V(s_T); every episode end is
    ``discount = 0``, so a truncation is treated as a termination."""
    column = lambda x: x[:, None] if x.ndim == 1 else x
    r, v, nv, term, trunc = (column(np.asarray(x)) for x in (rewards, values, next_values, terminated, truncated))
    discount = gamma * (1.0 - (term | trunc).astype(r.dtype))
    stream = np.concatenate([v, nv[-1:]], axis=0)
    advantage = np.asarray(_vmapped_gae(jnp.asarray(r.T), jnp.asarray(discount.T), jnp.asarray(lam, r.dtype),
                                        jnp.asarray(stream.T))).T
    returns = advantage + v
    return (advantage[:, 0], returns[:, 0]) if rewards.ndim == 1 else (advantage, returns)


# ---------------------------------------------------------------------------------------------
# the clipped surrogate, differentiated by JAX


def _surrogate(logp_new, logp_old, advantages, epsilon):
    ratios = jnp.exp(logp_new - logp_old)  # log space: exp(-1000) / exp(-1000.1) would be 0 / 0
    return rlax.clipped_surrogate_pg_loss(ratios, advantages, epsilon)


_loss_and_gradient = jax.jit(jax.value_and_grad(_surrogate))  # one compile per batch size


class _JaxLoss(torch.autograd.Function):
    """rlax's loss as a torch scalar whose backward is rlax's gradient (``jax.value_and_grad``)."""

    @staticmethod
    def forward(ctx, logp_new, logp_old, advantages, epsilon):
        to_jax = lambda t: jnp.asarray(t.detach().cpu().numpy())
        loss, gradient = _loss_and_gradient(to_jax(logp_new), to_jax(logp_old), to_jax(advantages), epsilon)
        ctx.save_for_backward(torch.as_tensor(np.asarray(gradient), dtype=logp_new.dtype))
        return torch.as_tensor(np.asarray(loss))

    @staticmethod
    def backward(ctx, grad_output):
        (gradient,) = ctx.saved_tensors
        return grad_output * gradient, None, None, None


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    return _JaxLoss.apply(logp_new, logp_old, advantages, float(clip_eps))


# ---------------------------------------------------------------------------------------------
# squashed Gaussian


def _gaussian_diagonal():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # rlax points to distrax, which it calls
        return rlax.gaussian_diagonal()


def _squashed(mean, log_std, bijector):
    return distrax.Transformed(distrax.MultivariateNormalDiag(loc=mean, scale_diag=jnp.exp(log_std)),
                               distrax.Block(bijector, ndims=1))


def _scaled_tanh(low, high):
    """The bijector rlax.squashed_gaussian builds for an action_spec: low + (high - low)(1 + tanh) / 2."""
    return distrax.Chain([distrax.ScalarAffine(shift=low, scale=0.5 * (high - low)), distrax.ScalarAffine(shift=1.0),
                          distrax.Tanh()])


# Compiled once per input shape: run op by op, distrax is about ten times slower here.
_diag_log_prob = jax.jit(lambda mean, log_std, action: _gaussian_diagonal().logprob(action, mean, jnp.exp(log_std)))
_diag_entropy = jax.jit(lambda log_std: _gaussian_diagonal().entropy(jnp.zeros_like(log_std), jnp.exp(log_std)))
_tanh_log_prob = jax.jit(lambda mean, log_std, u: _squashed(mean, log_std, distrax.Tanh()).log_prob(jnp.tanh(u)))
_scaled_tanh_log_prob = jax.jit(
    lambda mean, log_std, u, low, high: _squashed(mean, log_std, _scaled_tanh(low, high)).log_prob(
        low + 0.5 * (high - low) * (jnp.tanh(u) + 1.0)))


def _jax(*arrays):
    return (jnp.asarray(np.asarray(x)) for x in arrays)


def diag_gaussian_log_prob(mean, log_std, action):
    """``rlax.gaussian_diagonal().logprob`` (a distrax MultivariateNormalDiag)."""
    return np.asarray(_diag_log_prob(*_jax(mean, log_std, action)))


def diag_gaussian_entropy(log_std):
    return np.asarray(_diag_entropy(*_jax(log_std)))


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    return np.asarray(_tanh_log_prob(*_jax(mean, log_std, pre_tanh)))


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    return np.asarray(_scaled_tanh_log_prob(*_jax(mean, log_std, pre_tanh, low, high)))


def _wrapper_tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """``rlax.squashed_gaussian().logprob``: its loc is tanh(mu), so mu = atanh(mean) (|mean| < 1
    only); its scale is exp(sigma_min + (sigma_max - sigma_min)(tanh(sigma) + 1) / 2), which is
    exactly exp(log_std) with sigma_min = log_std and sigma = -inf."""
    mean, log_std, u = (np.asarray(x) for x in (mean, log_std, pre_tanh))
    if np.any(np.abs(mean) >= 1):
        raise ValueError("rlax.squashed_gaussian squashes its mean with tanh: a mean outside (-1, 1) has no mu")
    family = rlax.squashed_gaussian(sigma_min=jnp.asarray(log_std), sigma_max=jnp.asarray(log_std + 1.0))
    sigma = jnp.full(log_std.shape, -jnp.inf, dtype=log_std.dtype)
    return np.asarray(family.logprob(jnp.tanh(jnp.asarray(u)), jnp.arctanh(jnp.asarray(mean)), sigma, None))


# ---------------------------------------------------------------------------------------------
# variants: --candidate rlax:NAME

stream_truncation_as_termination = SimpleNamespace(
    __doc__="The rollout as one rlax stream per column with discount 0 at every episode end.",
    gae=_stream_gae,
)
squashed_gaussian = SimpleNamespace(
    __doc__="rlax.squashed_gaussian's own logprob (loc = tanh(mu), bounded scale).",
    tanh_gaussian_log_prob=_wrapper_tanh_gaussian_log_prob,
)

# Variants worth a column in the conformance matrix. (``squashed_gaussian`` is not one: it cannot
# take a mean outside (-1, 1) at all, so most Gaussian clauses would only report that.)
VARIANTS = ("stream_truncation_as_termination",)
