"""Three-valued symbolic verdicts.

A proof is a function returning a :class:`ProofResult`:

* ``proved``: every identity it states simplifies to exactly zero under the stated assumptions;
* ``refuted``: some identity is non-zero at an exact rational point, which is the counterexample;
* ``inconclusive``: SymPy could neither simplify to zero nor find a non-zero point. This fails
  closed: ``rlspec prove`` and the tests treat it as not proved.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import sympy as sp

PROVED, REFUTED, INCONCLUSIVE = "proved", "refuted", "inconclusive"


class Identity(NamedTuple):
    """One relation a proof decided, kept as SymPy expressions so it can be shown as mathematics
    (``rlspec book`` prints ``lhs relation rhs`` as MathML, the symbols' assumptions beside it).

    ``lhs`` and ``rhs`` are what was decided, often in a proof's working symbols (a region of the clip
    written with positive parameters, probabilities with the last one eliminated). ``shown`` is the same
    relation in the clause's own notation, unsimplified (``r d/dr L_clip``, not what it simplified to),
    and ``where`` the condition it holds under, in the clause's symbols; ``notation`` maps each working
    symbol to its meaning in the clause's symbols (``e -> 1/epsilon - 1``), so the book can print what the
    decided sides simplify to in the clause's notation."""

    label: str
    lhs: Any
    rhs: Any
    relation: str = "="  # "=", ">", ">=", "!="
    shown: Any = None  # (lhs, rhs) as the clause writes them, or None: lhs and rhs with ``notation`` applied
    where: Any = None  # a SymPy condition (Relational, And) in the clause's symbols, or None
    notation: Any = None  # {working symbol: expression in the clause's symbols}, or None


@dataclass
class ProofResult:
    status: str
    steps: list[str] = field(default_factory=list)  # one line per identity established
    counterexample: str = ""
    identities: list[Identity] = field(default_factory=list)  # what was decided, in order

    @property
    def ok(self) -> bool:
        return self.status == PROVED


@dataclass(frozen=True)
class Proof:
    id: str
    statement: str
    assumptions: str
    function: Callable[..., ProofResult]
    notation: dict = field(default_factory=dict)  # {working symbol's name: its meaning in the clause's symbols}

    def __call__(self, **overrides) -> ProofResult:
        try:
            return self.function(**overrides)
        except Exception as exc:  # a proof that crashes proves nothing
            return ProofResult(INCONCLUSIVE, counterexample=f"proof raised {type(exc).__name__}: {exc}")


PROOFS: dict[str, Proof] = {}


def proof(proof_id: str, *, statement: str, assumptions: str, notation: dict | None = None):
    """Register the decorated proof function under ``proof_id`` (referenced by clauses' ``proofs`` field).

    ``notation`` maps a working symbol's name (``e0``, a softmax's exp(z_0)) to its meaning in the clause's symbols
    (``exp(z_0)``): the book prints every relation the proof decided in the clause's notation. An identity's own
    ``notation`` (a region of the clip written with positive parameters) takes precedence."""

    def register(function):
        if proof_id in PROOFS:
            raise ValueError(f"duplicate proof id {proof_id}")
        PROOFS[proof_id] = Proof(proof_id, " ".join(statement.split()), " ".join(assumptions.split()), function,
                                 dict(notation or {}))
        return function

    return register


def _nonzero_point(expr: sp.Expr, rng: random.Random, tries: int = 24):
    """An exact rational assignment of the free symbols at which ``expr`` is non-zero, or None."""
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    for _ in range(tries):
        point = {}
        for s in symbols:
            value = sp.Rational(rng.randint(1, 97), rng.randint(1, 97))
            if s.is_integer:
                value = sp.Integer(rng.randint(1, 9))
            elif s.is_negative:
                value = -value
            elif s.is_positive is not True and rng.random() < 0.5:
                value = -value
            point[s] = value
        try:
            value = sp.nsimplify(expr.subs(point))
        except Exception:
            continue
        if value.is_number and value.is_finite and value != 0:
            return point, value
    return None


