"""The candidate protocol: how the runner calls a candidate's operations and what counts as unusable.

Which operations exist, and their signatures and meanings, is the contract's (``rlspec.spec.contract``).

Every call to candidate code goes through :func:`call`, which converts the suite's numpy arrays to
the candidate's array kind, hands the candidate copies, captures what it prints, notices if it
mutated its inputs, and turns whatever comes back into float64 numpy arrays, or raises
:class:`CandidateError` with one line saying what was wrong. The types a call returns and raises (``Call``,
``CandidateError``, ``NotProvided``, ``MutatedInput``) are defined in ``checks/kit/context.py``, the surface the
chapters see; this module is the runner's and no chapter imports it.
"""

from __future__ import annotations

import os
import random
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ...spec import contract
from ..kit.context import (  # noqa: F401 - the types and helpers of a call are the kit's (what a check sees); re-exported
    Call,
    CandidateError,
    MutatedInput,
    NotProvided,
    _is_array,
    _to_numpy,
    call_writer,
    captured_output,
    describe,
    format_call,
    format_value,
)

# The operations, their signatures, array kinds and meanings are the contract's (spec/contract/*.toml).
OPERATIONS: dict[str, contract.Operation] = contract.operations()
ARRAY_KINDS: tuple[str, ...] = contract.declarations()["RLSPEC_ARRAY"].allowed


@dataclass
class Candidate:
    """A loaded candidate: its operations and what it declares about itself."""

    spec: str
    name: str
    operations: dict[str, Callable[..., Any]]
    array: str = "numpy"
    precision: str | None = None  # "float32" if the candidate computes in single precision (every operation)
    flags: str = "bool"  # "bool" or "float": how terminated / truncated are passed
    conventions: dict[str, Any] = field(default_factory=dict)
    xfail: dict[str, str] = field(default_factory=dict)  # clause id -> reason
    version: str = ""
    device: str = "cpu"
    precisions: dict[str, str] = field(default_factory=dict)  # operation -> declared precision (RLSPEC_PRECISION table)

    def __post_init__(self):
        # Declarations are validated when a candidate is made, however it is made (the loader adds the
        # candidate's name to the message): an unknown key or a value the contract does not allow raises
        # contract.ContractError, never a silent default.
        self.conventions = contract.validate_conventions(self.conventions)
        self.xfail = {str(k).upper(): str(v) for k, v in self.xfail.items()}
        contract.validate_clause_ids(self.xfail, "RLSPEC_XFAIL")

    def provides(self, operation: str) -> bool:
        return operation in self.operations

    def precision_of(self, operation: str) -> str | None:
        """The precision declared for ``operation`` (a table entry, else the module-wide one); None if none."""
        declared = self.precisions.get(operation, self.precision)
        return None if declared == "float64" else declared

    def info(self) -> dict[str, Any]:
        """What the parent process needs to know about a candidate loaded in a worker."""
        return {
            "spec": self.spec, "name": self.name, "operations": sorted(self.operations), "array": self.array,
            "precision": self.precision, "flags": self.flags, "conventions": dict(self.conventions),
            "xfail": dict(self.xfail), "version": self.version, "device": self.device,
            "precisions": dict(self.precisions),
        }


UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def unit_roundoff(dtype) -> float:
    """``u = eps / 2`` for a floating dtype (the relative error of one correctly rounded operation); a name
    numpy lacks (``bfloat16``) from the table."""
    if isinstance(dtype, str) and dtype in UNIT_ROUNDOFF:
        return UNIT_ROUNDOFF[dtype]
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


