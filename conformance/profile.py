"""Profiles: one protocol's requirements, checks and target, plugged into the shared suite.

The shared parts (settings, capabilities, provisioning, verdicts, reports, baseline, the
command line and the pytest plugin) know no protocol. A ``Profile`` supplies the rest:

* its requirement registry (``requirements.toml`` in ``package``, ids starting ``prefix``) and
  its checks package;
* the settings and capabilities it adds to the shared ones;
* ``start``: builds the target of one pytest process (an embedded reference, a URL, a command
  line...) with its provisioning and settled capability claims;
* ``world``: builds one check's view of the target (fresh identities and the verbs checks use).

See docs/conformance.md, "Writing a profile". Profiles import this module and it imports none
of them: the table of installed profiles and a run's resolution are ``conformance.installed``.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from conformance.capabilities import CAPABILITIES, Capability, Claims
from conformance.errors import ConfigError
from conformance.registry import Registry, load_registry
from conformance.serve import SERVE
from conformance.settings import (
    ParseContext,
    Setting,
    Settings,
    parse_bytes,
    parse_int,
    parse_path,
    parse_seconds,
    parse_text,
    parse_url,
)
from conformance.transcript import Transcript

if TYPE_CHECKING:
    import pytest

__all__ = [
    "BASELINE",
    "CLI",
    "CONFIG",
    "CheckContext",
    "EMBEDDED_FACTORY",
    "MAX_BODY_BYTES",
    "PROFILE",
    "Profile",
    "REPORT_DIR",
    "RUN_SETTINGS",
    "RUN_TAG",
    "SEED",
    "Sibling",
    "StartContext",
    "TIMEOUT",
    "Target",
    "TargetDescription",
    "URL",
    "World",
    "lazy",
]

DEFAULT_PROFILE = "aidememo"


# -- what a profile returns to the shared parts ------------------------------------------------------
class Target(Protocol):
    """The started target of one pytest process."""

    @property
    def claims(self) -> Claims: ...

    def close(self) -> None: ...


class World(Protocol):
    """What the plugin reads from one check's world after the check ran."""

    @property
    def transcript(self) -> Transcript: ...

    @property
    def warnings(self) -> list[str]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetDescription:
    """How the run header and reports name the target, and how a case file's script reaches it again.

    ``mode`` says where identities come from: ``embedded`` (the reference started for the run),
    ``command`` (the bootstrap template), ``fixed-tokens``, ``provision hook``; AideMemo adds
    ``real-time leases`` when lease expiry is waited for.
    """

    target: str
    mode: str  # "embedded", "command", "fixed-tokens", "provision hook", ...
    url: str | None = None  # the base URL a replay script sends to (None: the run's target is gone)
    # Bootstrap templates a replay script provisions with: (identity field that must be set, or "", template).
    templates: tuple[tuple[str, str], ...] = ()
    credential_prefix: str = ""  # what the kit's own credentials start with ("tok-")
    replay_hint: str = ""  # what a replay must start first when the run's target is gone
    command: tuple[str, ...] | None = None  # a command-line target's words, which a script's command steps run


@dataclass(frozen=True, slots=True, kw_only=True)
class StartContext:
    """What ``Profile.start`` gets: the resolved settings, the profile's declared capabilities (the
    target settles its claims against them) and the pytest config (for a profile's hooks)."""

    settings: Settings
    capabilities: tuple[Capability, ...] = ()
    config: pytest.Config | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sibling:
    """Another check this process will run, whose world a check may build ahead of it."""

    check: str  # test_module.py::test_name
    markers: Mapping[str, tuple[object, ...]]
    world: Callable[[], Any]  # the world that check will get (built once, on first call)


@dataclass(frozen=True, slots=True, kw_only=True)
class Upcoming:
    """A check this process surely runs from now on, in the order it runs them."""

    check: str  # test_module.py::test_name
    check_tag: str  # the tag its world's ids carry
    function: Callable[..., Any] | None  # the test function (None: not a Python function)
    markers: Mapping[str, tuple[object, ...]]


def _no_siblings(marker: str) -> list[Sibling]:
    return []


def _nothing_ahead() -> list[Upcoming]:
    return []


