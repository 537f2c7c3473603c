"""Built-in adapter ``openrlhf``: OpenRLHF (written against 0.11.2) through its real code.

    .ci/install/openrlhf.sh PYTHON CONSTRAINTS     # the library needs --no-deps (below)
    rlspec check --candidate openrlhf

Loading (``load_openrlhf``). ``import openrlhf.models`` cannot succeed on a machine without CUDA:
``openrlhf/models/__init__.py`` imports ``Actor``, which imports ``ring_attn_utils``, which imports
``flash_attn``, a CUDA-only build (and ``openrlhf/trainer/ray/__init__.py`` imports vLLM). The math
lives in three files whose own imports are harmless: ``models/utils.py``, ``models/loss.py`` and
``trainer/ppo_utils/experience_maker.py``. The adapter therefore

1. finds the installed ``openrlhf`` with the normal import machinery (``importlib.util.find_spec``);
2. registers ``openrlhf.models`` and ``openrlhf.trainer.ray`` in ``sys.modules`` as *bare* packages:
   module objects made from their real specs (same ``__path__``, same files) whose ``__init__`` is
   not executed. A package that is already imported (say, on a GPU machine where the normal import
   works) is used as it is;
3. puts one stub in ``sys.modules``: ``openrlhf.trainer.ray.launcher`` with an empty
   ``RayActorGroup`` class, the only name ``experience_maker`` takes from it (for type annotations
   of the Ray actor groups its ``__init__`` receives; nothing the adapter calls touches it);
4. imports ``openrlhf.models.utils``, ``openrlhf.models.loss`` and
   ``openrlhf.trainer.ppo_utils.experience_maker`` with ``importlib.import_module``: Python's own
   loader executes the unmodified installed files (their other imports, deepspeed, ray,
   transformers, are real);
5. removes the stub and the bare packages it added from ``sys.modules`` again (the loaded modules
   keep what they imported), so nothing later in the process sees a fake ``openrlhf.models``.

No file of the installed library is read by hand, patched or written (bytecode writing is off while
loading). ``RLSPEC_VERSION`` carries the version (the same on every machine, for the matrix);
``OPENRLHF_ROOT`` the directory the files came from.

What each operation drives (paths in ``site-packages/openrlhf``):

- ``token_gae``: ``RemoteExperienceMaker.get_advantages_and_returns(values, rewards, action_mask,
  gamma, lambd)`` (trainer/ppo_utils/experience_maker.py), called unbound (``self`` is unused). It
  multiplies values and rewards by the mask and runs the recursion over every position: padding on
  either side is harmless, but an interior masked span becomes steps with r = V = 0, which corrupts
  the real tokens before it (RLHF-GAE-INTERIOR-MASK-SKIPPED stays red; docs/bugs-found.md).
- ``gae`` (time-major): each column is cut into its episodes, one right-padded row each, and the
  same function runs on the rows. OpenRLHF has no bootstrap input (a row ends terminal), so a
  truncated episode and the rollout's last unfinished one get ``gamma * next_values[t]`` folded into
  their last reward (checks/adapters/_rows.py).
- ``assemble_rewards``: ``models/utils.py`` ``compute_reward(r, kl_coef, kl, action_mask)``.
- ``group_advantages``: the group estimators inside ``RemoteExperienceMaker.
  compute_advantages_and_returns`` (the smallest function that holds that math), on an instance
  made without ``__init__`` (which wants Ray actor groups) carrying the ``strategy.args`` the method
  reads, a real ``FixedKLController(0)`` and one real ``Experience`` whose samples are one-token
  responses (reward = score, KL 0): "grpo" -> ``group_norm``, "rloo" -> ``rloo``, "mean" ->
  ``dr_grpo`` (``reinforce_baseline`` is the same subtraction followed by batch whitening). The
  groups are passed as OpenRLHF tracks them: ``Experience.index``, the sample's position in prompt
  order (prompt p, sample k -> p * n + k), so ids in any order work. OpenRLHF reshapes to
  ``(prompts, n_samples_per_prompt)``: groups of different sizes cannot be expressed and raise, as
  does n = 1 (its CLI asserts ``n_samples_per_prompt > 1`` for these estimators); NaN scores are not
  a concept there (they enter the group statistics).
- ``normalize_advantages``: the same method with estimator ``reinforce`` (returns = the one-token
  rewards, then whitening across the batch): mean over tokens, biased variance,
  ``var.clamp(min=1e-8).rsqrt()``, i.e. ``(A - mean) / max(std, 1e-4)`` with ddof 0; the mean and
  the variance are computed in float32 (``torch.cat(...).float()``).
- ``aggregate_loss``: ``models/loss.py`` ``aggregate_loss``: "token-mean" is ``token_level_loss=
  True`` (``batch_num_tokens = num_tokens``, ``dp_size = 1``; None: the masked mean),
  "seq-mean-token-mean" is ``token_level_loss=False`` (rows' sums / (n_b + 1e-8), mean over the rows
  that have tokens). OpenRLHF has no "seq-mean-token-sum" or "seq-mean-token-sum-norm" mode
  (``--actor.loss_agg_mode`` offers the two above): those raise ``NotImplementedError`` naming the
  modes it has, and ``aggregate_loss_modes`` declares the two, so the clauses judge those only.
- ``token_ppo_loss``: ``PolicyLoss(clip_eps_low, clip_eps_high, dual_clip)`` forward with the
  token-level aggregation made a sum: ``batch_num_tokens = 1``, ``dp_size = 1`` gives
  ``(loss * mask).sum() / 1 * 1``. Its log-ratio clamp to [-20, 20] is declared
  (``log_ratio_clamp``).
- ``ppo_clip_loss``, ``ppo_value_loss``: ``PolicyLoss`` and ``ValueLoss`` on one row with every
  token real (token mean = the mean over samples). ``ValueLoss`` returns ``0.5 *`` the aggregate.
- ``kl_penalty``: ``models/utils.py`` ``compute_approx_kl(log_probs, log_probs_base, log_probs_old,
  kl_estimator, unbiased_gradient)``: k1/k2/k3 with ``unbiased_gradient=False``, and the "+" kinds
  with ``unbiased_gradient=True`` (forward value of the estimator, gradient of ``w * k2`` with the
  detached IS weight ``w = exp(logp - logp_old)`` clipped at ``KL_IS_WEIGHT_CLIP = 10``).
  ``kl_estimate``: the same function with ``log_probs`` = the sampler (``kl_estimate_arguments``
  "sampler, other"). Every estimate is clamped to [-10, 10] and k3's log ratio at -10: defects the
  extreme-ratio clauses catch (docs/bugs-found.md).

Precision: ``compute_approx_kl`` casts to float32 whatever it is given, and OpenRLHF's experience
tensors (log-probs, values, rewards) are float32, and advantage whitening computes its mean and
variance in float32 (``.float()``); the adapter declares ``RLSPEC_PRECISION = "float32"``: the suite
judges it by float32 error bounds. Deliberate deviations are listed in ``openrlhf.xfail``; defects
stay red (docs/bugs-found.md).

Loading takes a while: ``import deepspeed`` (models/utils.py) costs 15-30 s on a small CPU machine
(rlspec's workers give importing a candidate at least 120 s).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import sys
import types
from importlib.metadata import version as _distribution_version
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ._rows import episode_rows

WRITTEN_AGAINST = "0.11.2"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "openrlhf",
    "range": ">=0.11.0",
    "why": "provisional",
}

# packages whose __init__ cannot run without CUDA-only or serving dependencies (flash-attn, vLLM)
_BARE_PACKAGES = ("openrlhf.models", "openrlhf.trainer.ray")
_STUB = "openrlhf.trainer.ray.launcher"  # experience_maker: `from ... import RayActorGroup` (annotations only)
_MODULES = ("openrlhf.models.utils", "openrlhf.models.loss", "openrlhf.trainer.ppo_utils.experience_maker")


def load_openrlhf() -> SimpleNamespace:
    """The three math modules of the installed OpenRLHF, executed unmodified (see the docstring)."""
    if importlib.util.find_spec("openrlhf") is None:
        raise ModuleNotFoundError("No module named 'openrlhf' (install it with .ci/install/openrlhf.sh)")
    added: list[str] = []
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        for name in _BARE_PACKAGES:
            if name in sys.modules:
                continue
            spec = importlib.util.find_spec(name)  # imports the parents (their __init__ are harmless)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"{name} is not a package in this OpenRLHF installation")
            package = importlib.util.module_from_spec(spec)  # __path__, __file__, __spec__ set; __init__ not run
            sys.modules[name] = package
            added.append(name)
        if _STUB not in sys.modules:
            stub = types.ModuleType(_STUB, "rlspec stub: RayActorGroup for experience_maker's annotations")
            stub.RayActorGroup = type("RayActorGroup", (), {"__module__": _STUB})
            sys.modules[_STUB] = stub
            added.append(_STUB)
        modules = [importlib.import_module(name) for name in _MODULES]
    finally:
        sys.dont_write_bytecode = writes_bytecode
        for name in reversed(added):
            sys.modules.pop(name, None)
            parent, _, child = name.rpartition(".")
            if getattr(sys.modules.get(parent), child, None) is not None:
                delattr(sys.modules[parent], child)
    utils, loss, maker = modules
    from openrlhf.trainer.ppo_utils.experience import Experience
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    return SimpleNamespace(utils=utils, loss=loss, maker=maker, Experience=Experience, FixedKLController=FixedKLController)


_orl = load_openrlhf()
OPENRLHF_ROOT = Path(_orl.utils.__file__).resolve().parents[1]  # where the three files came from
RLSPEC_VERSION = f"openrlhf {_distribution_version('openrlhf')}"
RLSPEC_ARRAY = "torch"
RLSPEC_PRECISION = "float32"  # compute_approx_kl casts to float32; OpenRLHF's experience tensors are float32
RLSPEC_CONVENTIONS = {
    # token_ppo_loss / ppo_clip_loss: PolicyLoss.forward, models/loss.py (ratio = exp(clamp(log r, -20, 20)))
    "log_ratio_clamp": 20.0,
    "dual_clip": None,  # --actor.dual_clip defaults to None (the protocol's token_ppo_loss passes its own)
    # aggregate_loss: token_level_loss=False divides each row's sum by token_counts + 1e-8 (with OpenRLHF's bool
    # action_mask the count is int64 and the sum float32, where n + 1e-8 rounds to n)
    "seq_mean_token_mean_eps": 1e-8,
    "aggregate_loss_modes": ("token-mean", "seq-mean-token-mean"),  # the clauses judge these; the others raise
    # ppo_value_loss: ValueLoss returns 0.5 * aggregate_loss(max(clipped, unclipped squared errors))
    "value_loss_factor": 0.5,
    # normalize_advantages: compute_advantages_and_returns, (A - mean) * var.clamp(min=1e-8).rsqrt(), biased var
    "advantage_std_ddof": 0,
    "advantage_eps": 1e-4,  # sqrt of the variance floor 1e-8: the std is floored at 1e-4
    "advantage_eps_form": "clamp",
    "advantage_normalization": "batch",  # across every experience of the rollout
    # group_advantages: group_norm (r - mean) / (torch.std + 1e-9), unbiased
    "group_std_ddof": 1,
    "group_std_eps": 1e-9,
    # group_singleton / group_unscorable: not declared: n_samples_per_prompt > 1 is asserted by the CLI and a
    # reward is always a number in OpenRLHF (see openrlhf.xfail)
    # kl_penalty: the "+" kinds (unbiased_gradient=True) importance-weight the gradient by exp(logp - logp_old),
    # clipped at KL_IS_WEIGHT_CLIP = 10
    "kl_penalty_off_policy": "importance-weighted",
    # kl_is_weight_clip: 10.0
    # kl_estimate: compute_approx_kl(log_probs=sampler, log_probs_base=other)
    "kl_estimate_arguments": "sampler, other",
    # facts about the library that no clause judges (not conventions):
    # kl_estimate_clamp: (-10.0, 10.0) (every estimator, after k3's log-ratio clamp at min -10)
    # kl_dtype: "float32"
}


@contextlib.contextmanager
def _quiet():
    """OpenRLHF's loggers (e.g. 'gamma is set to 1.0') write to stderr: silence them for the call."""
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.WARNING))
    try:
        yield
    finally:
        logging.disable(previous)


