"""Every setting of a run, resolved in one function with one precedence.

A ``Setting`` declares one value once: its parser, its default and the names it goes by in each
layer (a flag, an environment variable, a target-file key, an ini option). ``resolve`` applies

    flag > environment > target file > ini > default

to every declared setting, and a bad value stops the run with a ``ConfigError`` naming the layer
it came from: the flag (``--aidememo-url``, or ``--url`` for the command line), the variable
(``AIDEMEMO_URL``), the file key (``target.toml: url``) or the ini name (``ini aidememo_url``).
Settings that accumulate (capability claims) are folded from the lowest layer to the highest,
so a flag overrides one capability without forgetting the file's others.

This module knows no protocol: profiles declare their own settings with the same ``Setting``
(see ``conformance.profile``), and the plugin and the command line feed it their layers.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from conformance.errors import ConfigError

__all__ = [
    "Layer",
    "ParseContext",
    "Setting",
    "Settings",
    "SettingsInput",
    "TargetFile",
    "load_target_file",
    "parse_bool",
    "parse_bytes",
    "parse_int",
    "parse_path",
    "parse_seconds",
    "parse_text",
    "parse_url",
    "read_toml",
    "resolve",
]

T = TypeVar("T")

ENV_PREFIX = "AIDEMEMO_"
PYTEST_FLAG_PREFIX = "--aidememo-"
INI_PREFIX = "aidememo_"


class Layer(StrEnum):
    """Where a value came from, highest precedence first."""

    FLAG = "flag"
    ENV = "environment"
    FILE = "target file"
    INI = "ini"
    DEFAULT = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseContext:
    """What a parser may need besides the raw value."""

    base_dir: Path | None  # the target file's directory for values read from it; None otherwise
    environ: Mapping[str, str]
    capabilities: tuple[str, ...] = ()  # the selected profile's capability names


Parser = Callable[[object, str, ParseContext], T]


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting(Generic[T]):
    """One value of a run and the name it goes by in each layer.

    ``name`` derives the defaults: flag ``--NAME`` on the command line and ``--aidememo-NAME`` in
    pytest (``_`` spelled ``-``), variable ``AIDEMEMO_NAME``, ini ``aidememo_NAME``, file key
    ``NAME``. Give ``None`` for a layer the setting must not be read from.
    """

    name: str
    parse: Parser[T]
    default: T
    help: str
    metavar: str | None = None
    flag: str | None = ""  # "" derives from name
    env: str | None = ""
    file_key: str | None = ""  # dotted: "provision.command"
    ini: str | None = ""
    action: str = "store"  # "store", "store_true" or "append" (flag layer only)
    merge: Callable[[T, T], T] | None = None  # fold layers (low to high) instead of the highest winning
    render: Callable[[T], list[str]] | None = None  # value -> flag arguments that give it back (rerun commands)
    secret: bool = False  # never echoed in rerun commands or reports
    hidden: bool = False  # left out of --help

    def arguments(self, value: T) -> list[str]:
        """The command-line flag and arguments that set ``value`` (empty when it has no flag)."""
        flag = self.cli_flag
        if flag is None or value is None or self.secret:
            return []
        if self.action == "store_true":
            return [flag] if value else []
        words = self.render(value) if self.render is not None else [format(value, "g") if isinstance(value, float)
                                                                    else str(value)]
        return [part for word in words for part in (flag, word)]

    @property
    def cli_flag(self) -> str | None:
        if self.flag is None:
            return None
        return "--" + (self.flag or self.name.replace("_", "-"))

    @property
    def pytest_flag(self) -> str | None:
        if self.flag is None:
            return None
        return PYTEST_FLAG_PREFIX + (self.flag or self.name.replace("_", "-"))

    @property
    def dest(self) -> str:
        return INI_PREFIX + self.name

    @property
    def env_name(self) -> str | None:
        return None if self.env is None else (self.env or ENV_PREFIX + self.name.upper())

    @property
    def ini_name(self) -> str | None:
        return None if self.ini is None else (self.ini or INI_PREFIX + self.name)

    @property
    def file_path(self) -> str | None:
        return None if self.file_key is None else (self.file_key or self.name)


@dataclass(frozen=True, slots=True)
class TargetFile:
    """A parsed target file and the directory its relative paths are taken from."""

    path: str  # as given, so messages name the file the user typed
    data: dict[str, object]
    base_dir: Path

    def get(self, dotted: str) -> tuple[bool, object]:
        node: object = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def where(self, dotted: str) -> str:
        return f"{self.path}: {dotted}"


def read_toml(path: str, what: str) -> dict[str, Any]:
    """Parse a TOML file the user named.

    Raises:
        ConfigError: unreadable, not UTF-8, or not TOML; the message names ``what`` and the file.
    """
    try:
        return tomllib.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: {exc}") from None


def load_target_file(path: str) -> TargetFile:
    """Read a target file (TOML).

    Raises:
        ConfigError: unreadable, not UTF-8, or not TOML; the message names the file.
    """
    return TargetFile(path, read_toml(path, "target file"), Path(path).resolve().parent)


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsInput:
    """The raw layers: flag values by setting name, the environment, a target file, ini values."""

    flags: Mapping[str, object] = field(default_factory=dict)  # None (or absent) = not given
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    target_file: TargetFile | None = None
    ini: Mapping[str, object] = field(default_factory=dict)  # by ini name; None or "" = not set
    flag_style: str = "cli"  # "cli" names flags --url, "pytest" names them --aidememo-url


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved values, each with the layer and name it came from."""

    values: dict[str, object]
    origins: dict[str, tuple[Layer, str]]  # name -> (layer, where)
    declared: dict[str, Setting[Any]]
    target_file: TargetFile | None = None
    flag_style: str = "cli"

    def __getitem__(self, setting: Setting[T]) -> T:
        return cast(T, self.values[setting.name])

    def layer(self, setting: Setting[Any]) -> Layer:
        return self.origins[setting.name][0]

    def where(self, setting: Setting[Any]) -> str:
        return self.origins[setting.name][1]

    def flag_name(self, setting: Setting[Any]) -> str:
        """How this run spells the setting's flag (for messages that tell the user what to pass)."""
        flag = setting.pytest_flag if self.flag_style == "pytest" else setting.cli_flag
        return flag or setting.file_path or setting.name


