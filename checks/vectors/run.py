"""Running an implementation on vector cases: calling it on a case's inputs, judging its outputs against the
bounds, and running a Python candidate on a whole set (``rlspec check --vectors DIR``) in a killable worker."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ...spec import contract
from ..runner import protocol
from ..runner.protocol import Candidate, CandidateError
from .format import U, Bound, Case, VectorError, case_from_json, read
from .rules import MATRIX_INPUTS, RULES, _grad, _scenario

# ------------------------------------------------------------------------------------------------
# calling an implementation on a case


def call_arguments(operation: str, inputs: dict) -> dict:
    """The keyword arguments of the call: matrices become the callables the contract passes (``matvec(v) =
    A v``), a line search's polynomials the surrogate and KL functions of x."""
    from ..clauses import trpo

    args = dict(inputs)
    if operation in MATRIX_INPUTS:
        name, label = MATRIX_INPUTS[operation]
        args[name] = trpo.matvec(np.asarray(inputs[name], dtype=np.float64), label)
    if operation == "line_search":
        args["surrogate"], args["kl"] = _scenario(inputs).functions()
    return args


SCALAR_OUTPUTS = ("running_moments", "merge_moments", "diagnostic_approx_kl", "diagnostic_clip_fraction",
                  "diagnostic_explained_variance", "diagnostic_entropy")


def _adapted(candidate: Candidate, operation: str) -> Candidate:
    """The candidate as the clause checks call it: group_advantages receives integer ids in its array kind
    (the protocol converts arrays to floats); a scalar operation may return a Python or NumPy scalar."""
    function = candidate.operations[operation]
    if operation == "cql_penalty":
        def adapted(q_values, actions, alpha):  # integer actions, as the offline checks pass them
            return function(q_values=q_values, actions=actions.long(), alpha=alpha)
    elif operation == "group_advantages":
        def adapted(scores, groups, kind):
            if candidate.array == "torch":
                groups = groups.long()
            elif candidate.array == "jax":
                import jax.numpy as jnp

                groups = jnp.asarray(groups).astype(jnp.int32)
            else:
                groups = np.asarray(groups).astype(np.int64)
            return function(scores=scores, groups=groups, kind=kind)
    elif operation == "kl_coefficient_update":
        def adapted(**kwargs):
            result = function(**kwargs)
            if isinstance(result, np.floating):
                return np.asarray(result)
            return np.asarray(float(result)) if isinstance(result, (int, float, np.integer)) and not isinstance(result, bool) else result
    elif operation in SCALAR_OUTPUTS:  # a count or a logged diagnostic may come back as a Python or NumPy number
        from ..clauses.normalisation import _as_array

        def adapted(**kwargs):
            result = function(**kwargs)
            return tuple(_as_array(r) for r in result) if isinstance(result, tuple) else _as_array(result)
    else:
        return candidate
    return dataclasses.replace(candidate, operations={**candidate.operations, operation: adapted})


def evaluate(candidate: Candidate, operation: str, inputs: dict, precision: list | None = None) -> dict[str, np.ndarray]:
    """The candidate's outputs on a case (float64), and for a differentiated operation the gradient of each
    output (of its sum, where it is not a scalar) with respect to each differentiated input.
    Raises CandidateError if it raises or returns something unusable."""
    import torch

    spec = contract.operations()[operation]
    args = call_arguments(operation, inputs)
    candidate = _adapted(candidate, operation)
    requires = tuple(n for n in spec.differentiated if args.get(n) is not None)
    call = protocol.call(candidate, operation, args, dtype=np.float64, outputs=len(spec.outputs),
                         array="torch" if spec.arrays == "torch" else None, requires_grad=requires, allow_nonfinite=True)
    result = {out.name: value for out, value in zip(spec.outputs, call.outputs)}
    if precision is not None:
        precision.append("float32" if call.unit_roundoff > U["float64"] else "float64")
    if requires:
        raws = [call.raw] if len(spec.outputs) == 1 else list(call.raw)
        leaves = [call.inputs[n] for n in requires]
        for out, raw in zip(spec.outputs, raws):
            label = out.name if out.shape == "()" else f"sum {out.name}"
            grads = [None] * len(leaves)
            if torch.is_tensor(raw) and raw.requires_grad:
                try:
                    grads = torch.autograd.grad(raw.sum(), leaves, allow_unused=True, retain_graph=True)
                except RuntimeError as exc:
                    raise CandidateError(f"{operation} returned a tensor autograd cannot differentiate: {exc}") from None
            for name, leaf, grad in zip(requires, leaves, grads):
                result[_grad(name, label)] = (np.zeros(tuple(leaf.shape)) if grad is None
                                              else grad.detach().cpu().double().numpy().reshape(tuple(leaf.shape)))
    return result


