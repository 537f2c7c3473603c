"""The contract: the operations a candidate may provide, the conventions it may declare, and what
else it may say about itself. One TOML file per chapter in ``spec/contract/`` (beside the clause
catalogue in ``spec/clauses/``); ``00_candidate.toml`` holds the candidate-level declarations.

This module only reads and validates the data, and validates a candidate's declarations against
it. The protocol (``rlspec.checks.runner.protocol``), the loader, the checks (through ``Context.convention``),
the command line, the reports and the generated docs (``docs/contract.md``, the README's protocol
table) all read the contract through it; no convention key, default or allowed value is written
anywhere else.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

CONTRACT_DIR = Path(__file__).parent / "contract"
ARRAY_MODES = ("candidate", "torch")  # inputs in the candidate's declared array kind, or always torch
ARGUMENT_TYPES = ("array", "bool", "integer", "scalar", "string", "callable", "object", "mapping")
CONVENTION_TYPES = ("choice", "number", "integer", "subset", "choice-by-kind")
ENFORCERS = ("protocol", "suite", "bounds")  # who keeps a promise that names no clause (see Promise.by)
DECLARATION_TYPES = ("choice", "table", "string", "list")


class ContractError(ValueError):
    """The contract data is malformed (a bug in rlspec itself), or a candidate's declaration is not one
    the contract allows (then the message is one line a user can act on)."""


# ------------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Edge:
    """A value at the edge of what an argument allows: every clause whose calls vary the argument passes it in its
    fixed cases (the ones that run on every seed), and the strategies draw it often (rlspec.checks.kit.edges)."""

    value: Any  # a number (NaN allowed), or None: an optional argument left out
    why: str


EDGE_STEP = 2.0**-20  # "just inside" an exclusive bound b: b +- 2^-20 max(1, |b|), representable in float32 and float64


@dataclass(frozen=True)
class Argument:
    name: str
    type: str = "array"  # one of ARGUMENT_TYPES; "array" and "bool" are arrays
    shape: str = ""  # e.g. "(T,) or (T, N)", "like rewards"
    optional: bool = False  # passed as ``name=None`` unless the clause gives it
    meaning: str = ""
    minimum: float | None = None  # the range a scalar (or each element of an array) is allowed
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    special: tuple[Edge, ...] = ()  # further edges the meaning names (past exp's overflow, past a library's clamp)

    def __str__(self) -> str:
        return f"{self.name}=None" if self.optional else self.name

    @property
    def numeric(self) -> bool:
        """A number passed on its own (a scalar, or an integer without a shape); an integer array has a shape."""
        return self.type == "scalar" or (self.type == "integer" and not self.shape)

    def allows(self, value: float) -> bool:
        return not ((self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum)
                    or (self.exclusive_minimum is not None and value <= self.exclusive_minimum)
                    or (self.exclusive_maximum is not None and value >= self.exclusive_maximum))

    def range_text(self) -> str:
        """``[0, 1]``, ``(0, inf)``, ``>= 1``: the allowed range in words, or "" if there is none."""
        low = f"[{_show_number(self.minimum)}" if self.minimum is not None else \
            f"({_show_number(self.exclusive_minimum)}" if self.exclusive_minimum is not None else "(-inf"
        high = f"{_show_number(self.maximum)}]" if self.maximum is not None else \
            f"{_show_number(self.exclusive_maximum)})" if self.exclusive_maximum is not None else "inf)"
        return "" if low == "(-inf" and high == "inf)" else f"{low}, {high}"

    @property
    def edges(self) -> tuple[Edge, ...]:
        """The edges of the argument's allowed range, generated from its bounds, then the special ones it names:

        * an inclusive bound itself; an exclusive bound's nearest value inside (the next integer; for a real,
          ``b +- 2^-20 max(1, |b|)``, which float32 and float64 both represent);
        * 0 and 1 where the range holds them (a coefficient of 0 where code writes ``x or default``; a parameter of 1
          where code takes a fast path), for a scalar or integer whether or not it is bounded;
        * None for an optional argument (left out);
        * ``special``: values the meaning singles out (past exp's overflow, past the range a library clamps to)."""
        found: list[Edge] = []

        def add(value, why):
            if value is not None and self.type != "integer" and not (isinstance(value, float) and math.isnan(value)):
                value = float(value)
            if not any(e.value == value or (e.value is None and value is None) for e in found):
                found.append(Edge(value, why))

        if self.numeric:
            integer = self.type == "integer"
            if self.minimum is not None:
                add(self.minimum, "the minimum")
            if self.exclusive_minimum is not None:
                b = self.exclusive_minimum
                add(b + 1 if integer else b + EDGE_STEP * max(1.0, abs(b)), f"just above the exclusive minimum {_show_number(b)}")
            if self.maximum is not None:
                add(self.maximum, "the maximum")
            if self.exclusive_maximum is not None:
                b = self.exclusive_maximum
                add(b - 1 if integer else b - EDGE_STEP * max(1.0, abs(b)), f"just below the exclusive maximum {_show_number(b)}")
            for value in (0, 1):
                if self.allows(value):
                    add(value if integer else float(value), f"{value} (inside the range)")
        if self.optional:
            add(None, "left out")
        for edge in self.special:
            add(edge.value, edge.why)
        return tuple(found)


@dataclass(frozen=True)
class PromiseKind:
    """A kind of promise a meaning makes (``[[promise_kind]]`` of ``00_candidate.toml``). ``words``: regular
    expressions; wherever one matches an operation's meaning, a promise of this kind must quote the words
    around it (tests/test_promises.py). The vocabulary is what makes "every word of the contract is checked"
    testable: a new meaning that says "without gradient" needs a no-graph promise and a clause that keeps it."""

    name: str
    meaning: str
    words: tuple[str, ...] = ()

    def matches(self, text: str) -> list[tuple[int, int]]:
        """The spans of ``text`` that make a promise of this kind."""
        return [m.span() for word in self.words for m in re.finditer(word, text)]


@dataclass(frozen=True)
class Promise:
    """One thing a meaning promises, and what keeps it. ``says``: for an operation's promise, the words of its
    meaning that make it, quoted verbatim; for a candidate-level promise (``[[promise]]`` of
    ``00_candidate.toml``, true of every operation), the promise in words. ``clauses``: the clauses that fail
    a candidate that breaks it. ``by``: a promise no clause can fail is kept by ``protocol`` (every call
    through checks/runner/protocol.py: a candidate that breaks it gets ``error`` on any clause), by the ``suite``
    (a promise the suite makes to the candidate: the callables it passes, the noise it draws), or by the
    ``bounds`` of every clause (the precision an output's dtype claims)."""

    says: str
    kinds: tuple[str, ...]
    clauses: tuple[str, ...] = ()
    by: str = ""


@dataclass(frozen=True)
class Operation:
    name: str
    chapter: str
    meaning: str
    inputs: tuple[Argument, ...]
    outputs: tuple[Argument, ...]
    arrays: str = "candidate"  # "candidate": the candidate's RLSPEC_ARRAY kind; "torch": always torch tensors
    differentiated: tuple[str, ...] = ()  # inputs passed as leaf tensors that require grad
    promises: tuple[Promise, ...] = ()  # what the meaning promises and the clauses that keep each promise

    @property
    def signature(self) -> str:
        """``(a, b, c=None) -> (x, y)``: the call as the suite makes it."""
        outs = [o.name for o in self.outputs]
        result = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
        return f"({', '.join(str(a) for a in self.inputs)}) -> {result}"


NO_DEFAULT = object()


@dataclass(frozen=True)
class Convention:
    key: str
    chapter: str
    type: str  # one of CONVENTION_TYPES
    meaning: str
    operations: tuple[str, ...]
    clauses: tuple[str, ...] = ()  # the clauses whose checks read it
    default: Any = None
    allowed: tuple = ()  # choice, subset, choice-by-kind: the values allowed
    kinds: tuple[str, ...] = ()  # choice-by-kind: the kinds a table may name
    noun: str = "values"  # subset: what its members are called in notes ("kinds", "modes")
    nullable: bool = False  # number: None is allowed (and is the default unless one is given)
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None

    def allowed_text(self) -> str:
        """What a declaration may say, in words (for messages and docs)."""
        if self.type == "choice":
            return " or ".join(_show(v) for v in self.allowed)
        if self.type == "subset":
            return f"a non-empty list of {', '.join(_show(v) for v in self.allowed)}"
        if self.type == "choice-by-kind":
            choices = " or ".join(_show(v) for v in self.allowed)
            return f"{choices}, or a table from kinds {', '.join(self.kinds)} to {choices}"
        bounds = []
        if self.exclusive_minimum is not None:
            bounds.append(f"> {_show(self.exclusive_minimum)}")
        if self.minimum is not None:
            bounds.append(f">= {_show(self.minimum)}")
        if self.exclusive_maximum is not None:
            bounds.append(f"< {_show(self.exclusive_maximum)}")
        if self.maximum is not None:
            bounds.append(f"<= {_show(self.maximum)}")
        text = ("an integer" if self.type == "integer" else "a finite number") + (f" {' and '.join(bounds)}" if bounds else "")
        return text + (" or None" if self.nullable else "")

    def validate(self, value: Any) -> Any:
        """The value in the form checks read (subsets as tuples in contract order, tables as sorted
        item tuples); :class:`ContractError` saying what is allowed if the contract does not allow it."""
        if self.type == "choice":
            if not _is_choice(value, self.allowed):
                raise self._refuse(value)
            return value
        if self.type == "subset":
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value \
                    or not all(_is_choice(v, self.allowed) for v in value):
                raise self._refuse(value)
            return tuple(v for v in self.allowed if v in value)
        if self.type == "choice-by-kind":
            if isinstance(value, tuple) and all(isinstance(item, tuple) and len(item) == 2 for item in value):
                value = dict(value)  # already normalised
            if isinstance(value, Mapping):
                if not value or not set(value) <= set(self.kinds) or not all(_is_choice(v, self.allowed) for v in value.values()):
                    raise self._refuse(value)
                return tuple(sorted(value.items()))
            if not _is_choice(value, self.allowed):
                raise self._refuse(value)
            return value
        # number, integer
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._refuse(value)
        if self.type == "integer" and not isinstance(value, int):
            raise self._refuse(value)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum) \
                or (self.exclusive_minimum is not None and value <= self.exclusive_minimum) \
                or (self.exclusive_maximum is not None and value >= self.exclusive_maximum):
            raise self._refuse(value)
        return value

    def by_kind(self, value, kind: str):
        """A choice-by-kind convention's value for one kind (a table's unnamed kinds get the default)."""
        return value if not isinstance(value, tuple) else dict(value).get(kind, self.default)

    def _refuse(self, value) -> ContractError:
        return ContractError(f"RLSPEC_CONVENTIONS[{self.key!r}] = {value!r} is not allowed; {self.key} takes {self.allowed_text()}")


