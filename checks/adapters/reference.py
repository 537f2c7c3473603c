"""The built-in candidate ``reference``: rlspec's own reference implementations."""

from rlspec.reference.gae import gae
from rlspec.reference.returns import rewards_to_go

RLSPEC_ARRAY = "numpy"
RLSPEC_VERSION = "rlspec reference"

__all__ = ["gae", "rewards_to_go"]
