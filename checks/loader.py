"""Load a candidate from a built-in name, a dotted module (optionally ``module:object``) or a file.

A candidate module exposes any subset of the contract's operations as functions and may declare
``RLSPEC_ARRAY``, ``RLSPEC_PRECISION``, ``RLSPEC_FLAGS``, ``RLSPEC_CONVENTIONS``, ``RLSPEC_XFAIL`` and
``RLSPEC_VERSION`` (their meanings and allowed values: spec/contract/00_candidate.toml, docs/contract.md).
Every declaration is validated here, once: a name, key, value or xfail id the contract does not know is a
:class:`LoadError` with one line that names it and suggests the nearest valid one.

Loading runs the candidate's code. Nothing is loaded until asked for: the built-in ``reference`` is
rlspec's own (``rlspec.checks.reference_candidate``); a bare name (``sb3``) resolves to the library adapter
of that name in ``rlspec.checks.adapters``, and ``<adapter>.xfail`` beside it lists the library's declared
deviations (``CLAUSE-ID  # reason, upstream link`` per line).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..spec import contract
from .protocol import OPERATIONS, Candidate, captured_output

BUILTIN = {"reference": f"{__package__}.reference_candidate"}
ADAPTERS = f"{__package__}.adapters"  # built-in library adapters, one module per library


class LoadError(Exception):
    """The candidate could not be loaded; the message is one line."""


def _import_file(path: Path) -> ModuleType:
    name = f"rlspec_candidate_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ next to the user's file: rlspec writes nothing unasked
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module


def _resolve(spec: str):
    target, _, attribute = spec.partition(":")
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise LoadError(f"no such file: {target}")
        module = _import_file(path)
    elif target in BUILTIN:
        module = importlib.import_module(BUILTIN[target])
    elif (adapter := target.replace("-", "_")).isidentifier() and importlib.util.find_spec(f"{ADAPTERS}.{adapter}"):
        module = importlib.import_module(f"{ADAPTERS}.{adapter}")  # a built-in library adapter (sb3-contrib: sb3_contrib)
    else:
        module = importlib.import_module(target)
    obj = module
    if attribute:
        for part in attribute.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, type) or (callable(obj) and not any(hasattr(obj, op) for op in OPERATIONS)):
            obj = obj()  # a class or factory that builds the candidate object
    return module, obj


def load(spec: str = "reference", *, device: str = "cpu") -> Candidate:
    """Load ``spec``; raises :class:`LoadError` with one line saying why not."""
    try:
        with captured_output():
            module, obj = _resolve(spec)
    except LoadError:
        raise
    except ModuleNotFoundError as exc:
        raise LoadError(f"cannot load candidate {spec!r}: {exc}") from None
    except (KeyboardInterrupt, MemoryError):
        raise
    except BaseException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise LoadError(f"cannot load candidate {spec!r}: {type(exc).__name__} while importing" + (f": {first}" if first else "")) from None

    return from_object(obj, spec=spec, module=module, device=device)


def parse_xfail(text: str, origin: str) -> tuple[dict[str, str], list[str]]:
    """``CLAUSE-ID  # reason`` lines -> (id -> reason, warnings about entries without a reason)."""
    entries, warnings = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        body, _, reason = line.partition("#")
        clause_id = body.strip().upper()
        if not clause_id:
            continue
        if not reason.strip():
            warnings.append(f"{origin}:{number}: {clause_id} has no '# reason' (an upstream link is best)")
        entries[clause_id] = reason.strip() or f"declared in {origin}"
    return entries, warnings


def _adapter_xfail(module) -> dict[str, str]:
    """A built-in adapter's deviations, from ``<adapter>.xfail`` beside its module (if any)."""
    source = getattr(module, "__file__", None)
    if not source or not getattr(module, "__name__", "").startswith(f"{ADAPTERS}."):
        return {}  # an object or a module built in memory: no file beside it
    path = Path(source).with_suffix(".xfail")
    if not path.is_file():
        return {}
    entries = parse_xfail(path.read_text(encoding="utf-8"), path.name)[0]
    check_xfail_ids(entries, path.name)
    return entries


def check_xfail_ids(entries, origin: str) -> None:
    """Every xfail id must name a clause: a typo would otherwise silently leave a deviation undeclared."""
    try:
        contract.validate_clause_ids(entries, origin)
    except contract.ContractError as exc:
        raise LoadError(str(exc)) from None


def from_object(obj, *, spec: str | None = None, module=None, device: str = "cpu") -> Candidate:
    """A :class:`Candidate` from a module or object exposing protocol operations as attributes.

    Its declarations are validated here, once: an unknown ``RLSPEC_*`` name or convention key, a value
    the contract does not allow, or an xfail id that names no clause raises :class:`LoadError` with
    one line that names it and says what is allowed."""
    module = module if module is not None else obj
    spec = spec or getattr(obj, "__name__", type(obj).__name__)
    operations = {name: getattr(obj, name) for name in OPERATIONS if callable(getattr(obj, name, None))}
    declared = lambda key, default: getattr(obj, key, getattr(module, key, default))
    try:
        contract.validate_declared_names({n for n in dir(obj) if n.startswith("RLSPEC_")}
                                         | {n for n in dir(module) if n.startswith("RLSPEC_")})
        array = contract.validate_declaration("RLSPEC_ARRAY", declared("RLSPEC_ARRAY", "numpy"))
        precision = declared("RLSPEC_PRECISION", None)
        if precision is not None:
            contract.validate_declaration("RLSPEC_PRECISION", precision)
        flags = contract.validate_declaration("RLSPEC_FLAGS", declared("RLSPEC_FLAGS", "bool"))
        conventions = contract.validate_conventions(declared("RLSPEC_CONVENTIONS", {}) or {})
    except contract.ContractError as exc:
        raise LoadError(f"candidate {spec!r}: {exc}") from None
    own_xfail = declared("RLSPEC_XFAIL", {}) or {}
    if not isinstance(own_xfail, dict):
        raise LoadError(f"candidate {spec!r}: RLSPEC_XFAIL is {type(own_xfail).__name__}; expected a dict of clause id -> reason")
    own_xfail = {str(k).upper(): str(v) for k, v in own_xfail.items()}
    check_xfail_ids(own_xfail, f"candidate {spec!r}: RLSPEC_XFAIL")
    xfail = {**_adapter_xfail(module), **own_xfail}
    if device != "cpu" and array != "torch":
        raise LoadError(f"--device {device} needs a torch candidate (RLSPEC_ARRAY = 'torch'); {spec!r} uses {array}")
    return Candidate(
        spec=spec,
        name=spec if spec in BUILTIN else getattr(module, "__name__", spec),
        operations=operations,
        array=array,
        precision=None if precision == "float64" else precision,
        flags=flags,
        conventions=conventions,
        xfail=xfail,
        version=str(declared("RLSPEC_VERSION", declared("__version__", ""))),
        device=device,
    )