@dataclass(frozen=True)
class Declaration:
    """An ``RLSPEC_*`` name a candidate may define."""

    name: str
    meaning: str
    type: str = "choice"
    allowed: tuple = ()
    default: Any = None


@dataclass(frozen=True)
class KnownAnswer:
    """One operation's inputs and the outputs the math gives for them, worked exactly (by hand, checked by
    a proof) or published to ``digits`` decimals. Read by the proofs, the checks and the tests alike.

    ``derived``: further numbers the clause states about the same call that are not outputs of the
    operation (a gradient, an expectation over the inputs' outcomes), each named by what it is.
    ``digits``: None (every number exact), a number of decimals for every number, or a table of decimals
    per output or derived name (the rest exact). A number is exact as written: a decimal, or a fraction
    written as a string ``"p/q"`` where no decimal is (``"1/6"``); NaN marks an output the clause does not
    state (at a masked position). Inputs of a callable or object argument (a matvec, a surrogate) hold the
    data the check builds it from, as the meaning says."""

    id: str
    operation: str
    clauses: tuple[str, ...]
    meaning: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    conventions: dict[str, Any] = field(default_factory=dict)
    digits: int | dict[str, int] | None = None
    derived: dict[str, Any] = field(default_factory=dict)

    def value(self, name: str):
        """An output or a derived number as floats (fractions rounded to the nearest float), lists kept."""
        return _floats(self.outputs[name] if name in self.outputs else self.derived[name])

    def exact(self, name: str):
        """An input, output or derived number as exact :class:`~fractions.Fraction` values (a decimal means its
        decimal value: 0.2 is 1/5), lists kept: what a proof compares with."""
        for part in (self.inputs, self.outputs, self.derived):
            if name in part:
                return _fractions(part[name])
        raise KeyError(name)

    def decimals(self, name: str) -> int | None:
        """The decimals ``name`` is published to; None if it is exact."""
        if isinstance(self.digits, dict):
            return self.digits.get(name)
        return self.digits

    def published_error(self, name: str) -> float:
        """How far the written value of ``name`` may be from the exact one: half a unit in its last published
        decimal, 0 if it is exact."""
        decimals = self.decimals(name)
        return 0.0 if decimals is None else float(f"5e-{decimals + 1}")

    def arrays(self, part: str = "inputs") -> dict[str, Any]:
        """``inputs`` or ``outputs`` with the lists of array arguments as numpy arrays (float64; bool and integer
        arguments as bool and int64 arrays; fractions as the nearest floats), in the operation's argument order:
        keyword arguments for the candidate's call. Data for a callable or object argument stays as written."""
        import numpy as np

        values = getattr(self, part)
        spec = operations()[self.operation]
        arguments = {a.name: a for a in (spec.inputs if part == "inputs" else spec.outputs)}
        converted = {}
        for name in sorted(values, key=list(arguments).index):
            value = _floats(values[name]) if _is_data(values[name], _is_number) else values[name]
            if isinstance(value, list) and arguments[name].type in ("array", "bool", "integer"):
                flat = np.asarray(value)
                value = flat.astype(bool) if flat.dtype == bool else flat.astype(np.int64 if arguments[name].type == "integer" else np.float64)
            converted[name] = value
        return converted


