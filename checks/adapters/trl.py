"""Built-in adapter ``trl``: Hugging Face TRL (written against 1.16.0) through its real code paths.

    pip install "rlspec[trl]"
    rlspec check --candidate trl             # GRPOTrainer / RLOOTrainer with TRL's defaults (below)
    rlspec check --candidate trl:bnpo        # token-mean as loss_type="bnpo" (one of the VARIANTS)
    rlspec check --candidate trl:rloo        # ppo_clip_loss through RLOOTrainer._compute_loss

**No PPO, no GAE.** TRL's PPO trainer (``trl/experimental/ppo/ppo_trainer.py``, with its GAE, value
loss and reward assembly, all inline in ``PPOTrainer.train()``) exists up to TRL 1.12.0 and was
removed after it (absent from 1.13.0 on). This adapter drives TRL 1.16, so ``token_gae``,
``assemble_rewards``, ``gae``, ``ppo_value_loss`` and ``ppo_update`` are not provided; the 1.12 PPO
findings (the score placed one step after EOS: bug G4) are not part of this adapter.

What each operation drives (paths in ``site-packages/trl/trainer``), always a method of the real
trainer class called unbound on a stub ``self`` (a ``SimpleNamespace`` carrying the trainer's
attributes: its config values, a one-process accelerator, and a ``_get_per_token_logps_and_entropies``
that returns the suite's log-probabilities as the model's):

- ``group_advantages``: the whole of ``GRPOTrainer._generate_and_score_completions``
  (``grpo_trainer.py``; kinds ``"grpo"``: ``scale_rewards="group"``, ``"mean"``: ``"none"``) or
  ``RLOOTrainer._generate_and_score_completions`` (``rloo_trainer.py``; kind ``"rloo"``), with
  ``_generate`` returning one-token completions and TRL's own ``_calculate_rewards`` calling one
  reward function that returns the suite's scores (None for a NaN score: TRL's "unscorable"
  completion; TRL stores rewards as float32). The advantage code is inline in these
  methods, so the adapter runs the methods themselves rather than exec'ing source blocks: nothing
  depends on line numbers, and a TRL change to the block is what runs. TRL lays a batch out as
  contiguous groups of ``num_generations`` completions (its ``RepeatSampler``) and reshapes with
  ``view(-1, num_generations)``; the adapter arranges the suite's samples by group id in that
  layout, one call per distinct group size (``num_generations`` is a trainer constant; statistics
  are per group, so separate calls change nothing), and scatters the advantages back.
- ``token_ppo_loss``: ``GRPOTrainer._compute_loss`` with ``beta = 0``, ``epsilon_low`` /
  ``epsilon_high`` = ``clip_low`` / ``clip_high``, the suite's ``logp_old`` as
  ``old_per_token_logps``, per-token advantages ``(B, L)`` (``_compute_loss`` accepts them) and
  ``loss_type="dapo"`` (TRL's default) with ``num_items_in_batch = 1``, one process, one
  accumulation step per generation: its normaliser is then 1, so the loss is the token SUM.
  ``dual_clip = c`` is TRL's ``delta`` (INTELLECT-2's two-sided clipping, ``coef_1 = clamp(r,
  max=delta)`` before the min). For ``A < 0`` that caps the loss at ``-delta A`` (the dual clip);
  for ``A > 0`` it changes nothing as long as ``delta >= 1 + epsilon_high`` (TRL recommends
  ``delta > 1 + epsilon``), but a smaller ``delta`` also caps positive-advantage ratios.
- ``aggregate_loss``: ``GRPOTrainer._compute_loss`` on-policy (no stored old log-probs: TRL takes
  ``old = logp.detach()``, so the ratio is exactly 1 and ``per_token_loss = -A``) with advantages
  ``-per_token_loss`` passed as a tensor in the suite's autograd graph: TRL's per-token loss is then
  the suite's, value and gradient, and the aggregation is TRL's own code. Modes -> ``loss_type``:
  ``token-mean`` -> ``dapo`` (sum / ``num_items_in_batch``, the generation batch's token count, as
  ``_generate_and_score_completions`` computes it, or ``num_tokens`` when given: a global count
  across micro-batches); ``seq-mean-token-mean`` -> ``grpo``; ``seq-mean-token-sum`` -> ``luspo``;
  ``seq-mean-token-sum-norm`` -> ``dr_grpo`` with ``max_completion_length = norm_length`` (default
  the padded width). One process, ``gradient_accumulation_steps = steps_per_generation = 1`` (with
  accumulation TRL divides grpo / bnpo / dr_grpo / luspo by the number of steps and dapo's count
  spans the generation batch: tests/adapters/test_trl.py checks both).
- ``kl_penalty``: GRPO's per-token KL, ``exp(ref - logp) - (ref - logp) - 1`` (k3, no clamp), from
  ``GRPOTrainer._compute_loss`` with ``A = 0``: the tensor is captured where TRL adds it to the
  loss (``self.beta * per_token_kl``, ``beta`` a float that records its right operand), so it is
  TRL's tensor, in the suite's autograd graph. TRL has only k3, with a switch
  ``use_bias_correction_kl`` that multiplies it by the non-detached ratio ``exp(logp - old)``:
  kind ``"k3"`` is ``use_bias_correction_kl=False`` (plain k3: forward-KL gradient on-policy, logp_old
  ignored by the gradient); kind ``"k3+"`` is TRL's default ``True`` (on-policy value k3 and the
  gradient of k2 -- the straight-through contract; off-policy the gradient is ``w grad k2`` but the
  value is ``w k3``). Kinds k1, k2, k1+, k2+ raise: TRL's GRPO has no such estimator.
- ``ppo_clip_loss``: ``GRPOTrainer._compute_loss`` on ``(B, 1)`` one-token completions, TRL's
  default ``loss_type="dapo"`` with ``num_items_in_batch = B`` (the mean over samples).
- ``kl_estimate``: ``"k3"`` from ``GRPOTrainer._compute_loss`` as for ``kl_penalty`` (sampler =
  the current policy, other = the reference); ``"k1"`` from ``RLOOTrainer._generate_and_score_completions``
  with ``beta != 0``, where TRL puts ``sum_t (old_logp - ref_logp)`` into the reward (captured at
  ``self.beta * kl``). There is no k2.

Verdicts to know: the adapter declares the kinds TRL has (``kl_penalty_kinds`` k3, k3+;
``kl_estimate_kinds`` k1, k3), so the KL clauses judge those and KL-K2-SECOND-ORDER is not
provided. k3 conforms; k3+ (TRL's default) has the reverse-KL expected gradient but an
importance-weighted value off-policy (by design: trl.xfail) and a gradient that cancels
catastrophically at large log ratios (docs/bugs-found.md #7: KL-PENALTY-EXTREME-LOG-RATIO fails).

Import time: ``trl.trainer.grpo_trainer`` imports transformers, accelerate and datasets, 10 to 40 s
on a busy 2-core machine (rlspec's workers give importing a candidate at least 120 s).

Precision: TRL computes in the model's dtype; the stub's log-probabilities are the suite's float64
tensors and the loss operations run in float64, so the adapter declares no reduced precision.
Rewards are float32 in TRL (``_calculate_rewards`` builds them so): ``group_advantages`` returns
TRL's float32 advantages and is judged at float32 by its output's dtype.
Conventions are in ``RLSPEC_CONVENTIONS``; deliberate deviations in ``trl.xfail`` beside this file;
defects stay red (docs/bugs-found.md).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import torch
import trl
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.rloo_trainer import RLOOTrainer

WRITTEN_AGAINST = "1.16.0"
# The releases this adapter drives (``rlspec matrix --releases`` reads it without importing the library; docs/releases.md).
RELEASES = {
    "distribution": "trl",
    "range": ">=1.0.0",
    "why": "1.0.0 is TRL's first stable release, with the GRPOTrainer and RLOOTrainer methods this adapter calls "
           "unbound (_generate_and_score_completions, _compute_loss); their private interfaces changed in 1.1, 1.3, 1.7 "
           "and 1.9, bridged by the small shims at the end of the module",
}
RLSPEC_VERSION = f"trl {trl.__version__}"
RLSPEC_ARRAY = "torch"
RLSPEC_CONVENTIONS = {
    # group advantages: GRPOTrainer / RLOOTrainer._generate_and_score_completions, trainer/utils.py nanstd
    "group_std_ddof": 1,  # nanstd applies Bessel's correction
    "group_std_eps": 1e-4,  # (r - mean) / (std + 1e-4)
    "group_singleton": "zero",  # one scorable member: nanstd is NaN (grpo), (sum - r) / 0 (rloo): nan_to_num -> 0
    "group_unscorable": "zero",  # advantages = torch.nan_to_num(advantages, nan=0.0)
    # token_ppo_loss / aggregate_loss: GRPOTrainer._compute_loss
    "log_ratio_clamp": None,  # coef_1 = exp(logp - old), no clamp
    "seq_mean_token_mean_eps": 0,  # loss_type="grpo": sum / mask.sum(-1).clamp(min=1.0)
    "kl_penalty_off_policy": "importance-weighted",  # k3+ (use_bias_correction_kl=True) multiplies by exp(logp - old)
    # classic ppo_clip_loss
    "dual_clip": None,  # GRPOConfig.delta defaults to None
    "kl_penalty_kinds": ("k3", "k3+"),  # the only kinds the adapter can drive (the others raise)
    "kl_estimate_kinds": ("k1", "k3"),
    # facts about the library that no clause judges (not conventions):
    # default_loss_type: "dapo"
    # epsilon: 0.2 (GRPOConfig default; epsilon_high defaults to epsilon)
    # beta: 0.0 (GRPOConfig default: no KL term unless asked)
}
# What the conformance matrix shows next to this adapter (checks/matrix/__init__.py renders it).
RLSPEC_NOTE = (
    "TRL's PPO trainer and its GAE were removed after TRL 1.12.0: token_gae, assemble_rewards, gae, "
    "ppo_value_loss and ppo_update are not provided (TRL 1.16 has GRPO and RLOO only)."
)

_KINDS = {"grpo": (GRPOTrainer, "group"), "mean": (GRPOTrainer, "none"), "rloo": (RLOOTrainer, None)}


class _Accelerator:
    """One process, no distribution: gather / reduce are the identity."""

    device = torch.device("cpu")
    process_index = 0
    num_processes = 1
    is_main_process = True
    sync_gradients = True

    def gather(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x

    def gather_for_metrics(self, x):
        return x

    def unwrap_model(self, model):
        return model


class _Recorder(float):
    """A float ``beta`` that records the tensor it multiplies: TRL's per-token (or per-sequence) KL."""

    def __new__(cls, value=1.0):
        self = super().__new__(cls, value)
        self.seen = []
        return self

    def __mul__(self, other):
        if isinstance(other, torch.Tensor):
            self.seen.append(other)
        return float(self) * other

    __rmul__ = __mul__


