"""The durable send outbox (upstream ``cmd/remote_handoff/send_operation.rs``), same files and rules.

A transport can fail after the server committed a handoff but before the sender saw the receipt.
So each send reserves one immutable operation per (profile, URL, project, profile generation,
receiver, session, source), keyed by that *intent*: the same payload reuses the same operation,
handoff and context ids, and a replay finds the server's records instead of making new ones.
Layout under ``~/.aidememo/remote-outbox/send/``::

    <intent_key>/operation.json   profile, project, bound actor, payload hash, the three ids
    <intent_key>/status.json      state (queued|failed|conflict|committed), last_error
    <intent_key>/replay.json      what a replay publishes (session, source, topic, route, packet)
    <intent_key>/committed        marker file holding the operation id
    <intent_key>.lock/            the reservation lock (5 s wait, stale after 30 s)
    <intent_key>.done.<op_id>/    a committed reservation archived by a changed send

No token is ever written here.

This is where upstream's code and its docs disagree: ``docs/HANDOFF.md`` (and the handoff
guide) say a new send is not yet deduplicated, while this code (at e2a15d4) deduplicates it.
The kit follows the code.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aidememo_wire.ids import id_problem, stable_operation_id
from aidememo_cli._local._ids import new_ulid

from ._errors import internal, refusal
from ._profiles import RemoteProfile

__all__ = [
    "Outbox",
    "QueuedSend",
    "Reservation",
    "SendPlan",
    "SendState",
    "failure_state",
    "outbox_dir",
    "send_keys",
]

LOCK_TIMEOUT_S = 5.0
STALE_LOCK_AFTER_S = 30.0
_CONFLICT_WORDS = ("remote server returned HTTP 409", "different evidence", "profile identity changed",
                   "different authenticated actor", "already bound to a different")


class SendState(StrEnum):
    QUEUED = "queued"
    FAILED = "failed"
    CONFLICT = "conflict"
    COMMITTED = "committed"


def failure_state(message: str) -> SendState:
    """A failure is a ``conflict`` (replaying will not help) or merely ``failed`` (try again)."""
    return SendState.CONFLICT if any(word in message for word in _CONFLICT_WORDS) else SendState.FAILED


@dataclass(frozen=True, slots=True, kw_only=True)
class SendPlan:
    """Everything a replay publishes (``replay.json``)."""

    session_id: str
    source_id: str | None
    topic: str
    to_actor: str
    focus: str | None
    done_when: str | None
    content: str

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "source_id": self.source_id, "topic": self.topic,
                "to_actor": self.to_actor, "focus": self.focus, "done_when": self.done_when, "content": self.content}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SendPlan:
        return cls(session_id=data["session_id"], source_id=data.get("source_id"), topic=data["topic"],
                   to_actor=data["to_actor"], focus=data.get("focus"), done_when=data.get("done_when"),
                   content=data["content"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    operation_id: str
    handoff_id: str
    context_id: str
    actor_id: str | None
    reused_pending: bool  # upstream reports this as the send's `recovered`
    already_committed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedSend:
    """One uncommitted reservation, as ``replica outbox`` lists it."""

    intent_key: str
    profile_name: str
    profile_url: str
    profile_added_at: int
    project_id: str
    actor_id: str | None
    operation_id: str
    handoff_id: str
    context_id: str
    created_at_ms: int
    state: SendState
    last_error: str | None
    plan: SendPlan

    def to_json(self, state: SendState, last_error: str | None, receipt: object = None) -> dict[str, Any]:
        return {
            "profile_name": self.profile_name, "profile_url": self.profile_url,
            "profile_added_at": self.profile_added_at, "project_id": self.project_id, "actor_id": self.actor_id,
            "operation_id": self.operation_id, "handoff_id": self.handoff_id, "context_id": self.context_id,
            "session_id": self.plan.session_id, "source_id": self.plan.source_id, "to_actor": self.plan.to_actor,
            "focus": self.plan.focus, "done_when": self.plan.done_when,
            "bytes": len(self.plan.content.encode("utf-8")), "created_at_ms": self.created_at_ms,
            "state": str(state), "last_error": last_error, "receipt": receipt,
        }


def send_keys(profile: RemoteProfile, to_actor: str, session_id: str, source_id: str | None, focus: str | None,
              done_when: str | None, body: str) -> tuple[str, str]:
    """The intent key (which reservation) and the payload hash (is it the same send)."""
    route = [profile.name, profile.url, profile.project_id, str(profile.added_at), to_actor, session_id,
             source_id or ""]
    return (stable_operation_id("send_intent_v2", route),
            stable_operation_id("send_payload_v2", [*route, focus or "", done_when or "", body]))


def outbox_dir(env: Mapping[str, str]) -> str:
    home = env.get("HOME")
    if not home:
        raise refusal("HOME env var not set — can't resolve the remote outbox directory")
    return os.path.join(home, ".aidememo", "remote-outbox", "send")


def _io(action: str, exc: OSError) -> Exception:
    return internal(f"{action}: {exc.strerror or exc}")


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise _io("read remote send outbox record", exc) from exc
    except ValueError as exc:
        raise internal(f"decode remote send outbox record {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise internal(f"decode remote send outbox record {path}: not an object")
    return data


def _write_new(path: str, data: Mapping[str, Any]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=2, ensure_ascii=False))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise _io("create remote send outbox record", exc) from exc


def _replace(path: str, data: Mapping[str, Any]) -> None:
    temporary = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{new_ulid(int(time.time() * 1000))}.tmp")
    _write_new(temporary, data)
    try:
        os.replace(temporary, path)
    except OSError as exc:
        raise _io("replace remote send outbox record", exc) from exc


def _generated(prefix: str, now_ms: int) -> str:
    return f"{prefix}_{new_ulid(now_ms)}"


class _Lock:
    """``<intent_key>.lock`` as a directory: creating it is atomic on every filesystem."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> _Lock:
        started = time.monotonic()
        while True:
            try:
                os.mkdir(self.path)
                return self
            except FileExistsError:
                try:
                    stale = time.time() - os.stat(self.path).st_mtime >= STALE_LOCK_AFTER_S
                except FileNotFoundError:
                    continue
                if stale:
                    try:
                        os.rmdir(self.path)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        pass
                    else:
                        continue
                if time.monotonic() - started >= LOCK_TIMEOUT_S:
                    raise internal(f"timed out waiting for remote send reservation lock {self.path}") from None
                time.sleep(0.025)
            except OSError as exc:
                raise _io("create remote send reservation lock", exc) from exc

    def __exit__(self, *exc: object) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def _check_key(intent_key: str) -> None:
    if not intent_key or len(intent_key) > 128 or not all(ch.isascii() and (ch.isalnum() or ch in "-_")
                                                           for ch in intent_key):
        raise internal("remote send intent key is not filesystem-safe")


