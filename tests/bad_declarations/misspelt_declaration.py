"""Bad declaration: RLSPEC_CONVENTION (no S): every convention in it would be ignored."""

from rlspec.reference.ppo import normalize_advantages  # noqa: F401 - the operation under test

RLSPEC_CONVENTION = {"advantage_std_ddof": 0}
