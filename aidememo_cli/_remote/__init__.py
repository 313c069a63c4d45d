"""The client side of the remote flow: one actor's authenticated profile on a shared server.

Upstream's ``aidememo`` CLI reaches an ``aidememo-server`` through named credential profiles
(``cmd/auth.rs``), routes handoffs through it (``cmd/remote_handoff.rs`` and its durable send
outbox), keeps an actor-pinned exact-read replica (``crates/aidememo-client``) and serves the same
routes to agents over stdio MCP. This package is that client, server-agnostic: it knows wire
shapes only, so it drives the kit's reference and any other server alike.

``_profiles`` (auth.json), ``_http`` (one request seam over ``aidememo_client``, whose pure
planner ``aidememo_client.recovery`` holds the rules: derived ids, retry state, ``recovered``),
``_input`` (the flow's own checks of its arguments), ``_handoffs`` (the verbs), ``_receiver``
(what accept and return do in the receiver's embedded store), ``_send`` and ``_outbox`` (sends
and their durable reservations), ``_changes`` and ``_replica`` (what the cache is fed, and the
cache). Every refusal is a ``RemoteError``; the client's errors become one in ``_errors``.
"""
