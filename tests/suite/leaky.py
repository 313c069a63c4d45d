"""A reference whose mailboxes leak: every handoff sent in the project is listed, whoever asks.

Not a kill-matrix mutant (its checks catch it like any mailbox bug): ``test_isolation`` runs the
suite against it to show that the probe of what checks see is not blind, so its finding nothing
against the unbroken reference means something.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import aidememo_ref

_SENT = re.compile(rb"/v1/projects/([^/?]+)/handoffs\Z")


def mailbox_lists_the_project(db_path: str) -> Any:
    ledger = aidememo_ref.ReferenceLedger(db_path, clock=aidememo_ref.OffsetClock(), test_clock=True)
    original = ledger.service.handle
    sent: dict[bytes, list[dict[str, Any]]] = {}  # project -> the records of every handoff sent in it

    def handle(method: str, target: Any, headers: Any, body: bytes = b"", **options: Any) -> Any:
        raw = target.encode("latin-1") if isinstance(target, str) else target
        response = original(method, target, headers, body, **options)
        path = _SENT.match(raw.split(b"?")[0])
        if path is None or response.status != 200:
            return response
        if method == "POST":
            payload = json.loads(body).get("payload", {})
            sent.setdefault(path.group(1), []).append({"handoff_id": payload.get("handoff_id"), "status": "pending"})
            return response
        page = json.loads(response.body)
        listed = {entry["record"]["handoff_id"] for entry in page.get("assignments", [])}
        page["assignments"] += [{"project_seq": 1, "revision": 1, "record": record}
                                for record in sent.get(path.group(1), []) if record["handoff_id"] not in listed]
        return dataclasses.replace(response, body=json.dumps(page).encode())

    ledger.service.handle = handle
    return ledger
