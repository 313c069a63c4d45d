"""The token-free local handoff flow: one embedded SQLite store, no server, no credentials.

Layout: ``_rules`` holds every transition and guard as pure functions (no I/O, time arrives
as ``now_ms``); ``_store`` is the thin SQLite layer (one transaction per command, CAS on
``updated_at``); ``_packet`` renders the Markdown packet; ``_scope`` resolves actor and
source (including the Hermes mapping); ``_run`` holds the run adapters. The command line
lives in ``aidememo_ref._cli.local``.

Nothing here may import the server, the HTTP stack or the remote modules: agents call these
commands dozens of times per task, so start-up time is part of the contract.
"""