def rational_zero(expr) -> bool:
    """True when ``expr`` is zero as a rational function of its symbols and of the other atoms it holds (``exp(z)``,
    ``log(p)``, each taken as an independent unknown), decided exactly in SymPy's polynomial field arithmetic.

    Sound for deciding zero: a rational function that is formally zero in independent unknowns is zero at every
    value of them, whatever relations hold between the atoms; the converse fails (``sin(z)**2 + cos(z)**2 - 1``), so
    False means "not shown this way", and the caller goes on to ``simplify``. It is the same cancellation
    ``together`` + ``expand`` of the numerator performs, in sparse polynomials instead of expression trees: five
    to ten times faster on the softmax proofs. Inexact coefficients (floats) are never decided here."""
    try:
        field, element = sp.polys.fields.sfield(expr)
    except Exception:  # an expression the field constructor cannot take apart (Sum, Piecewise, ...)
        return False
    return bool(field.domain.is_Exact) and not element


def field_sign(expr):
    """+1, 0 or -1 when ``expr`` is, over a common denominator in SymPy's polynomial field arithmetic, a ratio of
    polynomials in positive symbols whose coefficients each have one sign (so its sign is theirs at every point);
    None otherwise, for the caller's slower path (a form cancellation leaves mixed, ``(x^3 + 1) / (x + 1)``)."""
    try:
        field, element = sp.polys.fields.sfield(expr)
    except Exception:
        return None
    if not field.domain.is_Exact or not all(g.is_Symbol and g.is_positive for g in field.symbols):
        return None
    if not element:
        return 0
    signs = []
    for part in (element.numer, element.denom):
        coefficients = part.coeffs()
        if all(c > 0 for c in coefficients):
            signs.append(1)
        elif all(c < 0 for c in coefficients):
            signs.append(-1)
        else:
            return None
    return signs[0] * signs[1]


def identity(lhs, rhs, label: str, seed: int = 0) -> ProofResult:
    """Decide ``lhs == rhs``: proved (difference simplifies to 0), refuted (rational witness) or inconclusive."""
    lhs, rhs = sp.sympify(lhs), sp.sympify(rhs)
    decided = [Identity(label, lhs, rhs)]
    difference = lhs - rhs
    if difference == 0 or rational_zero(difference):  # the first costs nothing: SymPy cancels equal terms as it builds
        return ProofResult(PROVED, [f"{label}: proved"], identities=decided)
    difference = sp.expand(difference)
    if difference == 0:
        return ProofResult(PROVED, [f"{label}: proved"], identities=decided)
    # The first point of the witness search, tried before simplifying: a wrong identity is usually non-zero there,
    # and an exact witness refutes it whatever simplify would say (simplify on a non-zero difference is the dear
    # case: it tries every strategy). The full search below starts from the same point, so the counterexample is
    # the same one either way; a true identity pays one exact evaluation.
    witness = _nonzero_point(difference, random.Random(seed), tries=1)
    if witness is None and sp.simplify(difference) == 0:
        return ProofResult(PROVED, [f"{label}: proved"], identities=decided)
    witness = witness or _nonzero_point(difference, random.Random(seed))
    if witness is not None:
        point, value = witness
        shown = ", ".join(f"{s} = {v}" for s, v in point.items())
        return ProofResult(REFUTED, [f"{label}: refuted"], counterexample=f"{label}: at {shown} lhs - rhs = {value}",
                           identities=decided)
    return ProofResult(INCONCLUSIVE, [f"{label}: inconclusive"], counterexample=f"{label}: lhs - rhs = {difference}",
                       identities=decided)


def combine(results: list[ProofResult]) -> ProofResult:
    """All proved -> proved; any refuted -> refuted (first counterexample); otherwise inconclusive."""
    steps = [s for r in results for s in r.steps]
    decided = [i for r in results for i in r.identities]
    for status in (REFUTED, INCONCLUSIVE):
        bad = [r for r in results if r.status == status]
        if bad:
            return ProofResult(status, steps, bad[0].counterexample, decided)
    return ProofResult(PROVED, steps, identities=decided)


def restate(result: ProofResult, *, shown=None, where=None, notation=None) -> ProofResult:
    """``result`` with its identities put in the clause's notation (see :class:`Identity`): ``shown`` is one
    ``(lhs, rhs)`` for a result that decided one relation; ``where`` and ``notation`` apply to every identity."""
    if shown is not None and len(result.identities) != 1:
        raise ValueError(f"restate(shown=...) needs one identity, got {len(result.identities)}")
    result.identities = [i._replace(shown=tuple(shown) if shown is not None else i.shown,
                                    where=where if where is not None else i.where,
                                    notation=dict(notation) if notation is not None else i.notation)
                         for i in result.identities]
    return result


def run(proof_id: str, **overrides) -> ProofResult:
    return PROOFS[proof_id](**overrides)
