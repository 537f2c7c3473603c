"""The specification: the clause catalogue (data), the works and bugs it cites, and the SymPy proofs
of its identities.

Imports SymPy and its own catalogue only; nothing here calls reference or check code.
"""

from .catalogue import Bug, Clause, CodeSource, PaperSource, ProofSource, Reference, Source, bugs, by_id, chapters, clauses, references

__all__ = ["Bug", "Clause", "CodeSource", "PaperSource", "ProofSource", "Reference", "Source", "bugs", "by_id",
           "chapters", "clauses", "references"]
