"""Runtime backends: declared in registry.py, each implemented by a session module imported only
inside workers (see base.py for the protocol)."""
