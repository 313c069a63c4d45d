"""Credential profiles: upstream's auth.json, private, several per URL, never printed."""

from __future__ import annotations

import json
import os
import stat

from tests.remote.conftest import PROJECT, TOKENS, World


def _auth(world: World) -> dict[str, object]:
    data: dict[str, object] = json.loads((world.home / ".aidememo" / "auth.json").read_text())
    return data


def test_profiles_share_a_url_with_their_own_token_and_project_in_a_private_file(world: World) -> None:
    path = world.home / ".aidememo" / "auth.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = _auth(world)
    profiles = data["profiles"]
    assert isinstance(profiles, dict) and list(data) == ["remotes", "profiles"]
    assert profiles["codex-p1"] == {"name": "codex-p1", "url": world.url, "project_id": PROJECT,
                                    "token": TOKENS["codex-p1"][0], "added_at": profiles["codex-p1"]["added_at"]}
    assert profiles["codex-p2"]["url"] == world.url and profiles["codex-p2"]["token"] == TOKENS["codex-p2"][0]
    listed = world.ok(None, "auth", "list").out
    assert "profile=codex-p1" in listed and "profile=codex-p2" in listed and "token=<redacted>" in listed
    for token, _ in TOKENS.values():
        assert f"token={token[:6]}" not in listed  # not even upstream's six-character prefix


def test_login_rules_and_messages(world: World) -> None:
    token = world.root / "t.token"
    token.write_text("  padded-token-0123  \n")
    base = ("auth", "login", world.url, "--profile", "x")
    assert world.refused(None, *base, "--project-id", "p", "--token", "a", "--token-file", str(token)) == \
        "invalid input: pass --token OR --token-file, not both"
    assert world.refused(None, *base, "--project-id", "p") == \
        "invalid input: aidememo auth login requires --token or --token-file"
    assert world.refused(None, *base, "--token", "a") == "invalid input: named auth profiles require --project-id"
    assert world.refused(None, *base, "--project-id", "bad id", "--token", "a") == \
        "invalid input: --project-id contains an invalid server identity"
    assert world.refused(None, "auth", "login", world.url, "--project-id", "p", "--token", "a") == \
        "invalid input: --project-id requires --profile"
    assert world.refused(None, "auth", "login", "ftp://x", "--profile", "x", "--project-id", "p", "--token", "a") == \
        "invalid input: remote URL must be an absolute http:// or https:// URL without whitespace"
    assert world.refused(None, "auth", "login", world.url, "--profile", "no/slash", "--project-id", "p",
                         "--token", "a").startswith("invalid input: profile name must contain")
    assert world.refused(None, *base, "--project-id", "p", "--token", "two words") == \
        "invalid input: bearer token must be non-empty and contain no whitespace"
    world.ok(None, *base, "--project-id", "p", "--token-file", str(token))
    assert _auth(world)["profiles"]["x"]["token"] == "padded-token-0123"  # type: ignore[index]
    # A legacy URL-keyed token sits beside the profiles, as upstream keeps it for `sync pull`.
    assert world.ok(None, "auth", "login", world.url + "/", "--token", "legacy-0123").out.startswith(
        f"stored token for {world.url} (in ")


def test_plain_http_needs_loopback_or_an_explicit_opt_in(world: World) -> None:
    args = ("--profile", "far", "--project-id", "p", "--token", "far-token-0123")
    message = world.refused(None, "auth", "login", "http://memory.example.com", *args)
    assert "plain http:// for a non-loopback host" in message
    world.ok(None, "auth", "login", "http://memory.example.com", *args, "--allow-insecure-http")
    assert _auth(world)["profiles"]["far"]["allow_insecure_http"] is True  # type: ignore[index]
    world.ok(None, "auth", "login", "https://memory.example.com", "--profile", "tls", "--project-id", "p",
             "--token", "tls-token-0123")
    # A profile written without the opt-in (upstream's file has no such key) is refused at use.
    data = _auth(world)
    del data["profiles"]["far"]["allow_insecure_http"]  # type: ignore[index]
    (world.home / ".aidememo" / "auth.json").write_text(json.dumps(data))
    assert "plain http:// for a non-loopback host" in world.refused(None, "handoff", "--remote-profile", "far", "inbox")


def test_logout_and_missing_profiles(world: World) -> None:
    assert world.ok(None, "auth", "logout", "codex-p1").out == "removed stored credential for codex-p1\n"
    assert world.ok(None, "auth", "logout", "codex-p1").out == "no stored credential for codex-p1 — nothing to do\n"
    assert world.refused("codex-p1", "handoff", "--remote-profile", "codex-p1", "inbox") == (
        "invalid input: remote profile `codex-p1` was not found; run `aidememo auth login <URL> --profile codex-p1"
        " --project-id <PROJECT> --token-file <PATH>`")
    world.ok(None, "auth", "logout", "codex-p2")
    world.ok(None, "auth", "logout", "hermes")
    assert world.ok(None, "auth", "list").out.startswith("no stored tokens (file: ")


def test_a_corrupt_file_is_refused_and_kept(world: World) -> None:
    path = world.home / ".aidememo" / "auth.json"
    path.write_text("{not json")
    assert "is not valid JSON" in world.refused(None, "auth", "login", world.url, "--profile", "x", "--project-id", "p",
                                                "--token", "abc-0123")
    assert path.read_text() == "{not json"


def test_a_file_written_by_upstream_is_read(world: World) -> None:
    # Upstream's serde output: 2-space pretty JSON, the same keys, no kit-only keys.
    upstream = {"remotes": {}, "profiles": {"codex-p2": {"name": "codex-p2", "url": world.url, "project_id": PROJECT,
                                                          "token": TOKENS["codex-p2"][0], "added_at": 42}}}
    (world.home / ".aidememo" / "auth.json").write_text(json.dumps(upstream, indent=2))
    assert world.remote("codex-p2", "inbox")["assignments"] == []


def test_generate_mints_a_token_printed_or_into_a_private_file(world: World) -> None:
    printed = world.ok(None, "auth", "generate", "--bytes", "8").out.strip()
    assert len(printed) == 16 and int(printed, 16) >= 0
    target = world.root / "new.token"
    assert world.ok(None, "auth", "generate", "--output", str(target)).out == f"wrote a new token to {target}\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and len(target.read_text().strip()) == 64
    assert target.read_text().strip() not in world.ok(None, "auth", "list").out
    assert "must be in 1..=256" in world.refused(None, "auth", "generate", "--bytes", "0")
