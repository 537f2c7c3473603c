"""The SymPy proofs, re-derived for the book and printed as mathematics.

Every proof of ``spec/proofs`` runs afresh (no verdict cache: the book shows what the proofs say
now), in a pool of processes forked before anything heavy is imported. Each worker returns plain
data: the verdict, its steps, and the relations the proof decided (``ProofResult.identities``) as
presentation MathML, with the SymPy assumptions of their symbols, so nothing SymPy crosses a
process boundary.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor

SHOWN = 8  # identities printed per proof (the first four and the last four); the rest are counted
MATHML_LIMIT = 12_000  # characters of MathML per side; a longer expression is shown as text, shortened
RELATIONS = {"=": "=", ">": "&gt;", ">=": "&#x2265;", "!=": "&#x2260;", "<": "&lt;", "<=": "&#x2264;"}


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


_PRINTER = None


def _mathml(expr) -> str:
    """``sympy.printing.mathml(expr, printer="presentation")``, with cases (Piecewise) as a brace and a table."""
    global _PRINTER
    if _PRINTER is None:
        from sympy.printing.mathml import MathMLPresentationPrinter

        class Printer(MathMLPresentationPrinter):
            def _print_Piecewise(self, expr):
                row = self.dom.createElement("mrow")
                brace = self.dom.createElement("mo")
                brace.setAttribute("stretchy", "true")
                brace.setAttribute("fence", "true")
                brace.appendChild(self.dom.createTextNode("{"))
                row.appendChild(brace)
                table = self.dom.createElement("mtable")
                table.setAttribute("columnalign", "left left")
                table.setAttribute("displaystyle", "true")
                for value, condition in expr.args:
                    line = self.dom.createElement("mtr")
                    for part in (self._print(value), self._when(condition)):
                        cell = self.dom.createElement("mtd")
                        cell.appendChild(part)
                        line.appendChild(cell)
                    table.appendChild(line)
                row.appendChild(table)
                return row

            def _when(self, condition):
                import sympy as sp

                row = self.dom.createElement("mrow")
                text = self.dom.createElement("mtext")
                text.appendChild(self.dom.createTextNode("\u2003otherwise" if condition == sp.true else "\u2003if\u2002"))
                row.appendChild(text)
                if condition != sp.true:
                    row.appendChild(self._print(condition))
                return row

        _PRINTER = Printer
    return _PRINTER().doprint(expr)  # a fresh printer (and DOM document) per expression


def _side(expr) -> dict:
    """``{"mathml": ...}`` or, for an expression too long to read as a formula, ``{"text": ...}``."""
    try:
        shown = _mathml(expr)
    except Exception as exc:  # noqa: BLE001 - a printer gap shows the expression as text
        return {"text": f"{expr}", "why": f"not printable as MathML ({type(exc).__name__})"}
    if len(shown) > MATHML_LIMIT:
        text = str(expr)
        return {"text": text[:600] + (" …" if len(text) > 600 else ""), "why": f"{len(shown)} characters of MathML"}
    return {"mathml": shown}


# The assumption sets SymPy can state about a symbol, strongest first, and the set each means.
_DOMAINS = (
    (("integer", "positive"), "&#x2124;", "&gt;", "0"),
    (("integer", "nonnegative"), "&#x2124;", "&#x2265;", "0"),
    (("integer", "negative"), "&#x2124;", "&lt;", "0"),
    (("integer",), "&#x2124;", "", ""),
    (("positive",), "&#x211D;", "&gt;", "0"),
    (("nonnegative",), "&#x211D;", "&#x2265;", "0"),
    (("negative",), "&#x211D;", "&lt;", "0"),
    (("nonpositive",), "&#x211D;", "&#x2264;", "0"),
    (("real",), "&#x211D;", "", ""),
)


def _domain(symbol):
    for facts, letter, relation, bound in _DOMAINS:
        if all(getattr(symbol, f"is_{fact}") for fact in facts):
            return facts, letter, relation, bound
    return None


def assumptions(expressions) -> dict:
    """The symbols of ``expressions`` grouped by their SymPy assumptions: ``{"groups": [{"mathml", "facts"}],
    "free": [names]}`` (free: SymPy assumes nothing, so the identity holds for every complex value)."""
    import sympy as sp

    symbols = set()
    for expr in expressions:
        for atom in getattr(expr, "free_symbols", ()):
            if not isinstance(atom, sp.Indexed):  # r[l]: its base's label r and its index l are free symbols too
                symbols.add(atom)
    groups: dict[tuple, list] = {}
    free = []
    for symbol in sorted((s for s in symbols if isinstance(s, sp.Symbol)), key=lambda s: str(s)):
        domain = _domain(symbol)
        if domain is None:
            free.append(_mathml(symbol))
        else:
            groups.setdefault(domain, []).append(_mathml(symbol))
    shown = []
    for (facts, letter, relation, bound), names in sorted(groups.items(), key=lambda kv: [d[0] for d in _DOMAINS].index(kv[0][0])):
        where = f"<msub><mi mathvariant=\"normal\">{letter}</mi><mrow><mo>{relation}</mo><mn>{bound}</mn></mrow></msub>" \
            if relation else f"<mi mathvariant=\"normal\">{letter}</mi>"
        shown.append({"mathml": "<mrow>" + "<mo>,</mo>".join(names) + f"<mo>&#x2208;</mo>{where}</mrow>",
                      "facts": list(facts)})
    return {"groups": shown, "free": free}


def _symbols_of(expressions, problems: list[str]) -> dict:
    """The assumptions of the symbols the page prints (the clause's, once working symbols are translated)."""
    try:
        return assumptions(expressions)
    except Exception as exc:  # noqa: BLE001 - the verdict still shows; the page says what could not be printed
        problems.append(f"the symbols' assumptions could not be read ({type(exc).__name__}: {exc})")
        return {"groups": [], "free": []}


SIMPLIFY_LIMIT = 80  # operations in an expression the book simplifies to show what it reduces to (beyond: not shown)


def _translated(expr, identity_notation: dict | None, proof_notation: dict):
    """``expr`` in the clause's symbols: each working symbol replaced by its meaning (the identity's notation first,
    keyed by symbol, then the proof's, keyed by name)."""
    mapping = {}
    for symbol in getattr(expr, "free_symbols", ()):
        if identity_notation and symbol in identity_notation:
            mapping[symbol] = identity_notation[symbol]
        elif getattr(symbol, "name", None) in proof_notation:
            mapping[symbol] = proof_notation[symbol.name]
    return expr.xreplace(mapping) if mapping else expr


def _simplified(expr):
    """What SymPy simplifies ``expr`` to, or None when that is the expression itself (or it is too long to try)."""
    import sympy as sp

    try:
        if not isinstance(expr, sp.Basic) or expr.is_Atom or sp.count_ops(expr) > SIMPLIFY_LIMIT:
            return None
        expr = expr.doit() if expr.has(sp.Derivative, sp.Sum) else expr
        # a common denominator cancelled, then factored: what the proofs' rational identities reduce to (simplify's
        # heuristics cost seconds an expression, and a book re-derives some 500 of them)
        done = sp.factor(sp.cancel(sp.together(expr))) if not expr.has(sp.Min, sp.Max, sp.Piecewise) else expr
    except Exception:  # noqa: BLE001 - a display nicety, never a verdict
        return None
    return None if done == expr else done


def derive_one(proof_id: str) -> dict:
    """Run one proof and return its verdict with the identities as MathML (plain data, picklable).

    Each relation is printed in its clause's notation: ``shown`` where the proof states it (unsimplified, e.g. a
    derivative before it is taken), else the decided sides with every working symbol replaced by its meaning; below
    it, what the decided sides simplify to, so a reader sees what was reduced to what."""
    import sympy as sp

    from ...spec.proofs import PROOFS

    proof = PROOFS[proof_id]
    started = time.perf_counter()
    result = proof()
    seconds = time.perf_counter() - started
    identities = list(result.identities)
    # the first and the last few: instances come first, the general step (an induction, a symbolic sum) often last
    if len(identities) > SHOWN + 2:  # (two more are shown rather than counted)
        chosen = list(enumerate(identities))[: SHOWN // 2] + list(enumerate(identities))[-(SHOWN - SHOWN // 2):]
    else:
        chosen = list(enumerate(identities))
    shown, problems, displayed = [], [], []
    for index, item in chosen:
        try:
            lhs, rhs = sp.sympify(item.lhs), sp.sympify(item.rhs)
            stated = tuple(sp.sympify(x) for x in item.shown) if item.shown else None
        except (sp.SympifyError, TypeError) as exc:
            problems.append(f"{item.label}: not a SymPy expression ({exc})")
            continue
        relation = RELATIONS.get(item.relation, item.relation)
        if lhs.is_number and rhs.is_number and lhs == 0 and rhs == 0 and stated is None:
            # a difference computed exactly beforehand: the label says what it was
            shown.append({"index": index, "label": item.label, "relation": relation, "exact_zero": True})
            continue
        decided = tuple(_translated(x, item.notation, proof.notation) for x in (lhs, rhs))
        statement = stated or decided
        entry = {"index": index, "label": item.label, "relation": relation,
                 "lhs": _side(statement[0]), "rhs": _side(statement[1])}
        displayed += list(statement)
        if item.where is not None:
            entry["where"] = _side(item.where)
            displayed.append(item.where)
        if stated is not None and decided != stated and not all(x.is_number for x in decided):
            entry["decided"] = {"lhs": _side(decided[0]), "rhs": _side(decided[1])}
            displayed += list(decided)
        translated = decided != (lhs, rhs)
        # what the decided sides reduce to, where they are not already what the page states: a relation restated in the
        # clause's notation, or written in working symbols (a plain identity is shown as it was decided)
        simpler = [_simplified(x) for x in decided] if (stated is not None or translated) else [None, None]
        if any(x is not None for x in simpler):
            entry["simplified"] = {"lhs": _side(simpler[0] if simpler[0] is not None else decided[0]),
                                   "rhs": _side(simpler[1] if simpler[1] is not None else decided[1])}
        shown.append(entry)
    try:
        source = inspect.getsource(proof.function)
    except (OSError, TypeError):
        source = ""
    return {
        "id": proof.id, "statement": proof.statement, "assumptions": proof.assumptions,
        "status": result.status, "steps": list(result.steps), "counterexample": result.counterexample,
        "identities": shown, "identity_count": len(identities),
        "symbols": _symbols_of(displayed, problems), "problems": problems,
        "module": proof.function.__module__, "function": proof.function.__name__, "source": source,
        "seconds": round(seconds, 3),
    }


def _context():
    # fork: the workers start with SymPy and the proofs already imported (and nothing heavier); where
    # fork is unavailable (macOS default, Windows) spawn re-imports them.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def pool(jobs: int | None = None) -> ProcessPoolExecutor | None:
    """Worker processes, or None for ``jobs == 1``; create it before importing torch or the checks (the workers
    are forked from this process: they start small, with SymPy and the proofs already imported)."""
    from ...spec import proofs  # noqa: F401 - imported once here, inherited by the forked workers

    jobs = default_jobs() if jobs is None else jobs
    return ProcessPoolExecutor(max_workers=jobs, mp_context=_context()) if jobs > 1 else None


def submit(pool: ProcessPoolExecutor | None, proof_ids) -> dict[str, Future]:
    return {p: pool.submit(derive_one, p) for p in proof_ids} if pool is not None else {}


def finish(pool, futures: dict[str, Future], proof_ids) -> dict[str, dict]:
    """Every proof's derivation (in this process for any the pool did not run)."""
    out = {}
    for proof_id in proof_ids:
        future = futures.get(proof_id)
        out[proof_id] = future.result() if future is not None else derive_one(proof_id)
    if pool is not None:
        pool.shutdown()
    return out
