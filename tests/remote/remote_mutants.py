"""Broken remote CLIs for the aidememo-local profile's remote checks.

``python tests/remote/remote_mutants.py NAME ARGS...`` runs ``aidememo-ref ARGS...`` with one
rule of the remote flow broken. Each mutant breaks exactly what one AML-REM requirement forbids;
``test_remote_profile.py`` shows the profile fails by that requirement.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from any directory


def outbox_reads_inbox() -> None:
    """The sender's remote outbox asks the server for its inbox."""
    from aidememo_cli._remote import _handoffs

    original = _handoffs.RemoteHandoffs.mailbox

    def mailbox(self: Any, box: str, source_id: str | None, include_completed: bool, limit: int) -> Any:
        return original(self, "inbox", source_id, include_completed, limit)

    _handoffs.RemoteHandoffs.mailbox = mailbox  # type: ignore[method-assign]


def accept_no_materialize() -> None:
    """Accept claims on the server but writes nothing into the receiver's store."""
    from aidememo_cli._remote import _receiver  # accept imports it when it runs

    _receiver.materialize_context = lambda *args, **kwargs: "01HZZZZZZZZZZZZZZZZZZZZZZZ"  # type: ignore[assignment]


def actor_override_ignored() -> None:
    """--actor-id and --from are silently ignored instead of refused."""
    from aidememo_cli._commands import remote

    remote.reject_actor_override = lambda actor_id: None  # type: ignore[assignment]


def no_recovery() -> None:
    """An applied accept is never recognised: the rerun posts it again."""
    from aidememo_cli._remote import _handoffs

    original = _handoffs.plan_accept

    def plan_accept(*args: Any) -> Any:
        return original(*args)._replace(recovered=False)

    _handoffs.plan_accept = plan_accept


def no_send_outbox() -> None:
    """Every send is a brand-new intent (the durable send outbox forgets)."""
    from aidememo_cli._remote import _send

    original = _send.send_keys

    def send_keys(*args: Any) -> tuple[str, str]:
        intent, payload = original(*args)
        nonce = os.urandom(4).hex()
        return f"{intent[:100]}-{nonce}", f"{payload}-{nonce}"

    _send.send_keys = send_keys


MUTANTS = {name: func for name, func in globals().items() if callable(func) and not name.startswith("_")
           and getattr(func, "__module__", None) == __name__}

if __name__ == "__main__":
    MUTANTS[sys.argv[1]]()
    from aidememo_cli import main

    sys.exit(main(sys.argv[2:]))