def _metrics():
    return defaultdict(lambda: defaultdict(list))


def _model_logps(tensors: dict):
    """``_get_per_token_logps_and_entropies``: the suite's log-probs for ``model`` / ``ref_model``."""

    def get(model, *args, **kwargs):
        logps = tensors[model]
        return (logps, torch.zeros_like(logps.detach()), None)[:_LOGPS_OUTPUTS]  # log-probs, entropies, aux loss

    return get


# ---------------------------------------------------------------------------------------------
# GRPOTrainer._compute_loss


def _compute_loss(logp, advantages, mask, *, logp_old=None, logp_ref=None, loss_type="dapo", beta=0.0,
                  epsilon_low=0.2, epsilon_high=0.2, delta=None, use_bias_correction_kl=True,
                  num_items_in_batch=None, max_completion_length=None, gradient_accumulation_steps=1,
                  steps_per_generation=1):
    """One ``GRPOTrainer._compute_loss`` on (B, L) tensors; returns TRL's loss."""
    B, L = logp.shape
    mask = torch.as_tensor(mask).to(torch.long)  # TRL's completion_mask is a 0/1 long tensor
    model = "policy"
    stub = SimpleNamespace(
        _get_per_token_logps_and_entropies=_model_logps({model: logp}),
        aux_loss_enabled=False, top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        importance_sampling_level="token", beta=beta, loss_type=loss_type,
        epsilon_low=epsilon_low, epsilon_high=epsilon_high,
        args=SimpleNamespace(use_bias_correction_kl=use_bias_correction_kl, delta=delta,
                             steps_per_generation=steps_per_generation),
        use_vllm=False, vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True), current_gradient_accumulation_steps=gradient_accumulation_steps,
        max_completion_length=L if max_completion_length is None else max_completion_length,
        accelerator=_Accelerator(), _entropy_bonus_enabled=False, _metrics=_metrics(),
    )
    inputs = {
        "prompt_ids": torch.ones(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.ones(B, L, dtype=torch.long), "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": torch.as_tensor(mask.sum() if num_items_in_batch is None else num_items_in_batch),
    }
    if logp_old is not None:
        inputs["old_per_token_logps"] = logp_old.detach()
    if logp_ref is not None:
        inputs["ref_per_token_logps"] = logp_ref.detach()
    return GRPOTrainer._compute_loss(stub, model, inputs)


def token_ppo_loss(logp_new, logp_old, advantages, mask, clip_low, clip_high, dual_clip=None):
    return _compute_loss(logp_new, advantages, mask, logp_old=logp_old, loss_type="dapo", num_items_in_batch=1,
                         epsilon_low=float(clip_low), epsilon_high=float(clip_high), delta=dual_clip)


_MODES = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum": "luspo",
          "seq-mean-token-sum-norm": "dr_grpo"}


