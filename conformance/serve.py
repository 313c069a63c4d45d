"""The target's server, started by the kit: ``[serve] command = "..."`` in a target file.

``ServedServer`` owns one server process's lifecycle, and nothing else: ``start`` runs the
command (in the target file's directory, split into words, no shell, in a process group of
its own, its output appended to a log file), ``wait_ready`` polls ``/health`` until the server
answers, ``stop`` sends SIGTERM to the group and SIGKILL after the grace, ``kill`` is SIGKILL
of the group at once (a crash), ``pause``/``resume`` are SIGSTOP/SIGCONT, ``restart`` runs the
same command again on the same port and data folder. Fault campaigns build on these verbs.

``{port}`` (a free loopback port) and ``{dir}`` (a data folder the kit made for the run) are
filled into the command, the target's ``url`` (default ``http://127.0.0.1:{port}``) and its
provisioning command. ``[[serve]]`` tables, one per server, start several servers on one
database (say two PostgreSQL-backed servers): each gets a port of its own and the one data
folder; the url and the provisioning command name the first, which the suite and ``diff``
reach, and a fault campaign balances its requests over all of them. ``serving`` is what the commands use: start, wait, hand the values to the
run's processes through ``AIDEMEMO_SERVED`` (so xdist workers and the simulator's shards see
the same server), then stop.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from refkit.jsonvalue import loads
from conformance.errors import ConfigError, ConformanceError
from conformance.settings import Layer, ParseContext, Setting, Settings, parse_seconds

__all__ = ["SERVE", "SERVED_ENV", "ServeError", "ServeSpec", "ServedServer", "Served", "apply_served", "fill",
           "free_port", "serve_spec", "served_of", "serving"]

SERVED_ENV = "AIDEMEMO_SERVED"  # {"config": abs path, "port": N, "dir": path}: a parent started the file's server
DEFAULT_URL = "http://127.0.0.1:{port}"
LOG_NAME = "serve.log"
_HEALTH_BYTES = 64 * 1024  # the /health answer kept for the reports; more is not a health answer
_TAIL_BYTES = 4096


class ServeError(ConformanceError):
    """The server did not start, or did not answer ``/health`` in time (one line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSpec:
    """A target file's ``[serve]`` table."""

    command: tuple[str, ...]  # words, placeholders not yet filled
    base_dir: Path  # where the command runs: the target file's directory
    ready_timeout_s: float = 30.0
    stop_grace_s: float = 10.0
    others: tuple[ServeSpec, ...] = ()  # the later tables of a [[serve]] list, on the same data


@dataclass(frozen=True, slots=True)
class Served:
    """The values a started server's placeholders took."""

    port: int
    dir: str


def fill(text: str, served: Served, *, quote: bool = False) -> str:
    """``text`` with ``{port}`` and ``{dir}`` filled in (``quote``: the folder as one shell word,
    for templates that are split into words later). Other braces are left alone."""
    folder = shlex.quote(served.dir) if quote else served.dir
    return text.replace("{port}", str(served.port)).replace("{dir}", folder)


def _parse_serve(value: object, where: str, context: ParseContext) -> ServeSpec:
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where}: expected a table [serve], or [[serve]] tables, with a command")
        specs = [_parse_one(table, f"{where}[{i}]", context) for i, table in enumerate(value)]
        return replace(specs[0], others=tuple(specs[1:]))
    return _parse_one(value, where, context)


