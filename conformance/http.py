"""Bounded HTTP to one target: the only place HTTP profiles touch the network.

``Wire`` records each exchange on the check's ``Transcript``, stops reading a body beyond
``max_body_bytes``, enforces an overall deadline per request (a watchdog shuts the socket, so a
server trickling a byte per read cannot stretch it), maps transport failures to
``TargetError`` and retries only what the profile says is retryable (AideMemo's
``503 storage_failure``, ERRATA 7). A circuit breaker makes a dead or hanging target fail fast
after a few consecutive transport failures, so a hostile server cannot stretch a run to
(checks x timeout).
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from conformance.answers import parse
from conformance.errors import Indeterminate, TargetError
from conformance.transcript import Transcript, kept, redact_headers, shown_text
from refkit.jsonvalue import loads

__all__ = ["Exchange", "Wire", "health_answer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request and its answer (``status`` 0 when no answer came; ``error`` then says why)."""

    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    status: int
    response_headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    error: str | None = None
    truncated: bool = False
    actor: str | None = None  # the check's name for the actor whose credential was sent
    # Once settled (``settled``): the whole lengths of the bodies cut to what a report shows.
    body_size: int | None = None
    request_body_size: int | None = None
    # What the check expected of this answer, filled in by the helpers that judge it
    # (``expect_status``: "HTTP 200"), for the reports and the replay script.
    expected: list[str] = field(default_factory=list, compare=False, repr=False)
    # The concurrency group the request was sent in (``conformance.race``), for reproductions.
    group: list[int] = field(default_factory=list, compare=False, repr=False)
    lane: list[int] = field(default_factory=list, compare=False, repr=False)  # its lane in the group, if shared
    # [True]: a replay sends it even when it stops before it (the test clock's release after a hold).
    cleanup: list[bool] = field(default_factory=list, compare=False, repr=False)

    @property
    def answered(self) -> bool:
        return self.status != 0

    def expect(self, what: str) -> str:
        """Note what the check expects of this answer; returns ``what``."""
        if what not in self.expected:
            self.expected.append(what)
        return what

    def json(self) -> Any:
        """The answer as JSON, read through ``conformance.answers``: a body that is not JSON, and
        a subscript of a field the answer lacks, raise ``ShapeError`` (a departure of the target)."""
        return parse(self.body, f"{self.method} {self.url} answered {self.status}", self)

    def error_code(self) -> str | None:
        """The ``error.code`` string of a JSON error body, or None when the body has no such shape."""
        try:
            data = loads(self.body)
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            code = data["error"].get("code")
            return code if isinstance(code, str) else None
        return None

    def settled(self) -> Exchange:
        """This exchange as its report shows it: the answer's body cut at ``SHOWN_BYTES``, and a
        request body too long for a replay script to carry whole cut the same, each with its length."""
        body, body_size = kept(self.body, self.body_size)
        request_body, request_size = self.request_body, self.request_body_size
        if request_size is None and len(request_body) > REPLAYED_BODY_BYTES:
            request_body, request_size = kept(request_body, None)
        if body_size == self.body_size and request_size == self.request_body_size:
            return self
        return replace(self, body=body, body_size=body_size, request_body=request_body,
                       request_body_size=request_size)

    def header(self, name: str) -> str | None:
        for key, value in self.response_headers:
            if key.lower() == name.lower():
                return value
        return None

    def to_dict(self) -> dict[str, object]:
        request_headers = redact_headers(list(self.request_headers), self.actor)
        response_headers = redact_headers(list(self.response_headers))
        status = self.status or f"no answer ({self.error})"
        response_body = shown_text(self.body, self.body_size) + (
            " [truncated by the size bound]" if self.truncated else "")
        request_shown = shown_text(self.request_body, self.request_body_size)
        request_text = "\n".join(f"{k}: {v}" for k, v in request_headers)
        response_text = "\n".join(f"{k}: {v}" for k, v in response_headers)
        return {
            "kind": "http",
            "summary": f"{self.method} {self.url} -> {status}",
            "request": f"{self.method} {self.url}\n{request_text}\n\n{request_shown}",
            "response": f"HTTP {status}\n{response_text}\n\n{response_body}",
            "method": self.method,
            "url": self.url,
            "actor": self.actor,
            "request_headers": [list(pair) for pair in request_headers],
            "request_body": request_shown,
            "status": self.status,
            "response_headers": [list(pair) for pair in response_headers],
            "response_body": response_body,
            "error": self.error,
            "expected": "; ".join(self.expected),
            **({"group": self.group[0]} if self.group else {}),
            **({"lane": self.lane[0]} if self.lane else {}),
            **({"cleanup": True} if self.cleanup else {}),
            # For the replay script: every header the check set (credentials redacted by the
            # transcript), and the body whole when it is text of a size a script can carry.
            "replay_headers": [[k, v] for k, v in self.request_headers],
            **({"request_body_exact": self.request_body.decode("utf-8")}
               if self.request_body_size is None and _whole_text(self.request_body) else {}),
        }


