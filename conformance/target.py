"""The server under test: where it is, what it claims, and how the suite gets identities.

Settings resolve in one place (``resolve_target``) with the precedence
flag > environment > target file > default, and every error names where the bad value came
from. Three ways to get identities:

* embedded (no URL): the reference ledger starts on a free loopback port with a temporary
  database and actors are provisioned in-process on the same SQLite file;
* a provisioning command template, run once per actor (``aidememo-server bootstrap ...``);
* a fixed list of pre-provisioned tokens, for servers that cannot be provisioned from outside.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from conformance.errors import ConfigError, Untestable
from conformance.registry import CAPABILITIES

__all__ = [
    "CommandProvisioner",
    "FixedToken",
    "Provisioner",
    "TargetSettings",
    "resolve_target",
]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024  # well above any answer the suite provokes (1 MiB bodies echo nothing)
PLACEHOLDERS = ("{tenant}", "{project}", "{actor}", "{token_file}", "{role}")
ROLES = ("owner", "admin", "writer", "reader")


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedToken:
    """A pre-provisioned identity of a server the suite cannot provision."""

    project: str
    actor: str
    role: str
    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSettings:
    """Everything the suite needs to know about the target, after precedence is applied."""

    profile: str = "aidememo-remote"
    url: str | None = None  # None: the embedded reference ledger
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    capabilities: dict[str, bool | None] = field(default_factory=dict)  # None: detect
    provision_command: str | None = None
    fixed_tokens: tuple[FixedToken, ...] = ()
    embedded_factory: str | None = None  # "module:callable" returning a ReferenceLedger (mutants)
    embedded_backend: str = "sqlite"  # or "postgres": the database named by $AIDEMEMO_POSTGRES_URL
    provision_hook: bool = False  # a conftest implements pytest_aidememo_provision
    origin: str = "defaults"

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


class Provisioner(Protocol):
    """Creates (tenant, project, actor) with a role and binds a token to the actor."""

    def provision(self, *, tenant: str, project: str, actor: str, role: str, token: str) -> None: ...


class CommandProvisioner:
    """Runs the target's bootstrap command once per actor, with a fresh 0600 token file."""

    def __init__(self, template: str, timeout_s: float = 60.0) -> None:
        self.template = template
        self.timeout_s = timeout_s
        self._dir = tempfile.mkdtemp(prefix="aidememo-tokens-")

    def close(self) -> None:
        """Delete the token files: they hold live credentials of the target."""
        shutil.rmtree(self._dir, ignore_errors=True)

    def provision(self, *, tenant: str, project: str, actor: str, role: str, token: str) -> None:
        token_file = Path(self._dir) / f"{tenant}.{project}.{actor}.token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        values = {"tenant": tenant, "project": project, "actor": actor, "role": role, "token_file": str(token_file)}
        argv = [part.format(**values) for part in shlex.split(self.template)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Untestable(f"provisioning command failed to run: {exc}") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise Untestable(
                f"provisioning command exited {done.returncode}: {detail[-1] if detail else 'no output'}"
            )


def _parse_bool_or_auto(value: object, where: str) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "yes", "on", "1"}:
        return True
    if isinstance(value, str) and value.lower() in {"false", "no", "off", "0"}:
        return False
    if isinstance(value, str) and value.lower() == "auto":
        return None
    raise ConfigError(f"{where}: expected true, false or \"auto\", got {value!r}")


def _capability_list(text: str, where: str) -> dict[str, bool | None]:
    """``search,-mcp,leases=auto`` -> claims; the CLI's ``--capability`` uses the same grammar."""
    result: dict[str, bool | None] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, value = item, True
        if item.startswith("-"):
            name, value = item[1:], False
        elif "=" in item:
            name, _, flag = item.partition("=")
            value = _parse_bool_or_auto(flag, where)  # type: ignore[assignment]
        if name not in CAPABILITIES:
            raise ConfigError(f"{where}: unknown capability {name!r} (known: {', '.join(CAPABILITIES)})")
        result[name] = value
    return result


