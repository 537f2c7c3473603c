"""Built-in adapter ``torchrl``: TorchRL 0.14.1 with tensordict 0.14.3, through its real code paths.

    rlspec check --candidate torchrl                 # the recommended calls (below)
    rlspec check --candidate torchrl:vec_gae         # one of the VARIANTS, by attribute name

What each operation drives (paths in ``site-packages/torchrl``):

- ``gae``: ``objectives.value.functional.generalized_advantage_estimate`` (the loop), with
  ``done = terminated | truncated`` cutting the trace and ``terminated`` passed explicitly so that a
  truncation still bootstraps from ``next_state_value``. Inputs as TorchRL lays them out:
  ``[N, T, 1]``, time at dim -2.
- ``ppo_clip_loss``, ``ppo_value_loss``, ``ppo_entropy_loss``, ``normalize_advantages``: one real
  ``ClipPPOLoss.forward`` on a tensordict batch. The actor is a ``ProbabilisticTensorDictSequential``
  whose distribution scores the stored action with exactly the log-probability the suite asks for
  (``_GivenLogProb``), so ``d loss / d logp_new`` is the loss module's own gradient. The critic is an
  identity ``TensorDictModule`` returning the suite's values. ``normalize_advantages`` is read back
  from the gradient of a forward with ``normalize_advantage=True`` at ratio 1, where
  ``d loss / d logp_i = -A_norm_i / B``.
- ``kl_coefficient_update``: one real ``KLPENPPOLoss.forward`` whose two distributions differ by
  exactly the suite's KL (TorchRL's Monte Carlo KL path: ``log p_prev(x) - log p_cur(x)``), then
  the ``beta`` buffer the forward adapted.
- ``tanh_gaussian_log_prob`` / ``scaled_tanh_gaussian_log_prob``: ``modules.TanhNormal(mean,
  exp(log_std)[, low, high]).log_prob(action)``, the call ``ClipPPOLoss`` makes when it re-scores a
  stored action (TorchRL inverts the action through a clamped atanh); the variant
  ``tanh_exact_preimage`` scores the pre-tanh draw itself (``sample_and_log_prob``, as actors do at
  collection time).
- ``diag_gaussian_log_prob`` / ``diag_gaussian_entropy``: ``modules.IndependentNormal``.

Precision: TorchRL holds its coefficients as float32 tensors whatever the data's dtype -- GAE
multiplies ``gamma`` by an int32 mask (``gamma * (~terminated).int()``, functional.py:170), which is
float32, and the loss modules register ``clip_epsilon``, ``clip_value``, ``entropy_coeff``,
``critic_coeff`` and ``beta`` as float32 buffers. So results on float64 data carry float32 rounding
(measured: 6e-6 at T = 1e5, gamma = 0.99). The adapter declares ``RLSPEC_PRECISION = "float32"``:
the suite judges it by float32 error bounds.

Conventions (RLSPEC_CONVENTIONS): ``ppo_value_loss`` is ``ClipPPOLoss``'s default critic loss,
``loss_critic_type="smooth_l1"`` (Huber's loss with delta 1, not the squared error: ``torchrl.xfail``);
the variant ``l2_critic`` asks for ``"l2"``, ``F.mse_loss`` with no 0.5 factor;
advantage normalisation is ``(A - mean) / std.clamp_min(1e-6)`` with the unbiased std, skipped for a
single element; no dual clip; the KL penalty doubles / halves beta above 1.5 / below 1/1.5 of dtarg.

Deliberate deviations are listed in ``torchrl.xfail`` beside this file; the variants in
``VARIANTS`` exercise the other GAE paths (vectorised, ``terminated`` omitted, the ``GAE`` module).
"""

from __future__ import annotations

from types import SimpleNamespace

import tensordict
import torch
import torchrl
from tensordict import TensorDict
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential, TensorDictModule
from torch.distributions import Distribution
from torchrl.modules import IndependentNormal, TanhNormal
from torchrl.objectives import ClipPPOLoss, KLPENPPOLoss
from torchrl.objectives.value import GAE
from torchrl.objectives.value.functional import generalized_advantage_estimate, vec_generalized_advantage_estimate

RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"  # float32 coefficients whatever the data (see the module docstring)
RLSPEC_VERSION = f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}"
RLSPEC_CONVENTIONS = {
    "dual_clip": None,  # ClipPPOLoss has no dual clip
    # the default loss_critic_type="smooth_l1" is Huber's loss (torchrl.xfail); the l2_critic variant's
    # "l2" is F.mse_loss, no 0.5 (objectives/utils.py distance_loss)
    "value_loss_factor": 1.0,
    "advantage_std_ddof": 1,  # torchrl._utils._standardize: torch's unbiased std
    "advantage_eps": float(torch.finfo(torch.float).resolution),  # 1e-6, a clamp on the std
    "advantage_eps_form": "clamp",
    "kl_adaptive_factor": 2.0,  # KLPENPPOLoss: increment 2, decrement 0.5
    "kl_adaptive_threshold": 1.5,  # above 1.5 dtarg / below dtarg / 1.5
}


# ---------------------------------------------------------------------------------------------
# gae


def _batch_time(x: torch.Tensor) -> torch.Tensor:
    """Protocol (T,) or (T, N) -> TorchRL's [N, T, 1] (batch, time at -2, one feature)."""
    return (x[:, None] if x.ndim == 1 else x).transpose(0, 1).unsqueeze(-1)


def _time_major(x: torch.Tensor, ndim: int) -> torch.Tensor:
    """[N, T, 1] -> the protocol's (T,) or (T, N)."""
    x = x.squeeze(-1).transpose(0, 1)
    return x[:, 0] if ndim == 1 else x


def _functional_gae(function, pass_terminated: bool):
    def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
        terminated_ = _batch_time(terminated)
        done = terminated_ | _batch_time(truncated)  # the trace stops at every episode end
        extra = {"terminated": terminated_} if pass_terminated else {}  # omitted: TorchRL uses done
        advantage, value_target = function(
            gamma, lam, _batch_time(values), _batch_time(next_values), _batch_time(rewards), done, **extra
        )
        return _time_major(advantage, rewards.ndim), _time_major(value_target, rewards.ndim)

    gae.__doc__ = f"{function.__name__}, terminated {'passed' if pass_terminated else 'omitted (defaults to done)'}."
    return gae


gae = _functional_gae(generalized_advantage_estimate, pass_terminated=True)


def _module_gae(vectorized: bool | None):
    """The ``GAE`` value-estimator module on a [T, N] tensordict (time_dim=0), with a value network
    that reads V off the observation, so the module itself evaluates V(s_t) and V(s_{t+1})."""

    def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
        shape = rewards.shape if rewards.ndim == 2 else (rewards.shape[0], 1)
        column = lambda x: x.reshape(shape).unsqueeze(-1)  # [T, N, 1]
        value_network = TensorDictModule(lambda obs: obs, in_keys=["observation"], out_keys=["state_value"])
        estimator = GAE(gamma=gamma, lmbda=lam, value_network=value_network, vectorized=vectorized, time_dim=0)
        data = TensorDict(
            {
                "observation": column(values),
                "next": {
                    "observation": column(next_values),
                    "reward": column(rewards),
                    "done": column(terminated | truncated),
                    "terminated": column(terminated),
                },
            },
            batch_size=shape,
        )
        out = estimator(data)
        advantage, value_target = out["advantage"].squeeze(-1), out["value_target"].squeeze(-1)
        return (advantage, value_target) if rewards.ndim == 2 else (advantage[:, 0], value_target[:, 0])

    gae.__doc__ = f"GAE(vectorized={vectorized}, time_dim=0) module forward."
    return gae


# ---------------------------------------------------------------------------------------------
# a controlled policy for the loss modules


