"""``python -m rlspec.checks.matrix ADAPTER --json PATH``: check one adapter in this interpreter (the matrix starts
it in each library's own environment)."""

import sys

from . import main

sys.exit(main())
