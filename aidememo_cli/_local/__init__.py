"""The token-free local handoff flow: one embedded SQLite store, no server, no credentials.

Layout: ``_rules`` holds every transition and guard as pure functions (no I/O, time arrives as
``now_ms``); ``_records`` and ``_facttypes`` are the values; ``_store`` is the thin SQLite layer
(one transaction per command, CAS on ``updated_at``, every SQLite failure mapped once);
``_memory`` (sessions, facts, packets) and ``_assignments`` (the handoff ledger) are the
operations the CLI verbs and the MCP tools both call; ``_packet`` renders upstream's Markdown;
``_scope`` holds the kit's opt-in Hermes mapping; ``_worker`` is ``handoff run`` (delegation to
upstream's worker lane, or the built-in runner in ``_run``). The command line lives in
``aidememo_cli._commands``, the MCP server in ``aidememo_cli._mcp``.

Nothing here may import the server, the HTTP stack or the remote modules: agents call these
commands dozens of times per task, so start-up time is part of the contract.
"""
