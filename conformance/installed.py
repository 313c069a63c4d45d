"""The installed profiles and a run's resolution: which profile a run uses, and every setting.

Each profile imports ``conformance.profile``; this module imports the profiles by the names in
``PROFILES`` only when a run asks, so no import, static or computed, points back up at them
from the shared modules (a contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

import importlib
from typing import Any

from conformance.errors import ConfigError
from conformance.profile import CONFIG, PROFILE, RUN_SETTINGS, Profile
from conformance.serve import apply_served
from conformance.settings import Setting, Settings, SettingsInput, load_target_file, resolve

__all__ = ["PROFILES", "installed_profiles", "load_profile", "resolve_run"]

# ``"module:attribute"`` of each installed ``Profile``, by name. A new profile adds one line here
# (see docs/conformance.md, "Writing a profile").
PROFILES: dict[str, str] = {
    "aidememo": "conformance.profiles.aidememo:PROFILE",
    "aidememo-local": "conformance.profiles.aidememo_local:PROFILE",
    "xmemo": "conformance.profiles.xmemo:PROFILE",
}


def installed_profiles() -> dict[str, Profile]:
    """Every installed profile by name (their declarations are light: nothing heavy is imported)."""
    found = {}
    for name, spec in PROFILES.items():
        module_name, _, attribute = spec.partition(":")
        profile = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(profile, Profile) or profile.name != name:
            raise ConfigError(f"profile {name!r}: {spec} is not a Profile named {name!r}")
        found[name] = profile
    return found


def load_profile(name: str, where: str = "profile") -> Profile:
    """The profile called ``name`` (or one of its aliases).

    Raises:
        ConfigError: no such profile; the message names ``where`` the name came from.
    """
    profiles = installed_profiles()
    for profile in profiles.values():
        if name == profile.name or name in profile.aliases:
            return profile
    raise ConfigError(f"{where}: unknown profile {name!r} (known: {', '.join(profiles)})")


def resolve_run(given: SettingsInput, *, config: Any = None) -> tuple[Profile, Settings]:
    """Resolve the profile and every setting of a run (see ``conformance.settings``).

    The target file is found first (flag > environment > ini), then the profile (its ``profile``
    key may name it), then every shared and profile setting; last the profile checks how the
    values fit together.

    Raises:
        ConfigError: naming where the bad value came from.
    """
    bare = SettingsInput(flags=given.flags, environ=given.environ, ini=given.ini, flag_style=given.flag_style)
    located = resolve([CONFIG], bare, check_file_keys=False)
    path = located[CONFIG]
    target_file = load_target_file(path) if path else None
    with_file = SettingsInput(flags=given.flags, environ=given.environ, ini=given.ini, flag_style=given.flag_style,
                              target_file=target_file)
    named = resolve([PROFILE], with_file, check_file_keys=False)
    profile = load_profile(named[PROFILE], named.where(PROFILE))
    if target_file is not None:
        present, in_file = target_file.get("profile")
        if present and in_file != named[PROFILE] and in_file != profile.name and in_file not in profile.aliases:
            raise ConfigError(f"{target_file.where('profile')} is {in_file!r}, but {named.where(PROFILE)} "
                              f"selects profile {profile.name!r}")
    declared = _merged(RUN_SETTINGS + profile.settings, profile.name)
    settings = apply_served(resolve(declared, with_file, capabilities=profile.capability_names), given.environ)
    if profile.validate is not None:
        profile.validate(settings, config)
    return profile, settings


def _merged(declared: tuple[Setting[Any], ...], owner: str) -> list[Setting[Any]]:
    names: dict[str, Setting[Any]] = {}
    for setting in declared:
        if setting.name in names and names[setting.name] is not setting:
            raise ConfigError(f"profile {owner}: setting {setting.name!r} is declared twice")
        names[setting.name] = setting
    return list(names.values())
