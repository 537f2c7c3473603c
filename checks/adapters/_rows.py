"""Time-major rollouts as RLHF-style rows, for libraries whose GAE takes (B, L) rows with a response
mask and no done or bootstrap input (verl, OpenRLHF): every row ends terminal.

Each episode segment of each column becomes one right-padded row; a segment that did not terminate
(truncated by a time limit, or the rollout's unfinished last episode) gets its bootstrap folded into
its last reward, r_last + gamma V(s_next), which is exactly what GAE would add there
(partial-episode bootstrapping, Pardo et al. 2018, arXiv:1712.00378).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def _tensor(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


@dataclass
class Rows:
    segments: list[tuple[int, int, int]]  # (column, first step, last step) per row
    rewards: torch.Tensor  # (B, L), bootstraps folded in
    values: torch.Tensor  # (B, L)
    mask: torch.Tensor  # (B, L) bool, True on a segment's steps
    shape: tuple[int, ...]  # the time-major input's shape, (T,) or (T, N)

    def scatter(self, rows: torch.Tensor) -> torch.Tensor:
        """Per-row results (B, L) back to the time-major shape."""
        columns = 1 if len(self.shape) == 1 else self.shape[1]
        out = torch.zeros((self.shape[0], columns), dtype=rows.dtype)
        for b, (n, start, end) in enumerate(self.segments):
            out[start:end + 1, n] = rows[b, :end - start + 1]
        return out[:, 0] if len(self.shape) == 1 else out


def episode_rows(rewards, values, next_values, terminated, truncated, gamma) -> Rows:
    rewards, values, next_values = _tensor(rewards), _tensor(values), _tensor(next_values)
    terminated, truncated = _tensor(terminated).to(torch.bool), _tensor(truncated).to(torch.bool)
    shape = tuple(rewards.shape)
    if rewards.dim() == 1:
        rewards, values, next_values = rewards[:, None], values[:, None], next_values[:, None]
        terminated, truncated = terminated[:, None], truncated[:, None]
    T, N = rewards.shape
    segments = []
    for n in range(N):
        start = 0
        for t in range(T):
            if bool(terminated[t, n]) or bool(truncated[t, n]) or t == T - 1:
                segments.append((n, start, t))
                start = t + 1
    width = max(end - start + 1 for _, start, end in segments)
    row_rewards = torch.zeros(len(segments), width, dtype=rewards.dtype)
    row_values = torch.zeros(len(segments), width, dtype=values.dtype)
    row_mask = torch.zeros(len(segments), width, dtype=torch.bool)
    for b, (n, start, end) in enumerate(segments):
        length = end - start + 1
        row_rewards[b, :length] = rewards[start:end + 1, n]
        row_values[b, :length] = values[start:end + 1, n]
        row_mask[b, :length] = True
        if not bool(terminated[end, n]):  # truncated, or the rollout's unfinished episode: bootstrap
            row_rewards[b, length - 1] = row_rewards[b, length - 1] + gamma * next_values[end, n]
    return Rows(segments, row_rewards, row_values, row_mask, shape)
