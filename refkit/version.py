"""The kit's version: the one definition, read by packaging (``pyproject.toml``), by every command's
``--version`` and by the servers and clients that report it (the MCP ``serverInfo`` and ``clientInfo``),
which so need no ``importlib.metadata`` (tens of milliseconds of every MCP start)."""

VERSION = "0.1.0"

# The upstream AideMemo commit whose protocol the kit's requirements, reference and checks follow
# (the spec's facts were read there); every report names it.
PROTOCOL_COMMIT = "e2a15d4"
