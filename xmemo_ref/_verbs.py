"""``aidememo-ref xmemo bootstrap|serve``: the XMemo reference's command line.

Same flag style, file-mode and idempotence rules as ``aidememo-ref bootstrap|serve``: the key
file must be a regular file no one else can read (mode & 0o077 == 0), trailing CR/LF are
stripped, re-running a bootstrap with the same arguments is a no-op, the same key with another
owner, tenant, scope set or agent is refused. The key is never printed.
"""

from __future__ import annotations

from refkit.args import Parser, fail, read_token_file
from refkit.serving import add_listen_flags, listen_address, require_database_dir, serve

__all__ = ["run"]

DEFAULT_BIND = "127.0.0.1:3040"
USAGE = "usage: aidememo-ref xmemo bootstrap|serve ... (XMemo reference server)"


def _bootstrap(argv: list[str]) -> int:
    parser = Parser(prog="aidememo-ref xmemo bootstrap",
                    description="Bind an API key to an owner's tenant, with scopes and optionally an agent identity.")
    parser.add_argument("--database", required=True)
    parser.add_argument("--owner-id", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--scopes", default="memory:read,memory:write",
                        help="comma-separated: memory:read, memory:write (default both)")
    parser.add_argument("--agent-id", help="bind this agent identity to the key (token_bound); headers cannot override it")
    parser.add_argument("--organization-id", help="default org-<owner>")
    parser.add_argument("--workspace-id", help="default ws-<owner>")
    parser.add_argument("--project-id", help="default <owner>")
    args = parser.parse_args(argv)
    key = read_token_file(args.key_file, label="key file")

    from ._errors import ProvisionError, RequestError, StoreError
    from ._provision import provision_key

    try:
        principal, created = provision_key(
            args.database, owner_id=args.owner_id, key=key, scopes=args.scopes.split(","), agent_id=args.agent_id,
            organization_id=args.organization_id, workspace_id=args.workspace_id, project_id=args.project_id,
        )
    except (ProvisionError, StoreError) as exc:
        fail(str(exc))
    except RequestError as exc:  # the storage fault behind it says more than the HTTP detail
        fail(f"storage failure on {args.database}: {exc.__cause__ or exc.detail}")
    tenant = principal.tenant
    print(
        f"{'bootstrapped' if created else 'already bootstrapped'} owner={tenant.owner_id} "
        f"organization={tenant.organization_id} workspace={tenant.workspace_id} project={tenant.project_id} "
        f"agent={principal.bound_agent_id or '-'} scopes={','.join(principal.scopes)}"
    )
    return 0


def _serve(argv: list[str]) -> int:
    parser = Parser(prog="aidememo-ref xmemo serve", description="Serve the XMemo reference over HTTP.")
    parser.add_argument("--database", required=True)
    add_listen_flags(parser, DEFAULT_BIND)
    args = parser.parse_args(argv)
    host, port = listen_address(args)
    require_database_dir(args.database)

    from ._reference import XMemoReference

    try:
        reference = XMemoReference(args.database)
    except Exception as exc:  # a corrupt or unreadable file: one line, not a traceback
        fail(f"cannot open database {args.database}: {exc.__cause__ or exc}")
    serve(reference.asgi, host=host, port=port, bind=args.bind, name="aidememo-ref xmemo",
          where=f"database={args.database}")
    reference.close()
    return 0


def run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "bootstrap":
        return _bootstrap(argv[1:])
    if argv[0] == "serve":
        return _serve(argv[1:])
    fail(f"aidememo-ref xmemo: unknown command {argv[0]!r} (bootstrap or serve)", code=2)
