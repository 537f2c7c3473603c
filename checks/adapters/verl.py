"""Built-in adapter ``verl``: verl (written against 0.9.1) through its real code paths.

    .ci/install/verl.sh PYTHON CONSTRAINTS     # verl itself needs --no-deps (see the script)
    rlspec check --candidate verl
    rlspec check --candidate verl:whitened     # token_gae returning verl's advantages as they are
    rlspec check --candidate verl:vectorized   # group_advantages through the vectorised estimators

Nothing of verl is copied, patched or re-implemented: every operation calls verl's own functions on
tensors laid out as verl lays them out (paths in ``site-packages/verl``).

- ``token_gae``: ``trainer/ppo/core_algos.py`` ``compute_gae_advantage_return(token_level_rewards,
  values, response_mask, gamma, lam)``. verl's rows are the protocol's rows (one response each, no
  bootstrap after the last token; masked positions are carried through, i.e. skipped). The function
  returns **whitened** advantages (``masked_whiten`` over the whole batch, unbiased variance,
  ``rsqrt(var + 1e-8)``) next to raw returns. The protocol's operation is the raw advantage, so the
  adapter returns ``returns - values`` (raw: ``returns = A_raw + values`` inside verl), and verl's
  returns. The whitening is not hidden: variant ``verl:whitened`` returns verl's advantages as they
  come out and fails every clause that reads them (the known-answer rows, rows equal GAE, rows
  independent, returns = advantages + values). Because the whitening runs inside the function, a
  batch with fewer than two real tokens raises ``ValueError`` ("The sum of the mask is one"): the
  variant shows that too, while the raw candidate appends two all-real rows of zeros to every call
  and drops them after (verl's recursion is vectorised over rows, so they touch no other row; they
  only keep the whitening, whose output the raw candidate does not read, from raising).
- ``gae`` (time-major, the classic chapter): each column is cut into episode segments at
  ``terminated | truncated`` and at the rollout's end, one right-padded row each (mask 0 after the
  segment). verl has no done, truncation or bootstrap input: a segment that was not terminated
  (truncated, or the rollout's last) gets ``gamma * next_values[t]`` folded into its last reward
  (checks/adapters/_rows.py). Raw advantages as for ``token_gae``.
- ``assemble_rewards``: verl's two real steps on a controlled ``DataProto``:
  ``experimental/reward_loop/reward_manager/base.py`` ``RewardManagerBase.assemble_rm_scores``
  (0.9.1's default reward loop: the score at ``valid_response_length - 1``, where
  ``valid_response_length`` counts the response's attention mask), then ``trainer/ppo/ray_trainer.py``
  ``apply_kl_penalty`` with a real ``FixedKLController(kl_coef)`` (``token_level_rewards =
  token_level_scores - beta * kl_penalty(old_log_probs, ref_log_prob, "kl") * response_mask``). The
  suite's per-token ``kl`` enters as ``old_log_probs = kl``, ``ref_log_prob = 0`` (k1 of that pair is
  ``kl`` exactly). Layout: verl's responses are right-padded by construction (the prompt is
  left-padded); a response position before the last trained token that is not trained is an
  observation/tool token, attended (attention 1) but with ``response_mask`` 0. The adapter builds the
  response's attention mask that way: 1 up to the row's last real token, 0 after it; so placement
  is verl's ``sum - 1`` on verl's own layout. rm_scores are float32 in verl (``torch.zeros_like(
  responses, dtype=torch.float32)``), and so are its log-probs: the operation computes in float32.
- ``group_advantages``: ``compute_grpo_outcome_advantage`` ("grpo"; "mean" is the same function with
  ``norm_adv_by_std_in_grpo=False``, Dr. GRPO) and ``compute_rloo_outcome_advantage`` ("rloo"), on a
  batch of one-token responses whose token reward is the score (verl sums token rewards into the
  score), ``index`` = the group ids (verl's per-prompt ``uid``), in float32 (the token rewards are
  verl's float32 ``rm_scores``; a singleton's mean 0 and std 1 are float32 tensors too, so its
  ``1 + 1e-6`` is float32's). Group std: ``torch.std`` (unbiased)
  ``+ 1e-6``. A singleton group gets mean 0 and std 1 (its advantage is the raw score, / (1 + 1e-6)
  for grpo), declared ``group_singleton = "score"``. verl has no unscorable samples (a NaN score
  enters its group's mean and std: verl.xfail). Variant ``verl:vectorized`` drives the vectorised
  estimators (``compute_grpo_vectorized_outcome_advantage`` on ``utils/groupwise.py``
  ``group_mean_std``, ``compute_rloo_vectorized_outcome_advantage``); their variance comes from
  centred scores (GROUP-LOW-VARIANCE passes), but the vectorised RLOO gives a singleton group 0
  where the loop keeps the raw score: the variant declares ``group_singleton`` by kind.
- ``aggregate_loss``: ``core_algos.agg_loss(loss_mat, loss_mask, loss_agg_mode, batch_num_tokens=
  num_tokens, loss_scale_factor=norm_length)``, ``dp_size`` 1. "seq-mean-token-sum-norm"'s default
  factor is ``loss_mask.shape[-1]``, the padded width, as the protocol's default. The mask is a bool
  tensor, as verl's actor passes it (``workers/utils/losses.py``: ``data["response_mask"].to(bool)``).
  "seq-mean-token-mean" divides by ``torch.sum(loss_mask, -1) + 1e-8``: an int64 count plus a Python
  float is a float32 tensor (torch's default dtype), where ``n + 1e-8`` rounds to ``n`` for every
  n >= 1, so the epsilon never acts on a row with tokens (``seq_mean_token_mean_eps = 0``; with a
  float64 mask it would be 1e-8).
- ``token_ppo_loss``: ``get_policy_loss_fn("vanilla")`` (``compute_policy_loss_vanilla``) with a real
  ``ActorConfig(clip_ratio_low, clip_ratio_high, clip_ratio_c)`` and ``loss_agg_mode="token-sum"``.
  verl's dual clip is always on for A < 0 (``clip_ratio_c`` is asserted > 1, default 3): the adapter
  passes ``clip_ratio_c = dual_clip``, or 1e9 when the suite asks for none, which never binds
  because verl clamps the log-ratio to [-20, 20] first (r <= e^20 = 4.85e8 < 1e9). That clamp is
  declared (``log_ratio_clamp = 20``).
- ``kl_penalty``: ``core_algos.kl_penalty(logprob=logp, ref_logprob=logp_ref, kl_penalty=kind)`` for
  k1, k2, k3 and the straight-through k1+, k2+, k3+ (value of the estimator, gradient of
  ``0.5 (logp - logp_ref)^2``). k3 is the branch of ``"low_var_kl"``, verl's default
  ``actor.kl_loss_type`` (k1 is ``"kl"``, the default in-reward ``algorithm.kl_penalty``), so the
  defaults users run are judged. verl's KL loss (``workers/utils/losses.py``) passes the current
  policy's log-probs and has no importance correction for off-policy tokens: ``logp_old`` is ignored,
  declared ``kl_penalty_off_policy = "on-policy-only"`` (verl.xfail). k3 clamps its log-ratio to
  [-20, 20] and its value to [-10, 10]: defects the extreme-ratio clauses catch (docs/bugs-found.md).
- ``kl_estimate``: the same ``kl_penalty`` with ``logprob`` = the sampler (verl's ``logprob`` is the
  policy the tokens came from, ``ref_logprob`` the other distribution): KL(sampler || other).
- ``ppo_clip_loss``: ``compute_policy_loss_vanilla`` on one row with every token real, ``token-mean``
  (the mean over samples), verl's default ``clip_ratio_c = 3`` (declared ``dual_clip``).
- ``ppo_value_loss``: ``compute_value_loss`` (``0.5 *`` the token-mean of ``max`` of the unclipped and
  clipped squared errors; declared ``value_loss_factor = 0.5``). verl always clips; the unclipped loss
  is ``cliprange_value = inf`` with ``values = vpreds`` (the clipped branch then equals the unclipped).
- ``normalize_advantages``: ``utils/torch_functional.py`` ``masked_whiten`` with every entry real
  (what ``compute_gae_advantage_return`` applies to a whole batch): unbiased variance,
  ``(A - mean) * rsqrt(var + 1e-8)``. It runs in float32: with verl's int64 mask the counts and the
  Bessel factor ``mask_sum / (mask_sum - 1)`` are float32 tensors whatever the data's dtype (an
  integer division gives torch's default dtype), so masked_whiten is float32-accurate (float64 input
  comes back 1.5e-8 off at [1, 2, 3, 4]); verl's advantages are float32 anyway. One element raises
  ``ValueError`` (verl.xfail).

Precision: verl's math is dtype-generic; the adapter runs it in the suite's float64 except
``assemble_rewards``, ``group_advantages`` (verl's reward tensors are float32 by construction) and
``normalize_advantages`` (float32 counts inside), whose outputs the suite judges at float32. Deliberate deviations are listed
in ``verl.xfail``; defects stay red (docs/bugs-found.md).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import torch
import verl
import verl.trainer.ppo.core_algos as core_algos
import verl.utils.torch_functional as verl_F
from verl.workers.config import ActorConfig

from ._rows import episode_rows

WRITTEN_AGAINST = "0.9.1"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "verl",
    "range": ">=0.8.0",
    "why": "provisional",
}
RLSPEC_VERSION = f"verl {verl.__version__}"
RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {
    # token_ppo_loss / ppo_clip_loss: compute_policy_loss_vanilla, ratio = exp(clamp(log r, -20, 20))
    "log_ratio_clamp": 20.0,
    "dual_clip": 3.0,  # ppo_clip_loss: ActorConfig.clip_ratio_c default, always on for A < 0
    # agg_loss "seq-mean-token-mean": sum / (n_b + 1e-8) with n_b an int64 count: float32(n_b + 1e-8) = n_b
    "seq_mean_token_mean_eps": 0.0,
    # compute_value_loss: 0.5 * agg_loss(max(unclipped, clipped))
    "value_loss_factor": 0.5,
    # masked_whiten: unbiased masked_var, (A - mean) * rsqrt(var + 1e-8), once per training batch
    "advantage_std_ddof": 1,
    "advantage_eps": 1e-8,
    "advantage_eps_form": "var",
    "advantage_normalization": "batch",
    # compute_grpo_outcome_advantage: torch.std (unbiased) + epsilon 1e-6; singleton: mean 0, std 1
    "group_std_ddof": 1,
    "group_std_eps": 1e-6,
    "group_singleton": "score",
    "group_unscorable": "nan",  # no such notion in verl: a NaN score stays NaN (and poisons its group)
    # kl_penalty: logprob = the policy the tokens were drawn from, no importance weight off-policy
    "kl_estimate_arguments": "sampler, other",
    "kl_penalty_off_policy": "on-policy-only",
}

_EPSILON = 1e-6  # compute_grpo_outcome_advantage's default epsilon
_NO_DUAL_CLIP = 1e9  # > e^20, the largest ratio verl's clamped log-ratio gives


def _tensor(x, dtype=None) -> torch.Tensor:
    x = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return x.to(dtype) if dtype is not None else x


def _response_mask(mask) -> torch.Tensor:
    """verl's response_mask in the trainer (GAE, rewards): the response part of the int64 attention mask."""
    return _tensor(mask).to(torch.bool).to(torch.int64)


