"""SymPy proofs, one module per topic; importing this package registers every proof."""

from rlspec.spec.proofs import gae, returns  # noqa: F401  (registration)
from rlspec.spec.proofs.core import INCONCLUSIVE, PROOFS, PROVED, REFUTED, Proof, ProofResult, run

__all__ = ["INCONCLUSIVE", "PROOFS", "PROVED", "REFUTED", "Proof", "ProofResult", "run"]
