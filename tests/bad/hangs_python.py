"""Bad candidate: an infinite Python loop."""


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    while True:
        pass
