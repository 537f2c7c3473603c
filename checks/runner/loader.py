"""Load a candidate from a built-in name, a dotted module (optionally ``module:object``) or a file.

A candidate module exposes any subset of the contract's operations as functions and may declare
``RLSPEC_ARRAY``, ``RLSPEC_PRECISION``, ``RLSPEC_FLAGS``, ``RLSPEC_CONVENTIONS``, ``RLSPEC_XFAIL`` and
``RLSPEC_VERSION`` (their meanings and allowed values: spec/contract/00_candidate.toml, docs/contract.md).
Every declaration is validated here, once: a name, key, value or xfail id the contract does not know is a
:class:`LoadError` with one line that names it and suggests the nearest valid one.

Loading runs the candidate's code. Nothing is loaded until asked for: the built-in ``reference`` is
rlspec's own (``rlspec.checks.runner.reference_candidate``); a bare name (``sb3``) resolves to the library adapter
of that name in ``rlspec.checks.adapters``, and ``<adapter>.xfail`` beside it lists the library's declared
deviations (``CLAUSE-ID  # reason, upstream link`` per line).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ...spec import contract
from .protocol import OPERATIONS, Candidate, captured_output

BUILTIN = {"reference": f"{__package__}.reference_candidate"}
ADAPTERS = f"{__package__.rpartition('.')[0]}.adapters"  # built-in library adapters, one module per library (rlspec.checks.adapters)


class LoadError(Exception):
    """The candidate could not be loaded; the message is one line."""


def importable_folder(folder: Path) -> None:
    """Put ``folder`` first on ``sys.path`` (once), as ``python FILE`` does for the folder of FILE: an adapter
    imports the user's modules beside it (``from myrl import gae``). It stays there, like a script's folder,
    so that imports inside the adapter's functions keep working."""
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.insert(0, entry)


def _import_file(path: Path) -> ModuleType:
    name = f"rlspec_candidate_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}: not a Python file")
    importable_folder(path.parent)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ next to the user's file: rlspec writes nothing unasked
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module


def adapter_extra(adapter: str) -> str:
    """The extra that installs a built-in adapter's library (``sb3_contrib`` -> ``sb3-contrib``)."""
    wanted = adapter.replace("_", "-")
    try:
        from importlib import metadata

        extras = metadata.metadata("rlspec").get_all("Provides-Extra") or []
    except Exception:  # noqa: BLE001 - not installed as a distribution (a bare checkout on sys.path)
        extras = []
    return next((e for e in extras if e.replace("_", "-") == wanted), wanted)


def _import_adapter(adapter: str):
    """A built-in library adapter; a missing library is a LoadError that says which extra installs it."""
    try:
        return importlib.import_module(f"{ADAPTERS}.{adapter}")
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == ADAPTERS or exc.name.startswith(f"{ADAPTERS}.")):
            raise
        extra = adapter_extra(adapter)
        how = " (the README says how for verl and OpenRLHF: .ci/install/" + adapter + ".sh first)" \
            if adapter in ("verl", "openrlhf") else ""
        raise LoadError(f"cannot load candidate {adapter.replace('_', '-')!r}: the adapter needs its library "
                        f"({exc}); install it with: pip install \"rlspec[{extra}]\"{how}") from None


def _import_module(target: str):
    """A dotted module, found as ``python -m`` would find it: installed, or under the working directory."""
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        top = target.split(".")[0]
        if exc.name != top or not (Path.cwd() / top).exists() and not (Path.cwd() / f"{top}.py").exists():
            raise
    importable_folder(Path.cwd())
    return importlib.import_module(target)


def _resolve(spec: str):
    target, _, attribute = spec.partition(":")
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise LoadError(f"no such file: {target}" + (" (a folder)" if path.is_dir() else ""))
        module = _import_file(path)
    elif path.is_dir() and not target.replace(".", "").replace("_", "").isalnum():
        raise LoadError(f"cannot load candidate {spec!r}: a folder; name a .py file or a dotted module")
    elif target in BUILTIN:
        module = importlib.import_module(BUILTIN[target])
    elif (adapter := target.replace("-", "_")).isidentifier() and importlib.util.find_spec(f"{ADAPTERS}.{adapter}"):
        module = _import_adapter(adapter)  # a built-in library adapter (sb3-contrib: sb3_contrib)
    elif not target or not all(part.isidentifier() for part in target.split(".")):
        raise LoadError(f"cannot load candidate {spec!r}: not a built-in name, a dotted module or a .py file")
    else:
        module = _import_module(target)
    obj = module
    if attribute:
        for part in attribute.split("."):
            if not hasattr(obj, part):
                raise LoadError(f"cannot load candidate {spec!r}: {target} has no attribute {part!r}")
            obj = getattr(obj, part)
        if isinstance(obj, type) or (callable(obj) and not any(hasattr(obj, op) for op in OPERATIONS)):
            obj = obj()  # a class or factory that builds the candidate object
    return module, obj