@dataclass(frozen=True)
class Contract:
    version: int
    operations: dict[str, Operation]
    conventions: dict[str, Convention]
    declarations: dict[str, Declaration]
    known_answers: dict[str, KnownAnswer] = field(default_factory=dict)
    files: tuple[str, ...] = field(default=(), compare=False)
    promise_kinds: dict[str, PromiseKind] = field(default_factory=dict)
    promises: tuple[Promise, ...] = ()  # candidate-level: true of every operation


def _show_number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _show(value) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        return f"{value:.1f}"
    return repr(value)


def _is_choice(value, allowed) -> bool:
    """``value`` is one of ``allowed`` with the same type family (1 is not True; 1.0 is a choice 1.0)."""
    if isinstance(value, bool):
        return any(isinstance(a, bool) and a == value for a in allowed)
    if isinstance(value, (int, float)):
        return any(not isinstance(a, (bool, str)) and isinstance(a, (int, float)) and a == value for a in allowed)
    if isinstance(value, str):
        return value in [a for a in allowed if isinstance(a, str)]
    return False


# ------------------------------------------------------------------------------------------------
# reading the files


def _keys(raw: dict, allowed: set[str], required: tuple[str, ...], where: str) -> None:
    unknown = set(raw) - allowed
    missing = [k for k in required if k not in raw]
    if unknown or missing:
        raise ContractError(f"{where}: " + "; ".join(
            ([f"unknown keys {sorted(unknown)}"] if unknown else []) + ([f"missing {missing}"] if missing else [])))