def _snapshot(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if _is_array(value):
        return _to_numpy(value).copy()
    return None


class Nondeterministic(CandidateError):
    """Two calls with identical inputs (and identical global RNG state) returned different outputs."""


# --------------------------------------------------------------------------------------------
# global state: what a candidate may change behind the caller's back. The suite restores all of
# it after every call. Changing the torch default dtype or grad mode is an error (it changes the
# meaning of the caller's own code); the rest (RNG draws or reseeding, environment variables,
# warnings filters, working directory) is restored and reported as a note.

BREAKING_STATE = ("torch default dtype", "torch grad mode")


def _environment() -> dict:
    """A copy of the environment: of os.environ's own (encoded) mapping where it has one, which copies in
    0.1 us where decoding every variable takes 60."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


def _decoded(value) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else value


def _numpy_rng_unchanged(state) -> bool:
    """Whether numpy's global RNG is still in ``state`` (a ``get_state()`` tuple), read from the generator's
    C struct (``uint32 key[624]; int pos``): 1 us, where ``get_state()`` copies the key word by word (0.1 ms).
    False when it cannot tell (another layout, a cached Gaussian): the caller then compares full states."""
    name, key, pos, has_gauss, _ = state
    if name != "MT19937" or has_gauss:
        return False
    try:
        import ctypes

        address = np.random.mtrand._rand._bit_generator.ctypes.state_address
        return ctypes.string_at(address, key.nbytes + 4) == key.astype(np.uint32).tobytes() + bytes(ctypes.c_int(pos))
    except (AttributeError, TypeError, ValueError):
        return False


def _global_state(numpy_before=None) -> dict[str, Any]:
    """The global state a call may change. ``numpy_before``: numpy's RNG state before the call, reused as
    the state after it when the generator did not move (see :func:`_numpy_rng_unchanged`)."""
    unchanged = numpy_before is not None and _numpy_rng_unchanged(numpy_before)
    state = {
        "numpy global RNG": numpy_before if unchanged else np.random.get_state(),
        "python random RNG": random.getstate(),
        "environment variables": _environment(),
        "working directory": os.getcwd(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch RNG"] = torch.get_rng_state()
        state["torch default dtype"] = torch.get_default_dtype()
        state["torch grad mode"] = torch.is_grad_enabled()
    return state


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return False
        if not any(isinstance(x, np.ndarray) or hasattr(x, "equal") for x in a):
            return a == b  # plain data (Python's RNG state: 625 ints): one comparison in C, not one call per item
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if hasattr(a, "equal") and hasattr(b, "equal"):  # torch tensors
        return bool(a.equal(b))
    return a == b


def _restore(state: dict[str, Any], changed: Iterable[str] | None = None) -> None:
    """Put back the global state ``state``: the entries named in ``changed`` (None: all of them). Setting
    numpy's global RNG state costs about 0.1 ms, so after a call that left it alone it is not set again."""
    changed = set(state) if changed is None else set(changed)
    if "numpy global RNG" in changed:
        np.random.set_state(state["numpy global RNG"])
    if "python random RNG" in changed:
        random.setstate(state["python random RNG"])
    if "environment variables" in changed and _environment() != state["environment variables"]:
        os.environ.clear()
        os.environ.update({_decoded(k): _decoded(v) for k, v in state["environment variables"].items()})
    if "working directory" in changed and os.getcwd() != state["working directory"]:
        os.chdir(state["working directory"])
    torch = sys.modules.get("torch")
    if torch is not None and "torch RNG" in state:
        if "torch RNG" in changed:
            torch.set_rng_state(state["torch RNG"])
        torch.set_default_dtype(state["torch default dtype"])
        torch.set_grad_enabled(state["torch grad mode"])


def _describe_change(name: str, before, after) -> str:
    if name in ("torch default dtype", "torch grad mode"):
        return f"{name} {before} -> {after}"
    if name == "environment variables":
        changed = sorted(set(before) ^ set(after) | {k for k in set(before) & set(after) if before[k] != after[k]})
        return f"environment variables ({', '.join(_decoded(k) for k in changed[:3])})"
    return name


# Candidate calls that moved a global RNG (restored after each): a verdict reached after one may depend on the
# RNG's state, not on the inputs alone (verdict.Context.seed_dependent reads it).
rng_draws = 0


def _invoke(function, converted: dict[str, Any], operation: str):
    """One call of candidate code: output captured, warnings silenced, global state restored.

    Returns ``(result, printed, changes)``; raises CandidateError if it raised or broke state.
    """
    global rng_draws
    before = _global_state()
    with warnings.catch_warnings(), captured_output() as printed, np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        filters = list(warnings.filters)
        try:
            result = function(**converted)
        except KeyboardInterrupt:
            raise
        except MemoryError:
            rng_draws += 1  # not looked at: assume it drew
            _restore(before)
            raise CandidateError(f"{operation} raised MemoryError (out of memory)") from None
        except BaseException as exc:  # SystemExit too: a candidate cannot stop the suite
            after = _global_state(before["numpy global RNG"])
            rng_draws += any("RNG" in k and not _same(before[k], after.get(k)) for k in before)
            _restore(before)
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CandidateError(f"{operation} raised {type(exc).__name__}" + (f": {message}" if message else "")) from None
        filters_changed = warnings.filters != filters
    after = _global_state(before["numpy global RNG"])
    changed = [k for k in before if not _same(before[k], after.get(k))]
    rng_draws += any("RNG" in k for k in changed)
    _restore(before, changed)
    changes = [_describe_change(k, before[k], after.get(k)) for k in changed]
    if filters_changed:
        changes.append("warnings filters")
    breaking = [c for c in changes if c.startswith(BREAKING_STATE)]
    if breaking:
        raise CandidateError(f"{operation} changed global state: {'; '.join(breaking)} (restored)")
    return result, printed.getvalue(), changes


def _plain(value) -> bool:
    return value is None or isinstance(value, (np.ndarray, bool, int, float, str, np.generic))


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
    repeat: bool = False,
) -> Call:
    """Call ``candidate.operation(**args)`` and validate what comes back.

    ``outputs``: how many arrays the operation returns (1: a bare array; n > 1: a tuple of n).
    ``shape``: the shape every output must have (None: not checked; ``()`` for a scalar).
    ``array``: pass arrays as this kind whatever the candidate declares (``"torch"`` for the
    operations whose meaning is a gradient); ``requires_grad``: inputs passed as leaf tensors that
    require grad. ``Call.raw`` keeps the candidate's own return value for autograd.
    ``repeat``: call a second time on fresh copies of the same inputs, from the same global RNG
    state, and raise :class:`Nondeterministic` if the outputs differ in any bit (only when every
    argument is plain data: arrays, numbers, strings).
    """
    function = candidate.operations[operation]
    convert = lambda: {
        name: _to_candidate(value, candidate, dtype, array, name in requires_grad) for name, value in args.items()
    }
    converted = convert()
    before = {name: _snapshot(value) for name, value in converted.items()}
    code = call_writer(operation, converted, before)  # written from the copies in `before` if a message needs it
    result, printed, changes = _invoke(function, converted, operation)

    for name, value in converted.items():
        if before[name] is None:
            continue
        after = _to_numpy(value)
        # the same bytes are the same values (the common case, one comparison); else compare as values
        if after.shape == before[name].shape and after.dtype == before[name].dtype and after.tobytes() == before[name].tobytes():
            continue
        after = after.copy()
        if after.shape != before[name].shape or not np.array_equal(after, before[name], equal_nan=True):
            where = np.argwhere(after != before[name]) if after.shape == before[name].shape else []
            at = f" at index {tuple(int(i) for i in where[0])}" if len(where) else ""
            raise MutatedInput(f"{operation} mutated its input `{name}` in place{at}", name, before[name], after)

    arrays, dtypes = _validate(result, operation, outputs, shape, allow_nonfinite)
    if repeat and all(_plain(v) for v in args.values()):
        again, _, _ = _invoke(function, convert(), operation)
        second, _ = _validate(again, operation, outputs, shape, True)
        for index, (a, b) in enumerate(zip(arrays, second)):
            if not np.array_equal(a, b, equal_nan=True):
                bad = tuple(int(i) for i in np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b))))[0])
                label = operation if outputs == 1 else f"{operation} output {index}"
                raise Nondeterministic(
                    f"{operation} is nondeterministic: two calls with the same input gave {label} "
                    f"{float(a[bad])!r} and {float(b[bad])!r} at index {bad}"
                )

    u_inputs = unit_roundoff(np.dtype(dtype))
    u_outputs = max([unit_roundoff(d) for d in dtypes] + [u_inputs])
    declared = candidate.precision_of(operation)
    u_declared = unit_roundoff(declared) if declared else 0.0
    u = max(u_inputs, u_outputs, u_declared)
    widened_by, precision = "", ""
    if u > u_inputs:  # the bound is wider than the inputs' precision gives: say why in the verdict's note
        if u_declared >= u_outputs:
            widened_by, precision = "declared", declared
        else:
            widened_by, precision = "output", ", ".join(sorted({str(d) for d in dtypes if unit_roundoff(d) == u_outputs}))
    notes = [f"{operation} changed global state (restored): {', '.join(changes)}"] if changes else []
    return Call(arrays, u, code, printed, tuple(str(d) for d in dtypes), raw=result, inputs=converted, notes=notes,
                args=args, operation=operation, widened_by=widened_by, precision=precision, dtype=dtype, array=array,
                requires_grad=tuple(requires_grad))