def _loss_mask(mask) -> torch.Tensor:
    """verl's response_mask in the actor's and critic's losses: ``data["response_mask"].to(bool)``
    (workers/utils/losses.py)."""
    return _tensor(mask).to(torch.bool)


# ---------------------------------------------------------------------------------------------
# GAE over response rows


def _gae(rewards, values, mask, gamma, lam, *, whitening_rows=False):
    """compute_gae_advantage_return on (B, L) rows: (verl's whitened advantages, raw advantages, returns).

    ``whitening_rows``: append two all-real rows of zeros before the call and drop them after. The
    recursion is per row (vectorised over rows), so they change nothing in the other rows' returns;
    they only give the whitening that runs inside the function the two tokens it needs not to raise
    (``masked_var``: "The sum of the mask is one"). The raw candidate reads the returns only.
    """
    rewards, values, mask = _tensor(rewards), _tensor(values), _response_mask(mask)
    B = rewards.shape[0]
    if whitening_rows:
        rewards = torch.cat([rewards, rewards.new_zeros(2, rewards.shape[1])])
        values = torch.cat([values, values.new_zeros(2, values.shape[1])])
        mask = torch.cat([mask, mask.new_ones(2, mask.shape[1])])
    whitened, returns = core_algos.compute_gae_advantage_return(
        token_level_rewards=rewards, values=values, response_mask=mask, gamma=gamma, lam=lam
    )
    whitened, returns, values = whitened[:B], returns[:B], values[:B]
    return whitened, returns - values, returns


