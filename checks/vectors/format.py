"""The vector files' format: a case and the bound each output must meet, how numbers, NaN and masked
elements are written, the deterministic JSON, and reading a set back (its JSON Schema: spec/vectors.schema.json)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...spec import catalogue, contract

FORMAT = "rlspec-vectors"
VERSION = 1  # the format's version: docs/vectors.md says what changes it
U = {"float64": 2.0**-53, "float32": 2.0**-24}
SCHEMA = Path(catalogue.__file__).with_name("vectors.schema.json")  # the format's JSON Schema, copied into every set


# ------------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    id: str
    operation: str
    clauses: list[str]
    inputs: dict[str, Any]  # numpy arrays (float64 or bool), numbers, strings, or a matrix for a callable input
    conventions: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, dict] = field(default_factory=dict)  # name -> {"value", "low", "high", "tol": {float64, float32}}
    flags: list[str] = field(default_factory=list)
    source: str = ""  # "known answer" or the clause whose check passed these inputs


@dataclass(frozen=True)
class Bound:
    """What one output (or gradient) must be: ``low - tol <= actual <= high + tol`` elementwise; NaN in
    ``value`` means the element must be NaN, and ``compared`` False means it is not compared."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    tol: np.ndarray
    compared: np.ndarray
    finite_only: bool = False  # the contract leaves the value free: only finiteness is required

    @classmethod
    def of(cls, value, tol, low=None, high=None, compared=None) -> "Bound":
        value = np.asarray(value, dtype=np.float64)
        shape = value.shape
        fit = lambda a, fill: np.broadcast_to(np.asarray(fill if a is None else a, dtype=np.float64), shape).copy()
        return cls(value, fit(low, value), fit(high, value), fit(tol, 0.0),
                   np.broadcast_to(np.asarray(True if compared is None else compared, dtype=bool), shape).copy())

    @classmethod
    def finite(cls, shape) -> "Bound":
        nan = np.full(shape, np.nan)
        return cls(nan, nan, nan, np.zeros(shape), np.ones(shape, dtype=bool), True)


# ------------------------------------------------------------------------------------------------
# the files


def _number(x: float):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _encode(value):
    """JSON-ready: arrays as nested lists (bools stay bools), non-finite floats as strings, floats as the
    shortest decimal that reads back to the same float64."""
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return value.tolist()
        return _encode(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _number(float(value))
    return value


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def _masked(values: np.ndarray, compared: np.ndarray):
    out = np.asarray(values, dtype=object)
    encoded = _encode(np.asarray(values, dtype=np.float64))
    if compared.all():
        return encoded
    flat_mask = compared.ravel().tolist()
    flat = np.asarray(encoded, dtype=object).ravel().tolist() if out.ndim else [encoded]
    return np.array([v if keep else None for v, keep in zip(flat, flat_mask)], dtype=object).reshape(values.shape).tolist()


def case_json(case: Case) -> dict:
    expected = {}
    for name, bound in case.expected["float64"].items():
        b32 = case.expected["float32"][name]
        if bound.finite_only:
            expected[name] = {"finite": True}
            continue
        entry = {"value": _masked(bound.value, bound.compared)}
        if not (np.array_equal(bound.low, bound.value, equal_nan=True) and np.array_equal(bound.high, bound.value, equal_nan=True)):
            entry["low"], entry["high"] = _masked(bound.low, bound.compared), _masked(bound.high, bound.compared)
            entry["low_float32"], entry["high_float32"] = _masked(b32.low, b32.compared), _masked(b32.high, b32.compared)
        entry["tol"] = {"float64": _masked(bound.tol, bound.compared), "float32": _masked(b32.tol, b32.compared)}
        expected[name] = entry
    return {"id": case.id, "operation": case.operation, "clauses": case.clauses, "source": case.source,
            "conventions": case.conventions, "inputs": _encode(case.inputs), "expected": expected, "flags": case.flags}


def dumps(data) -> str:
    """Deterministic JSON: one key per line down to the arrays, each array of numbers on one line."""

    def fmt(value, indent: int) -> str:
        pad, inner = " " * indent, " " * (indent + 1)
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {fmt(v, indent + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(value, list) and value and any(isinstance(v, dict) for v in value):
            return "[\n" + ",\n".join(f"{inner}{fmt(v, indent + 1)}" for v in value) + f"\n{pad}]"
        return json.dumps(value, separators=(", ", ": "), allow_nan=False)

    return fmt(data, 0) + "\n"


# ------------------------------------------------------------------------------------------------
# reading a vector set, and running a Python candidate on it


class VectorError(ValueError):
    """A vector set that cannot be read (missing, changed or of another format version): one line."""


def read(folder: Path) -> tuple[dict, dict[str, dict]]:
    """``(manifest, {operation: file's data})``; every file the manifest lists must be there, unchanged."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VectorError(f"cannot read {folder / 'manifest.json'}: {exc}") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise VectorError(f"{folder}: format {manifest.get('format')!r} version {manifest.get('version')!r}; "
                          f"this rlspec reads {FORMAT!r} version {VERSION}")
    files = {}
    for entry in manifest["files"]:
        path = folder / entry["file"]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            raise VectorError(f"{path}: listed in the manifest but missing") from None
        if hashlib.sha256(text.encode()).hexdigest() != entry["sha256"]:
            raise VectorError(f"{path}: its SHA-256 differs from the manifest's (edited by hand, or a stale manifest)")
        files[entry["operation"]] = _decode(json.loads(text))
    return manifest, files


def case_from_json(data: dict) -> Case:
    spec = contract.operations()[data["operation"]]
    kinds = {a.name: a.type for a in spec.inputs}
    inputs = {}
    for name, value in data["inputs"].items():
        if kinds.get(name) in ("array", "bool") and not isinstance(value, dict):  # a 0-d array is written as a number
            value = np.asarray(value, dtype=bool if kinds.get(name) == "bool" else np.float64)
        elif isinstance(value, list):
            value = np.asarray(value, dtype=np.float64)  # a matrix behind a callable
        inputs[name] = value
    expected = {}
    for precision in U:
        expected[precision] = {}
        for name, e in data["expected"].items():
            if e.get("finite"):
                expected[precision][name] = Bound.finite(())
                continue
            value = np.asarray(_nulls(e["value"]), dtype=np.float64)
            compared = np.asarray(_not_null(e["value"]), dtype=bool)
            suffix = "" if precision == "float64" else "_float32"
            low = np.asarray(_nulls(e.get("low" + suffix, e["value"])), dtype=np.float64)
            high = np.asarray(_nulls(e.get("high" + suffix, e["value"])), dtype=np.float64)
            tol = np.asarray(_nulls(e["tol"][precision]), dtype=np.float64)
            expected[precision][name] = Bound(value, low, high, np.nan_to_num(tol), compared)
    return Case(data["id"], data["operation"], data["clauses"], inputs, data["conventions"], expected, data["flags"], data["source"])


def _nulls(value, marker=float("nan")):
    if isinstance(value, list):
        return [_nulls(v, marker) for v in value]
    return marker if value is None else value


def _not_null(value):
    if isinstance(value, list):
        return [_not_null(v) for v in value]
    return value is not None