def _argument(raw, where: str) -> Argument:
    if not isinstance(raw, dict):
        raise ContractError(f"{where}: an argument is a table, got {raw!r}")
    _keys(raw, {"name", "type", "shape", "optional", "meaning", "minimum", "maximum", "exclusive_minimum", "exclusive_maximum",
                "edges"}, ("name",), where)
    special = []
    for edge in raw.get("edges", ()):
        if not isinstance(edge, dict) or set(edge) != {"value", "why"} or not _is_number(edge["value"]) or not str(edge["why"]).strip():
            raise ContractError(f"{where}: argument {raw['name']}: an edge is {{ value = <number>, why = \"...\" }}, got {edge!r}")
        special.append(Edge(edge["value"], " ".join(str(edge["why"]).split())))
    argument = Argument(**{k: v for k, v in raw.items() if k != "edges"}, special=tuple(special))
    if argument.type not in ARGUMENT_TYPES:
        raise ContractError(f"{where}: argument {argument.name} has type {argument.type!r}; expected one of {ARGUMENT_TYPES}")
    bounded = any(b is not None for b in (argument.minimum, argument.maximum, argument.exclusive_minimum, argument.exclusive_maximum))
    if bounded and argument.type not in ("scalar", "integer", "array"):
        raise ContractError(f"{where}: argument {argument.name} of type {argument.type} cannot have a range")
    for edge in argument.special:
        if not (isinstance(edge.value, float) and math.isnan(edge.value)) and not argument.allows(edge.value):
            raise ContractError(f"{where}: argument {argument.name}: the edge {edge.value!r} is outside its range {argument.range_text()}")
    return argument


def _promise_kind(raw: dict, where: str) -> PromiseKind:
    _keys(raw, {"name", "meaning", "words"}, ("name", "meaning"), where)
    words = tuple(raw.get("words", ()))
    for word in words:
        try:
            re.compile(word)
        except re.error as exc:
            raise ContractError(f"{where}: promise kind {raw['name']}: {word!r} is not a regular expression ({exc})") from None
    return PromiseKind(raw["name"], " ".join(raw["meaning"].split()), words)


