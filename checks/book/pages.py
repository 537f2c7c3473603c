"""One function per kind of page. Each takes the gathered :class:`Book` and returns HTML text.

Markup is written here; every value from the data goes through :func:`e` (or is MathML SymPy
printed from the proofs' own expressions, or highlighted Python from the project's source).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ...spec import catalogue, contract
from .collect import BugsFound, Column, Mutant
from .html import code, e, page, status, upstream_label
from .mathtext import render as mathtext
from .markdown import _Inline
from .markdown import slug as heading_slug

ATTENTION = ("fail", "error", "xfail")  # verdicts whose detail (counterexample or reason) the clause page shows
PROVIDED = ("pass", "fail", "error", "xfail")  # a library "has" the clause: it provides the operation


@dataclass
class Book:
    chapters: tuple
    proofs: dict[str, dict]  # proof id -> derive.derive_one's data
    reference: dict[str, dict]  # operation -> source
    checks: dict[str, list]  # clause id -> registry.Check
    mutants: list[Mutant]
    vectors: dict[str, list[dict]]
    columns: list[Column]
    matrix: dict
    history: dict[str, list[dict]]
    bugs_found: BugsFound | None
    figures: list[dict]  # {"file", "chapter", "title", "claims": [(claim, holds, numbers)]}
    studies: list[dict]
    library_values: dict = field(default_factory=dict)  # convention -> {adapter: value}
    releases: dict = field(default_factory=dict)  # adapter -> its docs/matrix-history/ADAPTER/releases.json

    @property
    def clauses(self):
        return [c for ch in self.chapters for c in ch.clauses]

    @property
    def libraries(self) -> list[Column]:
        return [c for c in self.columns if c.is_library]

    def mutants_of(self, clause_id: str) -> list[Mutant]:
        return [m for m in self.mutants if clause_id in m.clauses]

    def tally(self, clause_id: str) -> tuple[int, int]:
        """(libraries that pass, libraries that provide the clause's operation), main columns only."""
        provided = [c for c in self.libraries if c.results.get(clause_id, {}).get("status") in PROVIDED]
        return sum(c.results[clause_id]["status"] == "pass" for c in provided), len(provided)


def md(text: str) -> str:
    """The contract's prose (its meanings quote code in backticks) as inline HTML, escaped."""
    return _Inline(lambda url: None, []).render(text)


def clause_href(clause_id: str, depth: int = 0) -> str:
    return f"{'../' * depth}clauses/{clause_id}.html"


def chapter_href(name: str, depth: int = 0) -> str:
    return f"{'../' * depth}chapters/{name}.html"


def verdict_href(clause_id: str, column: Column, depth: int = 0) -> str:
    return f"{clause_href(clause_id, depth)}#v-{column.slug}"


def _tally_html(book: Book, clause_id: str) -> str:
    passed, provided = book.tally(clause_id)
    if not book.libraries:
        return '<span class="tally none">no matrix</span>'
    if provided == 0:
        return '<span class="tally none" title="no library provides this operation">0 of 0</span>'
    cls = "all" if passed == provided else "some" if passed else "nil"
    return (f'<span class="tally {cls}" title="{passed} of the {provided} libraries that provide the operation pass '
            f'(each library&#x27;s default column)">{passed} of {provided}</span>')


def _proof_status(book: Book, clause) -> str:
    if not clause.proofs:
        return '<span class="muted">–</span>'
    states = [book.proofs[p]["status"] for p in clause.proofs if p in book.proofs]
    worst = next((s for s in ("refuted", "inconclusive") if s in states), "proved")
    return status(worst, title=f"{len(states)} proof(s): {', '.join(states)}")


# ------------------------------------------------------------------------------------------------
# index


def index_page(book: Book, seconds_note: str = "") -> str:
    proved = sum(p["status"] == "proved" for p in book.proofs.values())
    libs = book.libraries
    intro = (f'<p class="lead">{len(book.clauses)} clauses in {len(book.chapters)} chapters, each a checkable statement '
             f'with its sources, its proof where one exists ({proved} of {len(book.proofs)} SymPy proofs proved when this book '
             f'was built), the reference code, the checks that enforce it, the mistakes it catches, and how '
             f'{len(libs)} libraries fare on it (<a href="dashboard.html">dashboard</a>).</p>')
    parts = [f"<h1>The rlspec book</h1>{intro}",
             '<p class="filter-note" id="index-filter-note" hidden></p>']
    toc = "".join(f'<li><a href="#ch-{e(ch.name)}">{e(ch.title)}</a> <span class="muted">({len(ch.clauses)})</span></li>'
                  for ch in book.chapters)
    parts.append(f'<nav class="toc"><ol>{toc}</ol></nav>')
    for ch in book.chapters:
        rows = "".join(
            f'<tr class="clause-row" data-id="{e(c.id)}" data-text="{e((c.id + " " + c.statement).lower())}">'
            f'<td><a href="{clause_href(c.id)}"><code>{e(c.id)}</code></a></td><td>{mathtext(c.statement)}</td>'
            f'<td>{_proof_status(book, c)}</td><td>{_tally_html(book, c.id)}</td></tr>'
            for c in ch.clauses)
        parts.append(
            f'<section class="chapter-list" id="ch-{e(ch.name)}"><h2><a href="{chapter_href(ch.name)}">{e(ch.title)}</a></h2>'
            f'<table class="clauses"><thead><tr><th>clause</th><th>statement</th><th>proof</th>'
            f'<th title="libraries that pass, of those that provide the operation">libraries pass</th></tr></thead>'
            f'<tbody>{rows}</tbody></table></section>')
    if seconds_note:
        parts.append(f'<p class="muted">{e(seconds_note)}</p>')
    return page("Clauses", "\n".join(parts), active="index.html")


# ------------------------------------------------------------------------------------------------
# clause page


def _source_html(source, depth: int) -> str:
    if isinstance(source, catalogue.ProofSource):
        return (f'rlspec proof <a href="#proof-{e(source.proof)}"><code>{e(source.proof)}</code></a> '
                f'<span class="muted">({e(source.path)})</span>')
    if isinstance(source, catalogue.CodeSource):
        where = f'<a href="{e(source.url)}"><code>{e(source.path)}</code></a>' if source.url else f"<code>{e(source.path)}</code>"
        return f"{e(source.library)} {e(source.version)}, {where}: <code>{e(source.symbol)}</code>"
    ref = source.reference
    ident = f"arXiv:{ref.arxiv}" if ref.arxiv else ref.url
    where = f", {e(source.where)}" if source.where else ""
    return (f'<a href="{"../" * depth}works.html#ref-{e(ref.key)}">{e(ref.short)}</a>, <cite>{e(ref.title)}</cite>{where} '
            f'(<a href="{e(ref.link)}">{e(ident)}</a>)')


def _json(value) -> str:
    return e(json.dumps(value, default=str))


def _conventions_html(book: Book, clause) -> str:
    affecting = [k for k in contract.conventions().values() if clause.id in k.clauses]
    if not affecting:
        return ""
    rows = []
    for k in affecting:
        default = contract.plain({k.key: k.default})[k.key]
        declared = book.library_values.get(k.key, {})
        by = ", ".join(f"{e(lib)} <code>{_json(v)}</code>" for lib, v in sorted(declared.items())) or '<span class="muted">none</span>'
        rows.append(f'<tr><td><a href="../contract.html#{e(heading_slug(k.key))}"><code>{e(k.key)}</code></a></td>'
                    f"<td>{md(k.meaning)}</td><td>{e(k.allowed_text())}</td><td><code>{_json(default)}</code></td><td>{by}</td></tr>")
    return ('<section id="conventions"><h2>Conventions that affect it</h2><p class="muted">A candidate declares these in '
            '<code>RLSPEC_CONVENTIONS</code>; the checks judge the declared value exactly.</p>'
            '<table><thead><tr><th>convention</th><th>meaning</th><th>allowed</th><th>default</th><th>declared by libraries</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')


def _known_answers_html(clause) -> str:
    answers = [a for a in contract.known_answers().values() if clause.id in a.clauses]
    if not answers:
        return ""
    items = []
    for a in answers:
        exact = "exact" if a.digits is None else f"to {a.digits} decimals"
        conventions = f"; conventions <code>{_json(a.conventions)}</code>" if a.conventions else ""
        items.append(f'<li><code>{e(a.id)}</code> ({e(a.operation)}, {exact}{conventions}): {md(a.meaning)}'
                     f'<table class="kv"><tr><th>inputs</th><td><code>{_json(a.inputs)}</code></td></tr>'
                     f'<tr><th>outputs</th><td><code>{_json(a.outputs)}</code></td></tr></table></li>')
    return f'<section id="known-answers"><h2>Known answers (the contract)</h2><ul>{"".join(items)}</ul></section>'


def _math(mathml: str) -> str:
    # a formula on its own line, left-aligned and scrolled sideways when wider than the page (block math is
    # centred and clipped by Chromium); math-style: normal keeps sums and fractions at display size
    return f'<div class="formula"><math display="block">{mathml}</math></div>'


def _side(side: dict) -> str:
    if "mathml" in side:
        return side["mathml"]
    return f'<mtext>{e(side["text"])}</mtext>'


def proof_html(proof: dict, heading: str = "h3") -> str:
    symbols = proof["symbols"]
    assumed = "".join(f'<li><math>{g["mathml"]}</math> <span class="muted">(SymPy: {e(", ".join(g["facts"]))})</span></li>'
                      for g in symbols["groups"])
    if symbols["free"]:
        names = "<mo>,</mo>".join(symbols["free"])
        assumed += (f'<li><math><mrow>{names}</mrow></math> <span class="muted">(no SymPy assumption: the identities hold '
                    f'for every value)</span></li>')
    shown, previous = [], -1
    for item in proof["identities"]:
        skipped = item["index"] - previous - 1
        if skipped > 0:
            shown.append(f'<li class="gap muted">… {skipped} more of the same kind, each decided the same way (see the steps)</li>')
        previous = item["index"]
        number = f' value="{item["index"] + 1}"'
        if item.get("exact_zero"):
            shown.append(f'<li{number}><span class="label">{mathtext(item["label"])}</span>: the difference, computed exactly, is '
                         f'<math><mn>0</mn></math></li>')
            continue
        sides = [item["lhs"], item["rhs"]] + [x for key in ("decided", "simplified") if key in item for x in item[key].values()]
        notes = sorted({s["why"] for s in sides if "why" in s})
        note = f' <span class="muted">({e("; ".join(notes))}: shown as text)</span>' if notes else ""
        relation = "<mo>" + item["relation"] + "</mo>"
        where = ('<mspace width="1.5em"></mspace><mtext>where</mtext><mspace width="0.5em"></mspace>' + _side(item["where"])
                 if "where" in item else "")
        rows = [_math(_side(item["lhs"]) + relation + _side(item["rhs"]) + where)]
        for key, words in (("decided", "decided in the proof's working symbols, translated into the clause's:"),
                           ("simplified", "which SymPy simplifies to:")):
            if key in item:
                rows.append(f'<div class="derivation muted">{words}</div>'
                            + _math(_side(item[key]["lhs"]) + relation + _side(item[key]["rhs"])))
        shown.append(f'<li{number}><span class="label">{mathtext(item["label"])}</span>{note}{"".join(rows)}</li>')
    more = proof["identity_count"] - 1 - previous
    if more > 0:
        shown.append(f'<li class="gap muted">… {more} more of the same kind</li>')
    steps = "".join(f"<li>{e(s)}</li>" for s in proof["steps"])
    counter = f'<pre class="counterexample">{e(proof["counterexample"])}</pre>' if proof["counterexample"] else ""
    counter += "".join(f'<p class="muted">Not shown: {e(p)}</p>' for p in proof.get("problems", []))
    return (f'<div class="proof" id="proof-{e(proof["id"])}"><{heading}>Proof <code>{e(proof["id"])}</code> '
            f'{status(proof["status"], title="re-derived when this book was built")}</{heading}>'
            f'<p class="statement">{mathtext(proof["statement"])}</p>'
            f'<p><strong>Assumptions.</strong> {mathtext(proof["assumptions"])}</p>'
            + (f'<p><strong>Symbols, as SymPy assumes them:</strong></p><ul class="symbols">{assumed}</ul>' if assumed else "")
            + (f'<p><strong>What it decides</strong> ({proof["identity_count"]} relation(s)):</p><ol class="identities">{"".join(shown)}</ol>'
               if shown else "")
            + counter
            + f'<details><summary>Verdict: {e(proof["status"])} in {proof["seconds"]:.2f} s, {len(proof["steps"])} step(s)</summary>'
              f'<ol class="steps">{steps}</ol></details>'
            + (code(proof["source"], f'source: <code>{e(proof["module"])}.{e(proof["function"])}</code>', open_=False)
               if proof["source"] else "")
            + "</div>")


def _verdicts_html(book: Book, clause) -> str:
    if not book.columns:
        return '<section id="verdicts"><h2>Libraries</h2><p class="muted">No matrix was given to this build.</p></section>'
    rows, details = [], []
    for column in book.columns:
        result = column.results.get(clause.id)
        state = result["status"] if result else "none"
        past = _history_of(book, column, clause.id)
        link = f"#v-{column.slug}" if state in ATTENTION else None
        rows.append(f'<tr><td><code>{e(column.candidate)}</code></td><td>{e(column.version)}</td>'
                    f'<td>{status(state, link)}</td><td>{past}</td></tr>')
        if state not in ATTENTION:
            continue
        parts = [f'<h3><code>{e(column.candidate)}</code> · {status(state)} <span class="muted">{e(column.version)}</span></h3>']
        reason = column.xfail.get(clause.id)
        if state == "xfail" and reason:
            parts.append(f'<p><strong>Declared deviation:</strong> {e(reason)}</p>')
        for note in result.get("notes", []) or []:
            parts.append(f'<p class="muted">{e(note)}</p>')
        parts.append(f'<pre class="message">{e(result.get("message", ""))}</pre>')
        if result.get("cause") and state == "fail":
            parts.append(f'<p><strong>Likely cause:</strong> {e(result["cause"])}</p>')
        if result.get("call"):
            parts.append(f'<p><strong>Call:</strong></p><pre class="call">{e(result["call"])}</pre>')
        if result.get("counterexample"):
            parts.append(f'<p><strong>Counterexample:</strong></p><pre class="counterexample">{e(result["counterexample"])}</pre>')
        if result.get("replay"):
            parts.append(f'<p><strong>Replay:</strong> <code>{e(result["replay"])}</code></p>')
        if book.bugs_found is not None and state in ("fail", "error"):
            entries = book.bugs_found.explaining(clause.id, column)
            if entries:
                parts.append("<p><strong>In bugs-found.md:</strong> " + ", ".join(
                    f'<a href="../bugs-found.html#{e(d.anchor)}">{e(d.title)}</a>' for d in entries) + "</p>")
        details.append(f'<div class="verdict" id="v-{e(column.slug)}">{"".join(parts)}</div>')
    passed, provided = book.tally(clause.id)
    return (f'<section id="verdicts"><h2>Libraries <span class="muted">({passed} of {provided} pass)</span></h2>'
            '<table class="verdicts"><thead><tr><th>candidate</th><th>version</th><th>verdict</th><th>history</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>{"".join(details)}</section>')


def _history_of(book: Book, column: Column, clause_id: str) -> str:
    """The clause's verdict for this column over the library's releases, consecutive equal verdicts as one span
    (``1.0.0 – 1.5.1: FAIL · 1.6.0 – 1.16.0: pass``)."""
    from ..matrix.affected import release_of

    runs: list[list] = []  # [first release, last release, status]
    for record in book.history.get(column.adapter, []):
        for c in record["report"].get("candidates", []):
            if c.get("candidate") == column.candidate:
                found = next((r for r in c.get("run", {}).get("clauses", []) if r.get("id") == clause_id), None)
                state = found["status"] if found else "none"
                if runs and runs[-1][2] == state:
                    runs[-1][1] = release_of(record)
                else:
                    runs.append([release_of(record), release_of(record), state])
    cells = [f'<span class="hist">{e(first if first == last else f"{first} – {last}")}: {status(state)}</span>'
             for first, last, state in runs]
    return " ".join(cells) or '<span class="muted">–</span>'


def _mutants_html(book: Book, clause) -> str:
    found = book.mutants_of(clause.id)
    if not found:
        return ('<section id="mutants"><h2>Mistakes it catches</h2><p class="muted">No named mutant names this clause'
                + (" (this book was built without tests/mutants)." if not book.mutants else ".") + "</p></section>")
    items = []
    for m in found:
        bugs = "".join(f' <a class="bugref" href="../bugs.html#bug-{e(b.lower())}">{e(b)}</a>' for b in m.bug_ids)
        others = [c for c in m.clauses if c != clause.id]
        also = (" <span class=\"muted\">also caught by " + ", ".join(f'<a href="{e(o)}.html">{e(o)}</a>' for o in others) + "</span>") if others else ""
        items.append(f'<li><code>{e(m.name)}</code>: <strong>{e(m.bug)}</strong>{bugs}. {e(m.summary)}{also}'
                     + code(m.source, f"tests/mutants/{e(m.path.name)}", open_=False) + "</li>")
    return (f'<section id="mutants"><h2>Mistakes it catches</h2><p class="muted">Named mutants (<code>tests/mutants</code>): '
            f'each must fail this clause at the quick profile on every seed.</p><ul class="mutants">{"".join(items)}</ul></section>')


def _vectors_html(book: Book, clause) -> str:
    cases = book.vectors.get(clause.id, [])
    if not cases:
        return ""
    items = "".join(
        f'<li><code>{e(c["id"])}</code> <span class="muted">({e(c.get("source", ""))}; '
        f'<a href="../vectors/{e(c["file"])}">{e(c["file"])}</a>)</span>'
        f'<details><summary>inputs and expected outputs</summary><pre class="json">{_json({"conventions": c.get("conventions", {}), "inputs": c.get("inputs"), "expected": c.get("expected")})}</pre></details></li>'
        for c in cases)
    return (f'<section id="vectors"><h2>Known-answer vectors</h2><p class="muted">Cases of the committed vector set '
            f'(<code>rlspec check --vectors vectors/</code>) that exercise this clause.</p><ul>{items}</ul></section>')


def clause_page(book: Book, clause) -> str:
    chapter = next(ch for ch in book.chapters if ch.name == clause.chapter)
    ops = contract.operations()
    operations = ", ".join(
        f'<a href="../contract.html#{e(heading_slug(o))}"><code>{e(o)}{e(ops[o].signature) if o in ops else ""}</code></a>'
        for o in clause.operations)
    sources = "".join(f"<li>{_source_html(s, 1)}</li>" for s in clause.sources)
    body = [f'<p class="crumbs"><a href="../index.html">Clauses</a> › <a href="{chapter_href(chapter.name, 1)}">{e(chapter.title)}</a></p>',
            f'<h1><code>{e(clause.id)}</code></h1>', f'<p class="lead statement">{mathtext(clause.statement)}</p>',
            f'<table class="kv"><tr><th>operation</th><td>{operations}</td></tr>'
            f'<tr><th>libraries</th><td>{_tally_html(book, clause.id)} <a href="#verdicts">verdicts</a> · '
            f'<a href="../dashboard.html#row-{e(clause.id)}">dashboard</a></td></tr>'
            + (f'<tr><th>a failure most often means</th><td>{mathtext(clause.likely_cause)}</td></tr>' if clause.likely_cause else "")
            + (f'<tr><th>notes</th><td>{e(clause.notes)}</td></tr>' if clause.notes else "")
            + "</table>",
            f'<section id="sources"><h2>Sources</h2><ul>{sources}</ul></section>']
    if clause.bugs:
        items = "".join(
            f'<li><a href="../bugs.html#bug-{e(b.id.lower())}">{e(b.id)}</a> <code>{e(b.name)}</code> '
            f'({e(b.library)}{" " + e(b.version) if b.version else ""}; {e(b.status)}): {e(b.mechanism)} '
            + " ".join(f'<a class="upstream" href="{e(u)}">{e(upstream_label(u))}</a>' for u in b.links) + "</li>" for b in clause.bug_entries)
        body.append(f'<section id="bugs"><h2>Real bugs it targets</h2><ul>{items}</ul></section>')
    body.append(_conventions_html(book, clause))
    body.append(_known_answers_html(clause))
    if clause.proofs:
        body.append('<section id="proofs"><h2>Proof</h2>' + "".join(
            proof_html(book.proofs[p]) for p in clause.proofs if p in book.proofs) + "</section>")
    refs = [book.reference[o] for o in clause.operations if o in book.reference]
    if refs:
        body.append('<section id="reference"><h2>Reference implementation</h2>' + "".join(
            code(r["source"], f'<code>{e(r["qualname"])}</code> <span class="muted">({e(r["path"])}, line {r["line"]})</span>')
            for r in refs) + "</section>")
    checks = book.checks.get(clause.id, [])
    body.append('<section id="checks"><h2>Checks</h2>' + (
        "<ul>" + "".join(f'<li><code>{e(k.qualified)}</code>: {e(k.doc)}</li>' for k in checks) + "</ul>"
        if checks else '<p class="muted">No check is registered for this clause.</p>') + "</section>")
    body.append(_mutants_html(book, clause))
    body.append(_vectors_html(book, clause))
    studies = [st for st in book.studies if clause.id in st["illustrates"].get("clauses", [])]
    if studies:
        body.append('<section id="studies"><h2>Studies that illustrate it</h2><ul>' + "".join(
            f'<li><a href="{chapter_href(st["illustrates"].get("chapter", clause.chapter), 1)}#study-{e(st["study"])}">'
            f'{e(st.get("title", st["study"]))}</a> {status(_study_status(st), title="its claims, as the study judged them (refuted: a finding on the gridworld)")}</li>'
            for st in studies) + "</ul></section>")
    body.append(_verdicts_html(book, clause))
    return page(clause.id, "\n".join(b for b in body if b), depth=1)


# ------------------------------------------------------------------------------------------------
# chapter page


def _claim_status(claim: dict) -> str:
    """A study claim's badge: pass, refuted (a finding: not even the reference's run meets it), or fail (the candidate's)."""
    if claim.get("holds"):
        return "pass"
    return "refuted" if claim.get("verdict", "refuted") == "refuted" else "fail"


def _study_status(study: dict) -> str:
    judged = [c for c in study.get("claims", []) if isinstance(c, dict) and not str(c.get("id", "")).startswith("reference:")]
    statuses = {_claim_status(c) for c in judged} or {"pass" if study.get("holds") else "fail"}
    return "fail" if "fail" in statuses else ("refuted" if "refuted" in statuses else "pass")


def _figure_html(fig: dict, depth: int) -> str:
    claims = "".join(f'<li>{status("pass" if holds else "fail", title="checked when the book was built")} {e(claim)}: '
                     f'<span class="muted">{e(numbers)}</span></li>' for claim, holds, numbers in fig.get("claims", []))
    return (f'<figure id="fig-{e(Path(fig["file"]).stem)}"><img src="{"../" * depth}figures/{e(fig["file"])}" alt="{e(fig["title"])}">'
            f'<figcaption>{e(fig["title"])}{" " + e(fig["caption"]) if fig.get("caption") else ""}'
            + (f'<ul class="claims">{claims}</ul>' if claims else "") + "</figcaption></figure>")


def chapter_page(book: Book, chapter) -> str:
    ops = [o for o in contract.operations().values() if o.chapter == chapter.name]
    rows = "".join(
        f'<tr><td><a href="{clause_href(c.id, 1)}"><code>{e(c.id)}</code></a></td><td>{mathtext(c.statement)}</td>'
        f'<td>{_proof_status(book, c)}</td><td>{_tally_html(book, c.id)}</td></tr>' for c in chapter.clauses)
    body = [f'<p class="crumbs"><a href="../index.html">Clauses</a></p><h1>{e(chapter.title)}</h1>',
            f'<p class="muted">Chapter <code>{e(chapter.name)}</code>: {len(chapter.clauses)} clauses, '
            f'<a href="../dashboard.html?chapter={e(chapter.name)}">its rows of the dashboard</a>.</p>']
    if ops:
        body.append('<section><h2>Operations</h2><ul>' + "".join(
            f'<li><a href="../contract.html#{e(heading_slug(o.name))}"><code>{e(o.name)}{e(o.signature)}</code></a>: {md(o.meaning)}</li>'
            for o in ops) + "</ul></section>")
    figures = [f for f in book.figures if f["chapter"] == chapter.name]
    if figures:
        body.append('<section id="figures"><h2>Figures</h2><p class="muted">Drawn from the reference when this book was built; '
                    'the claims under each are checked, not just drawn.</p>' + "".join(_figure_html(f, 1) for f in figures) + "</section>")
    studies = [s for s in book.studies if s["illustrates"].get("chapter") == chapter.name]
    if studies:
        body.append('<section id="studies"><h2>Studies</h2>' + "".join(_study_html(s) for s in studies) + "</section>")
    body.append('<section><h2>Clauses</h2><table class="clauses"><thead><tr><th>clause</th><th>statement</th><th>proof</th>'
                f'<th>libraries pass</th></tr></thead><tbody>{rows}</tbody></table></section>')
    return page(chapter.title, "\n".join(body), depth=1)


def _study_html(study: dict) -> str:
    clauses = ", ".join(f'<a href="../clauses/{e(c)}.html"><code>{e(c)}</code></a>' for c in study["illustrates"].get("clauses", []))
    claims = "".join(
        f'<li>{status(_claim_status(c), title="the study judged it (refuted: it does not hold on the reference either)")} {e(c.get("statement", ""))} '
        f'<span class="muted">{e(c.get("measured", ""))}</span></li>' for c in study.get("claims", []) if isinstance(c, dict))
    figure = (f'<img src="../figures/studies/{e(study["figure"])}" alt="{e(study.get("title", ""))}">'
              if study.get("_figure_path") else "")
    sources = "".join(f"<li>{e(s)}</li>" for s in study.get("sources", []))
    return (f'<figure class="study" id="study-{e(study["study"])}">{figure}<figcaption><strong>{e(study.get("title", study["study"]))}</strong> '
            f'<span class="muted">(study <code>{e(study["study"])}</code>, candidate {e(study.get("candidate", ""))}, '
            f'{e(study.get("seeds", ""))} seeds)</span>'
            + (f"<p>Illustrates {clauses}.</p>" if clauses else "")
            + (f'<ul class="claims">{claims}</ul>' if claims else "")
            + (f'<details><summary>sources</summary><ul>{sources}</ul></details>' if sources else "")
            + "</figcaption></figure>")


# The dashboard, the history and the diff are in dashboard.py.


# ------------------------------------------------------------------------------------------------
# documents


def markdown_page(title: str, html_text: str, active: str) -> str:
    return page(title, f'<article class="doc">{html_text}</article>', active=active)


def bugs_page(book: Book) -> str:
    cited = catalogue.catalogued_bugs_cited()
    reproduced: dict[str, list[str]] = {}
    for m in book.mutants:
        for b in m.bug_ids:
            reproduced.setdefault(b, []).append(m.name)
    items = []
    for b in catalogue.bugs().values():
        facts = [f"{e(b.library)}{' ' + e(b.version) if b.version else ''}", f"status {e(b.status)}"]
        if b.fixed_in:
            facts.append(f"fixed in {e(b.fixed_in)}")
        links = ", ".join(f'<a class="upstream" href="{e(u)}">{e(upstream_label(u))}</a>' for u in b.links) or (
            '<span class="muted">not reported upstream; found by rlspec (<a href="bugs-found.html">defects found</a>)</span>'
            if b.found_by_rlspec else '<span class="muted">no upstream link</span>')
        caught = ", ".join(f'<a href="clauses/{e(c)}.html"><code>{e(c)}</code></a>' for c in cited[b.id]) or '<span class="muted">no clause yet</span>'
        mutant_names = ", ".join(f"<code>{e(n)}</code>" for n in reproduced.get(b.id, [])) or '<span class="muted">none</span>'
        related = ", ".join(f'<a href="#bug-{e(r.lower())}">{e(r)}</a>' for r in b.related)
        items.append(f'<section class="bug" id="bug-{e(b.id.lower())}"><h3>{e(b.id)} <code>{e(b.name)}</code></h3>'
                     f'<p class="muted">{"; ".join(facts)}</p><p>{e(b.mechanism)}</p>'
                     + (f'<p><strong>code:</strong> <code>{e(b.code)}</code></p>' if b.code else "")
                     + f'<p><strong>upstream:</strong> {links}</p>'
                     + (f'<p><strong>related:</strong> {related}</p>' if related else "")
                     + f'<p><strong>caught by:</strong> {caught}; <strong>mutants:</strong> {mutant_names}</p></section>')
    body = ('<h1>Bug catalogue</h1><p class="muted">Real mistakes in public policy-gradient code (<code>spec/bugs.toml</code>), '
            'each with its upstream reports, the clauses built to catch it and the named mutants that reproduce it.</p>' + "".join(items))
    return page("Bug catalogue", body, active="bugs.html")


def works_page(book: Book) -> str:
    citing: dict[str, list[str]] = {}
    for c in book.clauses:
        for s in c.sources:
            if isinstance(s, catalogue.PaperSource):
                citing.setdefault(s.reference.key, []).append(c.id)
    items = []
    for key, ref in catalogue.references().items():
        ident = f"arXiv:{ref.arxiv}" if ref.arxiv else ref.url
        by = ", ".join(f'<a href="clauses/{e(c)}.html"><code>{e(c)}</code></a>' for c in dict.fromkeys(citing.get(key, [])))
        items.append(f'<li id="ref-{e(key)}"><strong>{e(ref.short)}</strong>: {e(ref.authors)}, <cite>{e(ref.title)}</cite>, '
                     f'{e(ref.venue)}, {e(ref.year)}. <a href="{e(ref.link)}">{e(ident)}</a>'
                     + (f'<br><span class="muted">cited by {by}</span>' if by else "") + "</li>")
    return page("Works cited", f'<h1>Works cited</h1><ul class="works">{"".join(items)}</ul>', active="works.html")


def search_index(book: Book) -> list[dict]:
    return [{"id": c.id, "chapter": c.chapter, "statement": c.statement, "url": f"clauses/{c.id}.html"} for c in book.clauses]
