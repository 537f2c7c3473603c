"""Mutant: token-mean as (loss * mask).mean(): the denominator counts every one of the B * L
positions, padding included (the class of bug G5), so the loss shrinks with the padded width."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["RLHF-AGG-KNOWN-ANSWER", "RLHF-AGG-GRADIENT-WEIGHTS", "RLHF-AGG-WIDTH-INDEPENDENT"],
    "bug": "G5 padded-rows-inflate-token-mean-denominator ((loss * mask).mean())",
}


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    B, L = per_token_loss.shape
    sums = (per_token_loss * m).sum(-1)
    if mode == "token-mean":
        return (per_token_loss * m).mean() if num_tokens is None else sums.sum() / num_tokens
    if mode == "seq-mean-token-mean":
        return (sums / m.sum(-1)).mean()
    if mode == "seq-mean-token-sum":
        return sums.mean()
    return sums.sum() / (B * (norm_length or L))
