"""The kit's version: the one definition, read by packaging (``pyproject.toml``) and by the
servers that report it (the stdio MCP ``serverInfo``), which so need no ``importlib.metadata``
(tens of milliseconds of every MCP start)."""

VERSION = "0.1.0"
