"""Conformance checks, in layers; each may import only those below it (declared in pyproject.toml's
``[tool.importlinter]``, enforced by tests/test_layers.py):

    front ends   cli.py (``rlspec``), pytest_plugin.py (``pytest --rlspec-candidate``), report.py (JSON,
                 JUnit), readme_samples.py, and this package's ``run_conformance``
    products     book/ (the auditor's site, figures, the contract's documents), vectors/ (known-answer
                 files), studies/ (experiments), matrix/ (the conformance matrix, its history, releases)
    runner       runner/: loads a candidate and judges it in killable workers
    chapters     clauses/: the clause checks, one module per chapter, independent of one another
    kit          kit/: the context a check sees, assertions, tolerances, strategies, shared formulas

``adapters/`` holds the built-in library adapters, loaded by name only and importing nothing of rlspec.
``signatures.py`` and ``contract_docs.py`` here are compatibility names for modules that moved
(``python -m rlspec.checks.signatures`` and ``rlspec.checks.contract_docs`` keep working).

    from rlspec.checks import run_conformance
    assert run_conformance("mypkg.rlspec_adapter", profile="ci").ok

Names are imported on first use, so the pytest plugin costs nothing in a test run that does not
ask for a candidate.
"""

import importlib

_EXPORTS = {
    "run_conformance": ".runner.engine",
    "ClauseResult": ".runner.engine",
    "ConformanceResult": ".runner.engine",
    "load": ".runner.loader",
    "LoadError": ".runner.loader",
    "OPERATIONS": ".runner.protocol",
    "Candidate": ".runner.protocol",
    "CandidateError": ".runner.protocol",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'rlspec.checks' has no attribute {name!r}")
