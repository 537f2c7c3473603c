"""The candidate protocol: which operations exist, how the suite calls them, what counts as unusable.

Every call to candidate code goes through :func:`call`, which converts the suite's numpy arrays to
the candidate's array kind, hands the candidate copies, captures what it prints, notices if it
mutated its inputs, and turns whatever comes back into float64 numpy arrays, or raises
:class:`CandidateError` with one line saying what was wrong.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Operation:
    name: str
    signature: str
    meaning: str


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in [
        Operation(
            "gae",
            "(rewards, values, next_values, terminated, truncated, gamma, lam) -> (advantages, returns)",
            "time-major (T,) or (T, N); terminated[t]: s_{t+1} is terminal (no bootstrap); truncated[t]: a time "
            "limit cut the episode after step t (bootstrap from next_values[t], trace ends); next_values[t] = V of "
            "the real next observation; the last step bootstraps from next_values[T-1] unless terminated; "
            "returns = advantages + values; flags are bool arrays",
        ),
        Operation("rewards_to_go", "(rewards, gamma) -> returns", "one episode, (T,)"),
        Operation("reinforce_loss", "(logp, returns, baseline=None) -> loss", "torch scalar; minimising it ascends J"),
        Operation(
            "actor_critic_losses",
            "(logp, values, next_values, rewards, terminated, gamma) -> (actor_loss, critic_loss)",
            "one-step TD actor-critic",
        ),
        Operation(
            "ppo_clip_loss",
            "(logp_new, logp_old, advantages, clip_eps) -> loss",
            "torch scalar, mean over samples, differentiable in logp_new",
        ),
        Operation(
            "ppo_value_loss",
            "(values, returns, old_values=None, clip_eps=None) -> loss",
            "squared error; clipped variant when both optional args are given",
        ),
        Operation("normalize_advantages", "(advantages) -> advantages", "batch mean 0, std 1"),
        Operation(
            "kl_estimate",
            "(logp_sampler, logp_other, kind) -> per-sample estimates",
            "estimates KL(sampler||other) from samples of the sampler; kind in {k1, k2, k3}",
        ),
        Operation("conjugate_gradient", "(matvec, b, iters, tol) -> x", "solves A x = b for SPD A"),
        Operation("natural_step", "(grad, fvp, max_kl, cg_iters) -> step", "step ~ F^-1 g with 0.5 step' F step = max_kl"),
        Operation(
            "line_search",
            "(surrogate, kl, x0, fullstep, max_kl, max_backtracks) -> x",
            "first x0 + 0.5^k fullstep with surrogate(x) > surrogate(x0) and kl(x) <= max_kl, else x0",
        ),
        Operation("diag_gaussian_log_prob", "(mean, log_std, action) -> log_prob", "(B, D) -> (B,), sum over dims"),
        Operation(
            "tanh_gaussian_log_prob",
            "(mean, log_std, pre_tanh) -> log_prob",
            "(B, D) -> (B,): log-density of a = tanh(u) at u = pre_tanh, Jacobian included",
        ),
        Operation("train_ppo", "(env, iterations, seed) -> episode returns", "end-to-end trainer on the gridworld"),
    ]
}

ARRAY_KINDS = ("numpy", "torch", "jax")


class CandidateError(Exception):
    """The candidate raised, or returned something unusable. The message is one line."""


@dataclass
class Candidate:
    """A loaded candidate: its operations and what it declares about itself."""

    spec: str
    name: str
    operations: dict[str, Callable[..., Any]]
    array: str = "numpy"
    precision: str | None = None  # "float32" if the candidate computes in single precision
    flags: str = "bool"  # "bool" or "float": how terminated / truncated are passed
    conventions: dict[str, Any] = field(default_factory=dict)
    xfail: dict[str, str] = field(default_factory=dict)  # clause id -> reason
    version: str = ""
    device: str = "cpu"

    def provides(self, operation: str) -> bool:
        return operation in self.operations


@dataclass
class Call:
    """One completed candidate call: outputs as float64 numpy arrays and the precision they carry."""

    outputs: list[np.ndarray]
    unit_roundoff: float
    code: str
    printed: str = ""
    output_dtypes: tuple[str, ...] = ()
    raw: Any = None  # what the candidate returned, unconverted (torch tensors keep their graph)
    inputs: dict[str, Any] = field(default_factory=dict)  # the arguments as the candidate received them


def unit_roundoff(dtype) -> float:
    """``u = eps / 2`` for a floating dtype (the relative error of one correctly rounded operation)."""
    return float(np.finfo(dtype).eps) / 2


# --------------------------------------------------------------------------------------------
# conversion


def _to_candidate(value, candidate: Candidate, dtype, kind: str | None = None, requires_grad: bool = False):
    """A fresh copy of a suite value in the candidate's array kind (scalars pass through)."""
    if not isinstance(value, np.ndarray):
        return value
    kind = kind or candidate.array
    array = value.copy()
    if array.dtype == bool:
        if candidate.flags == "float":
            array = array.astype(dtype)
    else:
        array = array.astype(dtype)
    if kind == "torch":
        import torch

        tensor = torch.from_numpy(array)
        tensor = tensor.to(candidate.device) if candidate.device != "cpu" else tensor
        return tensor.requires_grad_(True) if requires_grad else tensor
    if kind == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    return array


def _is_array(value) -> bool:
    if isinstance(value, np.ndarray):
        return True
    module = type(value).__module__
    return module.startswith("torch") and hasattr(value, "detach") or module.startswith(("jax", "jaxlib"))


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach"):  # torch
        value = value.detach()
        if getattr(value, "dtype", None) is not None and "bfloat16" in str(value.dtype):
            value = value.float()
        return value.cpu().numpy()
    return np.asarray(value)  # jax


