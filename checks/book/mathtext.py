"""The catalogue's plain-text mathematics as typeset HTML: statements, likely causes, proofs' statements.

The catalogue writes its formulas in ASCII so that they read in a terminal and in TOML: ``A^pi(s_t, a_t)``,
``gamma^t G_t``, ``E[A_hat_t | s_t] <= 1 + eps``, ``sum_t grad log pi``. In the book the same text is set as
mathematics: Greek names become letters, ``x_t`` and ``x_{t+1}`` subscripts, ``x^2`` and ``A^pi`` superscripts,
``_hat`` a circumflex, ``<=``, ``>=``, ``!=``, ``->``, ``||`` and ``grad`` their symbols, ``sum_t`` a sigma. Names
of the protocol (operations, their arguments, the conventions) and anything in backticks stay code. Every piece
of text is escaped: the output is safe wherever the input came from.
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape

GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "epsilon": "ε", "eps": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "lambda": "λ", "lam": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ",
    "sigma": "σ", "tau": "τ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Omega": "Ω", "Sigma": "Σ",
}
OPERATORS = [("<=", "≤"), (">=", "≥"), ("!=", "≠"), ("->", "→"), ("+-", "±"), ("||", "‖")]
SUBSCRIPT_BASES = {"log", "logp", "max", "min", "sum", "mean", "std", "KL", "Var", "Cov", "E", "logsumexp", "argmax", "D", "L",
                   "prod", "lim", "softmax", "clip", "eps"}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")


@lru_cache(maxsize=None)
def protocol_names() -> frozenset[str]:
    """Operation, argument and convention names of the contract: code, never mathematics."""
    try:
        from ...spec import contract

        names = set()
        for op in contract.operations().values():
            names.add(op.name)
            names.update(x.name for x in list(op.inputs) + list(op.outputs))
        names.update(contract.conventions())
        return frozenset(n for n in names if "_" in n)
    except Exception:  # noqa: BLE001 - typesetting must never fail a build
        return frozenset()


def _base(name: str) -> str:
    return GREEK.get(name, escape(name))


def _identifier(word: str) -> str:
    """``A_hat_t`` -> Â<sub>t</sub>, ``pi_old`` -> π<sub>old</sub>, ``gamma`` -> γ; a protocol name stays code."""
    if word in protocol_names():
        return f"<code>{escape(word)}</code>"
    parts = word.split("_")
    base, rest = parts[0], parts[1:]
    if rest and not (base in GREEK or len(base) <= 2 or base in SUBSCRIPT_BASES):
        return escape(word)  # a name written with underscores (not a subscripted symbol)
    hat = bool(rest) and rest[0] == "hat"
    if hat:
        rest = rest[1:]
    head = "Σ" if base == "sum" and rest else _base(base)
    if hat:
        head = f'{head}\u0302'
    italic = (base in GREEK and base[0].islower()) or (len(base) == 1 and (bool(rest) or hat))  # a variable, not an operator
    out = f'<i class="mi">{head}</i>' if italic else head
    if rest:
        out += "<sub>" + ",".join(_base(r) for r in rest) + "</sub>"
    return out


def _group(text: str, i: int) -> tuple[str, int]:
    """The argument of a ``^`` or ``_{``: ``{...}``, ``(...)``, a signed number or a word; (html, end)."""
    if i < len(text) and text[i] in "{(":
        close = "}" if text[i] == "{" else ")"
        depth, j = 0, i
        while j < len(text):
            if text[j] in "{(":
                depth += 1
            elif text[j] in "})":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        inner = text[i + 1:j]
        rendered = render(inner)
        return (rendered if close == "}" else f"({rendered})"), j + 1
    match = re.compile(r"-?[0-9]+(?:\.[0-9]+)?|-?[A-Za-z][A-Za-z0-9]*").match(text, i)
    if match:
        token = match.group(0)
        sign = "−" if token.startswith("-") else ""
        body = token.lstrip("-")
        return sign + (GREEK.get(body, escape(body)) if not body[0].isdigit() else body), match.end()
    return "", i


def render(text: str) -> str:
    """``text`` as HTML with its mathematics typeset (see the module docstring); everything escaped."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "`":
            end = text.find("`", i + 1)
            if end != -1:
                out.append(f"<code>{escape(text[i + 1:end])}</code>")
                i = end + 1
                continue
        if c == "^" and out:
            sup, end = _group(text, i + 1)
            if sup:
                out.append(f"<sup>{sup}</sup>")
                i = end
                continue
        if c == "_" and text.startswith("_{", i) and out:
            sub, end = _group(text, i + 1)
            out.append(f"<sub>{sub}</sub>")
            i = end
            continue
        operator = next(((a, b) for a, b in OPERATORS if text.startswith(a, i)), None)
        if operator:
            out.append(operator[1])
            i += len(operator[0])
            continue
        inside_word = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_" or
                                 (text[i - 1] == "-" and i > 1 and text[i - 2].isalnum()))  # non-terminal, GAE-SEED
        if c.isalpha() and not inside_word:
            match = WORD.match(text, i)
            word = match.group(0)
            following = text[match.end():match.end() + 1]
            if following == "-" and re.match(r"-[A-Z0-9]", text[match.end():match.end() + 2]) and word.isupper():
                clause = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+").match(text, i)  # a clause id: as written
                out.append(escape(clause.group(0)))
                i = clause.end()
                continue
            if word == "grad":
                out.append("∇")
            elif word == "sqrt" and following == "(":
                out.append("√")
            else:
                out.append(_identifier(word))
            i = match.end()
            continue
        out.append(escape(c))
        i += 1
    return "".join(out)
