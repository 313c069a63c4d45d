"""The crash campaign's claim check: two grants from the same revision are reported as a loss.

The campaign's short run lives in ``tests/ref/test_cli.py``; this proves the check that the
racing accepts feed can fail.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from refkit.process import ReferenceProcess

from .conftest import load_script


def test_two_claims_granted_from_one_revision_are_a_loss(tmp_path: Path) -> None:
    campaign = load_script("scripts/crash_campaign.py")
    from aidememo_ref import provision

    db = tmp_path / "c.sqlite"
    for actor, token in campaign.TOKENS.items():
        provision(db, tenant_id="t", project_id="p", actor_id=actor, token=token, project_epoch="e")
    with ReferenceProcess.start(db) as server:
        url = server.url
        auth = {name: {"Authorization": f"Bearer {token}"} for name, token in campaign.TOKENS.items()}
        book = campaign.Ledger()
        steps = [
            ("sender", "/v1/projects/p/sessions", {"command_id": "s", "payload": {"session_id": "s", "topic": "t"}}),
            ("sender", "/v1/projects/p/handoffs", {"command_id": "send-h", "payload": {
                "handoff_id": "h", "session_id": "s", "to_actor": "receiver"}}),
            ("receiver", "/v1/projects/p/handoffs/h/accept", {"command_id": "acc-a", "expected_revision": 1,
                                                              "payload": {"claim_id": "claim-a"}}),
        ]
        for actor, path, body in steps:
            answer = httpx.post(f"{url}{path}", json=body, headers=auth[actor], timeout=10)
            assert answer.status_code == 200, answer.text
            book.record(path, body, answer.content)
        _, clean = campaign.verify(url, book)
        assert clean == []
        # A server that also granted the rival would have answered this; the campaign must object.
        rival = {"command_id": "acc-b", "expected_revision": 1, "payload": {"claim_id": "claim-b"}}
        book.record("/v1/projects/p/handoffs/h/accept", rival, answer.content.replace(b"acc-a", b"acc-b"))
        _, losses = campaign.verify(url, book)
        assert any("two live claims" in loss for loss in losses), losses