def bounds(case: Case, reference: dict, u: float) -> dict[str, Bound]:
    x = {k: (np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) and v.dtype != bool else v) for k, v in case.inputs.items()}
    return RULES[case.operation](x, reference, u, case.conventions)


def judge(actual: dict[str, np.ndarray], expected: dict[str, Bound]) -> list[str]:
    """What is wrong with ``actual``, one line per output (empty: it conforms)."""
    problems = []
    for name, bound in expected.items():
        if name not in actual:
            problems.append(f"{name}: not computed")
            continue
        if bound.finite_only:
            a = np.asarray(actual[name], dtype=np.float64)
            if not np.all(np.isfinite(a)):
                problems.append(f"{name}: expected finite values (the contract leaves them free), got {a.tolist()}")
            continue
        a = np.broadcast_to(np.asarray(actual[name], dtype=np.float64), bound.value.shape)
        want_nan = np.isnan(bound.value) & bound.compared
        ok = np.where(want_nan, np.isnan(a), (a >= bound.low - bound.tol) & (a <= bound.high + bound.tol))
        ok |= ~bound.compared
        if not ok.all():
            i = tuple(int(j) for j in np.argwhere(~ok)[0])
            where = f" at index {i}" if a.ndim else ""
            lo, hi = float(bound.low[i]), float(bound.high[i])
            span = f"{float(bound.value[i])!r}" if lo == hi else f"[{lo!r}, {hi!r}]"
            problems.append(f"{name}{where}: expected {span} (tol {float(bound.tol[i]):.3g}), got {float(a[i])!r}; "
                            f"{int((~ok).sum())} of {ok.size} elements off")
    return problems


def _in_force(declared: dict, keys) -> dict:
    """The values of ``keys`` a candidate is judged under: its declarations, else the contract's defaults."""
    declared = contract.plain(declared)
    return {k: declared.get(k, contract.plain({k: contract.convention(k).default})[k]) for k in keys}


@dataclass
class VectorResult:
    id: str
    operation: str
    status: str  # pass, fail, error, skip (not applicable: another convention), not-provided
    message: str = ""
    clauses: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "operation": self.operation, "status": self.status, "message": self.message,
                "clauses": self.clauses, "flags": self.flags}


def run_case(candidate: Candidate, case: Case) -> VectorResult:
    result = VectorResult(case.id, case.operation, "pass", clauses=case.clauses, flags=case.flags)
    if not candidate.provides(case.operation):
        result.status, result.message = "not-provided", f"the candidate does not provide {case.operation}"
        return result
    in_force = _in_force(candidate.conventions, case.conventions)
    differs = {k: v for k, v in in_force.items() if v != case.conventions[k]}
    if differs:
        result.status = "skip"
        result.message = f"not applicable: the case assumes {case.conventions}, the candidate's conventions are {differs}"
        return result
    precision: list[str] = []
    try:
        actual = evaluate(candidate, case.operation, case.inputs, precision)
    except CandidateError as exc:
        result.status, result.message = "error", str(exc)
        return result
    problems = judge(actual, case.expected[precision[0]])
    if problems:
        result.status = "fail"
        result.message = "; ".join(problems) + (f" (judged as {precision[0]}; this case catches {', '.join(case.flags)})"
                                                 if case.flags else f" (judged as {precision[0]})")
    return result


