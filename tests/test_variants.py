"""No false alarms: correct but differently written implementations (torch, float32 storage, float
flags, SB3-style, direct sums, vectorised) pass every clause they provide."""

from __future__ import annotations

import pytest

from conftest import REPEAT, VARIANTS
from rlspec.checks import load, run_conformance


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=REPEAT), pytest.param(2, marks=REPEAT)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.stem for v in VARIANTS])
def test_variant_passes(variant, dtype, seed, request):
    if (seed, dtype) == (0, "float32"):
        # float64's seed 0 is traced; float32's adds no line to the coverage count (docs/speed.md), so it runs untraced
        request.applymarker(REPEAT)
    # The long float32 rollout runs in float32 whatever --dtype says: once per variant is enough.
    only = None if (seed, dtype) == (0, "float64") else "!GAE-FLOAT32-LONG-ROLLOUT"
    run = run_conformance(load(str(variant)), seed=seed, dtype=dtype, clauses=only)
    assert run.ok, [(r.id, r.message) for r in run.failures]
    assert {r.status for r in run.results} <= {"pass", "not-provided"}
