"""The AideMemo profile's settings and the typed view its target is built from.

Declarations only (the shared resolver applies flag > environment > target file > ini >
default to them). Three ways to get identities, in this order of preference: a conftest hook
(``pytest_aidememo_provision``), a bootstrap command template, a list of pre-provisioned tokens;
without a URL the embedded reference provisions in-process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidememo_wire.shapes import ROLES
from conformance.capabilities import CAPABILITIES, Claim
from conformance.errors import ConfigError
from conformance.installed import resolve_run
from conformance.profile import EMBEDDED_FACTORY, MAX_BODY_BYTES, TIMEOUT, URL, TargetDescription
from conformance.provisioning import TokenField, TokenList, template_parser, token_list_parser
from conformance.settings import Setting, Settings, SettingsInput, parse_bool
from refkit.extras import MissingExtra, require

__all__ = ["BACKEND", "FRESH_IDENTITIES", "PROVISION_BOUND_COMMAND", "PROVISION_COMMAND", "PROVISION_TOKENS", "REAL_TIME_LEASES", "ROLES", "SETTINGS",
           "AideMemoSettings", "configure", "target_settings"]

PLACEHOLDERS = ("tenant", "project", "actor", "role")  # besides {token_file}

PROVISION_COMMAND: Setting[str | None] = Setting(
    name="provision_command", parse=template_parser(("project", "actor")), default=None, file_key="provision.command",
    metavar="TEMPLATE", help="bootstrap command with {tenant} {project} {actor} {token_file} {role}")
# A token bound to one source and actor on the gateway (mcp-bindings): upstream binds through
# --auth-bindings-file at start, so only a target that can bind at run time gives this template.
PROVISION_BOUND_COMMAND: Setting[str | None] = Setting(
    name="provision_bound_command", parse=template_parser(("project", "actor", "bind_source", "bind_actor")),
    default=None, file_key="provision.bound_command", metavar="TEMPLATE",
    help="bootstrap command for a token bound to a source and actor: {bind_source} {bind_actor} besides "
         "{tenant} {project} {actor} {token_file} {role}")
PROVISION_TOKENS: Setting[TokenList] = Setting(
    name="provision_tokens", parse=token_list_parser((TokenField(name="project"), TokenField(name="actor"),
                                                      TokenField(name="role", default="writer", choices=ROLES))),
    default=TokenList(), flag=None, env=None, ini=None, file_key="provision.tokens",
    help="pre-provisioned identities ([[provision.tokens]] in the target file)")



def _parse_backend(value: object, where: str, context: object) -> str:
    if value not in ("sqlite", "postgres"):
        raise ConfigError(f"{where}: expected sqlite or postgres, got {value!r}")
    if value == "postgres":
        try:
            require("postgres", "the embedded reference on PostgreSQL")
        except MissingExtra as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return str(value)


BACKEND: Setting[str] = Setting(
    name="backend", parse=_parse_backend, default="sqlite", file_key="embedded.backend", ini=None,
    metavar="sqlite|postgres",
    help="storage of the embedded reference (postgres: the database in $AIDEMEMO_POSTGRES_URL)")

REAL_TIME_LEASES: Setting[bool] = Setting(
    name="real_time_leases", parse=parse_bool, default=False, action="store_true",
    help="score lease expiry by waiting for real (one shared wait of about one lease length), "
         "also where the test-clock extension is served")

FRESH_IDENTITIES: Setting[bool] = Setting(
    name="fresh_identities", parse=parse_bool, default=False, action="store_true",
    help="fresh identities for every check (a fresh project each), as before checks declared their "
         "isolation: more bootstrap calls")

SETTINGS: tuple[Setting[Any], ...] = (URL, PROVISION_COMMAND, PROVISION_BOUND_COMMAND, PROVISION_TOKENS,
                                      EMBEDDED_FACTORY, BACKEND, REAL_TIME_LEASES, FRESH_IDENTITIES)


def hook_implemented(config: Any) -> bool:
    """A conftest implements ``pytest_aidememo_provision``."""
    if config is None:
        return False
    return bool(config.pluginmanager.hook.pytest_aidememo_provision.get_hookimpls())


@dataclass(frozen=True, slots=True, kw_only=True)
class AideMemoSettings:
    """Everything the AideMemo target needs, after precedence is applied."""

    url: str | None  # None: the embedded reference ledger
    timeout_s: float
    max_body_bytes: int
    capabilities: Mapping[str, Claim]  # declared claims; None: detect
    provision_command: str | None
    provision_bound_command: str | None  # a token bound to a source and actor (None: only the embedded reference binds)
    fixed_tokens: TokenList
    embedded_factory: str | None  # "module:callable" returning a ReferenceLedger (broken variants)
    provision_hook: bool  # a conftest implements pytest_aidememo_provision
    embedded_backend: str = "sqlite"  # or "postgres": the database named by $AIDEMEMO_POSTGRES_URL
    real_time_leases: bool = False  # wait for real leases to expire instead of moving the test clock
    fresh_identities: bool = False  # every check gets a fresh project, whatever its declared isolation

    @property
    def embedded(self) -> bool:
        return self.url is None

    @property
    def mode(self) -> str:
        if self.embedded:
            return "embedded"
        if self.provision_hook:
            return "provision hook"
        return "command" if self.provision_command else "fixed-tokens"

    @classmethod
    def of(cls, settings: Settings, config: Any = None) -> AideMemoSettings:
        claims = settings[CAPABILITIES]
        return cls(url=settings[URL], timeout_s=settings[TIMEOUT], max_body_bytes=settings[MAX_BODY_BYTES],
                   capabilities=claims, provision_command=settings[PROVISION_COMMAND],
                   provision_bound_command=settings[PROVISION_BOUND_COMMAND], fixed_tokens=settings[PROVISION_TOKENS], embedded_factory=settings[EMBEDDED_FACTORY],
                   provision_hook=hook_implemented(config), embedded_backend=settings[BACKEND],
                   real_time_leases=settings[REAL_TIME_LEASES], fresh_identities=settings[FRESH_IDENTITIES])


def validate(settings: Settings, config: Any) -> None:
    """A URL needs a way to get identities."""
    view = AideMemoSettings.of(settings, config)
    if view.url is not None and view.provision_command is None and not view.fixed_tokens and not view.provision_hook:
        raise ConfigError(
            f"target {view.url}: say how to get identities, with a provisioning command template "
            f"({settings.flag_name(PROVISION_COMMAND)} or [provision] command) or [[provision.tokens]]")


# A replay of an embedded run needs a reference of its own: this one, provisioned through its bootstrap.
REPLAY_DATABASE = "./replay.sqlite"
REPLAY_TEMPLATE = ("aidememo-ref bootstrap --database " + REPLAY_DATABASE + " --tenant-id {tenant} "
                   "--project-id {project} --actor-id {actor} --token-file {token_file} --role {role}")


def describe(settings: Settings, config: Any) -> TargetDescription:
    view = AideMemoSettings.of(settings, config)
    mode = f"{view.mode}, real-time leases" if view.real_time_leases else view.mode
    # Tokens bound to a source (mcp-bindings): the bound template makes them; without one, no template fits.
    if view.embedded:
        return TargetDescription(
            target="embedded reference", mode=mode, templates=(("bind_source", ""), ("", REPLAY_TEMPLATE)),
            credential_prefix="tok-",
            replay_hint=f"The run's embedded reference is gone: start one, `aidememo-ref serve --database "
                        f"{REPLAY_DATABASE} --test-clock` (127.0.0.1:3030), then BASE_URL=http://127.0.0.1:3030 "
                        "sh this-script.")
    templates = ((("bind_source", view.provision_bound_command or ""), ("", view.provision_command))
                 if view.provision_command else ())
    served = settings.values.get("serve") is not None
    hint = ("The run's server was started from the target file's [serve] command and stopped with the run, its "
            "data folder deleted: start the server again, point the bootstrap command below at its data, and run "
            "BASE_URL=http://HOST:PORT sh this-script.") if served else ""
    return TargetDescription(target=view.url or "", mode=mode, url=view.url, templates=templates,
                             credential_prefix="tok-", replay_hint=hint)


def target_settings(config_path: str, environ: Mapping[str, str] | None = None) -> AideMemoSettings:
    """The AideMemo target a target file names (for tools beside the suite, like the simulator).

    Raises:
        ConfigError: naming the file key, or the variable, holding a bad value.
    """
    given = SettingsInput(flags={"config": config_path}, environ=os.environ if environ is None else environ)
    profile, settings = resolve_run(given)
    if profile.name != "aidememo":
        raise ConfigError(f"{config_path}: names profile {profile.name!r}, not an AideMemo target")
    return AideMemoSettings.of(settings)


def configure(config: Any) -> None:
    """With real-time leases, the lease-expiry checks are this run's late checks (``conformance.schedule``).

    Each process sets up every lease it will observe at its first check and runs those checks
    last, so one wait of about a lease length overlaps the rest of the run; under ``-n`` the
    plugin's scheduler sends them all to one worker. Bad values are left for the run's own
    resolution to report.
    """
    from conformance.errors import ConformanceError
    from conformance.plugin import settings_input
    from conformance.profile import CONFIG
    from conformance.profiles.aidememo.leases import MARKER
    from conformance.schedule import LATE_MARKER
    from conformance.settings import load_target_file, resolve

    try:
        given = settings_input(config, [CONFIG, REAL_TIME_LEASES])
        path = resolve([CONFIG], given, check_file_keys=False)[CONFIG]
        with_file = SettingsInput(flags=given.flags, environ=given.environ, ini=given.ini, flag_style="pytest",
                                  target_file=load_target_file(path) if path else None)
        wanted = resolve([REAL_TIME_LEASES], with_file, check_file_keys=False)[REAL_TIME_LEASES]
    except ConformanceError:
        return
    if wanted:
        config.stash[LATE_MARKER] = MARKER