def _aggregate(modes: dict):
    def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
        if mode not in modes:
            raise ValueError(f"mode {mode!r}: this TRL configuration maps {', '.join(modes)}")
        loss_type = modes[mode]
        # on-policy, the ratio is exactly 1 and TRL's per-token loss is -A: A = -per_token_loss
        logp = torch.zeros_like(per_token_loss.detach())
        return _compute_loss(logp, -per_token_loss, mask, loss_type=loss_type,
                             num_items_in_batch=num_tokens if loss_type == "dapo" else None,
                             max_completion_length=norm_length)

    return aggregate_loss


aggregate_loss = _aggregate(_MODES)


def ppo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    B = logp_new.shape[0]
    return _compute_loss(logp_new.reshape(B, 1), advantages.reshape(B), torch.ones(B, 1, dtype=torch.long),
                         logp_old=logp_old.reshape(B, 1), loss_type="dapo", num_items_in_batch=B,
                         epsilon_low=float(clip_eps), epsilon_high=float(clip_eps))


def _grpo_kl(logp, logp_ref, *, logp_old=None, use_bias_correction_kl=True):
    """TRL's per-token KL tensor (B, L), captured where _compute_loss adds beta * per_token_kl."""
    beta = _Recorder(1.0)
    mask = torch.ones(logp.shape, dtype=torch.long)
    advantages = torch.zeros(logp.shape[0], dtype=logp.dtype)
    _compute_loss(logp, advantages, mask, logp_old=logp_old, logp_ref=logp_ref, beta=beta,
                  use_bias_correction_kl=use_bias_correction_kl)
    if len(beta.seen) != 1 or beta.seen[0].shape != logp.shape:
        raise RuntimeError("GRPOTrainer._compute_loss no longer adds beta * per_token_kl (B, L): adapter out of date")
    return beta.seen[0]


