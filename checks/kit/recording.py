"""What an update loop did to the objects the suite handed it: every forward of the policy module, every
optimizer step, the gradient each step applied and the parameters before and after it.

``ppo_update`` receives the suite's own policy module and optimizer, so nothing has to be asked of the
candidate: the suite watches them. Real update loops drive them the ordinary way (``policy(obs)`` or
``policy.evaluate_actions(obs, actions)``, ``optimizer.zero_grad()``, ``loss.backward()``,
``nn.utils.clip_grad_norm_(policy.parameters(), ...)``, ``optimizer.step()``), and that is all the
recording needs:

* :class:`ObservedActorCritic` is the suite's linear actor-critic on one-hot observations. Each forward
  records which rows of the batch it saw (a one-hot row names its sample), how many optimizer steps came
  before it, and hooks its outputs (logits or means, values) so that a ``backward`` through them marks the
  forward as one that fed a gradient. A step's minibatch is then the rows of the forwards that fed it,
  whatever the candidate's own bookkeeping (a ``torch.randperm``, ``np.random.permutation``, a sampler).
* :class:`RecordingSGD` is plain SGD, ``p <- p - lr grad``, with ``torch.optim``'s surface (``param_groups``,
  ``zero_grad(set_to_none=...)``, ``step(closure)``, ``state_dict`` / ``load_state_dict``,
  ``add_param_group``). At each ``step()`` it records the gradient it was given (after whatever clipping
  the candidate applied) and the parameters before and after. It is not a ``torch.optim.Optimizer``
  subclass: the first one built in a process imports TorchDynamo, about 4 s here, more than the whole
  chapter's checks.

The suite's optimizer has two parameter groups, the actor's (``actor.weight``, ``log_std``) and the
critic's (``critic.weight``), as update loops with separate learning rates have: a gradient-norm clip
must take one norm over every parameter, and one taken per group is then visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...reference.ppo import LinearActorCritic


@dataclass
class Forward:
    """One forward of the policy module."""

    index: int
    rows: np.ndarray | None  # (B,) the batch rows it saw, in order; None if an input was not a row of the batch's obs
    version: int  # optimizer steps taken before it
    graph: bool  # its outputs are part of an autograd graph
    api: str  # "forward" or "evaluate_actions"
    reached: set = field(default_factory=set)  # "actor", "critic": outputs a backward sent gradient through


@dataclass
class Step:
    """One ``optimizer.step()``."""

    index: int
    grads: dict  # name -> the gradient it applied (float64 copy; None where p.grad was None)
    before: dict  # name -> the parameters before it
    after: dict  # name -> the parameters after it
    forwards: list  # indices of the forwards whose outputs fed a gradient since the previous step
    zero_grads: int  # optimizer.zero_grad() calls since the previous step

    def rows(self, forwards: list[Forward]) -> np.ndarray | None:
        """The minibatch this step's gradient came from: the rows of the first forward that fed it, in its order
        (repeats kept), then those of any other forward that fed it and are not already there (an actor forward and
        a critic forward of the same rows are one minibatch). Empty where no forward fed it."""
        seen: list[int] = []
        for i in self.forwards:
            rows = forwards[i].rows
            if rows is None:
                return None
            seen += rows.tolist() if not seen else [r for r in rows.tolist() if r not in seen]
        return np.asarray(seen, dtype=np.int64)


@dataclass
class Recording:
    """Everything the update did, in order."""

    names: list  # parameter names, the module's order
    forwards: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    zero_grads: int = 0  # since the last step
    pending: list = field(default_factory=list)  # forwards that fed a gradient since the last step

    def forward(self, rows, graph: bool, api: str) -> Forward:
        record = Forward(len(self.forwards), rows, len(self.steps), graph, api)
        self.forwards.append(record)
        return record

    def reached(self, record: Forward, output: str) -> None:
        record.reached.add(output)
        if record.index not in self.pending:
            self.pending.append(record.index)

    def step_rows(self, k: int) -> np.ndarray | None:
        return self.steps[k].rows(self.forwards)

    def trailing(self) -> list[Forward]:
        """Forwards after the last step (e.g. the minibatch whose KL stopped the update before its step)."""
        return [f for f in self.forwards if f.version == len(self.steps)]


def _marker(recording: Recording, record: Forward, output: str):
    def hook(grad):
        recording.reached(record, output)  # leaves the gradient as it is

    return hook


def snapshot(names, tensors) -> dict:
    return {name: (None if t is None else t.detach().cpu().double().numpy().copy()) for name, t in zip(names, tensors)}


class ObservedActorCritic(LinearActorCritic):
    """The suite's :class:`LinearActorCritic` on one-hot observations, recording every forward.

    ``policy(obs) -> (dist, values)`` and ``policy.evaluate_actions(obs, actions) -> (values, log_prob,
    entropy)`` are the reference's, bit for bit; the recording only watches."""

    def __init__(self, obs_dim, action_dim, kind="categorical"):
        super().__init__(obs_dim, action_dim, kind)
        self.recording: Recording | None = None
        self._api = "forward"

    def observe(self, recording: Recording) -> "ObservedActorCritic":
        self.recording = recording
        return self

    @staticmethod
    def rows_of(obs) -> np.ndarray | None:
        """The sample each observation is: the one-hot rows the suite built (None if one is not one-hot)."""
        flat = obs.detach().reshape(-1, obs.shape[-1])
        ones = (flat == 1).sum(-1) == 1
        zeros = ((flat == 0) | (flat == 1)).all(-1)
        if not bool((ones & zeros).all()):
            return None
        return flat.argmax(-1).cpu().numpy().astype(np.int64)

    def forward(self, obs):
        out = self.actor(obs)  # (B, action_dim): logits or means
        values = self.critic(obs).squeeze(-1)  # (B,)
        recording = self.recording
        if recording is not None:
            graph = out.requires_grad
            record = recording.forward(self.rows_of(obs), graph, self._api)
            if graph:  # a backward through either output marks this forward as one that fed a gradient
                out.register_hook(_marker(recording, record, "actor"))
                values.register_hook(_marker(recording, record, "critic"))
        if self.kind == "categorical":
            return torch.distributions.Categorical(logits=out), values
        return torch.distributions.Normal(out, self.log_std.exp().expand_as(out)), values

    def evaluate_actions(self, obs, actions):
        self._api = "evaluate_actions"
        try:
            return super().evaluate_actions(obs, actions)
        finally:
            self._api = "forward"

    def __deepcopy__(self, memo):
        """A copy (an update loop keeping a frozen old policy) does not record into this recording."""
        import copy

        twin = ObservedActorCritic.__new__(ObservedActorCritic)
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "recording"}, memo))
        twin.recording = None
        return twin


