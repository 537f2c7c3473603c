"""Generating a vector set (``rlspec vectors OUT/``): the cases (the contract's known answers and the clause
checks' fixed inputs, recorded on the reference), the named mutants each case catches, the greedy cover, the files."""

from __future__ import annotations

import hashlib
import json
import runpy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...spec import contract
from ..runner.protocol import Candidate, CandidateError
from .format import FORMAT, SCHEMA, U, VERSION, Case, _encode, case_json, dumps
from .rules import MATRIX_INPUTS, OBJECT_TYPES, VECTOR_OPERATIONS, NotAVector
from .run import _in_force, bounds, evaluate, judge

MAX_ELEMENTS = 256  # inputs larger than this are left to the clause checks
PER_OPERATION = 12  # at most this many cases of one operation besides its known answers
ROOT = Path(__file__).resolve().parents[2]  # a checkout's root (tests/mutants lives there)


# ------------------------------------------------------------------------------------------------
# where cases come from


def _plain(value) -> bool:
    return value is None or isinstance(value, (np.ndarray, bool, int, float, str, np.generic))


def _to_float32(value):
    """An array as a float32 implementation would receive it (rounded to float32, kept as float64)."""
    if isinstance(value, np.ndarray) and value.dtype != bool and value.dtype.kind == "f":
        return value.astype(np.float32).astype(np.float64)
    return value  # scalars stay as given: the clause checks pass them so to float32 candidates too


def _finite_like(before, after) -> bool:
    """Rounding to float32 made nothing infinite that was finite (an overflow changes the case's meaning)."""
    a = np.asarray(before, dtype=np.float64) if not isinstance(before, (str, dict, type(None))) else None
    if a is None or a.dtype == bool:
        return True
    return bool(np.all(np.isfinite(np.asarray(after, dtype=np.float64)) | ~np.isfinite(a)))


def recorded_inputs(seed: int = 0) -> list[tuple[str, str, dict]]:
    """``(clause id, operation, arguments)`` of every call the clause checks make to the reference at
    ``--profile quick --seed seed`` with plain-data arguments of at most MAX_ELEMENTS elements, outside a
    property's drawn examples (those vary with the example budget)."""
    from ..runner import verdict
    from ..runner.engine import run_conformance

    seen: list[tuple[str, str, dict]] = []
    original = verdict.Context.call

    def recording(self, operation, args, **options):
        size = sum(v.size for v in args.values() if isinstance(v, np.ndarray))
        # Only the checks' fixed inputs: what a property draws depends on its example budget (and a search
        # can go another way on another machine), and a vector set must regenerate identically anywhere.
        if not self.drawing and operation in VECTOR_OPERATIONS and operation not in GENERATED and size <= MAX_ELEMENTS \
                and all(_plain(v) for v in args.values()):
            seen.append((self.clause.id, operation, {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}))
        return original(self, operation, args, **options)

    verdict.Context.call = recording
    try:
        run_conformance("reference", profile="quick", seed=seed)
    finally:
        verdict.Context.call = original
    return seen