class Outbox:
    """The reservations of one user (one ``HOME``)."""

    def __init__(self, directory: str, clock: Callable[[], int]) -> None:
        self.directory = directory
        self._clock = clock
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise _io(f"create remote outbox directory {directory}", exc) from exc

    def _lock(self, intent_key: str) -> _Lock:
        _check_key(intent_key)
        return _Lock(os.path.join(self.directory, f"{intent_key}.lock"))

    def _path(self, intent_key: str, name: str = "") -> str:
        return os.path.join(self.directory, intent_key, name) if name else os.path.join(self.directory, intent_key)

    @staticmethod
    def _same_profile(operation: Mapping[str, Any], profile: RemoteProfile) -> None:
        matches = (operation.get("profile_name") == profile.name and operation.get("project_id") == profile.project_id
                   and operation.get("profile_url", "") in ("", profile.url)
                   and operation.get("profile_added_at", 0) in (0, profile.added_at))
        if not matches:
            raise refusal("remote send operation profile identity changed; inspect the outbox before publishing")

    def _operation(self, intent_key: str, operation_id: str, action: str) -> dict[str, Any]:
        operation = _read(self._path(intent_key, "operation.json"))
        if operation.get("operation_id") != operation_id:
            raise internal(f"remote send reservation changed before {action}")
        return operation

    def reserve(self, intent_key: str, payload_hash: str, profile: RemoteProfile) -> Reservation:
        """The existing operation for this intent and payload, or a new one."""
        with self._lock(intent_key):
            directory = self._path(intent_key)
            if os.path.isdir(directory):
                if not os.path.exists(self._path(intent_key, "operation.json")):
                    shutil.rmtree(directory)  # a reservation that died before it was written
                else:
                    existing = _read(self._path(intent_key, "operation.json"))
                    self._same_profile(existing, profile)
                    committed = os.path.exists(self._path(intent_key, "committed"))
                    if existing.get("payload_hash") == payload_hash:
                        return Reservation(operation_id=existing["operation_id"], handoff_id=existing["handoff_id"],
                                           context_id=existing["context_id"], actor_id=existing.get("actor_id"),
                                           reused_pending=True, already_committed=committed)
                    if not committed:
                        raise refusal(
                            "a pending remote send for this session route has different evidence; retry the original"
                            " request or inspect the sender outbox before sending a changed assignment")
                    archive = os.path.join(self.directory, f"{intent_key}.done.{existing['operation_id']}")
                    try:
                        if os.path.exists(archive):
                            shutil.rmtree(archive)
                        os.rename(directory, archive)
                    except OSError as exc:
                        raise _io("archive completed remote send reservation", exc) from exc
            try:
                os.mkdir(directory)
            except OSError as exc:
                raise _io("create remote send reservation", exc) from exc
            now = self._clock()
            operation: dict[str, Any] = {
                "profile_name": profile.name, "profile_url": profile.url, "profile_added_at": profile.added_at,
                "project_id": profile.project_id, "actor_id": None, "payload_hash": payload_hash,
                "operation_id": _generated("operation", now), "handoff_id": _generated("handoff", now),
                "context_id": _generated("context", now), "created_at_ms": now,
            }
            _write_new(self._path(intent_key, "operation.json"), operation)
            _write_new(self._path(intent_key, "status.json"), self._status(SendState.QUEUED, None))
            return Reservation(operation_id=operation["operation_id"], handoff_id=operation["handoff_id"],
                               context_id=operation["context_id"], actor_id=None, reused_pending=False,
                               already_committed=False)

    def store_plan(self, intent_key: str, operation_id: str, plan: SendPlan) -> None:
        with self._lock(intent_key):
            self._operation(intent_key, operation_id, "replay data was stored")
            path = self._path(intent_key, "replay.json")
            if os.path.exists(path):
                if SendPlan.from_json(_read(path)) == plan:
                    return
                raise refusal("remote send replay data changed for an existing operation")
            _write_new(path, plan.to_json())

    def bind_actor(self, intent_key: str, operation_id: str, profile: RemoteProfile, actor_id: str) -> None:
        """Pin the operation to the bearer's actor; a later bearer of another actor is refused."""
        if id_problem(actor_id) is not None:
            raise refusal("authenticated actor is not a valid remote identifier")
        with self._lock(intent_key):
            operation = self._operation(intent_key, operation_id, "actor identity was bound")
            self._same_profile(operation, profile)
            bound = operation.get("actor_id")
            if bound is not None and bound != actor_id:
                raise refusal("remote send operation is already bound to a different authenticated actor")
            changed = bound != actor_id or not operation.get("profile_url") or not operation.get("profile_added_at")
            operation["actor_id"] = actor_id
            operation["profile_url"] = operation.get("profile_url") or profile.url
            operation["profile_added_at"] = operation.get("profile_added_at") or profile.added_at
            if changed:
                _replace(self._path(intent_key, "operation.json"), operation)

    def _status(self, state: SendState, last_error: str | None) -> dict[str, Any]:
        return {"state": str(state), "last_error": last_error, "updated_at_ms": self._clock()}

    def _set_status(self, intent_key: str, operation_id: str, state: SendState, last_error: str | None) -> None:
        with self._lock(intent_key):
            self._operation(intent_key, operation_id, "outbox status was updated")
            path = self._path(intent_key, "status.json")
            (_replace if os.path.exists(path) else _write_new)(path, self._status(state, last_error))

    def mark_queued(self, intent_key: str, operation_id: str) -> None:
        self._set_status(intent_key, operation_id, SendState.QUEUED, None)

    def record_failure(self, intent_key: str, operation_id: str, state: SendState, message: str) -> None:
        if state not in (SendState.FAILED, SendState.CONFLICT):
            raise internal("remote send failure state must be failed or conflict")
        self._set_status(intent_key, operation_id, state, message)

    def mark_committed(self, intent_key: str, operation_id: str) -> None:
        with self._lock(intent_key):
            self._operation(intent_key, operation_id, "commit acknowledgement was recorded")
            marker = self._path(intent_key, "committed")
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                with open(marker, encoding="utf-8") as handle:
                    if handle.read() != operation_id:
                        raise internal("remote send commit marker belongs to a different operation") from None
            except OSError as exc:
                raise _io("create remote send commit marker", exc) from exc
            else:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(operation_id)
                    handle.flush()
                    os.fsync(handle.fileno())
            path = self._path(intent_key, "status.json")
            (_replace if os.path.exists(path) else _write_new)(path, self._status(SendState.COMMITTED, None))

    def pending(self, profile_name: str | None = None) -> list[QueuedSend]:
        """Uncommitted reservations with a replay plan, oldest first."""
        queued: list[QueuedSend] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError as exc:
            raise _io("list remote send outbox", exc) from exc
        for name in names:
            path = self._path(name)
            if name.endswith(".lock") or ".done." in name or not os.path.isdir(path):
                continue
            if os.path.exists(self._path(name, "committed")):
                continue
            if not (os.path.exists(self._path(name, "operation.json")) and os.path.exists(self._path(name, "replay.json"))):
                continue
            operation = _read(self._path(name, "operation.json"))
            if profile_name is not None and operation.get("profile_name") != profile_name:
                continue
            status_path = self._path(name, "status.json")
            status = _read(status_path) if os.path.exists(status_path) else self._status(SendState.QUEUED, None)
            state = SendState(status.get("state", "queued"))
            if state is SendState.COMMITTED:
                continue
            queued.append(QueuedSend(
                intent_key=name, profile_name=operation["profile_name"], profile_url=operation.get("profile_url", ""),
                profile_added_at=int(operation.get("profile_added_at", 0)), project_id=operation["project_id"],
                actor_id=operation.get("actor_id"), operation_id=operation["operation_id"],
                handoff_id=operation["handoff_id"], context_id=operation["context_id"],
                created_at_ms=int(operation["created_at_ms"]), state=state, last_error=status.get("last_error"),
                plan=SendPlan.from_json(_read(self._path(name, "replay.json"))),
            ))
        queued.sort(key=lambda entry: entry.created_at_ms)
        return queued
