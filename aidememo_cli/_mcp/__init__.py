"""The stdio MCP server of ``aidememo-ref mcp``: upstream's JSON-RPC framing and tool surface.

``_protocol`` is the transport-free JSON-RPC dispatcher (initialize, ping, tools/list,
tools/call, error codes); it talks to a ``ToolBackend``. ``_local`` is the backend that runs
the tools on the embedded local store, through the same operations as the CLI verbs. A backend
that routes the same tools to a server plugs in beside it without touching the dispatcher.
"""