def generated_inputs() -> list[tuple[str, str, dict]]:
    """The TRPO operations take callables: their cases are the chapter's known problems with the matrix (or
    the line search's polynomials) written out."""
    from ..clauses import trpo

    cases = []
    for A, b in trpo.CG_KNOWN:
        cases.append(("TRPO-CG-SOLVES-SPD", "conjugate_gradient",
                      {"matvec": A, "b": b, "iters": trpo.CG_STEPS_PER_DIM * len(b), "tol": trpo.CG_TOL}))
    A, b = trpo.CG_KNOWN[0]  # r'r 5, 0.3125, 0: one step, by iters and by tol (0.4 lies between r_1'r_1 and its norm 0.559)
    for iters, tol in ((1, trpo.CG_TOL), (10, 0.4)):
        cases.append(("TRPO-CG-STOPPING-RULE", "conjugate_gradient", {"matvec": A, "b": b, "iters": iters, "tol": tol}))
    for F, g, max_kl in trpo.STEP_KNOWN:
        for clause in ("TRPO-NATURAL-STEP-DIRECTION", "TRPO-NATURAL-STEP-KL-BUDGET"):
            cases.append((clause, "natural_step", {"grad": g, "fvp": F, "max_kl": max_kl, "cg_iters": trpo.CG_STEPS_PER_DIM * len(g)}))
    for clause, scenarios in (("TRPO-LINE-SEARCH-RULE", trpo.LINE_SEARCH_KNOWN),
                              ("TRPO-LINE-SEARCH-RESTORES-ON-FAILURE", trpo.LINE_SEARCH_FAILURES)):
        for s in scenarios:
            cases.append((clause, "line_search", {
                "x0": s.x0, "fullstep": s.f, "max_kl": s.max_kl, "max_backtracks": s.max_backtracks,
                "surrogate": {"offset": s.offset, "a": s.a, "b": s.b}, "kl": {"c": s.c, "d": s.d}}))


    # above 1.5 target, below target / 1.5, in between (on both sides of the target itself)
    for beta, kl_, target in ((1.0, 0.02, 0.01), (1.0, 0.005, 0.01), (1.0, 0.008, 0.01), (1.0, 0.012, 0.01), (0.3, 4.0, 1.0)):
        cases.append(("KL-ADAPTIVE-PENALTY", "kl_coefficient_update", {"beta": beta, "kl": kl_, "target": target}))
    return cases


GENERATED = ("conjugate_gradient", "natural_step", "line_search", "kl_coefficient_update")
# Conventions whose other values the vectors also cover (with a rule that does not need the reference):
# each recorded case of the operation is repeated under each of these declarations.
CONVENTION_CASES = {"ppo_clip_loss": [{"dual_clip": 3.0}], "line_search": [{"line_search_accept_ratio": 0.5}]}


def _key(inputs: dict) -> str:
    return json.dumps(_encode(inputs), sort_keys=True)


def case_name(operation: str, clause_id: str, inputs: dict) -> str:
    """A recorded case's id, a function of the case alone: its operation, the clause that passed the inputs,
    and a short hash of the inputs (never a count of what a search recorded before it, which differs between
    machines and example budgets)."""
    digest = hashlib.sha256(f"{operation}\n{clause_id}\n{_key(inputs)}".encode()).hexdigest()[:8]
    return f"{operation}/{clause_id.lower()}-{digest}"


def _conventions_of(operation: str) -> dict[str, Any]:
    """The conventions in force for an operation's cases: the contract's defaults, named (never implied)."""
    return contract.plain({k.key: k.default for k in contract.conventions().values() if operation in k.operations})