REPLAYED_BODY_BYTES = 96 * 1024  # a request body beyond this is not carried into a replay script


def _whole_text(body: bytes) -> bool:
    if len(body) > REPLAYED_BODY_BYTES:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _Deadlines:
    """One thread per process that fires the watchdogs of requests outliving their deadline.

    A timer thread per request cost a thread start (and, on a loaded machine, a wait for it to be
    scheduled) on every request of a served run: ``bench/suite.py`` prints the wire's CPU and
    wall per served request. Entries are kept in deadline order; a finished request's entry is
    dropped when it reaches the front."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread does not survive a fork

    def _reset(self) -> None:
        self._lock = threading.Condition()
        self._queue: list[tuple[float, int, _Watchdog]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, watch: _Watchdog) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="conformance-deadlines", daemon=True)
                self._thread.start()
            heapq.heappush(self._queue, (time.monotonic() + watch.deadline_s, next(self._order), watch))
            if self._queue[0][2] is watch:
                self._lock.notify()

    def _run(self) -> None:
        lock, queue = self._lock, self._queue
        with lock:
            while True:
                now = time.monotonic()
                while queue and (queue[0][2].finished or queue[0][0] <= now):
                    _, _, watch = heapq.heappop(queue)
                    if not watch.finished:
                        watch._fire()
                lock.wait(queue[0][0] - now if queue else None)


class _Watchdog:
    """Shuts a request's socket when the request outlives its overall deadline."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self.expired = False
        self.finished = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            with self._lock:
                self._sock = info["return_value"].get_extra_info("socket")
                if self.expired:
                    self._shut()

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> _Watchdog:
        _DEADLINES.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished = True


class _NoWatch(_Watchdog):
    """The watchdog of an in-process request: never fires, never queued."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def __enter__(self) -> _Watchdog:
        return self


_NO_WATCH = _NoWatch()
_DEADLINES = _Deadlines()


class _Breaker:
    """Counts consecutive transport failures across the whole run (shared by all checks)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.failures = 0
        self.lock = threading.Lock()

    def open(self) -> bool:
        return self.limit > 0 and self.failures >= self.limit

    def record(self, ok: bool) -> None:
        with self.lock:
            self.failures = 0 if ok else self.failures + 1


