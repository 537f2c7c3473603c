"""Bad candidate: returns None."""


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    return None
