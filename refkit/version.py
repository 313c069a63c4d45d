"""The kit's version: the one definition, read by packaging (``pyproject.toml``), by every command's
``--version`` and by the servers and clients that report it (the MCP ``serverInfo`` and ``clientInfo``),
which so need no ``importlib.metadata`` (tens of milliseconds of every MCP start)."""

VERSION = "0.1.0"
