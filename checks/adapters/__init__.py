"""Built-in adapters, one module per library, loaded by name only (``--candidate NAME``)."""