def _validate(result, operation: str, outputs: int, shape, allow_nonfinite: bool):
    """The outputs as float64 numpy arrays (and their own dtypes), or CandidateError saying why not."""
    if outputs == 1:
        items = [result]
        if isinstance(result, (list, tuple)):
            raise CandidateError(f"{operation} returned {describe(result)}; expected one array")
    else:
        if not isinstance(result, (list, tuple)) or len(result) != outputs:
            raise CandidateError(f"{operation} returned {describe(result)}; expected a tuple of {outputs} arrays")
        items = list(result)

    arrays, dtypes = [], []
    for index, item in enumerate(items):
        label = operation if outputs == 1 else f"{operation} output {index}"
        if item is None or not _is_array(item):
            raise CandidateError(f"{label} is {describe(item)}; expected an array")
        array = _to_numpy(item)
        if array.dtype.kind == "c":
            raise CandidateError(f"{label} has complex dtype {array.dtype}; expected a real floating dtype")
        if array.dtype.kind != "f":
            raise CandidateError(f"{label} has dtype {array.dtype}; expected a floating dtype")
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise CandidateError(f"{label} has shape {tuple(array.shape)}; expected {tuple(shape)}")
        if not allow_nonfinite and not np.all(np.isfinite(array)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise CandidateError(f"{label} is {array[bad]} at index {bad} on finite input")
        dtypes.append(array.dtype)
        arrays.append(array.astype(np.float64))
    return arrays, dtypes
