"""Composition root: the ``maka`` command, settings and flags, data paths, the IPC contract."""

__version__ = "0.1.0"