def _present(value: object) -> bool:
    return value is not None and value != "" and value != []


def _layers(setting: Setting[Any], given: SettingsInput) -> list[tuple[Layer, str, object]]:
    """Every layer holding a value for the setting, highest precedence first."""
    found: list[tuple[Layer, str, object]] = []
    flag = setting.pytest_flag if given.flag_style == "pytest" else setting.cli_flag
    if flag is not None and _present(given.flags.get(setting.name)):
        found.append((Layer.FLAG, flag, given.flags[setting.name]))
    env = setting.env_name
    if env is not None and _present(given.environ.get(env)):
        found.append((Layer.ENV, env, given.environ[env]))
    if setting.file_path is not None and given.target_file is not None:
        present, value = given.target_file.get(setting.file_path)
        if present:
            found.append((Layer.FILE, given.target_file.where(setting.file_path), value))
    ini = setting.ini_name
    if ini is not None and _present(given.ini.get(ini)):
        found.append((Layer.INI, f"ini {ini}", given.ini[ini]))
    return found


def resolve(
    declared: Iterable[Setting[Any]],
    given: SettingsInput,
    *,
    capabilities: Sequence[str] = (),
    check_file_keys: bool = True,
) -> Settings:
    """Apply flag > environment > target file > ini > default to every declared setting.

    Args:
        capabilities: the capability names a capability-claim parser accepts.
        check_file_keys: refuse target-file keys no declared setting reads.

    Raises:
        ConfigError: naming the flag, variable, file key or ini name that holds the bad value.
    """
    settings = {s.name: s for s in declared}
    target_file = given.target_file
    if target_file is not None and check_file_keys:
        _refuse_unknown_keys(target_file, [s.file_path for s in settings.values() if s.file_path])
    file_context = ParseContext(base_dir=target_file.base_dir if target_file else None,
                                environ=given.environ, capabilities=tuple(capabilities))
    other_context = ParseContext(base_dir=None, environ=given.environ, capabilities=tuple(capabilities))
    values: dict[str, object] = {}
    origins: dict[str, tuple[Layer, str]] = {}
    for setting in settings.values():
        layers = _layers(setting, given)
        if not layers:
            values[setting.name] = setting.default
            origins[setting.name] = (Layer.DEFAULT, "default")
            continue

        def parsed(layer: tuple[Layer, str, object], setting: Setting[Any] = setting) -> object:
            context = file_context if layer[0] is Layer.FILE else other_context
            return setting.parse(layer[2], layer[1], context)

        if setting.merge is None:
            values[setting.name] = parsed(layers[0])
        else:
            folded = setting.default
            for layer in reversed(layers):
                folded = setting.merge(folded, parsed(layer))
            values[setting.name] = folded
        origins[setting.name] = (layers[0][0], layers[0][1])
    return Settings(values, origins, settings, target_file, given.flag_style)


def _refuse_unknown_keys(target_file: TargetFile, known: list[str]) -> None:
    def walk(node: dict[str, object], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if dotted in known:
                continue
            if isinstance(value, dict) and any(k.startswith(dotted + ".") for k in known):
                walk(value, dotted + ".")
                continue
            raise ConfigError(f"target file {target_file.path}: unknown key {dotted!r}")

    walk(target_file.data, "")


# -- parsers: (raw value, where, context) -> value; each error names where --------------------------
def parse_text(value: object, where: str, context: ParseContext) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def parse_url(value: object, where: str, context: ParseContext) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise ConfigError(f"{where}: expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def parse_seconds(value: object, where: str, context: ParseContext) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number of seconds, got {value!r}")
    try:
        number = float(cast(Any, value))
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number of seconds, got {value!r}") from None
    if not 0 < number <= 600:
        raise ConfigError(f"{where}: must be between 0 and 600 seconds, got {number:g}")
    return number


def parse_int(value: object, where: str, context: ParseContext) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where}: expected a non-negative integer, got {value!r}")
    if isinstance(value, str) and not value.strip().isdigit():
        raise ConfigError(f"{where}: expected a non-negative integer, got {value!r}")
    number = int(value)
    if number < 0:
        raise ConfigError(f"{where}: expected a non-negative integer, got {value!r}")
    return number


def parse_bytes(value: object, where: str, context: ParseContext) -> int:
    number = parse_int(value, where, context)
    if number < 65536:
        raise ConfigError(f"{where}: must be an integer of at least 65536, got {number}")
    return number


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_bool(value: object, where: str, context: ParseContext) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE:
        return False
    raise ConfigError(f"{where}: expected true or false, got {value!r}")


def parse_path(value: object, where: str, context: ParseContext) -> str:
    """A path; one given in the target file is taken relative to the file."""
    text = parse_text(value, where, context)
    if context.base_dir is None or Path(text).expanduser().is_absolute():
        return text
    return str(context.base_dir / text)
