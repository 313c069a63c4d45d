"""The kit's version: the one definition, read by packaging (``pyproject.toml``) and by the
servers that report it (the stdio MCP ``serverInfo``), which so need no ``importlib.metadata``
(tens of milliseconds of every MCP start)."""

VERSION = "0.1.0"

# The upstream AideMemo commit whose protocol the kit's requirements, reference and checks follow
# (the spec's facts were read there); every report names it.
PROTOCOL_COMMIT = "e2a15d4"
