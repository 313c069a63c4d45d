"""Who is acting and in which source scope: flags, settings, environment, Hermes mapping.

Precedence (explicit always wins; the Hermes mapping is a last-resort default):
  source: ``--source-id`` > setting ``source_id`` > ``AIDEMEMO_SOURCE_ID`` > Hermes board mapping
  actor:  ``--actor-id``/``--from`` > ``AIDEMEMO_ACTOR_ID`` > ``hermes:<HERMES_PROFILE>``
The Hermes mapping mirrors upstream's Hermes plugin. It is routing metadata for trusted
processes, not authentication: anyone who can set the variables can claim the scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from refkit.records import distinct
from ._errors import invalid_input

__all__ = [
    "HermesSource",
    "Settings",
    "SETTING_KEYS",
    "percent_encode",
    "hermes_source",
    "hermes_actor",
    "load_settings",
    "resolve_source",
    "resolve_actor",
]


class HermesSource(StrEnum):
    """The ``source_from_hermes`` setting."""

    NONE = "none"
    BOARD = "board"
    BOARD_TENANT = "board_tenant"


# Stored settings and their environment twins (the environment wins over the store).
# ``source_id`` has none: ``AIDEMEMO_SOURCE_ID`` ranks below the stored setting, as upstream's
# plugin ``source_id`` does.
SETTING_KEYS: dict[str, str | None] = {
    "source_id": None,
    "source_from_hermes": "AIDEMEMO_SOURCE_FROM_HERMES",
    "actor_from_hermes_profile": "AIDEMEMO_ACTOR_FROM_HERMES_PROFILE",
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# RFC 3986 unreserved characters: the only ones a component keeps unescaped.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


@distinct
class Settings(NamedTuple):
    source_id: str | None = None
    source_from_hermes: HermesSource = HermesSource.NONE
    actor_from_hermes_profile: bool = False


def _present(value: str | None) -> str | None:
    text = (value or "").strip()
    return text or None


def parse_setting(key: str, value: str, where: str) -> str:
    """Validate one setting's text; ``where`` names its origin in the error."""
    if key not in SETTING_KEYS:
        raise invalid_input(f"unknown setting {key!r}; known: {', '.join(SETTING_KEYS)}")
    text = value.strip()
    if key == "source_from_hermes" and text not in set(HermesSource):
        raise invalid_input(f"{where}: source_from_hermes must be none, board or board_tenant")
    if key == "actor_from_hermes_profile" and text.lower() not in _TRUE | _FALSE:
        raise invalid_input(f"{where}: actor_from_hermes_profile must be true or false")
    return text


def load_settings(stored: Mapping[str, str], env: Mapping[str, str]) -> Settings:
    """Settings from the store, each overridden by its environment twin when set."""
    values: dict[str, str] = {}
    for key, env_name in SETTING_KEYS.items():
        if env_name is not None and _present(env.get(env_name)) is not None:
            values[key] = parse_setting(key, env[env_name], env_name)
        elif _present(stored.get(key)) is not None:
            values[key] = parse_setting(key, stored[key], f"setting {key}")
    return Settings(
        source_id=_present(values.get("source_id")),
        source_from_hermes=HermesSource(values.get("source_from_hermes", "none")),
        actor_from_hermes_profile=values.get("actor_from_hermes_profile", "").lower() in _TRUE,
    )


def percent_encode(component: str) -> str:
    """Trim, then escape every byte outside the unreserved set as upper-case ``%XX``."""
    return "".join(
        chr(byte) if byte in _UNRESERVED else f"%{byte:02X}"
        for byte in component.strip().encode("utf-8")
    )


def hermes_source(mode: HermesSource, env: Mapping[str, str]) -> str | None:
    """``hermes:board:<B>[:tenant:<T>]`` from the Hermes dispatcher variables, or ``None``."""
    if mode is HermesSource.NONE:
        return None
    board = _present(env.get("HERMES_KANBAN_BOARD"))
    if board is None:
        return None
    source = f"hermes:board:{percent_encode(board)}"
    tenant = _present(env.get("HERMES_TENANT"))
    if mode is HermesSource.BOARD_TENANT and tenant is not None:
        source += f":tenant:{percent_encode(tenant)}"
    return source


def hermes_actor(settings: Settings, env: Mapping[str, str]) -> str | None:
    profile = _present(env.get("HERMES_PROFILE"))
    if not settings.actor_from_hermes_profile or profile is None:
        return None
    return f"hermes:{profile}"


def resolve_source(flag: str | None, settings: Settings, env: Mapping[str, str]) -> str | None:
    return (
        _present(flag)
        or settings.source_id
        or _present(env.get("AIDEMEMO_SOURCE_ID"))
        or hermes_source(settings.source_from_hermes, env)
    )


def resolve_actor(flag: str | None, settings: Settings, env: Mapping[str, str]) -> str | None:
    return _present(flag) or _present(env.get("AIDEMEMO_ACTOR_ID")) or hermes_actor(settings, env)