def _promise(raw, kinds: dict[str, PromiseKind], where: str, meaning: str | None) -> Promise:
    """A promise; ``meaning``: the operation's (normalised) meaning it quotes, None for a candidate-level one."""
    if not isinstance(raw, dict):
        raise ContractError(f"{where}: a promise is a table, got {raw!r}")
    _keys(raw, {"says", "kinds", "clauses", "by"}, ("says", "kinds"), where)
    promise = Promise(" ".join(str(raw["says"]).split()), tuple(raw["kinds"]), tuple(raw.get("clauses", ())), raw.get("by", ""))
    unknown = [k for k in promise.kinds if k not in kinds]
    if not promise.kinds or unknown:
        raise ContractError(f"{where}: promise {promise.says!r}: kinds {list(promise.kinds)} must be promise kinds "
                            f"({', '.join(kinds)}){nearest(unknown[0], kinds) if unknown else ''}")
    if not (promise.clauses or promise.by) or promise.by not in ("",) + ENFORCERS or (promise.by and meaning is not None and promise.clauses):
        raise ContractError(f"{where}: promise {promise.says!r} names the clauses that keep it, or by = one of {ENFORCERS} "
                            f"(a candidate-level promise may name both)")
    if meaning is not None and promise.says not in meaning:
        raise ContractError(f"{where}: promise {promise.says!r} does not quote the meaning (its words, verbatim)")
    return promise


def _operation(raw: dict, chapter: str, where: str, kinds: dict[str, PromiseKind]) -> Operation:
    _keys(raw, {"name", "meaning", "inputs", "outputs", "arrays", "differentiated", "promises"},
          ("name", "meaning", "inputs", "outputs"), where)
    where = f"{where}: operation {raw['name']}"
    inputs = tuple(_argument(a, where) for a in raw["inputs"])
    outputs = tuple(_argument(a, where) for a in raw["outputs"])
    names = [a.name for a in inputs]
    differentiated = tuple(raw.get("differentiated", ()))
    if raw.get("arrays", "candidate") not in ARRAY_MODES:
        raise ContractError(f"{where}: arrays = {raw['arrays']!r}; expected one of {ARRAY_MODES}")
    if not set(differentiated) <= set(names) or (differentiated and raw.get("arrays") != "torch"):
        raise ContractError(f"{where}: differentiated inputs {differentiated} must be inputs of a torch operation")
    meaning = " ".join(raw["meaning"].split())
    promises = tuple(_promise(p, kinds, where, meaning) for p in raw.get("promises", ()))
    return Operation(raw["name"], chapter, meaning, inputs, outputs, raw.get("arrays", "candidate"), differentiated, promises)


def _convention(raw: dict, chapter: str, where: str) -> Convention:
    fields = {"key", "type", "meaning", "operations", "clauses", "default", "allowed", "kinds", "noun", "nullable",
              "minimum", "maximum", "exclusive_minimum", "exclusive_maximum"}
    _keys(raw, fields, ("key", "type", "meaning", "operations"), where)
    where = f"{where}: convention {raw['key']}"
    kind = raw["type"]
    if kind not in CONVENTION_TYPES:
        raise ContractError(f"{where}: type {kind!r}; expected one of {CONVENTION_TYPES}")
    if kind not in ("number", "integer") and not raw.get("allowed"):
        raise ContractError(f"{where}: a {kind} convention lists its allowed values")
    allowed = tuple(raw.get("allowed", ()))
    default = raw.get("default", allowed if kind == "subset" else None)
    if kind in ("number", "integer") and "default" not in raw and not raw.get("nullable"):
        raise ContractError(f"{where}: a number convention has a default or is nullable (default None)")
    convention = Convention(
        key=raw["key"], chapter=chapter, type=kind, meaning=" ".join(raw["meaning"].split()),
        operations=tuple(raw["operations"]), clauses=tuple(raw.get("clauses", ())), default=default, allowed=allowed,
        kinds=tuple(raw.get("kinds", ())), noun=raw.get("noun", "values"), nullable=bool(raw.get("nullable", False)),
        minimum=raw.get("minimum"), maximum=raw.get("maximum"),
        exclusive_minimum=raw.get("exclusive_minimum"), exclusive_maximum=raw.get("exclusive_maximum"),
    )
    try:
        normalised = convention.validate(default)
    except ContractError as exc:
        raise ContractError(f"{where}: its default is not allowed ({exc})") from None
    return Convention(**{**convention.__dict__, "default": normalised})


_FRACTION = re.compile(r"-?\d+/[1-9]\d*")
_ANSWER_ID = re.compile(r"[a-z0-9]+\.[a-z0-9.-]+")  # also a vector case's name: rlspec vectors writes it


