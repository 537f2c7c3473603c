"""Known wrong answers: what a failing verdict's "likely cause" must rest on.

A cause is printed as *likely* only with evidence. The strongest: the candidate's output on the failing
input equals what a known mistake computes on that input, and differs from the right answer. The known
mistakes are rlspec's mutant catalogue (``tests/mutants``: each a realistic, named bug, proven caught),
shipped inside the package as ``wrong_answers.json`` (tests/ is not installed): for every mutant of an
operation whose arguments are plain data, its source, its bug and a one-line cause taken from its
docstring. ``rlspec`` regenerates the file with ``python -m rlspec.checks.signatures tests/mutants``
(tests/test_signatures.py keeps it in step with the catalogue).

Matching (:func:`explain`), after a clause fails, on the calls its check made (the last few): a mistake
*matches* a call when every output of the candidate is within ``sqrt(u) (1 + |x|)`` of the mistake's (u the
unit roundoff the candidate was judged at: 1.5e-8 relative in float64, 2.4e-4 in float32) and the mistake's
output is farther than ten times that from the reference's somewhere (the input tells the mistake apart from
the right answer). One mistake matching: the likely cause. Several: they are listed as equally likely. None:
no cause is claimed.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ...spec import contract

DATA = Path(__file__).parent.parent / "wrong_answers.json"  # checks/wrong_answers.json (package data of rlspec.checks)
PLAIN_TYPES = ("array", "bool", "integer", "scalar", "string")
MAX_ELEMENTS = 4096  # inputs larger than this are not replayed through the mistakes
MATCH_SCALE = 10.0  # the mistake must differ from the right answer by ten times the matching tolerance


@dataclass(frozen=True)
class WrongAnswer:
    name: str  # the mutant's file stem
    bug: str  # its bug label (RLSPEC_MUTANT["bug"])
    cause: str  # one line: what the mistake is
    operations: tuple[str, ...]
    source: str


def plain_operations() -> set[str]:
    """Operations whose every input is plain data: a mistake's output on the failing input can be computed."""
    return {name for name, op in contract.operations().items() if all(a.type in PLAIN_TYPES for a in op.inputs)}


def cause_of(docstring: str) -> str:
    """The first sentence of a mutant's docstring, without its "Mutant:" label and bug references."""
    text = " ".join((docstring or "").split())
    text = re.sub(r"^Mutant\s*(\([^()]*\))?\s*:\s*", "", text).replace("i.e.", "i.e,").replace("e.g.", "e.g,")
    match = re.search(r"(?<=[a-z0-9)`'\]])\.(\s+[A-Za-z(]|$)", text)
    sentence = text[:match.start()] if match else text
    sentence = re.sub(r"\s*\((?:bugs?|see|as in)\b[^()]*(?:\([^()]*\)[^()]*)*\)", "", sentence)
    sentence = re.sub(r"\s*\((?:[A-Z]\d+|[A-Z]{2,}[^()]*#\d+)[^()]*\)", "", sentence)
    return sentence.replace("i.e,", "i.e.").replace("e.g,", "e.g.").strip().rstrip(":;,")[:240]


