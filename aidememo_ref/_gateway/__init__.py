"""The reference server's stateless HTTP MCP gateway, ``POST /v1/projects/{project_id}/mcp``.

Upstream's ``crates/aidememo-server/src/mcp.rs``: JSON-RPC 2.0 over one POST, MCP protocol
``2026-07-28``, ten tools that re-dispatch in-process to the REST routes with the caller's own
``Authorization`` header, so authentication, roles, CAS and visibility have one source of truth.
``_tools`` maps tool arguments to REST requests (pure), ``_bindings`` reads the optional
``--auth-bindings-file`` (a kit extension: a bearer confined to one ``source_id`` and
``actor_id``), ``_post`` is the request handler the service's route table calls.
"""

from ._bindings import Binding, Bindings, BindingsError, load_bindings
from ._post import Gateway

__all__ = ["Binding", "Bindings", "BindingsError", "Gateway", "load_bindings"]