def _positive_float(value: object, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number of seconds, got {value!r}") from None
    if not 0 < number <= 600:
        raise ConfigError(f"{where}: must be between 0 and 600 seconds, got {number}")
    return number


def _url(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise ConfigError(f"{where}: expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def _template(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a command template string")
    missing = [p for p in ("{project}", "{actor}", "{token_file}") if p not in value]
    if missing:
        raise ConfigError(f"{where}: the command template lacks {', '.join(missing)}")
    try:
        shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value


def _fixed_tokens(entries: object, base: Path, where: str, env: Mapping[str, str]) -> tuple[FixedToken, ...]:
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: expected an array of tables [[provision.tokens]]")
    tokens = []
    for index, entry in enumerate(entries):
        spot = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{spot}: expected a table")
        for key in ("project", "actor"):
            if not isinstance(entry.get(key), str):
                raise ConfigError(f"{spot}: missing string {key!r}")
        role = entry.get("role", "writer")
        if role not in ROLES:
            raise ConfigError(f"{spot}: role must be one of {', '.join(ROLES)}")
        if isinstance(entry.get("token"), str):
            token = entry["token"]
        elif isinstance(entry.get("token_env"), str):
            token = env.get(entry["token_env"], "")
            if not token:
                raise ConfigError(f"{spot}: environment variable {entry['token_env']} is empty")
        elif isinstance(entry.get("token_file"), str):
            path = base / entry["token_file"]
            try:
                token = path.read_text("utf-8").rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{spot}: cannot read token_file {path}: {exc}") from None
        else:
            raise ConfigError(f"{spot}: give one of token, token_env or token_file")
        tokens.append(FixedToken(project=entry["project"], actor=entry["actor"], role=role, token=token))
    return tuple(tokens)


def resolve_target(
    *,
    config_path: str | None,
    url: str | None,
    timeout_s: str | float | None,
    capabilities: list[str] | None,
    provision_command: str | None,
    embedded_factory: str | None = None,
    backend: str | None = None,
    environ: Mapping[str, str] | None = None,
    flag_prefix: str = "--aidememo-",
    provision_hook: bool = False,
) -> TargetSettings:
    """Apply flag > environment > target file > default and validate every value.

    Raises:
        ConfigError: naming the file, variable or flag that holds the bad value.
    """
    env = os.environ if environ is None else environ
    config_path = config_path or env.get("AIDEMEMO_CONFIG") or None
    data: dict[str, object] = {}
    base = Path.cwd()
    origin = "defaults"
    if config_path:
        path = Path(config_path)
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except OSError as exc:
            raise ConfigError(f"target file {config_path}: {exc.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"target file {config_path}: {exc}") from None
        base = path.resolve().parent
        origin = str(path)
    known = {"profile", "url", "timeout_s", "max_body_bytes", "capabilities", "provision", "embedded"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"target file {config_path}: unknown key {unknown[0]!r}")
    profile = data.get("profile", "aidememo-remote")
    if profile != "aidememo-remote":
        raise ConfigError(f"target file {config_path}: unknown profile {profile!r} (known: aidememo-remote)")

    resolved_url: str | None = None
    if url is not None:
        resolved_url = _url(url, f"{flag_prefix}url")
    elif env.get("AIDEMEMO_URL"):
        resolved_url = _url(env["AIDEMEMO_URL"], "AIDEMEMO_URL")
    elif "url" in data:
        resolved_url = _url(data["url"], f"{config_path}: url")

    if timeout_s is not None:
        timeout = _positive_float(timeout_s, f"{flag_prefix}timeout")
    elif env.get("AIDEMEMO_TIMEOUT"):
        timeout = _positive_float(env["AIDEMEMO_TIMEOUT"], "AIDEMEMO_TIMEOUT")
    else:
        timeout = _positive_float(data.get("timeout_s", DEFAULT_TIMEOUT_S), f"{config_path}: timeout_s")

    max_body = data.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    if not isinstance(max_body, int) or max_body < 65536:
        raise ConfigError(f"{config_path}: max_body_bytes must be an integer of at least 65536")

    claims: dict[str, bool | None] = {}
    file_caps = data.get("capabilities", {})
    if not isinstance(file_caps, dict):
        raise ConfigError(f"{config_path}: [capabilities] must be a table")
    for name, value in file_caps.items():
        if name not in CAPABILITIES:
            raise ConfigError(f"{config_path}: unknown capability {name!r} (known: {', '.join(CAPABILITIES)})")
        claims[name] = _parse_bool_or_auto(value, f"{config_path}: capabilities.{name}")
    if env.get("AIDEMEMO_CAPABILITIES"):
        claims.update(_capability_list(env["AIDEMEMO_CAPABILITIES"], "AIDEMEMO_CAPABILITIES"))
    for item in capabilities or []:
        claims.update(_capability_list(item, f"{flag_prefix}capability"))
    if claims.get("core") is False:
        raise ConfigError("capability 'core' cannot be disclaimed")

    provision = data.get("provision", {})
    if not isinstance(provision, dict):
        raise ConfigError(f"{config_path}: [provision] must be a table")
    command: str | None = None
    if provision_command is not None:
        command = _template(provision_command, f"{flag_prefix}provision-command")
    elif env.get("AIDEMEMO_PROVISION_COMMAND"):
        command = _template(env["AIDEMEMO_PROVISION_COMMAND"], "AIDEMEMO_PROVISION_COMMAND")
    elif "command" in provision:
        command = _template(provision["command"], f"{config_path}: provision.command")
    tokens = _fixed_tokens(provision["tokens"], base, f"{config_path}: provision.tokens", env) if "tokens" in provision else ()

    embedded = data.get("embedded", {})
    factory = embedded_factory or env.get("AIDEMEMO_EMBEDDED_FACTORY") or (
        embedded.get("factory") if isinstance(embedded, dict) else None
    )
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        raise ConfigError(f"embedded factory must look like 'module:callable', got {factory!r}")
    store = backend or env.get("AIDEMEMO_BACKEND") or (
        embedded.get("backend", "sqlite") if isinstance(embedded, dict) else "sqlite")
    if store not in ("sqlite", "postgres"):
        raise ConfigError(f"embedded backend must be sqlite or postgres, got {store!r}")

    if resolved_url is not None and command is None and not tokens and not provision_hook:
        raise ConfigError(
            f"target {resolved_url}: say how to get identities, with a provisioning command template "
            f"({flag_prefix}provision-command or [provision] command) or [[provision.tokens]]"
        )
    return TargetSettings(
        url=resolved_url,
        timeout_s=timeout,
        max_body_bytes=max_body,
        capabilities=claims,
        provision_command=command,
        fixed_tokens=tokens,
        embedded_factory=factory,
        embedded_backend=str(store),
        provision_hook=provision_hook,
        origin=origin,
    )
