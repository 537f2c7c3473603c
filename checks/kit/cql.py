"""Calling a candidate's ``cql_penalty``: shared by the offline chapter (its values and gradients) and the theory chapter
(CQL's fixed point on a tabular dataset)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .context import format_call
from .strategies import rounded


def run_cql(ctx, q, actions, alpha, allow_nonfinite: bool = True):
    """``(penalty, call, q)``: the candidate's (B,) penalty, the call, and Q as the candidate received it.
    Actions reach the candidate as int64 tensors (the suite's conversion would make them floats)."""
    q = rounded(q, ctx.dtype)
    actions = np.asarray(actions, dtype=np.int64)
    candidate = ctx.candidate
    function = candidate.operations["cql_penalty"]

    def with_integer_actions(q_values, actions, alpha):
        return function(q_values=q_values, actions=actions.long(), alpha=alpha)

    ctx.candidate = dataclasses.replace(candidate, operations={**candidate.operations, "cql_penalty": with_integer_actions})
    try:
        call = ctx.call("cql_penalty", {"q_values": q, "actions": actions.astype(np.float64), "alpha": alpha}, array="torch",
                        requires_grad=("q_values",), shape=(q.shape[0],), allow_nonfinite=allow_nonfinite)
    finally:
        ctx.candidate = candidate
    call.code = format_call("cql_penalty", {"q_values": q.astype(ctx.dtype), "actions": actions, "alpha": alpha})
    return call.outputs[0], call, q