def token_gae(rewards, values, mask, gamma, lam):
    """Raw advantages: verl's returns minus the values (verl returns the advantages whitened)."""
    _, raw, returns = _gae(rewards, values, mask, float(gamma), float(lam), whitening_rows=True)
    return raw, returns


def _token_gae_whitened(rewards, values, mask, gamma, lam):
    """verl's compute_gae_advantage_return output as it is: whitened advantages, raw returns."""
    whitened, _, returns = _gae(rewards, values, mask, float(gamma), float(lam))
    return whitened, returns


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Time-major (T,) or (T, N) -> one right-padded row per episode segment; the bootstrap of a segment
    that was not terminated is folded into its last reward (verl rows end terminal)."""
    rows = episode_rows(rewards, values, next_values, terminated, truncated, gamma)
    _, row_raw, row_returns = _gae(rows.rewards, rows.values, rows.mask.to(torch.int64), float(gamma), float(lam),
                                   whitening_rows=True)
    return rows.scatter(row_raw), rows.scatter(row_returns)


whitened = SimpleNamespace(
    __doc__="verl's compute_gae_advantage_return with its advantages as returned: whitened over the batch "
    "(masked_whiten), next to raw returns.",
    token_gae=_token_gae_whitened,
    RLSPEC_CONVENTIONS=dict(RLSPEC_CONVENTIONS),
)


# ---------------------------------------------------------------------------------------------
# rewards: assemble_rm_scores, then apply_kl_penalty


@functools.cache
def _reward_path() -> SimpleNamespace:
    """verl's reward path, imported on first use (ray_trainer pulls in datasets, peft, fastapi, ...)."""
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
    from verl.trainer.ppo.ray_trainer import apply_kl_penalty

    return SimpleNamespace(DataProto=DataProto, assemble_rm_scores=RewardManagerBase.assemble_rm_scores,
                           apply_kl_penalty=apply_kl_penalty)


