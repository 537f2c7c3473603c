"""Bad declaration: a convention key one letter off (advantage_std_dof for advantage_std_ddof). Silently
dropped, the clause would run under the default ddof and the user would believe they were judged on theirs."""

from rlspec.reference.ppo import normalize_advantages  # noqa: F401 - the operation under test

RLSPEC_CONVENTIONS = {"advantage_std_dof": 0}