def generate(folder: Path) -> dict[str, Any]:
    """The wrong answers of the mutant catalogue in ``folder``, as ``wrong_answers.json`` holds them."""
    plain = plain_operations()
    out: dict[str, Any] = {}
    for path in sorted(Path(folder).glob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        meta = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "RLSPEC_MUTANT" for t in node.targets):
                meta = ast.literal_eval(node.value)
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        operations = sorted(functions & plain)
        if not meta or not operations:
            continue
        out[path.stem] = {"bug": meta["bug"], "cause": cause_of(ast.get_docstring(tree) or ""),
                          "operations": operations, "source": source}
    return {"format": "rlspec-wrong-answers", "from": "tests/mutants", "mutants": out}


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@lru_cache(maxsize=None)
def catalogue() -> dict[str, tuple[WrongAnswer, ...]]:
    """Operation -> the known wrong answers for it (empty where the file is missing)."""
    try:
        data = json.loads(DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    by_operation: dict[str, list[WrongAnswer]] = {}
    for name, entry in sorted(data.get("mutants", {}).items()):
        answer = WrongAnswer(name, entry["bug"], entry["cause"], tuple(entry["operations"]), entry["source"])
        for operation in answer.operations:
            by_operation.setdefault(operation, []).append(answer)
    return {op: tuple(answers) for op, answers in by_operation.items()}


_loaded: dict[str, Any] = {}


def _candidate(answer: WrongAnswer):
    """The mistake as a candidate (compiled once per process); None if it cannot be built here."""
    if answer.name not in _loaded:
        from .loader import from_object

        try:
            module = ModuleType(f"rlspec_wrong_answer_{answer.name}")
            module.__file__ = f"<wrong answer {answer.name}>"
            writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            try:
                exec(compile(answer.source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - rlspec's own mutant
            finally:
                sys.dont_write_bytecode = writes
            _loaded[answer.name] = from_object(module, spec=answer.name)
        except Exception:  # noqa: BLE001 - a mistake that needs a library not installed here is simply not used
            _loaded[answer.name] = None
    return _loaded[answer.name]


def _reference():
    if "reference" not in _loaded:
        from .loader import load

        _loaded["reference"] = load("reference")
    return _loaded["reference"]


def _outputs(candidate, call) -> list[np.ndarray] | None:
    from . import protocol

    try:
        again = protocol.call(candidate, call.operation, call.args, dtype=call.dtype, outputs=len(call.outputs),
                              allow_nonfinite=True, array=call.array, requires_grad=call.requires_grad)
    except BaseException as exc:  # noqa: BLE001 - a mistake that raises on this input does not match it
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None
    return again.outputs


def _close(a: list[np.ndarray], b: list[np.ndarray], u: float, scale: float = 1.0) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return False
        # Equal values (an infinity of one sign on both sides among them) and NaN against NaN are the same output.
        # A difference is taken only where both are finite: at an infinite y the tolerance would be infinite too,
        # and any finite x would "match" it.
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        finite = np.isfinite(x) & np.isfinite(y)
        xf, yf = np.where(finite, x, 0.0), np.where(finite, y, 0.0)
        near = finite & (np.abs(xf - yf) <= scale * math.sqrt(u) * (1 + np.abs(yf)))
        if not np.all(same | near):
            return False
    return True


def declares_for(operation: str, conventions: dict[str, Any]) -> bool:
    """Whether ``conventions`` (a candidate's declarations) change a convention ``operation`` reads from its default:
    the mutants compute their mistakes against the defaults, so under another declaration the reference is not the
    right answer and a mistake's output is no evidence (a declared group_singleton = 'score' makes verl's singleton
    right, not "undeclared")."""
    for key, value in (conventions or {}).items():
        try:
            spec = contract.convention(key)
        except Exception:  # noqa: BLE001 - validated at load; an unknown key cannot reach here
            continue
        if operation in spec.operations and value != spec.default:
            return True
    return False


def matching(call, conventions: dict[str, Any] | None = None) -> list[WrongAnswer]:
    """The known mistakes whose output on ``call``'s input is the candidate's and not the right answer (none when
    the candidate declares a convention of the operation other than the default: see :func:`declares_for`)."""
    answers = catalogue().get(call.operation, ())
    if not answers or not call.args or call.operation not in plain_operations():
        return []
    if declares_for(call.operation, conventions or {}):
        return []
    if sum(np.size(v) for v in call.args.values() if isinstance(v, np.ndarray)) > MAX_ELEMENTS:
        return []  # a long rollout: a dozen mistakes' Python loops over it would cost more than the clause
    reference = _outputs(_reference(), call)
    if reference is None:
        return []
    found = []
    for answer in answers:
        candidate = _candidate(answer)
        if candidate is None:
            continue
        wrong = _outputs(candidate, call)
        if wrong is None or _close(wrong, reference, call.unit_roundoff, MATCH_SCALE):
            continue  # the input does not tell this mistake from the right answer
        if _close(call.outputs, wrong, call.unit_roundoff):
            found.append(answer)
    return found


# A lower precision's arithmetic on the failing input, measured rather than bounded: a check's tolerance may hold
# terms that do not scale with the unit roundoff (an approximation torch admits, a floor for tiny values), so
# widening it by u_lower / u can admit errors no rounding makes (the right answer + 0.1, judged "within float32").
# The reference run again on the same input in float32 shows what float32 arithmetic gives there: e32 =
# |ref32 - ref64|, which for the first-order error is linear in u (bfloat16: e32 u_bf16 / u32). A correctly
# written lower-precision computation may round in another order, so the candidate's discrepancy may reach
# LOWER_PRECISION_SLACK times that, plus u_lower per unit of the largest magnitude among inputs and outputs (one
# rounding of each, which the reference's own rounding may happen to avoid). Algorithmic mistakes sit orders of
# magnitude above (an O(1) error against O(1e-7)).
LOWER_PRECISION_SLACK = 16.0
MAX_RERUN_ELEMENTS = 1_000_000  # the reference twice over a long rollout costs a fraction of a second


def within_lower_precision(call, lower: float) -> bool | None:
    """Whether the candidate's outputs on ``call``'s input are the right answer up to what arithmetic at unit
    roundoff ``lower`` gives on that input (see LOWER_PRECISION_SLACK); None when it cannot be told here (an
    operation that takes more than plain data, an input too large, a reference that refuses the input)."""
    if not call.args or call.operation not in plain_operations():
        return None
    if sum(np.size(v) for v in call.args.values() if isinstance(v, np.ndarray)) > MAX_RERUN_ELEMENTS:
        return None
    exact = _outputs_at(call, np.float64)
    single = _outputs_at(call, np.float32)
    if exact is None or single is None or len(exact) != len(call.outputs):
        return None
    u32 = 2.0**-24
    magnitude = max([float(np.max(np.abs(v), initial=0.0)) for v in call.args.values()
                     if isinstance(v, np.ndarray) and v.dtype.kind == "f"] +
                    [float(np.max(np.abs(y[np.isfinite(y)]), initial=0.0)) for y in exact] + [0.0])
    for out, y, y32 in zip(call.outputs, exact, single):
        if out.shape != y.shape or y32.shape != y.shape:
            return None
        arithmetic = np.abs(y32 - y) * (lower / u32)
        allowed = LOWER_PRECISION_SLACK * (arithmetic + lower * magnitude)
        same = (out == y) | (np.isnan(out) & np.isnan(y))
        if not np.all(same | (np.abs(out - y) <= allowed)):
            return False
    return True


def _outputs_at(call, dtype) -> list[np.ndarray] | None:
    """The reference's outputs on ``call``'s input passed at ``dtype``."""
    from . import protocol

    try:
        again = protocol.call(_reference(), call.operation, call.args, dtype=dtype, outputs=len(call.outputs),
                              allow_nonfinite=True, array=call.array, requires_grad=call.requires_grad)
    except BaseException as exc:  # noqa: BLE001 - a reference that refuses the input says nothing
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None
    return again.outputs


def explain(calls, conventions: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    """``(likely cause, known)`` from the calls a failing check made, latest first: the one mistake that
    matches (or "" if none or several), and what else is known (several matching mistakes, listed).
    ``conventions``: the candidate's declarations (see :func:`declares_for`)."""
    for call in reversed(calls):
        try:
            found = matching(call, conventions)
        except Exception:  # noqa: BLE001 - the evidence is a help; never let it break a verdict
            found = []
        causes = list(dict.fromkeys(a.cause for a in found))
        if len(causes) == 1:
            return causes[0], []
        if causes:
            return "", ["the outputs match each of these known mistakes: " + "; or ".join(causes)]
    return "", []


def main(argv: list[str] | None = None) -> None:
    """``python -m rlspec.checks.signatures tests/mutants > checks/wrong_answers.json``."""
    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.write(dumps(generate(Path(argv[0] if argv else "tests/mutants"))))


if __name__ == "__main__":  # python -m rlspec.checks.signatures tests/mutants > checks/wrong_answers.json
    main()