def _silent(line: str) -> None:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckContext:
    """What ``Profile.world`` gets for one check.

    ``rng`` is seeded from the run seed and the check's name, so a seed replays the same ids and
    texts whatever the order or the xdist split; ``check_tag`` is a short stable hash of the name.
    ``siblings(marker)`` lists the checks with that marker this process will run (itself
    included; under xdist only those sure to run here, see docs), so checks can share one slow
    step; ``ahead()`` lists this check and those the process surely runs after it, in order
    (a profile may prepare their identities in the background); ``progress(line)`` shows a line on the user's terminal at once; ``stop(reason)`` ends
    the run after the current check, as a clean stop.
    """

    target: Any  # the profile's own target type, as its ``start`` built it
    rng: random.Random
    run_tag: str
    check_tag: str
    transcript: Transcript
    markers: Mapping[str, tuple[object, ...]] = field(default_factory=dict)  # marker name -> args
    check: str = ""
    siblings: Callable[[str], list[Sibling]] = _no_siblings
    ahead: Callable[[], list[Upcoming]] = _nothing_ahead
    progress: Callable[[str], None] = _silent
    stop: Callable[[str], None] = _silent


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """One protocol's plug-in (see the module docstring)."""

    name: str
    title: str  # the protocol as headings name it: "AideMemo"
    prefix: str  # requirement id prefix, "AM-"
    package: str  # holds requirements.toml
    checks: str  # the checks package
    capabilities: tuple[Capability, ...]
    start: Callable[[StartContext], Target]
    world: Callable[[CheckContext], World]
    describe: Callable[[Settings, Any], TargetDescription]  # (settings, pytest config or None)
    settings: tuple[Setting[Any], ...] = ()
    validate: Callable[[Settings, Any], None] | None = None  # (settings, pytest config or None)
    markers: tuple[str, ...] = ()  # "name(args): meaning" lines registered with pytest
    hookspecs: str | None = None  # module of pytest hookspecs a conftest may implement
    configure: Callable[[Any], None] | None = None  # called in pytest_configure, whatever the profile
    aliases: tuple[str, ...] = ()
    # ``diff``: (parsed arguments, settings, the command's own words) -> exit status; None: the
    # profile has no reference to compare a target against.
    diff: Callable[[Any, Settings, list[str]], int] | None = None
    # ``overlap``: how many checks one process may run at once (``conformance.overlap``), for checks
    # that spend their time waiting on the target and share nothing; 1 runs them one by one.
    overlap: int = 1
    # The upstream commit whose protocol the requirements follow, named by every report (None: the
    # profile's sources are documents, not one upstream commit).
    protocol_commit: str | None = None
    # ``expectations``: a reproduction record (``conformance.reproduction``) with a correct server's
    # answers filled in beside its steps; None: a reproduction judges by what the checks stated.
    expectations: Callable[[Any], Any] | None = None

    @property
    def capability_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.capabilities)

    def registry(self) -> Registry:
        return load_registry(self.name, self.package, self.prefix, self.capability_names)

    def checks_dir(self) -> Path:
        module = importlib.import_module(self.checks)
        return Path(str(module.__file__)).parent

    def checked_requirements(self) -> frozenset[str]:
        """The requirement ids at least one check of the checks package proves (imports the checks).

        Tells a requirement no check exists for (untested) from one whose checks this run did not
        select.
        """
        package = importlib.import_module(self.checks)
        found: set[str] = set()
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("test_"):
                module = importlib.import_module(f"{self.checks}.{info.name}")
                for value in vars(module).values():
                    for mark in _with_parameter_marks(getattr(value, "pytestmark", ())):
                        if getattr(mark, "name", None) == "requirement" and getattr(mark, "args", ()):
                            found.add(str(mark.args[0]))
        return frozenset(found)


def _with_parameter_marks(marks: Any) -> list[Any]:
    """A check's marks and those of its parameters (``pytest.param(..., marks=reads(...))``): a
    check may name its requirement on each parameter only."""
    found = list(marks)
    for mark in marks:
        if getattr(mark, "name", None) == "parametrize" and len(getattr(mark, "args", ())) > 1:
            for value in mark.args[1]:
                found += list(getattr(value, "marks", ()))
    return found


