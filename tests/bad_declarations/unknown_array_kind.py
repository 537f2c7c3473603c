"""Bad declaration: an array kind rlspec cannot convert to."""

from rlspec.reference.gae import gae  # noqa: F401 - the operation under test

RLSPEC_ARRAY = "tensorflow"
