"""Mutant: the mask reaches only the denominators (loss.sum(-1) / mask.sum(-1)): losses computed at
padded positions enter every mode's numerator (the class of bug G3: the mask built from the
wrong tensor)."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["RLHF-AGG-MASKED-ZERO-GRADIENT"],
    "bug": "G3 padding-leaks-into-reverse-kl-advantage (trl #7024: padding not masked in the numerator)",
}


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    B, L = per_token_loss.shape
    sums = per_token_loss.sum(-1)
    if mode == "token-mean":
        return sums.sum() / (m.sum() if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-mean":
        return (sums / m.sum(-1)).mean()
    if mode == "seq-mean-token-sum":
        return sums.mean()
    return sums.sum() / (B * (norm_length or L))
