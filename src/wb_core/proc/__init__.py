"""Worker processes: the parent side of the protocol (parent.py), its private channel (channel.py),
the worker entry (worker.py) and the tasks a worker runs."""
