"""Bad candidate: returns a plain float."""


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    return 0.0