def assemble_rewards(scores, kl, mask, kl_coef):
    path = _reward_path()
    real = _tensor(mask).to(torch.bool)
    B, L = real.shape
    positions = torch.arange(L).expand(B, L)
    last = torch.where(real, positions, -1).max(dim=1).values  # the row's last real token (-1: none)
    response_attention = (positions <= last[:, None]).to(torch.int64)  # verl's layout: right padding only
    prompts = torch.zeros(B, 1, dtype=torch.int64)  # one prompt token, attended
    data = path.DataProto.from_dict(tensors={
        "prompts": prompts,
        "responses": torch.zeros(B, L, dtype=torch.int64),
        "attention_mask": torch.cat([torch.ones(B, 1, dtype=torch.int64), response_attention], dim=1),
        "response_mask": real.to(torch.int64),
    })
    scores32 = _tensor(scores).to(torch.float32)
    data.batch["token_level_scores"] = path.assemble_rm_scores(data, scores32.tolist())
    data.batch["old_log_probs"] = _tensor(kl).to(torch.float32)
    data.batch["ref_log_prob"] = torch.zeros(B, L, dtype=torch.float32)
    kl_ctrl = core_algos.FixedKLController(kl_coef=float(kl_coef))
    data, _ = path.apply_kl_penalty(data, kl_ctrl, kl_penalty="kl")
    return data.batch["token_level_rewards"]


# ---------------------------------------------------------------------------------------------
# group advantages: one-token responses whose reward is the score


def group_advantages(scores, groups, kind):
    scores = _tensor(scores).to(torch.float32)  # token_level_rewards come from rm_scores: float32 in verl
    index = np.asarray(_tensor(groups).cpu().numpy()).astype(np.int64)
    token_level_rewards = scores.reshape(-1, 1).clone()
    response_mask = torch.ones_like(token_level_rewards, dtype=torch.int64)
    if kind == "grpo":
        advantages, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards, response_mask, index, epsilon=_EPSILON, norm_adv_by_std_in_grpo=True)
    elif kind == "mean":
        advantages, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards, response_mask, index, epsilon=_EPSILON, norm_adv_by_std_in_grpo=False)
    elif kind == "rloo":
        advantages, _ = core_algos.compute_rloo_outcome_advantage(token_level_rewards, response_mask, index)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return advantages[:, 0]


def _group_advantages_vectorized(scores, groups, kind):
    """The vectorised estimators (algorithm.adv_estimator grpo_vectorized / rloo_vectorized)."""
    scores = _tensor(scores).to(torch.float32)
    index = np.asarray(_tensor(groups).cpu().numpy()).astype(np.int64)
    token_level_rewards = scores.reshape(-1, 1).clone()
    response_mask = torch.ones_like(token_level_rewards, dtype=torch.int64)
    if kind in ("grpo", "mean"):
        advantages, _ = core_algos.compute_grpo_vectorized_outcome_advantage(
            token_level_rewards, response_mask, index, epsilon=_EPSILON, norm_adv_by_std_in_grpo=kind == "grpo")
    elif kind == "rloo":
        advantages, _ = core_algos.compute_rloo_vectorized_outcome_advantage(token_level_rewards, response_mask, index)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return advantages[:, 0]