def _is_number(value) -> bool:
    """A number as a known answer writes it: an int or float (not a bool), or an exact fraction "p/q"."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) or isinstance(value, str) and bool(_FRACTION.fullmatch(value))


def _floats(value):
    """Fractions "p/q" as the nearest floats, through (nested) lists; other values unchanged."""
    if isinstance(value, list):
        return [_floats(v) for v in value]
    if isinstance(value, str) and _FRACTION.fullmatch(value):
        from fractions import Fraction

        return float(Fraction(value))
    return value


def _fractions(value):
    from fractions import Fraction

    if isinstance(value, list):
        return [_fractions(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or isinstance(value, str) and not _FRACTION.fullmatch(value):
        return value
    return Fraction(value) if isinstance(value, (int, str)) else Fraction(repr(value))


def _is_data(value, leaf) -> bool:
    """``value`` is ``leaf`` or a (nested) list of them."""
    return all(_is_data(v, leaf) for v in value) if isinstance(value, list) else leaf(value)


# What a known answer may hold for an argument of each contract type: arrays are (nested) lists, scalars
# numbers, and callables or objects the data the check builds them from (a matrix, a table of coefficients).
_KNOWN_VALUE = {
    "array": lambda v: _is_data(v, _is_number),
    "bool": lambda v: _is_data(v, lambda x: isinstance(x, bool)),
    "integer": lambda v: _is_data(v, lambda x: isinstance(x, int) and not isinstance(x, bool)),
    "scalar": _is_number,
    "string": lambda v: isinstance(v, str),
    "callable": lambda v: isinstance(v, (list, dict)),
    "object": lambda v: isinstance(v, (list, dict)),
    "mapping": lambda v: isinstance(v, dict),
}


def _known_answer(raw: dict, operations: dict[str, Operation], conventions: dict[str, Convention], where: str) -> KnownAnswer:
    _keys(raw, {"id", "operation", "clauses", "meaning", "inputs", "outputs", "conventions", "digits", "derived"},
          ("id", "operation", "clauses", "meaning", "inputs", "outputs"), where)
    where = f"{where}: known answer {raw['id']}"
    if not _ANSWER_ID.fullmatch(str(raw["id"])):
        raise ContractError(f"{where}: an id is '<chapter>.<name>' in lowercase letters, digits, dots and dashes")
    op = operations.get(raw["operation"])
    if op is None:
        raise ContractError(f"{where}: no operation {raw['operation']!r} (define operations first)")
    unknown_in = set(raw["inputs"]) - {a.name for a in op.inputs}
    unknown_out = set(raw["outputs"]) - {a.name for a in op.outputs}
    missing = {a.name for a in op.inputs if not a.optional} - set(raw["inputs"])
    if unknown_in or unknown_out or missing:
        raise ContractError(f"{where}: inputs/outputs must be {op.name}'s arguments (unknown {sorted(unknown_in | unknown_out)}, "
                            f"missing {sorted(missing)})")
    for argument in op.inputs + op.outputs:
        part = raw["inputs"] if argument in op.inputs else raw["outputs"]
        if argument.name in part and not _KNOWN_VALUE[argument.type](part[argument.name]):
            raise ContractError(f"{where}: {argument.name} = {part[argument.name]!r} is not a value of type {argument.type}")
    derived = raw.get("derived", {})
    if not isinstance(derived, dict) or not all(isinstance(k, str) and k and _is_data(v, _is_number) for k, v in derived.items()):
        raise ContractError(f"{where}: derived is a table of named numbers or lists of numbers, got {derived!r}")
    if set(derived) & set(raw["outputs"]):
        raise ContractError(f"{where}: {sorted(set(derived) & set(raw['outputs']))} is both an output and derived")
    digits = raw.get("digits")
    named = set(raw["outputs"]) | set(derived)
    decimal = lambda d: isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 17
    if not (digits is None or decimal(digits) or isinstance(digits, dict) and digits and set(digits) <= named
            and all(decimal(d) for d in digits.values())):
        raise ContractError(f"{where}: digits is a number of decimals (0..17) or a table of them per output or derived "
                            f"name ({sorted(named)}), got {digits!r}")
    answer = KnownAnswer(raw["id"], raw["operation"], tuple(raw["clauses"]), " ".join(raw["meaning"].split()),
                         dict(raw["inputs"]), dict(raw["outputs"]), dict(raw.get("conventions", {})),
                         dict(digits) if isinstance(digits, dict) else digits, dict(derived))
    try:
        validate_conventions(answer.conventions, conventions)
    except ContractError as exc:
        raise ContractError(f"{where}: {exc}") from None
    return answer


def _declaration(raw: dict, where: str) -> Declaration:
    _keys(raw, {"name", "meaning", "type", "allowed", "default"}, ("name", "meaning"), where)
    declaration = Declaration(raw["name"], " ".join(raw["meaning"].split()), raw.get("type", "choice"),
                              tuple(raw.get("allowed", ())), raw.get("default"))
    if declaration.type not in DECLARATION_TYPES or not declaration.name.startswith("RLSPEC_"):
        raise ContractError(f"{where}: declaration {declaration.name} must be an RLSPEC_ name of type {DECLARATION_TYPES}")
    return declaration


@lru_cache(maxsize=None)
def load() -> Contract:
    """The whole contract, every file in name order, validated (a malformed file raises ContractError)."""
    operations: dict[str, Operation] = {}
    conventions: dict[str, Convention] = {}
    declarations: dict[str, Declaration] = {}
    kinds: dict[str, PromiseKind] = {}
    general: list[Promise] = []
    pending: list[tuple[dict, str]] = []  # known answers, validated once every convention is known
    version = None
    files = sorted(CONTRACT_DIR.glob("*.toml"))
    for path in files:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        unknown = set(data) - {"contract", "operation", "convention", "declaration", "known_answer", "promise_kind", "promise"}
        if unknown:
            raise ContractError(f"{path.name}: unknown tables {sorted(unknown)}")
        if "contract" in data:
            version = data["contract"]["version"]
        chapter = path.stem.split("_", 1)[-1]
        for raw in data.get("promise_kind", []):
            kind = _promise_kind(raw, path.name)
            kinds[kind.name] = kind
        general += [_promise(raw, kinds, path.name, None) for raw in data.get("promise", [])]
        for raw in data.get("operation", []):
            op = _operation(raw, chapter, path.name, kinds)
            if op.name in operations:
                raise ContractError(f"{path.name}: operation {op.name} is also in {operations[op.name].chapter}")
            operations[op.name] = op
        for raw in data.get("convention", []):
            conv = _convention(raw, chapter, path.name)
            if conv.key in conventions:
                raise ContractError(f"{path.name}: convention {conv.key} is defined twice")
            if not set(conv.operations) <= set(operations):
                raise ContractError(f"{path.name}: convention {conv.key} names unknown operations "
                                    f"{sorted(set(conv.operations) - set(operations))} (define operations first)")
            conventions[conv.key] = conv
        for raw in data.get("declaration", []):
            declaration = _declaration(raw, path.name)
            declarations[declaration.name] = declaration
        pending += [(raw, path.name) for raw in data.get("known_answer", [])]
    if version is None:
        raise ContractError("spec/contract: no [contract] version")
    contract = Contract(version, operations, conventions, declarations, {}, tuple(p.name for p in files), kinds, tuple(general))
    for raw, where in pending:
        answer = _known_answer(raw, operations, conventions, where)
        if answer.id in contract.known_answers:
            raise ContractError(f"{where}: known answer {answer.id} is defined twice")
        contract.known_answers[answer.id] = answer
    return contract


def operations() -> dict[str, Operation]:
    return load().operations


def promise_kinds() -> dict[str, PromiseKind]:
    return load().promise_kinds


def promises(operation: str | None = None) -> tuple[Promise, ...]:
    """The candidate-level promises (true of every operation), then ``operation``'s own (all operations' if None)."""
    ops = load().operations.values() if operation is None else [load().operations[operation]]
    return load().promises + tuple(p for op in ops for p in op.promises)


def conventions() -> dict[str, Convention]:
    return load().conventions


def convention(key: str) -> Convention:
    """The convention ``key``; KeyError (a bug in rlspec: a check read a key the contract lacks) if none."""
    try:
        return load().conventions[key]
    except KeyError:
        raise KeyError(f"rlspec reads convention {key!r}, which spec/contract does not define") from None


def declarations() -> dict[str, Declaration]:
    return load().declarations


def known_answers(operation: str | None = None) -> dict[str, KnownAnswer]:
    """Every known answer (of one operation, if given), in file order."""
    answers = load().known_answers
    return answers if operation is None else {k: a for k, a in answers.items() if a.operation == operation}


def known_answer(answer_id: str) -> KnownAnswer:
    return load().known_answers[answer_id]


# ------------------------------------------------------------------------------------------------
# a candidate's declarations


def nearest(word: str, choices) -> str:
    """`` did you mean 'x'?`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def validate_conventions(declared: Mapping[str, Any], known: Mapping[str, Convention] | None = None) -> dict[str, Any]:
    """A candidate's ``RLSPEC_CONVENTIONS``, validated and normalised (see :meth:`Convention.validate`).

    An unknown key or a value the contract does not allow raises :class:`ContractError` with one line
    that names it, says what is allowed and suggests the nearest key."""
    if not isinstance(declared, Mapping):
        raise ContractError(f"RLSPEC_CONVENTIONS is {type(declared).__name__}; expected a dict of convention -> value")
    known = conventions() if known is None else known
    result = {}
    for key, value in declared.items():
        if key not in known:
            raise ContractError(f"RLSPEC_CONVENTIONS[{key!r}]: no such convention{nearest(str(key), known)} "
                                f"(known: {', '.join(sorted(known))})")
        result[key] = known[key].validate(value)
    return result


def validate_clause_ids(ids, origin: str) -> None:
    """Every id (of an xfail list) names a clause of the catalogue: a typo would silently leave a deviation
    undeclared."""
    from . import catalogue

    known = {c.id for c in catalogue.clauses()}
    for clause_id in ids:
        if clause_id not in known:
            raise ContractError(f"{origin}: xfail entry {clause_id} matches no clause{nearest(clause_id, known)}")


def validate_declared_names(names) -> None:
    """Every ``RLSPEC_*`` name a candidate defines must be a declaration of the contract."""
    known = declarations()
    for name in sorted(names):
        if name.startswith("RLSPEC_") and name not in known:
            raise ContractError(f"{name}: rlspec declares no such name{nearest(name, known)} (known: {', '.join(sorted(known))})")


def validate_declaration(name: str, value) -> Any:
    """A choice declaration (RLSPEC_ARRAY, RLSPEC_PRECISION, RLSPEC_FLAGS) checked against its values."""
    declaration = declarations()[name]
    if declaration.type == "choice" and value not in declaration.allowed:
        raise ContractError(f"{name} = {value!r} is not allowed; expected one of {', '.join(map(repr, declaration.allowed))}")
    return value


def validate_precision(value) -> tuple[str | None, dict[str, str]]:
    """``RLSPEC_PRECISION``: one precision for every operation, or a table operation -> precision. Returns
    ``(module-wide precision or None, per-operation table)``; ContractError naming what is wrong."""
    allowed = declarations()["RLSPEC_PRECISION"].allowed
    if value is None:
        return None, {}
    if isinstance(value, Mapping):
        if not value:
            raise ContractError("RLSPEC_PRECISION is an empty table; name an operation, e.g. {'gae': 'float32'}")
        known = operations()
        table = {}
        for key, precision in value.items():
            if key not in known:
                raise ContractError(f"RLSPEC_PRECISION[{key!r}]: no such operation{nearest(str(key), known)}")
            if precision not in allowed:
                raise ContractError(f"RLSPEC_PRECISION[{key!r}] = {precision!r} is not allowed; expected one of "
                                    f"{', '.join(map(repr, allowed))}")
            table[key] = precision
        return None, table
    if value not in allowed:
        raise ContractError(f"RLSPEC_PRECISION = {value!r} is not allowed; expected one of {', '.join(map(repr, allowed))} "
                            f"or a table operation -> precision")
    return value, {}


def validate_operation_names(value, name: str, *, operations: bool = True) -> tuple[str, ...]:
    """A list declaration (RLSPEC_REQUIRE, RLSPEC_NOT_OPERATIONS): a list of names; with ``operations`` each
    must name an operation of the contract, without it none may."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) \
            or not all(isinstance(v, str) for v in value):
        raise ContractError(f"{name} is {type(value).__name__}; expected a list of operation names")
    known = load().operations
    for entry in value:
        if operations and entry not in known:
            raise ContractError(f"{name} names {entry!r}, which is no operation{nearest(entry, known)}")
        if not operations and entry in known:
            raise ContractError(f"{name} names {entry!r}, which is an operation of the contract")
    return tuple(dict.fromkeys(value))


def plain(conventions: Mapping[str, Any]) -> dict[str, Any]:
    """Validated conventions in the form a user writes them (for reports and JSON): subsets as lists,
    by-kind tables as dicts."""
    known = load().conventions
    out = {}
    for key, value in conventions.items():
        if isinstance(value, tuple) and known[key].type == "choice-by-kind":
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out
