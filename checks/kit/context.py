"""What a check sees of the run: the context ``ctx`` it is handed, and the types and helpers of a candidate call.

A chapter module (``checks/clauses/*.py``) is written against this surface and the rest of the kit, never
against the runner (``checks/runner/``), which loads the candidate and judges it in workers. A check is a
function ``fn(ctx)`` registered with :func:`rlspec.checks.kit.registry.check`; ``ctx`` gives it:

- ``ctx.call(operation, args, *, dtype=None, outputs=1, shape=None, allow_nonfinite=False, array=None,
  requires_grad=(), repeat=None, record=True) -> Call``: the candidate's operation on ``args`` (numpy arrays,
  converted to the candidate's array kind), its outputs back as float64 numpy arrays in a :class:`Call`;
  a candidate that raises or returns something unusable raises :class:`CandidateError` (the clause's
  verdict is ``error``);
- ``ctx.invoke(operation, args) -> (result, changes)``: candidate code called as it is (``train_ppo`` takes
  an environment, not arrays), its output captured and the global state it changed restored;
- ``ctx.candidate`` (its ``operations``, ``conventions``, ``array``), ``ctx.convention(key)``,
  ``ctx.default(key)``, ``ctx.provided(key, *needed)``, ``ctx.note(text)``, ``ctx.dtype``, ``ctx.u``,
  ``ctx.seed``, ``ctx.seed_for(label)``, ``ctx.rng(label)``, ``ctx.examples(tier)``,
  ``ctx.property(strategy, body, label=..., tier=...)``, ``ctx.drawing``, ``ctx.calls``;
- the outcomes a check may raise: :class:`ClauseFailure` (``fail``, from :mod:`.assertions`),
  :class:`CandidateError` (``error``), :class:`NotProvided` (``not-provided``), and
  :class:`MutatedInput` (the candidate changed an input in place).

``describe``, ``format_call`` and ``captured_output`` are the helpers a message or a direct call needs.
The runner (``checks/runner/protocol.py``) implements ``ctx.call`` with these types; this module imports
nothing of it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .assertions import ClauseFailure

__all__ = ["Call", "CandidateError", "ClauseFailure", "MutatedInput", "NotProvided", "captured_output", "describe",
           "format_call", "format_value"]

class CandidateError(Exception):
    """The candidate raised, or returned something unusable. The message is one line."""


class NotProvided(Exception):
    """The candidate declares that it lacks what a clause needs (a KL kind, an aggregation mode): the
    clause gets ``not-provided`` with this one-line message, as for a missing operation."""


class MutatedInput(CandidateError):
    """The candidate changed an input array in place."""

    def __init__(self, message: str, name: str, before: np.ndarray, after: np.ndarray):
        super().__init__(message)
        self.name, self.before, self.after = name, before, after


@dataclass
class Call:
    """One completed candidate call: outputs as float64 numpy arrays and the precision they carry."""

    outputs: list[np.ndarray]
    unit_roundoff: float
    written: Any  # the call as code: the text, or a function that writes it when ``code`` is first read
    printed: str = ""
    output_dtypes: tuple[str, ...] = ()
    raw: Any = None  # what the candidate returned, unconverted (torch tensors keep their graph)
    inputs: dict[str, Any] = field(default_factory=dict)  # the arguments as the candidate received them
    notes: list[str] = field(default_factory=list)  # side effects the suite undid
    args: dict[str, Any] = field(default_factory=dict)  # the arguments as the suite made them (numpy, before conversion)
    operation: str = ""
    widened_by: str = ""  # what set the precision judged at when lower than the inputs': "output" or "declared"
    precision: str = ""  # the name of that precision ("float32")
    dtype: Any = np.float64  # how the call was made, so that it can be made again on another candidate
    array: str | None = None
    requires_grad: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        """The call as code a user can paste (:func:`format_call`). Written when first read: a message needs it,
        a passing check does not, and writing every argument out is a fifth of what a small call costs."""
        if not isinstance(self.written, str):
            self.written = self.written()
        return self.written

    @code.setter
    def code(self, text: str) -> None:
        self.written = text


# --------------------------------------------------------------------------------------------
# what a candidate returned, for messages


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


# --------------------------------------------------------------------------------------------
# output capture: neither Python-level prints nor writes to fd 1/2 from native code reach the
# suite's own output.


_spare_files: dict[int, list] = {}  # process id -> temporary files free for reuse by captured_output


def _capture_file():
    """An empty temporary file of this process: creating one per call (two per candidate call) costs more
    than the call of a small operation, so they are reused (per process: a forked worker has its own)."""
    spare = _spare_files.setdefault(os.getpid(), [])
    if spare:
        tmp = spare.pop()
        tmp.seek(0)
        tmp.truncate()
        return tmp
    return tempfile.TemporaryFile()


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
                tmp = _capture_file()
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
            _spare_files.setdefault(os.getpid(), []).append(tmp)


# --------------------------------------------------------------------------------------------
# the call


def format_value(value, limit: int = 64) -> str:
    """One argument as code that rebuilds it: what the candidate received, numpy, torch or jax (``import numpy
    as np``, ``import torch``, ``import jax.numpy as jnp`` assumed)."""
    return _value_writer(value, None, limit)()


def _value_writer(value, data: np.ndarray | None, limit: int):
    """A function that writes ``value`` as :func:`format_value` does. ``data``: the values of an array ``value``
    as numpy (what ``_to_numpy`` gives), copied when the call was made; None: read ``value`` itself, now. The
    kind, dtype and flags are read now; only the values are written later, from ``data``."""
    if isinstance(value, np.ndarray):
        array = value if data is None else data
        if array.size > limit:
            text = f"<array shape={array.shape} dtype={array.dtype}>"
            return lambda: text
        tail = ")" if array.dtype in (bool, np.float64) else f", dtype=np.{array.dtype})"
        return lambda: f"np.array({array.tolist()!r}" + tail
    module = type(value).__module__
    if module.startswith("torch") and hasattr(value, "detach"):
        if value.numel() > limit:
            text = f"<tensor shape={tuple(value.shape)} dtype={value.dtype}>"
            return lambda: text
        if data is None:
            data = value.detach().cpu()
            data = (data.float() if "bfloat16" in str(data.dtype) else data).numpy()
        extra = f", device={str(value.device)!r}" if value.device.type != "cpu" else ""
        extra += ", requires_grad=True" if value.requires_grad else ""
        dtype = value.dtype
        return lambda: f"torch.tensor({data.tolist()!r}, dtype={dtype}{extra})"
    if module.startswith(("jax", "jaxlib")) and hasattr(value, "dtype"):
        array = np.asarray(value) if data is None else data
        if array.size > limit:
            text = f"<array shape={array.shape} dtype={array.dtype}>"
            return lambda: text
        return lambda: f"jnp.array({array.tolist()!r}, dtype=jnp.{array.dtype})"
    text = repr(value.item()) if isinstance(value, np.generic) else repr(value)
    return lambda: text


def format_call(operation: str, args: dict[str, Any], limit: int = 64) -> str:
    """The call as code a user can paste, with each argument as the candidate received it (``import numpy as
    np``, and ``import torch`` for torch arguments, assumed)."""
    return f"{operation}({', '.join(f'{name}={format_value(value, limit)}' for name, value in args.items())})"


def call_writer(operation: str, args: dict[str, Any], copies: dict[str, np.ndarray | None], limit: int = 64):
    """A function that writes :func:`format_call`'s text for ``args`` as they are now, later: the values of each
    array argument are read from ``copies`` (its values as numpy, copied before the call, which nothing else
    holds), everything else is read now. The text is the same whatever the candidate or a check does to the
    arguments afterwards."""
    writers = [(name, _value_writer(value, copies.get(name), limit)) for name, value in args.items()]
    return lambda: f"{operation}({', '.join(f'{name}={write()}' for name, write in writers)})"
