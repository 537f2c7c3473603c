"""SymPy proofs, one module per topic; importing this package registers every proof."""

import importlib
import pkgutil

from .core import INCONCLUSIVE, PROOFS, PROVED, REFUTED, Proof, ProofResult, run

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "core":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["INCONCLUSIVE", "PROOFS", "PROVED", "REFUTED", "Proof", "ProofResult", "run"]
