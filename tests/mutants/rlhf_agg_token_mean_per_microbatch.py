"""Mutant: bug G12: token-mean divides by the call's own token count and ignores num_tokens, so
gradient accumulation over micro-batches weights each token by 1/(its micro-batch's count):
micro-batch 1 one token with loss 4, micro-batch 2 three tokens with loss 0 sum to 4, not 1."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["RLHF-AGG-MICROBATCH-INVARIANT", "RLHF-AGG-GRADIENT-WEIGHTS"],
    "bug": "G12 gradient-accumulation-breaks-token-mean (verl #5625, PR #3332)",
}


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    B, L = per_token_loss.shape
    sums = (per_token_loss * m).sum(-1)
    if mode == "token-mean":
        return sums.sum() / m.sum()
    if mode == "seq-mean-token-mean":
        return (sums / m.sum(-1)).mean()
    if mode == "seq-mean-token-sum":
        return sums.mean()
    return sums.sum() / (B * (norm_length or L))
