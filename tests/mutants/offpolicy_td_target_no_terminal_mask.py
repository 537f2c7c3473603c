"""Mutant: the one-step target forgets the terminal mask, y = r + gamma Q'(s', a') on every row, so a terminal
transition bootstraps from a state that does not exist (the classic DQN/DDPG slip the Nature DQN's Algorithm 1
spells out: y_j = r_j for terminal s_{j+1})."""

RLSPEC_MUTANT = {"clauses": ["TD-TARGET-TERMINAL-MASK"], "bug": "terminal mask missing in the TD target"}


def td_target(rewards, next_q, terminated, truncated, gamma):
    return rewards + gamma * next_q
