"""One module per ``maka`` subcommand (``<name>_cmd.py``), imported lazily by ``app.cli``."""