# -- settings every profile shares ------------------------------------------------------------------
def _parse_tag(value: object, where: str, context: ParseContext) -> str:
    tag = parse_text(value, where, context)
    if not all(c.isalnum() or c in "-_." for c in tag) or len(tag) > 24:
        raise ConfigError(f"{where}: use up to 24 letters, digits, '-', '_' or '.', got {tag!r}")
    return tag


def _parse_command_line(value: object, where: str, context: ParseContext) -> tuple[str, ...]:
    if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
        return tuple(value)
    text = parse_text(value, where, context)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not words:
        raise ConfigError(f"{where}: expected a command line, got {value!r}")
    return tuple(words)


def _parse_factory(value: object, where: str, context: ParseContext) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{where}: expected 'module:callable', got {value!r}")
    return value


CONFIG: Setting[str | None] = Setting(name="config", parse=parse_text, default=None, file_key=None, metavar="TOML",
                                      help="target file (TOML)")
PROFILE: Setting[str] = Setting(name="profile", parse=parse_text, default=DEFAULT_PROFILE, metavar="NAME",
                                help=f"protocol profile to run (default {DEFAULT_PROFILE})")
SEED: Setting[int | None] = Setting(name="seed", parse=parse_int, default=None, file_key=None, metavar="N",
                                    help="seed of every random choice (printed by every run)")
# The namespace of every id a run creates. Fresh by default, so a rerun of the same seed meets
# none of an earlier run's data; fixed, it replays the exact ids (into a database without them).
RUN_TAG: Setting[str | None] = Setting(name="run_tag", parse=_parse_tag, default=None, file_key=None, metavar="TAG",
                                       help="namespace of the ids this run creates (default: new every run); "
                                            "a fixed tag replays the exact ids, for a wiped database")
BASELINE: Setting[str | None] = Setting(name="baseline", parse=parse_path, default=None, metavar="TOML",
                                        help="expected failures; an entry that now passes fails the run")
REPORT_DIR: Setting[str] = Setting(name="report_dir", parse=parse_text, default="aidememo-report", file_key=None,
                                   metavar="DIR", help="where the reports go (default ./aidememo-report)")
TIMEOUT: Setting[float] = Setting(name="timeout", parse=parse_seconds, default=10.0, file_key="timeout_s",
                                  metavar="SECONDS", help="per-request (or per-command) deadline (default 10)")
# Well above any answer the AideMemo suite provokes (its 1 MiB bodies echo nothing back).
MAX_BODY_BYTES: Setting[int] = Setting(name="max_body_bytes", parse=parse_bytes, default=4 * 1024 * 1024,
                                       metavar="BYTES", help="answers beyond this fail (default 4 MiB)")

RUN_SETTINGS: tuple[Setting[Any], ...] = (CONFIG, PROFILE, SEED, RUN_TAG, BASELINE, REPORT_DIR, TIMEOUT,
                                          MAX_BODY_BYTES, CAPABILITIES, SERVE)

# Ready-made declarations for profiles whose target is an HTTP server or an embedded reference.
URL: Setting[str | None] = Setting(name="url", parse=parse_url, default=None, metavar="URL",
                                   help="server under test; without it the embedded reference is started")
# For profiles whose target is a command line (a CLI, a stdio MCP server): no URL.
CLI: Setting[tuple[str, ...] | None] = Setting(
    name="cli", parse=_parse_command_line, default=None, metavar="COMMAND",
    render=lambda words: [shlex.join(words or ())],
    help="command line of the CLI under test (a string, or an array in the target file); "
         "without it the embedded reference's is used")
EMBEDDED_FACTORY: Setting[str | None] = Setting(
    name="embedded_factory", parse=_parse_factory, default=None, file_key="embedded.factory", ini=None,
    metavar="MODULE:CALLABLE", hidden=True, help="build the embedded reference with this callable (broken variants)")


def lazy(spec: str) -> Callable[..., Any]:
    """A function that imports ``module:attribute.path`` on its first call and calls it.

    Profile declarations are imported whenever the plugin loads, so they name their target,
    world and check machinery this way instead of importing it.
    """
    module_name, _, path = spec.partition(":")
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            target: Any = importlib.import_module(module_name)
            for part in path.split("."):
                target = getattr(target, part)
            found.append(target)
        return found[0](*args, **kwargs)

    call.__qualname__ = call.__name__ = f"lazy({spec!r})"
    return call
