"""The chapters: the clause checks, one module per chapter; importing this package registers them all. A
chapter may import the kit (``rlspec.checks.kit``: the context ``ctx`` and its types, assertions, tolerances,
strategies, shared formulas), ``rlspec.spec`` (the catalogue and the contract) and ``rlspec.reference``, and no
other chapter and nothing of the runner, the products or the front ends (pyproject.toml's
``[tool.importlinter]``; tests/test_layers.py).
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