def candidate_cases(seed: int = 0) -> dict[str, list[Case]]:
    """Every case a vector file may hold, per operation: known answers first, then the recorded and generated
    inputs (rounded to float32, deduplicated), with their expected bounds at both precisions."""
    from ..runner.reference_candidate import __name__ as reference_module  # noqa: F401 - the oracle is loaded below
    from ..runner.loader import load

    reference = load("reference")
    pool: dict[str, list[Case]] = {op: [] for op in VECTOR_OPERATIONS}
    keys: dict[str, dict[str, Case]] = {op: {} for op in VECTOR_OPERATIONS}

    def add(case: Case):
        key = _key({"inputs": case.inputs, "conventions": case.conventions})
        if key in keys[case.operation]:
            known = keys[case.operation][key]
            known.clauses = sorted(set(known.clauses) | set(case.clauses))
            return
        defaults = case.conventions == _conventions_of(case.operation)
        try:
            outputs = evaluate(reference, case.operation, case.inputs) if defaults else {}
        except CandidateError:
            return  # an input outside the reference's domain (e.g. a deliberate overflow probe): not a vector
        try:
            case.expected = {"float64": bounds(case, outputs, U["float64"]), "float32": bounds(case, outputs, U["float32"])}
        except NotAVector:
            return
        if defaults and judge(outputs, case.expected["float64"]):
            return  # the reference's own output outside its derived bound: the case belongs to the clause checks
        keys[case.operation][key] = case
        pool[case.operation].append(case)

    for answer in contract.known_answers().values():
        if answer.operation in VECTOR_OPERATIONS:
            inputs = answer.arrays()
            if answer.operation in MATRIX_INPUTS:  # the callable's data: the matrix behind it
                name = MATRIX_INPUTS[answer.operation][0]
                inputs[name] = np.asarray(inputs[name], dtype=np.float64)
            add(Case(f"{answer.operation}/{answer.id.split('.', 1)[-1]}", answer.operation, list(answer.clauses),
                     inputs, {**_conventions_of(answer.operation), **contract.plain(answer.conventions)},
                     source="known answer"))
    for clause_id, operation, args in recorded_inputs(seed) + generated_inputs():
        rounded = {k: _to_float32(v) for k, v in args.items()}
        if not all(_finite_like(args[k], rounded[k]) for k in args):
            continue
        case_id = case_name(operation, clause_id, rounded)
        add(Case(case_id, operation, [clause_id], rounded, _conventions_of(operation), source=clause_id))
        for declared in CONVENTION_CASES.get(operation, []):
            suffix = "-".join(f"{k.replace('_', '-')}-{v:g}" for k, v in declared.items())
            inputs = dict(rounded)
            if declared.get("line_search_accept_ratio"):  # the slope the sufficient-increase test needs (trpo.run_line_search)
                inputs["expected_improve_rate"] = inputs["surrogate"]["a"]
            add(Case(f"{case_id}-{suffix}", operation, [clause_id], inputs, {**_conventions_of(operation), **declared},
                     source=clause_id))
    return pool


# ------------------------------------------------------------------------------------------------
# flags: which named bugs each case catches


@dataclass(frozen=True)
class Mutant:
    name: str  # the file's stem: the bug's name
    bug: str
    clauses: tuple[str, ...]
    candidate: Candidate


def mutants(folder: Path) -> list[Mutant]:
    """The mutant catalogue (tests/mutants/*.py in a checkout): each a candidate with one named bug."""
    from ..runner.loader import load

    found = []
    for path in sorted(Path(folder).glob("*.py")):
        meta = runpy.run_path(str(path)).get("RLSPEC_MUTANT")
        if meta:
            found.append(Mutant(path.stem, meta["bug"], tuple(meta["clauses"]), load(str(path))))
    return found


def comparable(mutant: Mutant, case: Case) -> bool:
    """A mutant judged under other values of the conventions the case assumes is judged by the clauses, not here."""
    return _in_force(mutant.candidate.conventions, case.conventions) == case.conventions


def catches(mutant: Mutant, case: Case) -> bool:
    """The mutant fails the case, judged (as any candidate) at the precision of its outputs."""
    precision: list[str] = []
    try:
        actual = evaluate(mutant.candidate, case.operation, case.inputs, precision)
    except CandidateError:
        return True  # an error on valid input is caught too: the verdict would be `error`
    return bool(judge(actual, case.expected[precision[0]]))


def select(cases: list[Case], caught: dict[str, set[str]]) -> list[Case]:
    """The known answers, then greedily the case that catches the most mutants not yet caught (ties: fewer
    elements, then the earlier case), at most PER_OPERATION of them."""
    chosen = [c for c in cases if c.source == "known answer"]
    covered = set().union(*(caught[c.id] for c in chosen)) if chosen else set()
    rest = [c for c in cases if c.source != "known answer"]
    size = lambda c: sum(np.asarray(v).size for v in c.inputs.values() if isinstance(v, np.ndarray))
    while rest and len(chosen) < PER_OPERATION + sum(c.source == "known answer" for c in cases):
        best = max(rest, key=lambda c: (len(caught[c.id] - covered), -size(c), -rest.index(c)))
        if not caught[best.id] - covered:
            break
        chosen.append(best)
        covered |= caught[best.id]
        rest.remove(best)
    if len(chosen) == 0 and cases:  # an operation no mutant names still gets a case to run
        chosen.append(min(cases, key=size))
    return chosen