def _parse_one(value: object, where: str, context: ParseContext) -> ServeSpec:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table [serve] with a command")
    unknown = sorted(set(value) - {"command", "ready_timeout", "stop_grace"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
    if context.base_dir is None:
        raise ConfigError(f"{where}: only a target file can say how to start its server")
    command = value.get("command")
    if isinstance(command, list) and command and all(isinstance(word, str) and word for word in command):
        words = tuple(command)
    elif isinstance(command, str) and command.strip():
        try:
            words = tuple(shlex.split(command))
        except ValueError as exc:
            raise ConfigError(f"{where}.command: {exc}") from None
    else:
        raise ConfigError(f"{where}.command: expected a command line (a string or an array of strings)")
    default = ServeSpec(command=words, base_dir=context.base_dir)

    def seconds(key: str, otherwise: float) -> float:
        return parse_seconds(value[key], f"{where}.{key}", context) if key in value else otherwise

    return replace(default, ready_timeout_s=seconds("ready_timeout", default.ready_timeout_s),
                   stop_grace_s=seconds("stop_grace", default.stop_grace_s))


SERVE: Setting[ServeSpec | None] = Setting(
    name="serve", parse=_parse_serve, default=None, flag=None, env=None, ini=None, file_key="serve",
    help="how the kit starts the target's server ([serve] command, ready_timeout, stop_grace; [[serve]] tables: "
         "several servers on one database)")


def serve_spec(settings: Settings) -> ServeSpec | None:
    """The ``[serve]`` table the run must start, if any: a URL given by flag or environment
    overrides it (the user points the run at a server of their own; nothing is started)."""
    spec = settings.values.get("serve")
    if not isinstance(spec, ServeSpec) or settings.target_file is None:
        return None
    if "url" in settings.origins and settings.origins["url"][0] in (Layer.FLAG, Layer.ENV):
        return None
    return spec


def served_of(settings: Settings, environ: Mapping[str, str]) -> Served | None:
    """The server a parent process started for this run's target file, if any."""
    if settings.target_file is None or serve_spec(settings) is None:
        return None
    try:
        doc = json.loads(environ.get(SERVED_ENV, ""))
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("config") != str(Path(settings.target_file.path).resolve()):
        return None
    port, folder = doc.get("port"), doc.get("dir")
    if not isinstance(port, int) or not isinstance(folder, str):
        return None
    return Served(port, folder)


def apply_served(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """With ``[serve]``: the URL defaults to the served loopback port, and once the server is
    started (``AIDEMEMO_SERVED``) the file's values have their placeholders filled.

    Raises:
        ConfigError: ``[serve]`` for a profile whose target has no URL.
    """
    spec = settings[SERVE] if "serve" in settings.values else None
    if spec is None:
        return settings
    if "url" not in settings.values:
        raise ConfigError(f"{settings.where(SERVE)}: this profile's target is not a server with a URL")
    values = dict(settings.values)
    if values["url"] is None:
        values["url"] = DEFAULT_URL
    served = served_of(settings, environ)
    if served is not None:
        for name, value in values.items():
            if isinstance(value, str) and (name == "url" or settings.origins[name][0] is Layer.FILE):
                values[name] = fill(value, served, quote=name != "url")
    return replace(settings, values=values)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServedServer:
    """One server process started from a ``[serve]`` command, and its lifecycle (see the module docstring)."""

    def __init__(self, spec: ServeSpec, *, url: str, served: Served, log_path: Path) -> None:
        self.spec = spec
        self.served = served
        self.url = fill(url, served).rstrip("/")
        self.argv = [fill(word, served) for word in spec.command]
        self.log_path = log_path
        self.health: object = None  # the last /health answer (JSON, or its text)
        self.process: subprocess.Popen[bytes] | None = None
        self.others: tuple[ServedServer, ...] = ()  # a [[serve]] list's later servers (on the first's)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Run the command in its own process group, its output appended to the log file.

        Raises:
            ServeError: the command could not be run at all.
        """
        # Appended, never through a link: a restart adds to the same log.
        try:
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as exc:
            raise ServeError(f"cannot write the server's log {self.log_path}: {exc.strerror or exc}") from None
        try:
            self.process = subprocess.Popen(self.argv, cwd=self.spec.base_dir, stdin=subprocess.DEVNULL, stdout=fd,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise ServeError(f"the target's server ({self.argv[0]}) could not start: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def wait_ready(self) -> object:
        """Poll ``/health`` until it answers 200; returns the answer (JSON, or its text).

        Raises:
            ServeError: the server exited, or did not answer within the ready timeout (it is then
                killed); the message names its last output.
        """
        import httpx

        deadline = time.monotonic() + self.spec.ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                if not self.running:
                    code = self.process.returncode if self.process is not None else None
                    raise ServeError(f"the target's server exited with status {code} before answering /health; "
                                     f"{self._last_words()}")
                answer = self._probe(client)
                if answer is not None:
                    self.health = answer
                    return answer
                if time.monotonic() >= deadline:
                    self.kill()
                    raise ServeError(f"the target's server did not answer {self.url}/health within "
                                     f"{self.spec.ready_timeout_s:g} s; {self._last_words()}")
                time.sleep(0.05)

    def _probe(self, client: Any) -> object:
        import httpx

        try:
            with client.stream("GET", f"{self.url}/health") as response:
                if response.status_code != 200:
                    return None
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > _HEALTH_BYTES:
                        return {"oversized": True}
        except httpx.HTTPError:
            return None
        text = body.decode("utf-8", "replace")
        try:
            return loads(text)
        except ValueError:
            return text

    def _last_words(self) -> str:
        """The server's last line of output, for a one-line error."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - _TAIL_BYTES))
                lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        last = lines[-1][:300] if lines else "no output"
        return f"its last output: {last} (all of it: {self.log_path})"

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)  # the group outlives its leader while a child runs
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> int | None:
        """SIGTERM to the group; SIGKILL to the group once the grace is over. Returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self._signal_group(signal.SIGCONT)  # a paused server cannot handle its SIGTERM
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=self.spec.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)  # what is left of the group, the leader included
        return self.process.wait()

    def kill(self) -> None:
        """SIGKILL of the whole group at once: a crash."""
        self._signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP to the group: the server holds its connections and answers nothing."""
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_group(signal.SIGCONT)

    def restart(self) -> object:
        """Stop it if it runs, then the same command on the same port and data folder; waits until ready."""
        self.stop()
        self.start()
        return self.wait_ready()

    def __enter__(self) -> ServedServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


@contextmanager
def serving(settings: Settings, log_dir: Path, *, announce: bool = True) -> Iterator[ServedServer | None]:
    """Start the target file's server (if it has ``[serve]`` and no parent started it), wait until
    it answers, make it this process tree's (``AIDEMEMO_SERVED``), and stop it on the way out.

    Raises:
        ServeError: it did not come up (one line, naming its last output).
    """
    spec = serve_spec(settings)
    if spec is None or settings.target_file is None or served_of(settings, os.environ) is not None:
        yield None
        return
    url = settings.values.get("url") or DEFAULT_URL
    assert isinstance(url, str)
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot make the folder of the server's log {log_dir}: {exc.strerror or exc}") from None
    folder = tempfile.mkdtemp(prefix="aidememo-serve-")
    server = ServedServer(spec, url=url, served=Served(free_port(), folder), log_path=log_dir / LOG_NAME)
    # The others of a [[serve]] list: the url's form with ports of their own, the first's data, a log each.
    server.others = tuple(ServedServer(other, url=url, served=Served(free_port(), folder),
                                       log_path=log_dir / f"serve-{i}.log") for i, other in enumerate(spec.others, 2))
    before = os.environ.get(SERVED_ENV)
    started: list[ServedServer] = []
    try:
        for each in (server, *server.others):  # one at a time: the first sets the database up alone
            started.append(each)
            each.start()
            each.wait_ready()
            if announce:
                sys.stderr.write(f"aidememo: started the target's server at {each.url} "
                                 f"(pid {each.process.pid if each.process else '?'}; its output: {each.log_path})\n")
        os.environ[SERVED_ENV] = json.dumps({"config": str(Path(settings.target_file.path).resolve()),
                                             "port": server.served.port, "dir": folder})
        yield server
    finally:
        if before is None:
            os.environ.pop(SERVED_ENV, None)
        else:
            os.environ[SERVED_ENV] = before
        for each in reversed(started):
            each.stop()
        shutil.rmtree(folder, ignore_errors=True)
