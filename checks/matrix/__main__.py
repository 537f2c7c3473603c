"""``python -m rlspec.checks.matrix ADAPTER --json PATH``: check one adapter in this interpreter (the matrix starts
it in each library's own environment)."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses (the matrix, tests/test_matrix.py)
    sys.exit(main())
