"""The contract written out (``docs/contract.md``, the README's protocol table): kept under this name for scripts
and users that import ``rlspec.checks.contract_docs``; the module lives with the book
(:mod:`rlspec.checks.book.contract_docs`)."""

from .book.contract_docs import *  # noqa: F401,F403 - the compatibility name
from .book.contract_docs import README_BEGIN, README_END, markdown, readme_table  # noqa: F401
