"""Where the races run: the embedded reference (or a planted variant of it), or a server by URL.

A ``Target`` answers one request for one actor (``request``), knows its clock if it can be
moved, and owns whatever the requests need. The embedded target runs the reference in-process
on a manual clock with the ``SeededScheduler`` installed in its store; a URL target sends over
the conformance suite's bounded wire (an answer is read whole, within a size cap and an overall
deadline, so a hostile server costs one lost answer, never a stalled run). A lost answer raises
``Lost``; what it means for the history is the execution's business, not the target's.

Targets are also read from the conformance suite's target file (``--config``): its format and
precedence rules belong to the suite's AideMemo profile (``conformance.profiles.aidememo.settings``);
this module only turns resolved settings into a ``HttpTarget``, provisioning fresh actors with
the file's command or picking writers among its fixed tokens.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from refkit.jsonvalue import loads
from simulations.errors import SimulationError
from simulations.plan import READER, START_MS, actor_names
from simulations.scheduler import SeededScheduler

if TYPE_CHECKING:
    from conformance.serve import ServedServer

__all__ = [
    "EmbeddedTarget",
    "HttpTarget",
    "LedgerFactory",
    "Lost",
    "Reply",
    "Target",
    "load_factory",
    "named_words",
    "recorded_target",
    "SIM_TENANT",
    "reference_factory",
    "served_apart",
    "served_config",
    "serves_apart",
    "target_from_config",
    "token_variable",
    "unnamed_code",
]

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # the same cap the conformance suite puts on an answer
SIM_TENANT = "sim-tenant"  # the tenant of every project the simulator provisions


def token_variable(actor: str) -> str:
    """The environment variable that holds ``actor``'s token in printed commands and scripts."""
    return "TOKEN_" + actor.replace("-", "_").upper()


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return loads(self.body)
        except ValueError:
            return None


class Lost(Exception):
    """No complete answer came. ``delivered``: the request may have reached the target."""

    def __init__(self, detail: str, *, delivered: bool = True) -> None:
        super().__init__(detail)
        self.delivered = delivered


class Target(Protocol):
    actors: tuple[str, ...]
    project: str
    has_reader: bool  # a non-participant reader token exists (reads by an outsider)
    scheduler: SeededScheduler | None  # the embedded store's; None where the network interleaves

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        """One request as ``actor``. Raises Lost when no complete answer came."""
        ...

    def now_ms(self) -> int | None: ...

    def set_clock(self, now_ms: int) -> int | None:
        """Move the clock to ``now_ms`` unless it is past it; the target's time afterwards (None:
        a clock that cannot be read)."""
        ...

    def close(self) -> None: ...


LedgerFactory = Callable[..., Any]  # (database, *, clock, scheduler) -> ReferenceLedger


def reference_factory(database: Path, *, clock: Any, scheduler: Any) -> Any:
    from aidememo_ref import ReferenceLedger

    return ReferenceLedger(database, clock=clock, scheduler=scheduler)