def generate(out: Path, *, mutant_folder: Path, seed: int = 0, progress: Callable[[str], None] = lambda _: None) -> dict:
    """Write the vector set into ``out`` (one file per operation, manifest.json); returns the manifest."""
    from ..runner.engine import VERSION as RLSPEC_VERSION

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress("recording the clause checks' inputs (reference, quick, seed 0)")
    pool = candidate_cases(seed)
    catalogue_ = mutants(mutant_folder)
    manifest = {"format": FORMAT, "version": VERSION, "rlspec": RLSPEC_VERSION, "contract": contract.load().version,
                "files": [], "mutants": {}}
    for operation in VECTOR_OPERATIONS:
        cases = pool[operation]
        relevant = [m for m in catalogue_ if m.candidate.provides(operation)]
        progress(f"{operation}: {len(cases)} candidate cases x {len(relevant)} mutants")
        caught = {c.id: {m.name for m in relevant if comparable(m, c) and catches(m, c)} for c in cases}
        chosen = select(cases, caught)
        for c in chosen:
            c.flags = sorted(caught[c.id])
        data = {"format": FORMAT, "version": VERSION, "operation": operation,
                "signature": f"{operation}{contract.operations()[operation].signature}",
                "cases": [case_json(c) for c in chosen]}
        text = dumps(data)
        (out / f"{operation}.json").write_text(text, encoding="utf-8")
        manifest["files"].append({"file": f"{operation}.json", "operation": operation, "cases": len(chosen),
                                  "sha256": hashlib.sha256(text.encode()).hexdigest()})
        for m in relevant:
            entry = manifest["mutants"].setdefault(m.name, {"bug": m.bug, "operations": [], "caught_by": []})
            entry["operations"].append(operation)
            entry["caught_by"] += [c.id for c in chosen if m.name in c.flags]
    for m in catalogue_:
        entry = manifest["mutants"].setdefault(m.name, {"bug": m.bug, "operations": [], "caught_by": []})
        if not entry["caught_by"]:
            entry["not_caught"] = not_caught_reason(m, entry["operations"])
    (out / "manifest.json").write_text(dumps(manifest), encoding="utf-8")
    (out / "schema.json").write_bytes(SCHEMA.read_bytes())
    return manifest


def not_caught_reason(mutant: Mutant, operations: list[str]) -> str:
    provided = sorted(set(mutant.candidate.operations) - set(VECTOR_OPERATIONS))
    if not operations:
        spec = contract.operations()
        objects = [op for op in provided if any(a.type in OBJECT_TYPES or (a.type == "callable" and op not in MATRIX_INPUTS)
                                                for a in spec[op].inputs)]
        if objects == provided:
            return f"its operation ({', '.join(provided) or '?'}) takes objects (networks, a policy, an optimizer, an environment, a schedule): judged by the clause checks only"
        return f"no vector rule is written for {', '.join(provided)} yet (checks/vectors/rules.py RULES)"
    declared = contract.plain(mutant.candidate.conventions)
    if declared:
        covered = [d for op in operations for d in CONVENTION_CASES.get(op, [])]
        why = " (a dual clip c <= 1 fails the clauses by declaration)" if (declared.get("dual_clip") or 2) <= 1 else ""
        return f"it declares {declared}, and the vectors cover the contract's defaults" + (f" and {covered}" if covered else "") + f" only{why}"
    return "no case of its operation separates it from the reference within tolerance (its bug shows only in a statistical or drawn property)"
