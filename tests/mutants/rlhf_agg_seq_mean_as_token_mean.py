"""Mutant: the "grpo" (seq-mean-token-mean) loss computed as a plain token mean, as TRL 0.16 did for
its GRPO loss (trl PR #3138 thread): the 1/(B n_b) per-response weighting, Dr. GRPO's length bias,
silently disappears."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["RLHF-AGG-LENGTH-BIAS", "RLHF-AGG-KNOWN-ANSWER"],
    "bug": "G10 grpo-length-bias (trl PR #3138: seq-mean-token-mean replaced by token-mean)",
}


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    B, L = per_token_loss.shape
    sums = (per_token_loss * m).sum(-1)
    if mode in ("token-mean", "seq-mean-token-mean"):
        return sums.sum() / (m.sum() if num_tokens is None or mode != "token-mean" else num_tokens)
    if mode == "seq-mean-token-sum":
        return sums.mean()
    return sums.sum() / (B * (norm_length or L))