vectorized = SimpleNamespace(
    __doc__="verl's vectorised group estimators: compute_grpo_vectorized_outcome_advantage (utils/groupwise.py "
    "group_mean_std: float32 sums by index_add_, variance from centred scores) and "
    "compute_rloo_vectorized_outcome_advantage (bincount).",
    group_advantages=_group_advantages_vectorized,
    # the vectorised RLOO gives a singleton group 0 (adv * (c > 1)); the vectorised GRPO (group_mean_std:
    # mean 0, std 1) keeps its score, as the loop estimators do
    RLSPEC_CONVENTIONS={**RLSPEC_CONVENTIONS, "group_singleton": {"grpo": "score", "mean": "score", "rloo": "zero"}},
)
VARIANTS = ("whitened", "vectorized")


# ---------------------------------------------------------------------------------------------
# loss aggregation and the per-token PPO loss


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    return core_algos.agg_loss(
        loss_mat=_tensor(per_token_loss), loss_mask=_loss_mask(mask), loss_agg_mode=mode,
        batch_num_tokens=num_tokens, loss_scale_factor=norm_length,
    )


@functools.lru_cache(maxsize=64)
def _actor_config(clip_low: float, clip_high: float, clip_ratio_c: float, loss_agg_mode: str) -> ActorConfig:
    return ActorConfig(
        strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=1, clip_ratio=clip_low,
        clip_ratio_low=clip_low, clip_ratio_high=clip_high, clip_ratio_c=clip_ratio_c, loss_agg_mode=loss_agg_mode,
    )


def _vanilla(logp_new, logp_old, advantages, mask, clip_low, clip_high, clip_ratio_c, loss_agg_mode):
    config = _actor_config(float(clip_low), float(clip_high), float(clip_ratio_c), loss_agg_mode)
    loss, _ = core_algos.get_policy_loss_fn("vanilla")(
        old_log_prob=logp_old, log_prob=logp_new, advantages=advantages, response_mask=mask,
        loss_agg_mode=loss_agg_mode, config=config,
    )
    return loss


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    clip_ratio_c = _NO_DUAL_CLIP if dual_clip is None else dual_clip
    return _vanilla(logp_new, _tensor(logp_old), _tensor(advantages), _loss_mask(mask), clip_low, clip_high,
                    clip_ratio_c, "token-sum")


def _one_row(x) -> torch.Tensor:
    return _tensor(x).reshape(1, -1)


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    """One row, every token real, token-mean: the mean over samples; verl's default clip_ratio_c = 3."""
    mask = torch.ones(1, _one_row(logp_old).shape[1], dtype=torch.bool)
    return _vanilla(_one_row(logp_new), _one_row(logp_old), _one_row(advantages), mask, clip_eps, clip_eps,
                    RLSPEC_CONVENTIONS["dual_clip"], "token-mean")


def ppo_value_loss(values, returns, old_values=None, clip_eps=None):
    vpreds = _one_row(values)
    old = vpreds.detach() if old_values is None else _one_row(old_values)
    cliprange = float("inf") if clip_eps is None or old_values is None else float(clip_eps)
    loss, _ = core_algos.compute_value_loss(
        vpreds=vpreds, returns=_one_row(returns), values=old, response_mask=torch.ones_like(vpreds, dtype=torch.bool),
        cliprange_value=cliprange, loss_agg_mode="token-mean",
    )
    return loss


def normalize_advantages(advantages):
    """masked_whiten over one int64-masked row, in float32 (see the module docstring)."""
    advantages = _tensor(advantages).to(torch.float32)
    mask = torch.ones(1, advantages.numel(), dtype=torch.int64)  # the response part of the attention mask
    return verl_F.masked_whiten(advantages.reshape(1, -1), mask).reshape(advantages.shape)


# ---------------------------------------------------------------------------------------------
# KL


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    """verl's kl_penalty; logp_old is ignored (no importance correction in verl's KL loss)."""
    return core_algos.kl_penalty(logprob=logp, ref_logprob=_tensor(logp_ref), kl_penalty=kind)


def kl_estimate(logp_sampler, logp_other, kind):
    return core_algos.kl_penalty(logprob=_tensor(logp_sampler), ref_logprob=_tensor(logp_other), kl_penalty=kind)