def load(spec: str = "reference", *, device: str = "cpu", overrides: dict | None = None) -> Candidate:
    """Load ``spec``; raises :class:`LoadError` with one line saying why not. ``overrides``: declarations made
    outside the candidate (``[tool.rlspec]``, ``--require``): ``RLSPEC_CONVENTIONS``, ``RLSPEC_XFAIL`` and
    ``RLSPEC_REQUIRE`` merge with the candidate's own, ``RLSPEC_PRECISION`` replaces it."""
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

    return from_object(obj, spec=spec, module=module, device=device, overrides=overrides)


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


NEAR_CUTOFF = 0.85  # difflib's ratio above which a public name reads as a misspelt operation (ppo_clip_los: 0.96)


def _near_operation(name: str, missing) -> str | None:
    """The operation ``name`` looks like a misspelling of (case aside), among the ones not provided."""
    lowered = name.lower()
    if lowered in missing:
        return lowered
    close = difflib.get_close_matches(lowered, list(missing), n=1, cutoff=NEAR_CUTOFF)
    return close[0] if close else None


def _check_operations(obj, spec: str, operations: dict, not_operations: tuple[str, ...], required: tuple[str, ...]) -> None:
    """No false green at load: a candidate that provides no operation, one with a public callable whose name is
    near a missing operation's (unless declared not one, RLSPEC_NOT_OPERATIONS), and one that lacks an operation
    it is required to provide (RLSPEC_REQUIRE, --require) are load errors, each one line."""
    names = [n for n in dir(obj) if not n.startswith("_")]
    defined = set(names)
    stray = [n for n in not_operations if n not in defined]
    if stray:
        raise LoadError(f"candidate {spec!r}: RLSPEC_NOT_OPERATIONS names {stray[0]!r}, which the candidate does not define")
    missing = [op for op in OPERATIONS if op not in operations]
    for name in sorted(names):
        if name in operations or name in not_operations or name.isupper():
            continue
        value = getattr(obj, name, None)
        if not callable(value) or isinstance(value, ModuleType):
            continue
        near = _near_operation(name, missing)
        if near:
            raise LoadError(f"candidate {spec!r}: {name} is not an operation of the contract; did you mean {near!r}? "
                            f"(rename it, or declare RLSPEC_NOT_OPERATIONS = [{name!r}])")
    if not operations:
        raise LoadError(f"candidate {spec!r} provides no operation of the contract (gae, ppo_clip_loss, ...: "
                        f"`rlspec contract` lists them); is it the adapter, not the module it wraps?")
    absent = [op for op in required if op not in operations]
    if absent:
        raise LoadError(f"candidate {spec!r} does not provide {', '.join(absent)}, which it is required to provide "
                        f"(RLSPEC_REQUIRE / --require)")


def from_object(obj, *, spec: str | None = None, module=None, device: str = "cpu", overrides: dict | None = None) -> Candidate:
    """A :class:`Candidate` from a module or object exposing protocol operations as attributes.

    Its declarations are validated here, once: an unknown ``RLSPEC_*`` name or convention key, a value
    the contract does not allow, or an xfail id that names no clause raises :class:`LoadError` with
    one line that names it and says what is allowed."""
    module = module if module is not None else obj
    spec = spec or getattr(obj, "__name__", type(obj).__name__)
    operations = {name: getattr(obj, name) for name in OPERATIONS if callable(getattr(obj, name, None))}
    declared = lambda key, default: getattr(obj, key, getattr(module, key, default))
    overrides = dict(overrides or {})
    try:
        contract.validate_declared_names({n for n in dir(obj) if n.startswith("RLSPEC_")}
                                         | {n for n in dir(module) if n.startswith("RLSPEC_")})
        array = contract.validate_declaration("RLSPEC_ARRAY", declared("RLSPEC_ARRAY", "numpy"))
        precision, precisions = contract.validate_precision(overrides.get("RLSPEC_PRECISION", declared("RLSPEC_PRECISION", None)))
        flags = contract.validate_declaration("RLSPEC_FLAGS", declared("RLSPEC_FLAGS", "bool"))
        conventions = contract.validate_conventions({**(declared("RLSPEC_CONVENTIONS", {}) or {}),
                                                     **(overrides.get("RLSPEC_CONVENTIONS") or {})})
        not_operations = contract.validate_operation_names(
            declared("RLSPEC_NOT_OPERATIONS", ()), "RLSPEC_NOT_OPERATIONS", operations=False)
        required = contract.validate_operation_names(
            [*declared("RLSPEC_REQUIRE", ()), *overrides.get("RLSPEC_REQUIRE", ())], "RLSPEC_REQUIRE")
    except contract.ContractError as exc:
        raise LoadError(f"candidate {spec!r}: {exc}") from None
    _check_operations(obj, spec, operations, not_operations, required)
    own_xfail = declared("RLSPEC_XFAIL", {}) or {}
    if not isinstance(own_xfail, dict):
        raise LoadError(f"candidate {spec!r}: RLSPEC_XFAIL is {type(own_xfail).__name__}; expected a dict of clause id -> reason")
    own_xfail = {str(k).upper(): str(v) for k, v in {**own_xfail, **(overrides.get("RLSPEC_XFAIL") or {})}.items()}
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
        precisions=precisions,
        flags=flags,
        conventions=conventions,
        xfail=xfail,
        version=str(declared("RLSPEC_VERSION", declared("__version__", ""))),
        device=device,
    )
