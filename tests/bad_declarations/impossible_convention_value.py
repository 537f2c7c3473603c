"""Bad declaration: a value the contract does not allow (a std with ddof 7)."""

from rlspec.reference.ppo import normalize_advantages  # noqa: F401 - the operation under test

RLSPEC_CONVENTIONS = {"advantage_std_ddof": 7}