class RecordingSGD:
    """Plain SGD, ``p <- p - lr grad`` per parameter group, recording every ``step()``.

    ``named_params``: ``(name, tensor)`` pairs; ``groups``: lists of names, one parameter group each
    (default: one group). ``recording``: where steps are recorded beside the module's forwards (a fresh
    one by default)."""

    def __init__(self, named_params, lr, groups=None, recording: Recording | None = None):
        named = list(named_params)
        self.names = [name for name, _ in named]
        by_name = dict(named)
        groups = groups or [self.names]
        self.defaults = {"lr": float(lr)}
        self.param_groups = [{"params": [by_name[n] for n in group], "lr": float(lr)} for group in groups]
        self.state: dict = {}
        self.recording = recording if recording is not None else Recording(self.names)
        self._params = [p for _, p in named]  # the module's order: how records are laid out

    # ---- torch.optim.Optimizer's surface -----------------------------------------------------

    def zero_grad(self, set_to_none: bool = True):
        self.recording.zero_grads += 1
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_().zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        recording = self.recording
        before = snapshot(self.names, self._params)
        grads = snapshot(self.names, [p.grad for p in self._params])
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
        recording.steps.append(Step(len(recording.steps), grads, before, snapshot(self.names, self._params),
                                    list(recording.pending), recording.zero_grads))
        recording.pending.clear()
        recording.zero_grads = 0
        return loss

    def add_param_group(self, group: dict):
        params = group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        self.param_groups.append({**self.defaults, **group, "params": params})

    def state_dict(self) -> dict:
        ids, groups, n = {}, [], 0
        for group in self.param_groups:
            indices = []
            for p in group["params"]:
                ids.setdefault(id(p), n + len(ids))
                indices.append(ids[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": indices})
        return {"state": {}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict):
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})

    def __repr__(self) -> str:
        return f"RecordingSGD(lr={self.defaults['lr']}, groups={len(self.param_groups)})"

    # ---- the record ---------------------------------------------------------------------------

    @property
    def grads(self) -> list[dict]:
        return [s.grads for s in self.recording.steps]

    @property
    def snapshots(self) -> list[dict]:
        """The parameters before the first step, then after each."""
        steps = self.recording.steps
        if not steps:
            return [snapshot(self.names, self._params)]
        return [steps[0].before] + [s.after for s in steps]

    @property
    def steps(self) -> int:
        return len(self.recording.steps)
