"""Mutant: verl #3741 (bug G11): seq-mean-token-sum-norm computed as
torch.sum(seq_losses) / loss_mask.shape[-1]: not divided by the number of rows (the loss grows with
the micro-batch size) and norm_length ignored in favour of the padded width."""

import torch

RLSPEC_MUTANT = {
    "clauses": ["RLHF-AGG-KNOWN-ANSWER", "RLHF-AGG-GRADIENT-WEIGHTS", "RLHF-AGG-WIDTH-INDEPENDENT"],
    "bug": "G11 drgrpo-aggregation-scales-with-micro-batch (verl #3741)",
}


def aggregate_loss(per_token_loss, mask, mode, num_tokens=None, norm_length=None):
    m = mask.to(per_token_loss.dtype)
    sums = (per_token_loss * m).sum(-1)
    if mode == "token-mean":
        return sums.sum() / (m.sum() if num_tokens is None else num_tokens)
    if mode == "seq-mean-token-mean":
        return (sums / m.sum(-1)).mean()
    if mode == "seq-mean-token-sum":
        return sums.mean()
    return torch.sum(sums) / m.shape[-1]