class _GivenLogProb(Distribution):
    """A policy distribution that gives every action the log-probability ``logp`` (and entropy
    ``entropy``): it lets the loss module's own forward run on exactly the suite's log-probs."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, logp, entropy=None):
        self.logp, self._entropy = logp, entropy
        super().__init__(batch_shape=logp.shape, validate_args=False)

    def log_prob(self, value):
        return self.logp.expand(value.shape)

    def sample(self, sample_shape=torch.Size()):
        return torch.zeros(torch.Size(sample_shape) + self.batch_shape, dtype=self.logp.dtype)

    def entropy(self):
        return self._entropy if self._entropy is not None else torch.zeros_like(self.logp)


def _actor() -> ProbabilisticTensorDictSequential:
    """Actor: ``logp_in`` / ``entropy_in`` -> distribution parameters -> ``_GivenLogProb``."""
    parameters = TensorDictModule(lambda lp, h: (lp, h), in_keys=["logp_in", "entropy_in"], out_keys=["logp", "entropy"])
    head = ProbabilisticTensorDictModule(in_keys=["logp", "entropy"], out_keys=["action"], distribution_class=_GivenLogProb)
    return ProbabilisticTensorDictSequential(parameters, head)


def _critic() -> TensorDictModule:
    return TensorDictModule(lambda v: v, in_keys=["value_in"], out_keys=["state_value"])


def _batch(logp_new, logp_old, advantages, *, entropy=None, values=None, returns=None, old_values=None) -> TensorDict:
    """One PPO minibatch as TorchRL's losses read it (batch [B]; advantage and values [B, 1])."""
    n = logp_new.shape[0]
    zeros = torch.zeros(n, dtype=logp_new.dtype, device=logp_new.device)
    data = {
        "logp_in": logp_new,
        "entropy_in": entropy if entropy is not None else zeros,
        "action": zeros,
        "action_log_prob": logp_old.detach(),
        "advantage": advantages.detach().unsqueeze(-1),
    }
    if values is not None:
        data["value_in"] = values.unsqueeze(-1)
        data["value_target"] = returns.detach().unsqueeze(-1)
    if old_values is not None:
        data["state_value"] = old_values.detach().unsqueeze(-1)  # V_old, read by the value clip
    return TensorDict(data, batch_size=[n])


# ---------------------------------------------------------------------------------------------
# PPO through ClipPPOLoss.forward


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    loss = ClipPPOLoss(_actor(), None, clip_epsilon=clip_eps, entropy_bonus=False, normalize_advantage=False)
    return loss(_batch(logp_new, logp_old, advantages))["loss_objective"]


def _value_loss(loss_critic_type: str | None):
    """ClipPPOLoss's critic term; ``loss_critic_type`` None: TorchRL's default (``"smooth_l1"``)."""
    options = {} if loss_critic_type is None else {"loss_critic_type": loss_critic_type}

    def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
        clipped = old_values is not None and clip_eps is not None
        loss = ClipPPOLoss(_actor(), _critic(), entropy_bonus=False, normalize_advantage=False, critic_coeff=1.0,
                           clip_value=float(clip_eps) if clipped else None, **options)
        zeros = torch.zeros_like(values).detach()
        batch = _batch(zeros, zeros, zeros, values=values, returns=returns, old_values=old_values if clipped else None)
        return loss(batch)["loss_critic"]

    return ppo_value_loss


ppo_value_loss = _value_loss(None)


def ppo_entropy_loss(entropy, coef):
    loss = ClipPPOLoss(_actor(), None, entropy_bonus=True, entropy_coeff=float(coef), normalize_advantage=False)
    zeros = torch.zeros_like(entropy).detach()
    return loss(_batch(zeros, zeros, zeros, entropy=entropy))["loss_entropy"]


