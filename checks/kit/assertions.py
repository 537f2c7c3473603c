"""Shared assertions. A failure says what was expected, what came out, the tolerance, the call,
and the likely cause, so that it stands on its own in a report."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


class ClauseFailure(AssertionError):
    """The candidate ran and returned something usable that contradicts the clause."""

    def __init__(self, message: str, *, table: str = "", call: str = "", cause: str = "", diagnosed: bool | None = None,
                 ratio: float | None = None, alternatives: Sequence[str] = ()):
        super().__init__(message)
        self.message, self.table, self.call, self.cause = message, table, call, cause
        # several known mistakes the numbers match equally (the input cannot tell them apart): listed, none likely
        self.alternatives = tuple(alternatives)
        # diagnosed: ``cause`` comes from the numbers (they match a known wrong answer), not a clause's usual
        # suspect; None (raised by a check's own code): a computed cause unless it is the clause's fixed text
        self.diagnosed = diagnosed
        self.ratio = ratio  # the largest |diff| / tol over the elements compared (None: not a tolerance comparison)

    def __str__(self) -> str:
        return self.message


def _number(x: float) -> str:
    return f"{x:.10g}"


def mismatch_table(index_name: str, rows: Sequence[tuple], headers=("expected", "actual", "|diff|", "tol")) -> str:
    """A small fixed-width table: one row per offending index."""
    lines = [f"{index_name:>8}  " + "  ".join(f"{h:>16}" for h in headers)]
    for index, *values in rows:
        lines.append(f"{index!s:>8}  " + "  ".join(f"{_number(v):>16}" for v in values))
    return "\n".join(lines)


def assert_close(
    actual,
    expected,
    tol,
    *,
    what: str,
    call: str = "",
    cause: str = "",
    diagnose: Callable[[np.ndarray], str] | None = None,
    max_rows: int = 6,
) -> None:
    """Elementwise ``|actual - expected| <= tol``; on failure a table of the worst offenders.

    ``diagnose(actual)`` may name the specific mistake the numbers match (it overrides ``cause``), or return the
    list of those they match: one is the diagnosis, several are listed as equally likely (none is claimed).
    """
    __tracebackhide__ = True
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), expected.shape)
    diff = np.abs(actual - expected)
    bad = ~(diff <= tol)
    if not bad.any():
        return
    offenders = np.argwhere(bad)
    rows = []
    for index in offenders[:max_rows]:
        key = tuple(int(i) for i in index)
        rows.append((key[0] if len(key) == 1 else key, expected[key], actual[key], diff[key], tol[key]))
    worst = tuple(int(i) for i in offenders[0])
    shown = worst[0] if len(worst) == 1 else worst
    specific = diagnose(actual) if diagnose else ""
    alternatives: list[str] = []
    if not isinstance(specific, str):
        alternatives = list(dict.fromkeys(r for r in specific if r))
        specific = alternatives.pop() if len(alternatives) == 1 else ""
    message = (
        f"{what}: expected {_number(expected[worst])} at index {shown}, got {_number(actual[worst])} "
        f"(|diff| {_number(diff[worst])} > tol {_number(tol[worst])}; {int(bad.sum())} of {bad.size} elements off)"
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.max(np.where(bad, np.where(tol > 0, diff / tol, np.inf), 0.0)))
    raise ClauseFailure(
        message,
        table=mismatch_table("index", rows) + (f"\n... {len(offenders) - max_rows} more" if len(offenders) > max_rows else ""),
        call=call,
        cause=specific or cause,
        diagnosed=bool(specific),
        ratio=ratio if math.isfinite(ratio) else None,
        alternatives=alternatives,
    )


def matches(actual, alternative, tol) -> bool:
    """Whether ``actual`` equals a known-wrong ``alternative`` within ``tol`` (for diagnoses)."""
    actual = np.asarray(actual, dtype=np.float64)
    return bool(np.all(np.abs(actual - np.asarray(alternative, dtype=np.float64)) <= tol))
