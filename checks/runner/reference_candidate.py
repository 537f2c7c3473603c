"""The built-in candidate ``reference``: rlspec's own reference implementations.

Every function in a ``rlspec.reference`` module whose name is a protocol operation is exported
here, so a new reference module needs no edit to this file. It is part of the core (the command
line's default candidate), not a library adapter.
"""

import importlib
import pkgutil

from ... import reference
from .protocol import OPERATIONS

RLSPEC_ARRAY = "numpy"
RLSPEC_VERSION = "rlspec reference"


def _discover() -> dict:
    found = {}
    for info in pkgutil.iter_modules(reference.__path__):
        module = importlib.import_module(f"{reference.__name__}.{info.name}")
        for name in OPERATIONS:
            function = getattr(module, name, None)
            if callable(function) and getattr(function, "__module__", "") == module.__name__:
                if name in found:
                    raise ImportError(f"two reference implementations of {name}: {found[name].__module__} and {module.__name__}")
                found[name] = function
    return found


globals().update(_discover())
__all__ = sorted(_discover())