def kl_penalty(logp, logp_ref, kind, logp_old=None):
    if kind not in ("k3", "k3+"):
        raise ValueError(f"TRL has only k3 (GRPO's KL term): kind {kind!r} does not exist there "
                         "('k3': use_bias_correction_kl=False, 'k3+': True, TRL's default)")
    return _grpo_kl(logp, logp_ref, logp_old=logp_old, use_bias_correction_kl=kind == "k3+")


# ---------------------------------------------------------------------------------------------
# _generate_and_score_completions: advantages (GRPO, RLOO) and RLOO's k1 in the reward


def _score(trainer, scores, num_generations, *, scale_rewards="group", beta=0.0, logp_old=None, logp_ref=None):
    """One real ``trainer._generate_and_score_completions`` on N one-token completions whose rewards
    are ``scores`` (N,), laid out as contiguous groups of ``num_generations``; returns its output.
    ``logp_old`` / ``logp_ref`` (N, 1): what the policy / the reference model score the completions
    (RLOO always scores them with the policy; zeros when not given)."""
    N = len(scores)
    policy, reference = _Model(), _Model()
    zeros = torch.zeros(N, 1, dtype=torch.float32 if logp_old is None else logp_old.dtype)
    logps = {policy: zeros if logp_old is None else logp_old, reference: zeros if logp_ref is None else logp_ref}

    def generate(prompts):
        if trainer is GRPOTrainer:  # prompt ids, completion ids, tool mask, texts, sampling logps, extra, images, tool images
            return _grpo_generated(([[1]] * N, [[2]] * N, None, ["c"] * N, None, {}, None, [None] * N))
        return [[1]] * N, [[2]] * N, ["c"] * N  # RLOO: prompt ids, completion ids, texts

    stub = SimpleNamespace(
        accelerator=_Accelerator(), model=policy, ref_model=reference,
        environment_factories=None, environments=None, tools=[], _is_vlm=False,
        _generate=generate, _calculate_rewards=lambda *args: trainer._calculate_rewards(stub, *args),
        reward_funcs=[_reward_function(scores)], reward_processing_classes=[None], reward_func_names=["score"],
        _log_completion_extra=None, _log_metric=None, state=SimpleNamespace(global_step=0),
        _get_per_token_logps_and_entropies=_model_logps(logps),
        _tokenizer=SimpleNamespace(pad_token_id=0), pad_token_id=0, processing_class=_PROCESSING_CLASS,  # (TRL < 1.7, below)
        pad_to_multiple_of=None, mask_truncated_completions=False,
        eos_token_ids=[3],
        args=SimpleNamespace(report_to=[], per_device_train_batch_size=N, per_device_eval_batch_size=N, steps_per_generation=1,
                             gradient_accumulation_steps=1, gradient_checkpointing_kwargs=None),
        num_iterations=1, use_vllm=False, vllm_importance_sampling_correction=False, beta=beta,
        num_generations=num_generations, num_generations_eval=num_generations,
        multi_objective_aggregation="sum_then_normalize", scale_rewards=scale_rewards,
        reward_weights=torch.ones(1),
        normalize_advantages=False, reward_clip_range=None, log_multimodal=False,
        _metrics=_metrics(), _pending_extra_logs={}, _pending_metrics={},
        _logs={"prompt": [], "completion": [], "rewards": defaultdict(list), "advantages": [],
               "extra": defaultdict(list), "images": []},
    )
    logger = logging.getLogger(trainer.__module__)  # TRL warns when every reward function returned None
    _accelerate_logging_ready()  # (below)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return trainer._generate_and_score_completions(stub, [{"prompt": "p"}] * N)
    finally:
        logger.setLevel(level)


