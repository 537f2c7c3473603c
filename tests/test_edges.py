"""Every edge the contract allows is drawn (issue 26, part 2).

The edges of each argument come from the contract (``Argument.edges``: its bounds, 0 and 1, None for an optional
argument, the special values it names). The rule: every clause whose calls vary an argument passes each of its edges
in its *fixed* cases, the ones that run on every seed before any drawn example. Fixed calls are found without
touching the engine: the reference is wrapped in a recording candidate built here and each clause runs at two seeds;
a call made at both is fixed (drawn calls differ with the seed). An argument "varies" in a clause when its calls pass
it more than one value. A clause whose statement holds an argument to part of its range names it in ``no_edges`` with
the reason (spec/clauses/*.toml).
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np
import pytest

from conftest import REPEAT
from rlspec.checks import run_conformance
from rlspec.checks.kit import edges
from rlspec.checks.runner import reference_candidate
from rlspec.checks.runner.protocol import OPERATIONS
from rlspec.spec import catalogue, contract

SEEDS = (0, 5)


def _plain(value):
    """A recorded argument: arrays as float64/bool numpy, numbers and None as they are, anything else by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
        return tuple(value)
    return f"<{type(value).__name__}>{value!r}"[:2000]


def _key(value):
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype), value.tobytes())
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def recording_reference(log: list):
    candidate = types.SimpleNamespace(RLSPEC_ARRAY="numpy")
    for name in OPERATIONS:
        function = getattr(reference_candidate, name, None)
        if function is None:
            continue

        def operation(*args, _function=function, _name=name, **kwargs):
            log.append((_name, {k: _plain(v) for k, v in kwargs.items()}))
            return _function(*args, **kwargs)

        setattr(candidate, name, functools.wraps(function)(operation))
    return candidate


def _present(edge_value, recorded) -> bool:
    if edge_value is None:
        return recorded is None
    if isinstance(recorded, np.ndarray):
        if recorded.dtype == bool or recorded.size == 0:
            return False
        return bool(np.any(np.isnan(recorded))) if math.isnan(edge_value) else bool(np.any(recorded == edge_value))
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return recorded == edge_value or (math.isnan(edge_value) and isinstance(recorded, float) and math.isnan(recorded))
    return False


def gaps(clause) -> list[str]:
    """The edges ``clause``'s fixed cases miss, as 'operation.argument = value (why)'."""
    logs = []
    for seed in SEEDS:
        log: list = []
        run = run_conformance(recording_reference(log), clauses=[clause.id], seed=seed)
        assert run[clause.id].status == "pass", (clause.id, run[clause.id].message)
        logs.append(log)
    key = lambda op, args: (op, tuple(sorted((k, _key(v)) for k, v in args.items())))
    at_second = {key(op, args) for op, args in logs[1]}
    fixed = [(op, args) for op, args in logs[0] if key(op, args) in at_second]
    missing = []
    for op_name in clause.operations:
        calls = [args for log in logs for op, args in log if op == op_name]
        fixed_calls = [args for op, args in fixed if op == op_name]
        for argument in contract.operations()[op_name].inputs:
            if not argument.edges or argument.name in clause.no_edges:
                continue
            if len({_key(args.get(argument.name)) for args in calls}) < 2:
                continue  # the clause holds the argument fixed: its value is the clause's premise
            for edge in argument.edges:
                if not any(_present(edge.value, args.get(argument.name)) for args in fixed_calls):
                    missing.append(f"{op_name}.{argument.name} = {edge.value!r} ({edge.why})")
    return missing


CLAUSES = list(catalogue.clauses())


@REPEAT  # two runs of every clause of the reference, whose lines its own tests count (docs/speed.md)
@pytest.mark.parametrize("clause", CLAUSES, ids=[c.id for c in CLAUSES])
def test_every_clause_takes_the_edges_of_the_arguments_it_varies(clause):
    missing = gaps(clause)
    assert not missing, f"{clause.id}'s fixed cases miss contract edges (add them with rlspec.checks.kit.edges.cases, or name the " \
                        f"argument in the clause's no_edges with the reason): {'; '.join(missing)}"


def test_no_edges_names_arguments_of_the_clause():
    for clause in catalogue.clauses():
        arguments = {a.name for op in clause.operations for a in contract.operations()[op].inputs}
        assert set(clause.no_edges) <= arguments, (clause.id, sorted(set(clause.no_edges) - arguments))


def test_edges_are_generated_from_the_bounds():
    gamma = next(a for a in contract.operations()["gae"].inputs if a.name == "gamma")
    assert [e.value for e in gamma.edges] == [0.0, 1.0]
    tau = next(a for a in contract.operations()["expectile_loss"].inputs if a.name == "tau")
    assert [e.value for e in tau.edges] == [2.0**-20, 1 - 2.0**-20, 0.5]
    entropy = next(a for a in contract.operations()["sac_alpha_loss"].inputs if a.name == "target_entropy")
    assert [e.value for e in entropy.edges] == [0.0, 1.0, None]  # 0: where `target_entropy or default` takes the default
    cases = list(edges.cases("polyak_update", {"target": None, "online": None, "tau": 0.25}))
    assert [args["tau"] for args, _ in cases] == [0.0, 1.0]


def test_an_edge_outside_its_range_is_refused():
    with pytest.raises(contract.ContractError, match="outside its range"):
        contract._argument({"name": "tau", "type": "scalar", "minimum": 0, "maximum": 1, "edges": [{"value": 2.0, "why": "x"}]}, "x")
