"""The kit: what every chapter shares to write a check. The context a check is handed and the outcomes it may
raise (:mod:`.context`), the assertion helpers (:mod:`.assertions`), the derived tolerances
(:mod:`.tolerances`, :mod:`.standardise`), the contract's edge cases (:mod:`.edges`), the Hypothesis
strategies (:mod:`.strategies`), the shared formulas and oracles of several chapters (:mod:`.clipping`,
:mod:`.kl_estimators`, :mod:`.gradients`, :mod:`.cql`, :mod:`.tabular`, :mod:`.gridworld_env`,
:mod:`.recording`) and the registry a check joins with ``@check("CLAUSE-ID")`` (:mod:`.registry`). It may
import ``rlspec.spec`` and ``rlspec.reference``, and nothing else of ``rlspec.checks``: not the chapters, not
the runner (the layers are declared in pyproject.toml's ``[tool.importlinter]`` and tested by
tests/test_layers.py).
"""