class Wire:
    """Bounded HTTP to one target; shared by all checks of a worker."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        max_body_bytes: int,
        retryable: Callable[[Exchange], str | None] | None = None,
        retries: int = 3,
        breaker_limit: int = 3,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """
        Args:
            retryable: names why an answer is indeterminate and worth resending (None: it is not);
                a profile's rule, e.g. AideMemo's ``503 storage_failure``.
            transport: an in-process transport (an embedded reference's) instead of a socket to
                ``base_url``: no framing of its own, so only for checks whose answers do not
                depend on HTTP's bytes; the deadline watchdog has no socket to shut there.
        """
        self.base_url = base_url.rstrip("/")
        self.max_body_bytes = max_body_bytes
        self.retryable = retryable
        self.retries = retries
        self.breaker = _Breaker(breaker_limit)
        # No pooling across a reset: a hostile server must not poison later checks' connections.
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            follow_redirects=False,
            trust_env=False,
            # Raw bytes are what we bound; a compressed answer could expand past the bound.
            headers={"Accept-Encoding": "identity"},
            # httpx writes headers and body separately; without TCP_NODELAY Nagle waits for the
            # server's delayed ACK and every POST costs ~40 ms (ERRATA 9).
            # A fresh connection per request: the deadline watchdog must know the socket it may
            # shut, and a connection poisoned by a hostile answer must not serve the next check.
            transport=transport or httpx.HTTPTransport(
                # A plain-HTTP target never meets TLS (redirects are not followed): no CA bundle to load.
                verify=not self.base_url.startswith("http://"),
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                limits=httpx.Limits(max_keepalive_connections=0),
            ),
        )
        self.deadline_s = timeout_s
        self._in_process = transport is not None

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        transcript: Transcript | None,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json_body: object = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, object] | list[tuple[str, object]] | None = None,
        raw_query: str | None = None,
        actor: str | None = None,
    ) -> Exchange:
        """Send one request, resending only answers the profile calls retryable.

        Raises:
            TargetError: no well-formed answer within the bounds.
            Indeterminate: every attempt got a retryable answer.
        """
        send_headers: dict[str, str] = {}
        if token is not None:
            send_headers["Authorization"] = f"Bearer {token}"
        body = content
        if body is None and json_body is not None:
            body = json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            send_headers["Content-Type"] = "application/json"
        send_headers.update(headers or {})
        url = self.base_url + path
        if raw_query is not None:
            url += "?" + raw_query
        elif params:
            items = params.items() if isinstance(params, dict) else params
            url = str(httpx.URL(url, params=[(key, _query_value(value)) for key, value in items if value is not None]))
        attempts = self.retries + 1 if self.retryable is not None else 1
        why: str | None = None
        for attempt in range(attempts):
            exchange, failure = self._send_once(method, url, send_headers, body or b"", actor)
            if transcript is not None:
                transcript.record(exchange)
            if failure is not None:
                raise failure
            why = self.retryable(exchange) if self.retryable is not None else None
            if why is None:
                return exchange
            if attempt + 1 < attempts:
                time.sleep(0.05 * (attempt + 1))  # brief backoff; servers queue writes for about a second
        raise Indeterminate(f"{method} {url}: {attempts} answers of {why}")

    def _send_once(
        self, method: str, url: str, headers: dict[str, str], body: bytes, actor: str | None
    ) -> tuple[Exchange, TargetError | None]:
        request_headers = tuple(headers.items())
        base: dict[str, Any] = {"method": method, "url": url, "request_headers": request_headers, "request_body": body,
                                "actor": actor}
        if self.breaker.open():
            detail = f"not sent: the target failed {self.breaker.failures} requests in a row"
            return Exchange(**base, status=0, error=detail), TargetError(f"{method} {url}: {detail}")
        # httpx timeouts bound each read, not the answer: a server trickling a byte per read would
        # hold a request for hours. A watchdog shuts the socket once the whole request overruns.
        # In-process, there is no socket to shut and no server to trickle: no watchdog thread.
        watch = _Watchdog(self.deadline_s) if self._in_process is False else _NO_WATCH
        try:
            request = self._client.build_request(method, url, headers=headers, content=body or None,
                                                 extensions={"trace": watch.trace})
            with watch:
                response = self._client.send(request, stream=True)
                try:
                    chunks: list[bytes] = []
                    size = 0
                    truncated = False
                    # An in-process transport hands its whole body over at once (already read).
                    raw = [response.content] if response.is_stream_consumed else response.iter_raw()
                    for chunk in raw:
                        size += len(chunk)
                        if size > self.max_body_bytes:
                            truncated = True
                            break
                        chunks.append(chunk)
                finally:
                    response.close()
        except httpx.HTTPError as exc:
            self.breaker.record(ok=False)
            detail = f"{type(exc).__name__}: {exc or 'no detail'}"
            if watch.expired:
                detail = f"no complete answer within the {self.deadline_s:g} s deadline ({detail})"
            return Exchange(**base, status=0, error=detail), TargetError(f"{method} {url}: {detail}")
        self.breaker.record(ok=True)
        exchange = Exchange(
            **base,
            status=response.status_code,
            response_headers=tuple(response.headers.items()),
            body=b"".join(chunks),
            truncated=truncated,
        )
        if truncated:
            return exchange, TargetError(f"{method} {url}: response body exceeds {self.max_body_bytes} bytes")
        return exchange, None


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_HEALTH_SHOWN = 2000  # characters of a /health answer that is not JSON kept for the reports


def health_answer(wire: Wire) -> object:
    """What the target answers to ``GET /health``, for the reports to name: its JSON, else its text
    (cut), else what went wrong. Never raises: a report names a missing answer, it does not fail on it."""
    from conformance.errors import ConformanceError

    failures = wire.breaker.failures
    try:
        exchange = wire.request(None, "GET", "/health")
    except ConformanceError as exc:
        return {"no_answer": str(exc)}
    finally:
        wire.breaker.failures = failures  # a report's provenance read is no step of the run: it never trips it
    try:
        document = loads(exchange.body)
    except ValueError:
        document = exchange.body.decode("utf-8", "replace")
    if len(json.dumps(document)) > _HEALTH_SHOWN:  # a report names the answer, it does not archive it
        document = json.dumps(document)[:_HEALTH_SHOWN] + " [cut]"
    return document if exchange.status == 200 else {"status_code": exchange.status, "body": document}

