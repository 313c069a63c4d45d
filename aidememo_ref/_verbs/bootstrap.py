"""``aidememo-ref bootstrap``: provision tenant, project, actor, membership and token binding.

Same flags, rules and success line as ``aidememo-server bootstrap`` (wire spec §4.3), on SQLite
(``--database``) or PostgreSQL (``--canonical-backend postgres --postgres-transport
insecure-no-tls``, URL from ``$AIDEMEMO_POSTGRES_URL`` or ``--postgres-url-env``): the token
file must be a regular file no one else can read (mode & 0o077 == 0), trailing CR/LF are
stripped, re-running with the same arguments is a no-op, a conflicting re-run is refused.
"""

from __future__ import annotations

from argparse import Namespace

from refkit.args import Parser, fail, read_token_file
from refkit.clock import SystemClock
from .._provision import BUSY_TIMEOUT_MS, ROLES, ProvisionError, Provisioning, StoreError, provision_current
from ._backend import add_backend_flags, check_backend, postgres_url, settings

__all__ = ["run"]


def run(argv: list[str]) -> int:
    parser = Parser(prog="aidememo-ref bootstrap", description="Provision one actor with a bearer token.")
    add_backend_flags(parser, serve=False)
    parser.add_argument("--tenant-id", required=True)
    parser.add_argument("--project-id", required=True)
    parser.add_argument("--actor-id", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--tenant-name")
    parser.add_argument("--project-name")
    parser.add_argument("--actor-name")
    parser.add_argument("--project-epoch")
    parser.add_argument("--role", choices=ROLES, default="writer")
    parser.add_argument("--actor-kind", choices=["human", "agent", "service"], default="agent")
    args = parser.parse_args(argv)
    check_backend(args, serve=False)
    token = read_token_file(args.token_file)
    url = postgres_url(args) if args.canonical_backend == "postgres" else None

    fields: Provisioning = {
        "tenant_id": args.tenant_id, "project_id": args.project_id, "actor_id": args.actor_id, "token": token,
        "role": args.role, "actor_kind": args.actor_kind, "project_epoch": args.project_epoch,
        "tenant_name": args.tenant_name, "project_name": args.project_name, "actor_name": args.actor_name,
    }
    try:
        # A file at the current layout takes the light path; anything else loads the whole
        # store, which creates, upgrades or refuses the file as the server does.
        epoch = provision_current(args.database, fields, SystemClock().now_ms(), BUSY_TIMEOUT_MS) if url is None else None
        if epoch is None:
            epoch = _whole_store(args, url, fields)
    except (ProvisionError, StoreError) as exc:
        fail(str(exc))
    print(f"bootstrapped tenant={args.tenant_id} project={args.project_id} actor={args.actor_id} epoch={epoch}")
    return 0


def _whole_store(args: Namespace, url: str | None, fields: Provisioning) -> str:
    """Bootstrap through the store, as the server opens it; a storage failure as one line."""
    from aidememo_wire.errors import LedgerError  # here: the light path raises none (its import is 3M instructions)

    from .._reference import provision

    try:
        return provision(args.database, postgres_url=url, postgres=settings(args) if url else None, **fields)
    except LedgerError as exc:
        fail(f"storage failure: {exc.message}")
