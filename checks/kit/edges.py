"""The edges of the contract's arguments, for the checks' fixed cases and the strategies.

Each argument of an operation in ``spec/contract/*.toml`` may give its allowed range (``minimum``, ``maximum``,
``exclusive_minimum``, ``exclusive_maximum``) and special values (``edges = [{ value, why }]``: past exp's overflow,
past a library's clamp); :attr:`rlspec.spec.contract.Argument.edges` generates the list from them (the bounds or the
values just inside them, 0 and 1 where the range holds them, None for an optional argument, then the special ones).
A new operation gets its edges from its bounds; nobody has to remember them.

Two rules use them (tests/test_edges.py enforces the first):

* every clause whose calls vary an argument passes each of its edges in its fixed cases, the ones that run on every
  seed before any drawn example (:func:`cases` makes them from a known case); a clause whose statement holds an
  argument to part of its range says so in its ``no_edges`` (spec/clauses);
* the strategies draw the edges often (:func:`edged`): half of the draws of an argument come from its edges.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from ...spec import contract


def edges(operation: str, argument: str) -> tuple[contract.Edge, ...]:
    """The edges of ``operation``'s input ``argument``, from the contract."""
    for arg in contract.operations()[operation].inputs:
        if arg.name == argument:
            return arg.edges
    raise KeyError(f"{operation} has no input {argument!r}")


def values(operation: str, argument: str, *, none: bool = True) -> list[Any]:
    """The edge values of ``argument`` (None, an optional argument left out, unless ``none`` is False)."""
    return [e.value for e in edges(operation, argument) if none or e.value is not None]


def cases(operation: str, base: dict[str, Any], *names: str) -> Iterator[tuple[dict[str, Any], str]]:
    """``base`` (keyword arguments of a known case) with one argument at a time moved to each of its edges:
    ``(arguments, label)`` pairs, the label saying which edge (for the failure message). ``names``: the arguments to
    move (default: every numeric or optional input ``base`` gives). An edge equal to the base value is skipped."""
    op = contract.operations()[operation]
    chosen = names or tuple(a.name for a in op.inputs if a.name in base and (a.numeric or a.optional))
    for name in chosen:
        for edge in edges(operation, name):
            current = base.get(name)
            if _same(edge.value, current):
                continue
            shown = "None" if edge.value is None else f"{edge.value:g}" if isinstance(edge.value, float) else str(edge.value)
            yield {**base, name: edge.value}, f"edge {name} = {shown}: {edge.why}"


def edged(strategy, operation: str, argument: str, *, none: bool = False):
    """``strategy`` with the argument's edges drawn half of the time (None only if ``none``)."""
    from hypothesis import strategies as st

    found = values(operation, argument, none=none)
    return st.one_of(st.sampled_from(found), strategy) if found else strategy


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return False
