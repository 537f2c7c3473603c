"""The specification: the clause catalogue (data) and the SymPy proofs of its identities.

Imports SymPy and its own catalogue only; nothing here calls reference or check code.
"""

from .catalogue import Clause, Source, by_id, chapters, clauses

__all__ = ["Clause", "Source", "by_id", "chapters", "clauses"]
