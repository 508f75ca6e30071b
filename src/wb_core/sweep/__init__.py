"""Sweeps: measuring a grid or a search of run configurations on this machine (local.py),
the smart search (search.py)."""
