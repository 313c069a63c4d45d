"""How the suite gets identities on a target: a command, a function (or hook), or a token list.

An *identity* is a profile's set of template values (``tenant``, ``project``, ``actor``,
``role`` for AideMemo); a *token* is the credential the suite chose for it. Three ways in:

* ``CommandProvisioner`` runs the target's own bootstrap command once per identity, with the
  values and ``{token_file}`` (a fresh 0600 file holding the token) filled into a template.
  A bootstrap that mints its own credential may write it to the token file: whatever the file
  holds afterwards is the credential;
* ``FunctionProvisioner`` calls a function (the embedded reference's store, or a conftest hook);
* ``TokenList`` is for targets that cannot be provisioned at all: pre-provisioned identities
  from the target file, which checks then share.

Nothing here knows a protocol; a profile says which template values exist and which must be
present. No token is ever printed: errors name the identity, never its credential.
"""

from __future__ import annotations

import errno
import itertools
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from conformance.errors import ConfigError, Untestable
from conformance.settings import ParseContext

__all__ = [
    "CommandProvisioner",
    "FixedIdentity",
    "FunctionProvisioner",
    "Provisioner",
    "TokenField",
    "TokenList",
    "template_parser",
    "token_list_parser",
]

TOKEN_FILE = "{token_file}"


class Provisioner(Protocol):
    """Makes an identity real on the target and binds a credential to it."""

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        """Provision ``identity`` with ``token``; return the credential to use (usually ``token``).

        Raises:
            Untestable: the identity could not be provisioned.
        """
        ...

    def close(self) -> None:
        """Release what provisioning holds (token files)."""
        ...


_SPAWN_TRIES = 3
_SPAWN_TRANSIENT = frozenset({errno.EFAULT, errno.EAGAIN, errno.ENOMEM})


class CommandProvisioner:
    """Runs a bootstrap command template once per identity, with a fresh 0600 token file."""

    def __init__(self, template: str, timeout_s: float = 60.0) -> None:
        self.template = template
        self.timeout_s = timeout_s
        self._dir = tempfile.mkdtemp(prefix="conformance-tokens-")
        self._count = itertools.count(1)  # next() is atomic: a pool's threads provision concurrently

    def close(self) -> None:
        """Delete the token files: they hold live credentials of the target."""
        shutil.rmtree(self._dir, ignore_errors=True)

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        token_file = Path(self._dir) / f"identity-{next(self._count)}.token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
        values = {**identity, "token_file": str(token_file)}
        try:
            argv = [part.format(**values) for part in shlex.split(self.template)]
        except (KeyError, IndexError) as exc:
            raise Untestable(f"provisioning command template names an unknown placeholder {exc}") from None
        shown = ", ".join(f"{k}={v}" for k, v in identity.items())
        try:
            done = self._run(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Untestable(f"provisioning command failed to run for {shown}: {exc}") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            last = detail[-1].replace(token, "<redacted>") if detail else "no output"
            raise Untestable(f"provisioning command exited {done.returncode} for {shown}: {last}")
        try:
            written = token_file.read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            written = ""
        return written or token

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run the command; a spawn that failed before the program ran (seen as EFAULT from a
        vfork'd exec while the pool's threads spawn at once) is tried again: nothing ran, so
        nothing is provisioned twice."""
        for attempt in range(_SPAWN_TRIES):
            try:
                return subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False)
            except OSError as exc:
                if exc.errno not in _SPAWN_TRANSIENT or attempt == _SPAWN_TRIES - 1:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises


class FunctionProvisioner:
    """Provisions by calling a function; a result of ``False`` means nobody handled the identity."""

    def __init__(self, provision: Callable[[Mapping[str, str], str], object], what: str) -> None:
        self._provision = provision
        self._what = what

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        handled = self._provision(identity, token)
        if handled is False or handled is None:
            raise Untestable(f"{self._what} did not handle the identity")
        return handled if isinstance(handled, str) else token

    def close(self) -> None:
        pass


def template_parser(required: Sequence[str]) -> Callable[[object, str, ParseContext], str]:
    """A parser for command templates that must name ``required`` placeholders (and ``{token_file}``)."""
    needed = [f"{{{name}}}" for name in required] + [TOKEN_FILE]

    def parse(value: object, where: str, context: ParseContext) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: expected a command template string")
        missing = [p for p in needed if p not in value]
        if missing:
            raise ConfigError(f"{where}: the command template lacks {', '.join(missing)}")
        try:
            shlex.split(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return value

    return parse


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenField:
    """One field of a token-list entry: required, or defaulted, optionally from a fixed set."""

    name: str
    default: str | None = None  # None: required
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FixedIdentity:
    """A pre-provisioned identity of a target the suite cannot provision."""

    fields: Mapping[str, str]
    token: str = field(repr=False)

    def __getitem__(self, name: str) -> str:
        return self.fields[name]


@dataclass(frozen=True, slots=True)
class TokenList:
    """The target file's pre-provisioned identities, in file order."""

    identities: tuple[FixedIdentity, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.identities)

    def __iter__(self) -> Iterator[FixedIdentity]:
        return iter(self.identities)

    def grouped(self, by: str) -> dict[str, list[FixedIdentity]]:
        """Identities by the value of one field (AideMemo groups by project)."""
        groups: dict[str, list[FixedIdentity]] = {}
        for identity in self.identities:
            groups.setdefault(identity[by], []).append(identity)
        return groups


def token_list_parser(fields: Sequence[TokenField]) -> Callable[[object, str, ParseContext], TokenList]:
    """A parser for ``[[provision.tokens]]`` entries with ``fields`` and one of token, token_env, token_file.

    ``token_file`` is read relative to the target file; ``token_env`` names a variable.
    """
    allowed = {f.name for f in fields} | {"token", "token_env", "token_file"}

    def parse(value: object, where: str, context: ParseContext) -> TokenList:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array of tables [[provision.tokens]]")
        identities = []
        for index, entry in enumerate(value):
            spot = f"{where}[{index}]"
            if not isinstance(entry, dict):
                raise ConfigError(f"{spot}: expected a table")
            unknown = sorted(set(entry) - allowed)
            if unknown:
                raise ConfigError(f"{spot}: unknown key {unknown[0]!r}")
            values: dict[str, str] = {}
            for spec in fields:
                raw = entry.get(spec.name, spec.default)
                if not isinstance(raw, str):
                    raise ConfigError(f"{spot}: missing string {spec.name!r}")
                if spec.choices and raw not in spec.choices:
                    raise ConfigError(f"{spot}: {spec.name} must be one of {', '.join(spec.choices)}")
                values[spec.name] = raw
            identities.append(FixedIdentity(values, _token(entry, spot, context)))
        return TokenList(tuple(identities))

    return parse


def _token(entry: Mapping[str, object], spot: str, context: ParseContext) -> str:
    token, token_env, token_file = entry.get("token"), entry.get("token_env"), entry.get("token_file")
    if isinstance(token, str):
        return token
    if isinstance(token_env, str):
        value = context.environ.get(token_env, "")
        if not value:
            raise ConfigError(f"{spot}: environment variable {token_env} is empty")
        return value
    if isinstance(token_file, str):
        path = (context.base_dir or Path.cwd()) / token_file
        try:
            return path.read_text("utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{spot}: cannot read token_file {path}: {exc}") from None
    raise ConfigError(f"{spot}: give one of token, token_env or token_file")