def _reward_function(scores):
    """A TRL reward function returning the suite's scores, None where a score is NaN (unscorable)."""
    values = [None if np.isnan(score) else score for score in np.asarray(scores, dtype=np.float64).tolist()]

    def score(prompts, completions, **kwargs):
        return values

    return score


class _Model:
    """A stand-in for the policy or the reference model (the stub looks log-probs up by it)."""

    training = True
    is_gradient_checkpointing = False


def group_advantages(scores, groups, kind):
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, not {kind!r}")
    trainer, scale_rewards = _KINDS[kind]
    scores = np.asarray(scores.cpu() if isinstance(scores, torch.Tensor) else scores, dtype=np.float64)
    groups = np.asarray(groups.cpu() if isinstance(groups, torch.Tensor) else groups)
    advantages = torch.zeros(len(scores), dtype=torch.float32)  # TRL's rewards are float32 (_calculate_rewards)
    members = {}
    for index, group in enumerate(groups.tolist()):  # groups in order of first appearance
        members.setdefault(group, []).append(index)
    by_size = {}
    for indices in members.values():
        by_size.setdefault(len(indices), []).append(indices)
    for size, lists in by_size.items():
        order = [i for indices in lists for i in indices]  # contiguous groups of `size`
        out = _score(trainer, scores[order], size, scale_rewards=scale_rewards or "group")
        advantages = advantages.to(out["advantages"].dtype)
        advantages[torch.as_tensor(order)] = out["advantages"]
    return advantages


def _rloo_k1(logp_sampler, logp_other):
    """RLOO's KL in the reward, per sample: sum_t (old - ref) over one-token completions."""
    N = logp_sampler.shape[0]
    beta = _Recorder(1.0)
    _score(RLOOTrainer, np.zeros(N), N, beta=beta,
           logp_old=logp_sampler.detach().reshape(N, 1), logp_ref=logp_other.detach().reshape(N, 1))
    if len(beta.seen) != 1 or beta.seen[0].shape != (N,):
        raise RuntimeError("RLOOTrainer no longer subtracts beta * kl (N,) from the rewards: adapter out of date")
    return beta.seen[0].reshape(logp_sampler.shape)