def describe(value) -> str:
    """A short name for what a candidate returned, for error messages."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    if _is_array(value):
        array = _to_numpy(value)
        return f"an array of shape {tuple(array.shape)} and dtype {array.dtype}"
    return f"a {type(value).__name__} ({value!r:.40})"


def _snapshot(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if _is_array(value):
        return _to_numpy(value).copy()
    return None


# --------------------------------------------------------------------------------------------
# output capture: neither Python-level prints nor writes to fd 1/2 from native code reach the
# suite's own output.


@contextlib.contextmanager
def captured_output():
    sink = io.StringIO()
    saved = []
    files = []
    try:
        for fd in (1, 2):
            try:
                sys.stdout.flush() if fd == 1 else sys.stderr.flush()
            except Exception:
                pass
            try:
                tmp = tempfile.TemporaryFile()
                saved.append((fd, os.dup(fd)))
                os.dup2(tmp.fileno(), fd)
                files.append(tmp)
            except OSError:
                pass
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield sink
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        for tmp in files:
            tmp.seek(0)
            sink.write(tmp.read(2000).decode("utf-8", "replace"))
            tmp.close()


# --------------------------------------------------------------------------------------------
# the call


def format_call(operation: str, args: dict[str, Any], limit: int = 64) -> str:
    """The call as code a user can paste (``import numpy as np`` assumed)."""
    parts = []
    for name, value in args.items():
        if isinstance(value, np.ndarray):
            if value.size > limit:
                text = f"<array shape={value.shape} dtype={value.dtype}>"
            else:
                text = f"np.array({value.tolist()!r}"
                text += ")" if value.dtype in (bool, np.float64) else f", dtype=np.{value.dtype})"
            parts.append(f"{name}={text}")
        else:
            parts.append(f"{name}={value!r}")
    return f"{operation}({', '.join(parts)})"


class MutatedInput(CandidateError):
    """The candidate changed an input array in place."""

    def __init__(self, message: str, name: str, before: np.ndarray, after: np.ndarray):
        super().__init__(message)
        self.name, self.before, self.after = name, before, after


def call(
    candidate: Candidate,
    operation: str,
    args: dict[str, Any],
    *,
    dtype=np.float64,
    outputs: int = 1,
    shape: tuple[int, ...] | None = None,
    allow_nonfinite: bool = False,
    array: str | None = None,
    requires_grad: tuple[str, ...] = (),
) -> Call:
    """Call ``candidate.operation(**args)`` and validate what comes back.

    ``outputs``: how many arrays the operation returns (1: a bare array; n > 1: a tuple of n).
    ``shape``: the shape every output must have (None: not checked; ``()`` for a scalar).
    ``array``: pass arrays as this kind whatever the candidate declares (``"torch"`` for the
    operations whose meaning is a gradient); ``requires_grad``: inputs passed as leaf tensors that
    require grad. ``Call.raw`` keeps the candidate's own return value for autograd.
    """
    function = candidate.operations[operation]
    converted = {
        name: _to_candidate(value, candidate, dtype, array, name in requires_grad) for name, value in args.items()
    }
    before = {name: _snapshot(value) for name, value in converted.items()}
    code = format_call(operation, {k: (v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype != bool else v) for k, v in args.items()})
    with warnings.catch_warnings(), captured_output() as printed, np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            result = function(**converted)
        except (KeyboardInterrupt, MemoryError):
            raise
        except BaseException as exc:  # SystemExit too: a candidate cannot stop the suite
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CandidateError(f"{operation} raised {type(exc).__name__}" + (f": {message}" if message else "")) from None

    for name, value in converted.items():
        if before[name] is None:
            continue
        after = _snapshot(value)
        if after.shape != before[name].shape or not np.array_equal(after, before[name], equal_nan=True):
            where = np.argwhere(after != before[name]) if after.shape == before[name].shape else []
            at = f" at index {tuple(int(i) for i in where[0])}" if len(where) else ""
            raise MutatedInput(f"{operation} mutated its input `{name}` in place{at}", name, before[name], after)

    if outputs == 1:
        items = [result]
        if isinstance(result, (list, tuple)):
            raise CandidateError(f"{operation} returned {describe(result)}; expected one array")
    else:
        if not isinstance(result, (list, tuple)):
            raise CandidateError(f"{operation} returned {describe(result)}; expected a tuple of {outputs} arrays")
        if len(result) != outputs:
            raise CandidateError(f"{operation} returned {describe(result)}; expected a tuple of {outputs} arrays")
        items = list(result)

    arrays, dtypes = [], []
    for index, item in enumerate(items):
        label = operation if outputs == 1 else f"{operation} output {index}"
        if item is None or not _is_array(item):
            raise CandidateError(f"{label} is {describe(item)}; expected an array")
        array = _to_numpy(item)
        if array.dtype.kind not in "fc":
            raise CandidateError(f"{label} has dtype {array.dtype}; expected a floating dtype")
        if array.dtype.kind == "c":
            raise CandidateError(f"{label} has complex dtype {array.dtype}; expected a real floating dtype")
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise CandidateError(f"{label} has shape {tuple(array.shape)}; expected {tuple(shape)}")
        if not allow_nonfinite and not np.all(np.isfinite(array)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise CandidateError(f"{label} is {array[bad]} at index {bad} on finite input")
        dtypes.append(array.dtype)
        arrays.append(array.astype(np.float64))

    precisions = [np.dtype(dtype)] + dtypes
    if candidate.precision:
        precisions.append(np.dtype(candidate.precision))
    u = max(unit_roundoff(p) for p in precisions)
    return Call(arrays, u, code, printed.getvalue(), tuple(str(d) for d in dtypes), raw=result, inputs=converted)