def normalize_advantages(advantages):
    """ClipPPOLoss(normalize_advantage=True) at ratio 1: loss = -mean(A_norm), so A_norm = -B dloss/dlogp."""
    n = advantages.shape[0]
    logp = torch.zeros(n, dtype=advantages.dtype, requires_grad=True)
    loss = ClipPPOLoss(_actor(), None, entropy_bonus=False, normalize_advantage=True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(loss(_batch(logp, logp.detach(), advantages))["loss_objective"], logp)
    return -n * grad


# ---------------------------------------------------------------------------------------------
# KL penalty


def kl_coefficient_update(beta, kl, target):
    """One KLPENPPOLoss forward whose previous and current policies are exactly ``kl`` apart."""
    loss = KLPENPPOLoss(_actor(), None, beta=float(beta), dtarg=float(target), entropy_bonus=False)
    zero = torch.zeros(1, dtype=torch.float64)
    batch = _batch(zero, zero, zero)
    batch["logp"] = torch.full((1,), float(kl), dtype=torch.float64)  # the stored (previous) distribution
    batch["entropy"] = zero
    loss(batch)
    return loss.beta.detach().clone()


# ---------------------------------------------------------------------------------------------
# squashed Gaussian


def diag_gaussian_log_prob(mean, log_std, action):
    return IndependentNormal(mean, log_std.exp()).log_prob(action)  # tanh_loc=False: the mean as given


def diag_gaussian_entropy(log_std):
    return IndependentNormal(torch.zeros_like(log_std), log_std.exp()).entropy()


def tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    """TanhNormal(mean, exp(log_std)).log_prob(tanh(u)): TorchRL inverts the action back to u."""
    return TanhNormal(mean, log_std.exp()).log_prob(torch.tanh(pre_tanh))


def scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    """TanhNormal(mean, exp(log_std), low, high).log_prob(a), a = low + (high - low)(tanh(u) + 1)/2."""
    action = low + (high - low) * (torch.tanh(pre_tanh) + 1) / 2
    return TanhNormal(mean, log_std.exp(), low=low, high=high).log_prob(action)


def _scored_at_preimage(dist, u):
    """``sample_and_log_prob`` -- the collection-time path that scores the exact pre-tanh draw --
    with the draw fixed to ``u``."""
    dist.base_dist.sample = lambda sample_shape=torch.Size(): u
    return dist.sample_and_log_prob()[1]


def _preimage_tanh_gaussian_log_prob(mean, log_std, pre_tanh):
    return _scored_at_preimage(TanhNormal(mean, log_std.exp()), pre_tanh)


def _preimage_scaled_tanh_gaussian_log_prob(mean, log_std, pre_tanh, low, high):
    return _scored_at_preimage(TanhNormal(mean, log_std.exp(), low=low, high=high), pre_tanh)


# ---------------------------------------------------------------------------------------------
# the other GAE paths, each a candidate of its own: --candidate torchrl:NAME


def _variant(doc: str, **operations) -> SimpleNamespace:
    return SimpleNamespace(__doc__=doc, **operations)


vec_gae = _variant(
    "vec_generalized_advantage_estimate with terminated passed (the conv1d path).",
    gae=_functional_gae(vec_generalized_advantage_estimate, pass_terminated=True),
)
gae_without_terminated = _variant(
    "generalized_advantage_estimate with terminated omitted: TorchRL defaults it to done.",
    gae=_functional_gae(generalized_advantage_estimate, pass_terminated=False),
)
vec_gae_without_terminated = _variant(
    "vec_generalized_advantage_estimate with terminated omitted: TorchRL defaults it to done.",
    gae=_functional_gae(vec_generalized_advantage_estimate, pass_terminated=False),
)
gae_module = _variant("The GAE module with its default vectorized=None (runs the loop).", gae=_module_gae(None))
gae_module_vectorized = _variant("The GAE module with vectorized=True.", gae=_module_gae(True))

tanh_exact_preimage = _variant(
    "TanhNormal.sample_and_log_prob (scores the stored pre-tanh draw; the draw fixed to u).",
    tanh_gaussian_log_prob=_preimage_tanh_gaussian_log_prob,
    scaled_tanh_gaussian_log_prob=_preimage_scaled_tanh_gaussian_log_prob,
)

l2_critic = _variant(
    "ClipPPOLoss(loss_critic_type='l2'): the squared-error critic loss (F.mse_loss, no 0.5) instead of the default "
    "smooth L1.",
    ppo_value_loss=_value_loss("l2"),
)

VARIANTS = ("l2_critic", "tanh_exact_preimage", "vec_gae", "gae_without_terminated", "vec_gae_without_terminated", "gae_module", "gae_module_vectorized")
