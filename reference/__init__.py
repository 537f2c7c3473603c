"""Minimal reference implementations, one module per topic.

Each function is short enough to check against its formula by eye; the formula and the paper are
in its docstring and shapes are in comments. Nothing here imports ``rlspec.spec`` or
``rlspec.checks``: the reference stands on the math alone.
"""