def run(candidate: Candidate, folder: Path, on_result: Callable[[VectorResult], None] | None = None) -> list[VectorResult]:
    """Every case of every file in the set, in manifest order."""
    manifest, files = read(folder)
    results = []
    for entry in manifest["files"]:
        for data in files[entry["operation"]]["cases"]:
            outcome = run_case(candidate, case_from_json(data))
            results.append(outcome)
            if on_result:
                on_result(outcome)
    return results


def _child(conn, spec: str, folder: str, parent: int) -> None:
    """The worker of an isolated vector run: load the candidate, then answer one case index at a time. It dies
    with the run that started it, however that ends (the clause workers' set-up, checks/runner/worker.py)."""
    from ..runner import worker
    from ..runner.lifetime import die_with_parent
    from ..runner.loader import LoadError, load

    die_with_parent(parent)
    worker._quiet_process(None)
    try:
        candidate = load(spec)
        manifest, files = read(Path(folder))
    except (LoadError, VectorError) as exc:
        conn.send(("load-error", str(exc)))
        return
    cases = [data for entry in manifest["files"] for data in files[entry["operation"]]["cases"]]
    conn.send(("loaded", len(cases)))
    while True:
        try:
            index = conn.recv()
        except (EOFError, OSError):
            return
        if index is None:
            return
        conn.send(("result", run_case(candidate, case_from_json(cases[index]))))


def run_isolated(spec: str, folder: Path, *, time_limit: float = 30.0, load_limit: float = 120.0,
                 on_result: Callable[[VectorResult], None] | None = None) -> list[VectorResult]:
    """``run`` in a worker process the suite can kill: a case that hangs or crashes the worker costs its own
    time limit and gets ``error``, and the later cases of that operation get an immediate ``error`` (not
    retried); a fresh worker takes the next case. LoadError/VectorError if the candidate or the set cannot be
    loaded. The worker dies with this process, whatever ends it."""
    import multiprocessing
    import os

    from ..runner.loader import LoadError

    manifest, files = read(folder)  # the set is checked here first: a bad set is one clear line, not a worker's
    cases = [data for entry in manifest["files"] for data in files[entry["operation"]]["cases"]]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    results: list[VectorResult] = []
    blamed: dict[str, str] = {}  # operation -> what happened on which case

    def start():
        parent, child = context.Pipe()
        process = context.Process(target=_child, args=(child, spec, str(folder), os.getpid()), daemon=True)
        process.start()
        child.close()
        if not parent.poll(load_limit):
            process.kill()
            raise LoadError(f"cannot load candidate: timed out after {load_limit:g} s while importing it")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):
            raise LoadError("cannot load candidate: the worker died while importing it") from None
        if kind == "load-error":
            process.join(1)
            raise LoadError(payload)
        return parent, process

    conn = process = None
    try:
        for index, data in enumerate(cases):
            operation = data["operation"]
            if operation in blamed:
                outcome = VectorResult(data["id"], operation, "error", f"{blamed[operation]}; not retried", data["clauses"], data["flags"])
            else:
                if process is None:
                    conn, process = start()
                conn.send(index)
                message = None
                if conn.poll(time_limit):
                    try:
                        _, outcome = conn.recv()
                    except (EOFError, OSError):
                        process.join(2)
                        message = f"the candidate crashed the worker process (exit code {process.exitcode})"
                else:
                    message = f"timed out after {time_limit:g} s"
                if message is not None:
                    process.kill()
                    process.join(2)
                    conn = process = None
                    blamed[operation] = f"{operation} {message.replace('the candidate ', '')} on {data['id']}"
                    outcome = VectorResult(data["id"], operation, "error", f"{operation}: {message}", data["clauses"], data["flags"])
            results.append(outcome)
            if on_result:
                on_result(outcome)
    finally:
        if process is not None:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
            process.join(1)
            if process.is_alive():
                process.kill()
    return results
