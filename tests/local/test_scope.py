"""Actor and source resolution, and the Hermes scope mapping (routing metadata, not auth)."""

from __future__ import annotations

import pytest

from aidememo_cli._local._errors import LocalError
from aidememo_cli._local._scope import (
    HermesSource,
    Settings,
    hermes_source,
    load_settings,
    percent_encode,
    resolve_actor,
    resolve_source,
)

BOARD = {"HERMES_KANBAN_BOARD": "aidememo", "HERMES_TENANT": "acme"}


def test_percent_encoding_keeps_only_unreserved_characters() -> None:
    assert percent_encode("  a-b._~Z9  ") == "a-b._~Z9"
    assert percent_encode("team a/b:c") == "team%20a%2Fb%3Ac"
    assert percent_encode("é") == "%C3%A9"
    assert percent_encode("100%") == "100%25"


@pytest.mark.parametrize(
    ("mode", "env", "expected"),
    [
        (HermesSource.NONE, BOARD, None),
        (HermesSource.BOARD, BOARD, "hermes:board:aidememo"),
        (HermesSource.BOARD_TENANT, BOARD, "hermes:board:aidememo:tenant:acme"),
        (HermesSource.BOARD_TENANT, {"HERMES_KANBAN_BOARD": "aidememo"}, "hermes:board:aidememo"),
        (HermesSource.BOARD_TENANT, {"HERMES_KANBAN_BOARD": " my board ", "HERMES_TENANT": " a:b "}, "hermes:board:my%20board:tenant:a%3Ab"),
        (HermesSource.BOARD_TENANT, {"HERMES_KANBAN_BOARD": "  ", "HERMES_TENANT": "acme"}, None),
        (HermesSource.BOARD, {}, None),
    ],
)
def test_hermes_board_mapping(mode: HermesSource, env: dict[str, str], expected: str | None) -> None:
    assert hermes_source(mode, env) == expected


def test_explicit_source_always_wins_over_the_hermes_mapping() -> None:
    hermes = Settings(source_from_hermes=HermesSource.BOARD_TENANT)
    assert resolve_source(None, hermes, BOARD) == "hermes:board:aidememo:tenant:acme"
    assert resolve_source(None, hermes, BOARD | {"AIDEMEMO_SOURCE_ID": "env"}) == "env"
    configured = Settings(source_id="config", source_from_hermes=HermesSource.BOARD)
    assert resolve_source(None, configured, BOARD | {"AIDEMEMO_SOURCE_ID": "env"}) == "config"
    assert resolve_source("flag", configured, BOARD | {"AIDEMEMO_SOURCE_ID": "env"}) == "flag"
    assert resolve_source(None, Settings(), {}) is None


def test_actor_from_hermes_profile_only_without_an_explicit_actor() -> None:
    on = Settings(actor_from_hermes_profile=True)
    env = {"HERMES_PROFILE": " reviewer "}
    assert resolve_actor(None, on, env) == "hermes:reviewer"
    assert resolve_actor(None, Settings(), env) is None
    assert resolve_actor(None, on, env | {"AIDEMEMO_ACTOR_ID": "codex"}) == "codex"
    assert resolve_actor("flag", on, env | {"AIDEMEMO_ACTOR_ID": "codex"}) == "flag"


def test_settings_come_from_the_store_and_the_environment_overrides() -> None:
    stored = {"source_from_hermes": "board", "actor_from_hermes_profile": "true", "source_id": "team"}
    settings = load_settings(stored, {})
    assert settings == Settings(source_id="team", source_from_hermes=HermesSource.BOARD, actor_from_hermes_profile=True)
    env = {"AIDEMEMO_SOURCE_FROM_HERMES": "board_tenant", "AIDEMEMO_ACTOR_FROM_HERMES_PROFILE": "0"}
    overridden = load_settings(stored, env)
    assert overridden.source_from_hermes is HermesSource.BOARD_TENANT
    assert overridden.actor_from_hermes_profile is False
    assert load_settings({}, {}) == Settings()


def test_bad_setting_names_its_origin() -> None:
    with pytest.raises(LocalError, match="AIDEMEMO_SOURCE_FROM_HERMES: source_from_hermes must be"):
        load_settings({}, {"AIDEMEMO_SOURCE_FROM_HERMES": "tenant"})
    with pytest.raises(LocalError, match="setting actor_from_hermes_profile: .* true or false"):
        load_settings({"actor_from_hermes_profile": "maybe"}, {})
