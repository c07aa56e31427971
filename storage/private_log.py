"""The desktop's rotating log, private like every file of the data directory.

Apart from ``storage/private_files.py`` because ``logging.handlers`` costs ~10 ms to import, and
every command that opens the store imports ``private_files`` (``maka sessions`` among them).
"""

from __future__ import annotations

import io
import logging.handlers

from storage.private_files import private_opener


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files (the current one and each new one after a rotation) are 0600."""

    def _open(self) -> io.TextIOWrapper:
        return open(
            self.baseFilename,
            "a",  # a rotating log always appends
            encoding=self.encoding,
            errors=self.errors,
            opener=private_opener,
        )
