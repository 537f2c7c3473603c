"""No bound rejects a better answer (issue 26, part 3).

Two runs of every clause on the reference, each through a wrapper candidate built here (the engine is not
touched):

* **one ulp off**: every floating output of every operation moved by one unit in the last place, up at even
  flat indices and down at odd ones (the float32 run the other way round). A bound derived from rounding
  errors admits at least one rounding of each output; a bound that rejects this has collapsed to zero (a
  relative bound at an expected 0, a float64-sized floor under a float32 output). Only the clauses that
  enforce an *exact* promise of the contract (a copy, a selection, a 0/1 schedule, a power-of-two scaling,
  an exact zero; ``kind = "exact"`` in spec/contract) may reject it, and each of them must.
* **more exact than declared**: the reference, which computes in float64, declares
  ``RLSPEC_PRECISION = "float32"``. A declared precision loosens bounds; it can never reject a result
  more exact than it promised.

``ppo_update``'s optional diagnostics are moved too (the ratios and every approx_kl value; the indices and the
epoch count are integers).
"""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
import torch

from conftest import REPEAT
from rlspec.checks import run_conformance
from rlspec.checks.runner import reference_candidate
from rlspec.checks.runner.protocol import OPERATIONS
from rlspec.spec import contract


def _directions(shape, flip: bool) -> np.ndarray:
    """+inf at even flat indices and -inf at odd ones (the other way round when ``flip``)."""
    signs = np.where(np.arange(int(np.prod(shape, dtype=int))) % 2 == int(flip), np.inf, -np.inf)
    return signs.reshape(shape)


def one_ulp_off(value, flip: bool):
    """``value`` with every finite floating element one ulp away (a torch loss keeps its graph: the step is a constant)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return np.where(np.isfinite(value), np.nextafter(value, _directions(value.shape, flip).astype(value.dtype)), value)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        plain = value.detach()
        towards = torch.from_numpy(_directions(tuple(plain.shape), flip)).to(plain.dtype)
        step = torch.where(torch.isfinite(plain), torch.nextafter(plain, towards) - plain, torch.zeros_like(plain))
        return value + step
    if isinstance(value, (float, np.floating)) and not isinstance(value, bool):
        return type(value)(np.nextafter(value, np.inf if not flip else -np.inf))
    if isinstance(value, (tuple, list)):
        return type(value)(one_ulp_off(v, flip) for v in value)
    if isinstance(value, dict):  # ppo_update's diagnostics
        return {k: one_ulp_off(v, flip) for k, v in value.items()}
    return value  # integers, None


def perturbed_reference(flip: bool):
    """The reference, every output one ulp off."""
    candidate = types.SimpleNamespace(RLSPEC_ARRAY="numpy", RLSPEC_VERSION="reference, one ulp off")
    for name in OPERATIONS:
        function = getattr(reference_candidate, name, None)
        if function is not None:
            def operation(*args, _function=function, **kwargs):
                return one_ulp_off(_function(*args, **kwargs), flip)

            setattr(candidate, name, functools.wraps(function)(operation))
    return candidate


def declared_float32_reference():
    """The reference (float64 arithmetic) under a float32 declaration: more exact than it promises."""
    candidate = types.SimpleNamespace(RLSPEC_ARRAY="numpy", RLSPEC_PRECISION="float32")
    for name in OPERATIONS:
        if hasattr(reference_candidate, name):
            setattr(candidate, name, getattr(reference_candidate, name))
    return candidate


def exact_clauses() -> dict[str, str]:
    """Clause -> the exact promise it enforces (spec/contract: promises of kind ``exact``)."""
    found = {}
    for op in contract.operations().values():
        for promise in op.promises:
            if "exact" in promise.kinds:
                for clause in promise.clauses:
                    found[clause] = f"{op.name}: {promise.says}"
    return found


def test_exact_promises_are_few_and_named():
    exact = exact_clauses()
    assert exact and len(exact) <= 8, exact


@REPEAT  # whole runs of the reference's code, counted by its own tests but for one diagnosis branch (docs/speed.md)
@pytest.mark.parametrize("dtype, flip", [("float64", False), ("float32", True)])
def test_one_ulp_off_passes_every_clause_but_the_exact_ones(dtype, flip):
    run = run_conformance(perturbed_reference(flip), dtype=dtype)
    exact = exact_clauses()
    rejected = {r.id: r.message for r in run.results if r.status != "pass"}
    wrongly = {k: v for k, v in rejected.items() if k not in exact}
    assert not wrongly, f"bounds that reject an answer one ulp off: {wrongly}"
    blind = sorted(set(exact) - set(rejected))
    assert not blind, f"clauses of an exact promise that accept an answer one ulp off: {blind}"


@REPEAT
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_float32_declaration_never_rejects_float64_exactness(dtype):
    run = run_conformance(declared_float32_reference(), dtype=dtype)
    assert run.ok and {r.status for r in run.results} == {"pass"}, [(r.id, r.message) for r in run.failures]
