"""Mutant: CQL's penalty with the hard maximum in place of the soft one, max_a Q - Q(s, a_data) (the "CQL with a max"
confusion): Q = [1, 2, 3], a_data = 0 gives 2 instead of 2.4076, and the expected gradient puts all the push-down on
the greedy action (onehot(argmax) - nu instead of softmax(Q) - nu)."""

RLSPEC_MUTANT = {"clauses": ["CQL-PENALTY-VALUES", "CQL-PENALTY-EXPECTED-GRADIENT", "GRID-CQL-LOWER-BOUND"], "bug": "CQL using max instead of logsumexp"}


def cql_penalty(q_values, actions, alpha):
    q_data = q_values.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    return alpha * (q_values.max(dim=-1).values - q_data)
