"""``rlspec book OUT/``: the auditor's book and the implementations dashboard, a static site.

Every page is generated from the project's own data, nothing typed twice: the clause catalogue
(``spec/clauses``, ``spec/references.toml``, ``spec/bugs.toml``), the contract (``spec/contract``),
the SymPy proofs (re-derived at build time, their identities printed as MathML), the reference
source, the registered checks, the named mutants (``tests/mutants``), the known-answer vectors
(``vectors/``), the conformance matrix (``docs/conformance.json``) and its history per library
version (``docs/matrix-history``), ``docs/bugs-found.md``, the figures (drawn from the reference)
and, when given, the studies' results (``rlspec study --out DIR``).

The site needs nothing from the network when it is read: its stylesheet, scripts and figures are
files beside the pages, and every text that comes from a candidate or a library (messages,
counterexamples, version strings) is escaped.

Modules: :mod:`.history` (the matrix JSON kept per library version; ``rlspec matrix`` writes it),
:mod:`.collect` (what the pages say, as data), :mod:`.derive` (the proofs, in parallel, as MathML),
:mod:`.markdown` (the small Markdown subset of ``docs/``), :mod:`.html` (escaping, layout, code),
:mod:`.pages` (one function per kind of page) and :mod:`.build` (the command).
"""
