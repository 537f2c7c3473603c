"""Comparing two generated sets (the staleness test): equal but for a few ulps where machines round differently."""

from __future__ import annotations

import json
import math
from pathlib import Path


# ------------------------------------------------------------------------------------------------
# comparing two generated sets (the staleness test)

# Two machines may write a few expected numbers one or two units in the last place apart: numpy and torch pick
# their exp, log, tanh ... kernels by CPU (AVX-512, AVX2, NEON, or the C library's), each accurate to about one
# ulp but none correctly rounded, so a value close to a rounding tie lands on either neighbour (2 e^25 is
# 144009798674.77173 or ...77176). Every tolerance in a set is many ulps of its value, so such a difference
# cannot change what a vector accepts; anything else (ids, inputs, flags, clauses, a number further apart) is
# a stale set.
SAME_SET_ULPS = 4


def _ulps(a: float, b: float) -> float:
    """How many float64 steps lie between ``a`` and ``b`` (inf when one is not finite and they differ)."""
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / math.ulp(max(abs(a), abs(b)))


def _same(a, b, path: str, out: list[str], ulps: int, computed: bool = False) -> None:
    """Append to ``out`` where ``a`` (committed) and ``b`` (regenerated) differ. Numbers under ``expected`` (the
    computed values, bounds and tolerances) may be ``ulps`` apart; everything else must be equal."""
    if len(out) >= 10:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        bounds = "value" in a and "value" in b  # an expected output: [low, high] = [value, value] when absent
        for k in dict.fromkeys([*a, *b]):
            inner = computed or k == "expected"
            if bounds and k in ("low", "high", "low_float32", "high_float32") and (k not in a or k not in b):
                _same(a.get(k, a["value"]), b.get(k, b["value"]), f"{path}.{k}", out, ulps, inner)
            elif k not in a or k not in b:
                out.append(f"{path}: key {k!r} only in the {'committed' if k in a else 'regenerated'} set")
            elif k != "sha256":  # a file's hash follows its bytes; the files themselves are compared
                _same(a[k], b[k], f"{path}.{k}", out, ulps, inner)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items committed, {len(b)} regenerated")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", out, ulps, computed)
    elif computed and isinstance(a, float) and isinstance(b, float):
        if _ulps(a, b) > ulps:
            out.append(f"{path}: committed {a!r}, regenerated {b!r} ({_ulps(a, b):.3g} ulps apart)")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: committed {a!r}, regenerated {b!r}")


def differences(committed: Path, regenerated: Path, *, ulps: int = SAME_SET_ULPS) -> list[str]:
    """What differs between two vector sets, beyond numbers at most ``ulps`` float64 steps apart (see
    SAME_SET_ULPS): an empty list means the committed set is what the generator writes."""
    committed, regenerated = Path(committed), Path(regenerated)
    names = sorted(p.name for p in committed.iterdir())
    other = sorted(p.name for p in regenerated.iterdir())
    if names != other:
        return [f"files differ: committed {names}, regenerated {other}"]
    out: list[str] = []
    for name in names:
        a, b = (committed / name).read_bytes(), (regenerated / name).read_bytes()
        if a == b:
            continue
        if name == "schema.json":
            out.append("schema.json differs")
            continue
        _same(json.loads(a), json.loads(b), name, out, ulps)
    return out
