"""The actor-pinned exact-read replica: correct across pulls, offline reads, one actor, one epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidememo_ref import ManualClock, ReferenceLedger, serve_in_thread
from tests.remote.conftest import PROJECT, START_MS, TENANT, TOKENS, World


def _visible(world: World, account: str) -> dict[tuple[str, str], dict[str, Any]]:
    """What the server's own snapshot shows this actor, keyed like the replica."""
    snapshot = world.get(account, "/snapshot").json()
    return {(r["resource"]["kind"], r["resource"]["id"]): r for r in snapshot["resources"]}


def _replicated(world: World, account: str, keys: object) -> dict[tuple[str, str], dict[str, Any]]:
    return {key: world.j(account, "replica", "get", *key) for key in keys}  # type: ignore[attr-defined]


def test_pulls_bootstrap_then_follow_the_feed_and_match_the_server(world: World) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    first = world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p1", "--limit", "2")
    report = first["report"]
    assert report["bootstrapped"] is True and report["changes"] == 0 and report["after_seq"] == 3
    assert report["identity"]["actor_id"] == "codex-p1" and report["resource_count"] == 3
    assert first["replica_path"] == world.store("codex-p1") + ".replica.sqlite"

    accepted = world.remote("codex-p2", "accept", handoff_id)
    fact_id = world.result_fact(session_id)
    world.remote("codex-p2", "return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    second = world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p1", "--limit", "1")["report"]
    assert second["bootstrapped"] is False and second["changes"] == 3 and second["batches"] == 3
    assert second["after_seq"] == 6 and second["resource_count"] == 4

    server = _visible(world, "codex-p1")
    assert _replicated(world, "codex-p1", server) == server
    handoff = world.j("codex-p1", "replica", "get", "handoff", handoff_id)
    assert handoff["revision"] == 3 and handoff["state"]["body"]["status"] == "completed"
    assert handoff["state"]["body"]["claim_id"] == accepted["claim_id"]
    status = world.j("codex-p1", "replica", "status")["status"]
    assert status == {"initialized": True, "scope": {"tenant_id": TENANT, "project_id": PROJECT},
                      "project_epoch": "epoch_cli_remote", "actor_id": "codex-p1", "after_seq": 6,
                      "resource_count": 4, "tombstone_count": 0, "updated_at_ms": status["updated_at_ms"]}
    assert world.ok("codex-p1", "replica", "status").out.startswith(
        f"replica status: {world.store('codex-p1')}.replica.sqlite tenant={TENANT} project={PROJECT} actor=codex-p1"
        " epoch=epoch_cli_remote seq=6 resources=4 tombstones=0 updated_at_ms=")


def test_the_replica_holds_only_what_its_actor_may_see(world: World) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    world.j("hermes", "replica", "pull", "--remote-profile", "hermes")
    assert "was not found" in world.refused("hermes", "replica", "get", "handoff", handoff_id)
    assert set(_visible(world, "hermes")) == {k for k in _visible(world, "codex-p1") if k[0] in ("session", "fact")}


def test_status_and_get_work_with_the_server_down(world: World) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    proxies = world.proxied()
    next(proxies)
    world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p1")
    proxies.close()  # the only route to the server is gone
    assert "remote transport failed" in world.refused("codex-p1", "replica", "pull", "--remote-profile", "codex-p1")
    assert world.j("codex-p1", "replica", "get", "handoff", handoff_id)["state"]["body"]["status"] == "pending"
    assert world.j("codex-p1", "replica", "status")["status"]["after_seq"] == 3
    text = world.ok("codex-p1", "replica", "get", "handoff", handoff_id).out
    assert text.startswith('{"resource":{"id":"handoff_') and text.endswith("}\n")


def test_another_profile_is_refused_until_reset(world: World) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p1")
    message = world.refused("codex-p1", "replica", "pull", "--remote-profile", "codex-p2")
    assert message == ('invalid input: replica actor mismatch: cached Some(ActorId("codex-p1")), remote codex-p2;'
                       " reset explicitly before pulling with another actor")
    assert world.j("codex-p1", "replica", "status")["status"]["actor_id"] == "codex-p1"  # untouched
    assert "pass --force" in world.refused("codex-p1", "replica", "reset")
    reset = world.ok("codex-p1", "--json", "replica", "reset", "--force").out
    assert reset == f'{{"replica_path":"{world.store("codex-p1")}.replica.sqlite","reset":true}}\n'
    assert world.j("codex-p1", "replica", "status")["status"]["initialized"] is False
    world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p2")
    assert world.j("codex-p1", "replica", "get", "handoff", handoff_id)["state"]["body"]["to_actor"] == "codex-p2"


def test_an_epoch_change_is_detected_not_merged(world: World, tmp_path: Path) -> None:
    world.send(world.session())
    world.j("codex-p1", "replica", "pull", "--remote-profile", "codex-p1")
    # The project restored elsewhere: same tenant, project, actor and token, a new history epoch.
    restored = ReferenceLedger(tmp_path / "restored.sqlite", clock=ManualClock(START_MS))
    restored.provision(tenant_id=TENANT, project_id=PROJECT, actor_id="codex-p1", token=TOKENS["codex-p1"][0],
                       project_epoch="epoch_restored")
    try:
        with serve_in_thread(restored) as url:
            world.login("codex-p1", url)
            message = world.refused("codex-p1", "replica", "pull", "--remote-profile", "codex-p1")
    finally:
        restored.close()
    assert message == ("invalid input: replica epoch mismatch: cached epoch_cli_remote, remote epoch_restored;"
                       " reset explicitly before pulling")
    status = world.j("codex-p1", "replica", "status")["status"]
    assert (status["project_epoch"], status["after_seq"], status["resource_count"]) == ("epoch_cli_remote", 3, 3)


def test_bad_limits_and_coordinates_are_refused(world: World) -> None:
    assert "change limit must be between 1 and 1000" in world.refused(
        "codex-p1", "replica", "pull", "--remote-profile", "codex-p1", "--limit", "1001")
    assert world.refused("codex-p1", "replica", "get", "Handoff", "x").startswith("invalid input: invalid resource kind")
    assert world.ok("codex-p1", "replica", "status").out.endswith(
        "uninitialized (run `aidememo replica pull --remote-profile NAME`)\n")
