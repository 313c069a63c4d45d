"""The stdio MCP server of ``aidememo-ref mcp``: upstream's JSON-RPC framing and tool surface.

``_protocol`` is the transport-free JSON-RPC dispatcher (initialize, ping, tools/list,
tools/call, error codes); it talks to a ``ToolBackend``. ``_local`` is the backend that runs
the tools on the embedded local store, through the same operations as the CLI verbs;
``_remote`` routes the handoff tools of a remote profile to its server and leaves the rest to
``_local``; ``_arguments`` reads the tools' arguments as upstream does. Neither backend touches
the dispatcher.
"""