def load_factory(spec: str | None, what: str = "ledger factory") -> LedgerFactory:
    """``None`` for the reference, else ``path/to/file.py:name`` (how planted variants travel:
    ledger factories, and for ``clients`` the client class, ``what`` names it in errors).

    Raises:
        SimulationError: when the file or the name is not there.
    """
    if spec is None:
        return reference_factory
    path, sep, name = spec.rpartition(":")
    if not sep or not path:
        raise SimulationError(f"{what} must be FILE.py:NAME, not {spec!r}")
    module_spec = importlib.util.spec_from_file_location(f"_sim_factory_{abs(hash(path))}", path)
    if module_spec is None or module_spec.loader is None or not Path(path).is_file():
        raise SimulationError(f"cannot load {what} file {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    factory = getattr(module, name, None)
    if factory is None:
        raise SimulationError(f"{path} has no {what} named {name}")
    return cast(LedgerFactory, factory)  # the file's author's word: called, it shows


def recorded_target(target: object) -> dict[str, Any]:
    """A replay file's ``target``, its fields checked for type (the file is data from anywhere).

    Raises:
        SimulationError: when it is not an object of strings (or nulls).
    """
    if not isinstance(target, dict):
        raise SimulationError("'target' is not an object")
    for key in ("kind", "factory", "url", "config", "project"):
        if not isinstance(target.get(key), (str, type(None))):
            raise SimulationError(f"target {key!r} is not a string")
    return target


def named_words(factory: str | None, config: str | Path | None) -> list[str]:
    """``replay``'s words that name a factory and a target file (absolute, so they run from anywhere)."""
    return [*(["--ledger", factory] if factory else []),
            *(["--config", str(Path(config).resolve())] if config else [])]


def unnamed_code(path: Path, unnamed: Sequence[tuple[str, str]]) -> SimulationError:
    """The error for a replay file that records a factory or target file (``(flag, value)``
    pairs) the command line did not name: it is the command that names them."""
    words = " ".join(f"{flag} {shlex.quote(value)}" for flag, value in unnamed)
    return SimulationError(f"{path} records code to run ({words}), which the kit runs only when the command line "
                           f"names it; if you trust it: aidememo-sim replay {shlex.quote(str(path))} {words}")


_JSON = (b"content-type", b"application/json")  # bytes: handed to the ledger as they are


class EmbeddedTarget:
    """The reference ledger (or a variant of it) in-process, on a manual clock.

    ``project`` names the project the actors are provisioned in; ``next_project`` gives a fresh,
    isolated project on the same ledger (what the state machines do between examples, instead
    of creating a database each time).
    """

    def __init__(self, actors: Sequence[str], *, seed: int, factory: LedgerFactory = reference_factory,
                 project: str = "project-sim") -> None:
        from aidememo_ref import ManualClock

        self.actors = tuple(actors)
        self.has_reader = True
        self._dir = tempfile.TemporaryDirectory(prefix="aidememo-sim-")
        self.clock = ManualClock(START_MS)
        self.scheduler: SeededScheduler | None = SeededScheduler(seed)
        self.ledger = factory(Path(self._dir.name) / "ledger.sqlite", clock=self.clock, scheduler=self.scheduler)
        self._headers: dict[str, list[tuple[bytes, bytes]]] = {}
        self._projects = 0
        self._provision(project)

    def _provision(self, project: str) -> None:
        self.project = project
        self._projects += 1
        for actor in (*self.actors, READER):
            token = f"token-{actor}-{self._projects}"
            self.ledger.provision(tenant_id="tenant-sim", project_id=project, actor_id=actor,
                                  token=token, role="reader" if actor == READER else "writer")
            self._headers[actor] = [(b"authorization", f"Bearer {token}".encode()), _JSON]

    def next_project(self) -> None:
        """Move to a fresh project on the same ledger: nothing written before is visible there."""
        self._provision(f"project-sim-{self._projects + 1}")

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        response = self.ledger.handle(method, path, self._headers[actor], body or b"")
        return Reply(response.status, response.body)

    def now_ms(self) -> int | None:
        return int(self.clock.now_ms())

    def set_clock(self, now_ms: int) -> int | None:
        self.clock.set(now_ms)
        return now_ms

    def close(self) -> None:
        self.ledger.close()
        self._dir.cleanup()


class HttpTarget:
    """A server by URL, with one bearer token per actor (at least two writers, ideally a reader)."""

    scheduler: SeededScheduler | None = None

    def __init__(self, url: str, project: str, tokens: Mapping[str, str], *, timeout_s: float = 10.0) -> None:
        writers = [a for a in tokens if a != READER]
        if len(writers) < 2:
            raise SimulationError("a URL target needs tokens of at least two writer actors (--token ACTOR=TOKEN)")
        self.actors = tuple(writers)
        self.project = project
        self.has_reader = READER in tokens
        self.url = url.rstrip("/")
        self.tokens: Mapping[str, str] = dict(tokens)
        self._timeout = timeout_s
        self._wire: Any = None
        self._has_clock: bool | None = None

    @property
    def timeout_s(self) -> float:
        return self._timeout

    def for_actors(self, actors: Sequence[str]) -> HttpTarget:
        """The same server and project with ``actors`` as its writers (a plan's, after shrinking);
        the reader stays."""
        if tuple(actors) == self.actors:
            return self
        tokens = {a: self.tokens[a] for a in (*actors, *([READER] if self.has_reader else []))}
        return HttpTarget(self.url, self.project, tokens, timeout_s=self._timeout)

    def _connection(self) -> Any:
        if self._wire is None:
            from conformance.http import Wire

            # No retries and no breaker: a lost answer is the simulator's to settle (it sends
            # the identical command again), and a flaky server is what it is looking for.
            self._wire = Wire(self.url, timeout_s=self._timeout, max_body_bytes=MAX_ANSWER_BYTES, breaker_limit=0)
        return self._wire

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        from conformance.errors import Indeterminate, TargetError

        if actor not in self.tokens:
            raise SimulationError(f"no token for actor {actor!r} on {self.url}")
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            exchange = self._connection().request(None, method, path, token=self.tokens[actor], content=body,
                                                  headers=headers, actor=actor)
        except (TargetError, Indeterminate) as exc:  # no answer, or 503 storage_failure: it may have run
            raise Lost(str(exc)) from exc
        return Reply(exchange.status, exchange.body)

    def _clock(self, advance_ms: int | None) -> int | None:
        if self._has_clock is False:
            return None
        body = None if advance_ms is None else json.dumps({"advance_ms": advance_ms}).encode()
        try:
            reply = self.request(self.actors[0], "GET" if body is None else "POST", "/__test__/clock", body)
        except Lost as exc:
            raise SimulationError(f"cannot reach {self.url}: {exc}") from exc
        self._has_clock = reply.status == 200
        if not self._has_clock:
            return None
        doc = reply.json()
        if not isinstance(doc, dict) or not isinstance(doc.get("now_ms"), int):
            raise SimulationError(f"{self.url}/__test__/clock answered 200 without a now_ms number")
        return int(doc["now_ms"])

    def now_ms(self) -> int | None:
        return self._clock(None)

    def set_clock(self, now_ms: int) -> int | None:
        now = self.now_ms()
        if now is None or now_ms <= now:
            # The extension only moves forward; a target already past the plan's time stays there.
            return now
        return self._clock(now_ms - now)

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
        self._wire = None  # a later run opens fresh connections


@contextmanager
def served_config(path: Path, log_dir: Path) -> Iterator[ServedServer | None]:
    """The target file's ``[serve]`` server (if it has one) started for the block, its output in
    ``log_dir/serve.log``; ``target_from_config`` then reaches it (``conformance.serve``). The
    block gets the server (None without ``[serve]``), which a fault campaign kills and restarts.

    Raises:
        SimulationError: a bad target file, or a server that did not come up (one line).
    """
    from conformance.errors import ConformanceError
    from conformance.installed import resolve_run
    from conformance.serve import serving
    from conformance.settings import SettingsInput

    try:
        _, settings = resolve_run(SettingsInput(flags={"config": str(path)}))
        with serving(settings, log_dir) as server:
            yield server
    except ConformanceError as exc:
        raise SimulationError(str(exc)) from None


def serves_apart(path: Path) -> bool:
    """Whether the target file's ``[serve]`` command (each of its ``[[serve]]`` commands) names
    both ``{port}`` and ``{dir}``, so that each shard of a hunt can run servers of its own (a file
    the loader cannot read: False, and its loader says what is wrong with it)."""
    import tomllib

    try:
        with path.open("rb") as file:
            serve = tomllib.load(file).get("serve")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    tables = serve if isinstance(serve, list) else [serve]

    def apart(table: object) -> bool:
        command = table.get("command") if isinstance(table, dict) else None
        if isinstance(command, list) and all(isinstance(w, str) for w in command):
            command = " ".join(command)
        return isinstance(command, str) and "{port}" in command and "{dir}" in command

    return bool(tables) and all(apart(table) for table in tables)


@contextmanager
def served_apart(path: Path, log_dir: Path) -> Iterator[tuple[ServedServer, dict[str, str]]]:
    """A server of the target file's ``[serve]`` command for the block alone, on a free port and
    a fresh data folder, with the environment under which ``target_from_config`` reaches it. Not
    through this process's environment: a hunt's worker may run shards side by side. With
    ``[[serve]]`` tables, the others too (``others``), each on a free port of its own and the
    same folder, started one at a time as ``conformance.serve.serving`` starts them.

    Raises:
        SimulationError: a bad target file, one without ``[serve]``, or a server that did not
            come up (one line).
    """
    import json
    import os
    import shutil
    import tempfile

    from conformance.errors import ConformanceError
    from conformance.installed import resolve_run
    from conformance.serve import DEFAULT_URL, SERVED_ENV, Served, ServedServer, free_port, serve_spec
    from conformance.settings import SettingsInput

    try:
        # Its own placeholders, not those of a server the environment names (AIDEMEMO_SERVED).
        mine = {name: value for name, value in os.environ.items() if name != SERVED_ENV}
        _, settings = resolve_run(SettingsInput(flags={"config": str(path)}, environ=mine))
        spec = serve_spec(settings)
        if spec is None:
            raise SimulationError(f"{path}: no [serve] command to start a server with")
        log_dir.mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(prefix="aidememo-serve-")
        url = settings.values.get("url") or DEFAULT_URL
        server = ServedServer(spec, url=str(url), served=Served(free_port(), folder), log_path=log_dir / "serve.log")
        server.others = tuple(ServedServer(other, url=str(url), served=Served(free_port(), folder),
                                           log_path=log_dir / f"serve-{i}.log") for i, other in enumerate(spec.others, 2))
        started: list[ServedServer] = []
        try:
            for each in (server, *server.others):  # one at a time: the first sets the data up alone
                started.append(each)
                each.start()
                each.wait_ready()
            environ = {**mine, SERVED_ENV: json.dumps({"config": str(path.resolve()), "port": server.served.port,
                                                             "dir": folder})}
            yield server, environ
        finally:
            for each in reversed(started):
                each.stop()
            shutil.rmtree(folder, ignore_errors=True)
    except ConformanceError as exc:
        raise SimulationError(str(exc)) from None
    except OSError as exc:
        raise SimulationError(f"cannot start a server of {path}: {exc.strerror or exc}") from None


def target_from_config(path: Path, actors: int | Sequence[str] = 3,
                       environ: Mapping[str, str] | None = None) -> HttpTarget | None:
    """The target a conformance target file names; None when it names the embedded reference.

    With a provisioning command, ``actors`` (a count, or the names a replayed plan uses) and the
    reader are provisioned into a fresh project with fresh tokens; with fixed tokens the file's
    actors are used. ``environ``: the environment the file's values are read under (default this
    process's; ``served_apart`` gives one naming its own server).

    Raises:
        SimulationError: for a bad file, a failed provisioning, or too few writer tokens.
    """
    from conformance.errors import ConfigError, Untestable
    from conformance.profiles.aidememo.settings import target_settings
    from conformance.provisioning import CommandProvisioner

    try:
        settings = target_settings(str(path), environ)
    except ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    if settings.url is None:
        return None
    if settings.provision_command is not None:
        project = f"sim-{secrets.token_hex(4)}"
        tokens: dict[str, str] = {}
        provisioner = CommandProvisioner(settings.provision_command)
        names = [*(actor_names(actors) if isinstance(actors, int) else actors), READER]
        try:
            for name in names:
                token = f"sim-{secrets.token_hex(16)}"
                tokens[name] = provisioner.provision({"tenant": SIM_TENANT, "project": project, "actor": name,
                                                      "role": "reader" if name == READER else "writer"}, token)
        except Untestable as exc:
            raise SimulationError(str(exc)) from exc
        finally:
            provisioner.close()  # its token files hold live credentials of the target
        return HttpTarget(settings.url, project, tokens, timeout_s=settings.timeout_s)
    by_project: dict[str, dict[str, str]] = {}
    for fixed in settings.fixed_tokens:
        # The reader's actor id never matters to the model (it is never a participant), so it
        # goes under the simulator's observer name.
        name = READER if fixed["role"] == "reader" else fixed["actor"]
        by_project.setdefault(fixed["project"], {}).setdefault(name, fixed.token)
    for project, tokens in by_project.items():
        if sum(name != READER for name in tokens) >= 2:
            return HttpTarget(settings.url, project, tokens, timeout_s=settings.timeout_s)
    raise SimulationError(f"{path}: the simulator needs at least two writer tokens in one project")
