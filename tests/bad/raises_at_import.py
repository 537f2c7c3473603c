"""Bad candidate: raises while being imported."""
raise RuntimeError("broken on import")
