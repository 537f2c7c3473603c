"""Clause checks, one module per chapter; importing this package registers them all."""

from rlspec.checks.clauses import gae  # noqa: F401