def kl_estimate(logp_sampler, logp_other, kind):
    if kind == "k1":
        return _rloo_k1(logp_sampler, logp_other)
    if kind == "k3":
        shape = logp_sampler.shape
        flat = logp_sampler.reshape(-1, 1)
        return _grpo_kl(flat, logp_other.reshape(-1, 1)).detach().reshape(shape)
    raise ValueError(f"TRL has no {kind} estimator: k3 in GRPO's loss, k1 in RLOO's reward")


# ---------------------------------------------------------------------------------------------
# variants: --candidate trl:NAME

def _rloo_clip_loss(logp_new, logp_old, advantages, clip_eps):
    """``RLOOTrainer._compute_loss``: B one-token completions, sequence-level ratio, mean over sequences."""
    B = logp_new.shape[0]
    stub = SimpleNamespace(
        _get_per_token_logps_and_entropies=_model_logps({"policy": logp_new.reshape(B, 1)}),
        aux_loss_enabled=False, epsilon_low=float(clip_eps), epsilon_high=float(clip_eps),
        model=SimpleNamespace(training=True), accelerator=_Accelerator(), _metrics=_metrics(),
    )
    ones = torch.ones(B, 1, dtype=torch.long)
    inputs = {"prompt_ids": ones, "prompt_mask": ones, "completion_ids": ones, "completion_mask": ones,
              "old_logps": logp_old.detach().reshape(B), "advantages": advantages.reshape(B)}
    return RLOOTrainer._compute_loss(stub, "policy", inputs)


bnpo = SimpleNamespace(
    __doc__="loss_type='bnpo' for token-mean: the micro-batch's own token count (num_tokens is not an input of "
            "bnpo), TRL's normalisation before 'dapo' became the default; the other modes as in trl.",
    aggregate_loss=_aggregate({**_MODES, "token-mean": "bnpo"}),
    RLSPEC_XFAIL={
        clause: "loss_type='bnpo' divides by the micro-batch's own token count by design (TRL's docs: the "
                "normalisation is over the local batch only, so results vary with the local batch size); 'dapo', "
                "TRL's default, divides by the global accumulated batch's count. "
                "https://huggingface.co/docs/trl/main/en/grpo_trainer#loss-types"
        for clause in ("RLHF-AGG-GRADIENT-WEIGHTS", "RLHF-AGG-MICROBATCH-INVARIANT")
    },
)

rloo = SimpleNamespace(
    __doc__="ppo_clip_loss through RLOOTrainer._compute_loss (one-token completions: its sequence-level ratio is "
            "the per-sample ratio, mean over sequences).",
    ppo_clip_loss=_rloo_clip_loss,
)

VARIANTS = ("bnpo", "rloo")


# ---------------------------------------------------------------------------------------------
# compatibility with older releases in RELEASES (nothing here changes what a current release runs)

# _get_per_token_logps_and_entropies returns (log-probs, entropies, aux loss) from TRL 1.7.0 (the MoE auxiliary
# loss, huggingface/trl #6083), (log-probs, entropies) before: its callers unpack exactly that many.
_LOGPS_OUTPUTS = 3 if tuple(int(p) for p in trl.__version__.split(".")[:2]) >= (1, 7) else 2  # noqa: E501
# RLOOTrainer reads self.pad_token_id before TRL 1.3.0 and self._tokenizer.pad_token_id from it: the stub has both.
# Before TRL 1.7.0 _generate_and_score_completions decodes the texts itself: processing_class.batch_decode.
_PROCESSING_CLASS = SimpleNamespace(batch_decode=lambda ids, **_: ["c"] * len(ids))
_VERSION = tuple(int(p) for p in trl.__version__.split(".")[:2])


def _grpo_generated(outputs: tuple) -> tuple:
    """GRPOTrainer._generate's outputs as this release unpacks them: before TRL 1.9.0 (huggingface/trl #6439) the
    generation batch's completion-token count (num_items_in_batch) came fifth, and before 1.1.0 there were no
    images; the advantages read neither."""
    if _VERSION >= (1, 9):
        return outputs
    outputs = outputs[:4] + (torch.tensor(sum(len(c) for c in outputs[1])),) + outputs[4:]
    return outputs if _VERSION >= (1, 1) else outputs[:-2]


def _accelerate_logging_ready() -> None:
    """TRL's warning for an unscorable completion goes through accelerate's logger, which raises unless accelerate's
    process state exists; a TRL 1.x import before 1.6 does not create it, so the adapter does (one CPU process)."""
    from accelerate import PartialState

    PartialState()