def _tensor(x, dtype=None) -> torch.Tensor:
    x = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return x.to(dtype) if dtype is not None else x


def _mask(mask) -> torch.Tensor:
    return _tensor(mask).to(torch.bool)


# ---------------------------------------------------------------------------------------------
# GAE over response rows


def _gae_rows(values, rewards, mask, gamma, lam):
    return _orl.maker.RemoteExperienceMaker.get_advantages_and_returns(None, values, rewards, mask, gamma, lam)


def token_gae(rewards, values, mask, gamma, lam):
    rewards, values = _tensor(rewards), _tensor(values)
    advantages, returns = _gae_rows(values, rewards, _mask(mask), float(gamma), float(lam))
    return advantages, returns


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Time-major (T,) or (T, N) -> one right-padded row per episode; bootstraps folded into the last reward."""
    rows = episode_rows(rewards, values, next_values, terminated, truncated, gamma)
    row_advantages, _ = _gae_rows(rows.values, rows.rewards, rows.mask, float(gamma), float(lam))
    advantages = rows.scatter(row_advantages)
    return advantages, advantages + _tensor(values)


def assemble_rewards(scores, kl, mask, kl_coef):
    return _orl.utils.compute_reward(_tensor(scores), float(kl_coef), _tensor(kl), action_mask=_mask(mask))


# ---------------------------------------------------------------------------------------------
# group estimators and whitening: RemoteExperienceMaker.compute_advantages_and_returns

_ESTIMATORS = {"grpo": "group_norm", "rloo": "rloo", "mean": "dr_grpo"}


def _advantages_of_one_token_responses(scores: torch.Tensor, index: list[int], estimator: str, n: int) -> torch.Tensor:
    """compute_advantages_and_returns on samples that are one-token responses with reward = score:
    the per-sample advantage it computes (the estimator's and whitening's math, nothing else)."""
    args = SimpleNamespace(
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator=estimator, gamma=1.0, lambd=1.0, no_std_norm=False)),
        rollout=SimpleNamespace(n_samples_per_prompt=n),
        reward=SimpleNamespace(clip_range=None, overlong_buffer_len=None, stop_properly_penalty_coef=None),
    )
    maker = object.__new__(_orl.maker.RemoteExperienceMaker)  # __init__ wants Ray actor groups
    maker.strategy = SimpleNamespace(args=args)
    maker.advantage_estimator = estimator
    maker.kl_ctl = _orl.FixedKLController(0.0)
    N = len(scores)
    experience = _orl.Experience(
        action_mask=torch.ones(N, 1, dtype=torch.bool),
        values=torch.zeros(N, 1, dtype=scores.dtype),
        kl=torch.zeros(N, 1, dtype=scores.dtype),
        rewards=scores.clone(),
        index=list(index),
    )
    with _quiet():
        (experience,) = maker.compute_advantages_and_returns([experience])
    return experience.advantages[:, 0]


def group_advantages(scores, groups, kind):
    if kind not in _ESTIMATORS:
        raise ValueError(f"kind must be one of {sorted(_ESTIMATORS)}, not {kind!r}")
    estimator = _ESTIMATORS[kind]
    scores = _tensor(scores)
    ids = np.asarray(groups.detach().cpu().numpy() if isinstance(groups, torch.Tensor) else groups).tolist()
    members: dict = {}
    for i, g in enumerate(ids):
        members.setdefault(g, []).append(i)  # prompts in order of first appearance
    if min(len(m) for m in members.values()) < 2:
        raise ValueError(f"{estimator} requires n_samples_per_prompt > 1 (OpenRLHF's CLI asserts it): a group has one sample")
    advantages = torch.zeros_like(scores)
    # one rollout batch per group size n (n_samples_per_prompt is fixed within a batch; the estimators
    # act on each group's own rewards, so the batches do not interact)
    for n in sorted({len(m) for m in members.values()}):
        prompts = [m for m in members.values() if len(m) == n]
        samples = [i for m in prompts for i in m]
        # Experience.index: each sample's position in prompt order (prompt p, sample k -> p * n + k),
        # while the experience holds the samples interleaved as the suite passed them
        samples.sort()
        position = {i: p * n + k for p, m in enumerate(prompts) for k, i in enumerate(m)}
        index = [position[i] for i in samples]
        advantages[samples] = _advantages_of_one_token_responses(scores[samples], index, estimator, n)
    return advantages


def normalize_advantages(advantages):
    advantages = _tensor(advantages)
    shape = advantages.shape
    flat = advantages.reshape(-1)
    whitened = _advantages_of_one_token_responses(flat, list(range(len(flat))), "reinforce", 1)
    return whitened.reshape(shape)


# ---------------------------------------------------------------------------------------------
# losses: models/loss.py

_MODES = {"token-mean": True, "seq-mean-token-mean": False}  # mode -> token_level_loss


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    if mode not in _MODES:
        raise NotImplementedError(
            f"OpenRLHF 0.11.2 has no {mode!r} aggregation: aggregate_loss offers token-mean (token_level_loss=True) and "
            "seq-mean-token-mean (token_level_loss=False)"
        )
    token_level = _MODES[mode]
    batch_num_tokens = float(num_tokens) if (token_level and num_tokens is not None) else None
    return _orl.loss.aggregate_loss(per_token_loss, _mask(mask), token_level_loss=token_level, dp_size=1,
                                    batch_num_tokens=batch_num_tokens)


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    policy_loss = _orl.loss.PolicyLoss(clip_eps_low=float(clip_low), clip_eps_high=float(clip_high),
                                       dual_clip=None if dual_clip is None else float(dual_clip))
    # token-level aggregation with a global token count of 1: (loss * mask).sum() / 1 * dp_size (1)
    loss, *_ = policy_loss(logp_new, logp_old, advantages, action_mask=_mask(mask), dp_size=1, batch_num_tokens=1)
    return loss


def _one_row(x):
    return x.reshape(1, -1)


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    mask = torch.ones(1, logp_new.numel(), dtype=torch.bool)
    loss, *_ = _orl.loss.PolicyLoss(clip_eps_low=float(clip_eps), clip_eps_high=float(clip_eps))(
        _one_row(logp_new), _one_row(logp_old), _one_row(advantages), action_mask=mask)
    return loss


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    clipped = old_values is not None and clip_eps is not None
    mask = torch.ones(1, values.numel(), dtype=torch.bool)
    value_loss = _orl.loss.ValueLoss(clip_eps=float(clip_eps) if clipped else None)
    old = _one_row(old_values) if clipped else _one_row(values).detach()  # ignored without clip_eps
    return value_loss(_one_row(values), old, _one_row(returns), action_mask=mask)


# ---------------------------------------------------------------------------------------------
# KL: models/utils.py compute_approx_kl


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    straight_through = kind.endswith("+")
    estimator = kind[:-1] if straight_through else kind
    return _orl.utils.compute_approx_kl(logp, logp_ref, log_probs_old=logp_old, kl_estimator=estimator,
                                        unbiased_gradient=straight_through)


def kl_estimate(logp_sampler, logp_other, kind):
    return _orl.utils.compute_approx_kl(_tensor(logp_sampler), _tensor(logp_other), kl_estimator=kind)
