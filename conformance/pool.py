"""Identities provisioned ahead, in the background, by a few threads running a slow provisioner.

A bootstrap command is a process per identity; run one after another they were nearly all of a
suite run against a served target. ``ProvisionPool`` runs them concurrently and ahead of the
checks that need them:

* ``provision(identity)`` starts one now, ahead of anything queued, and returns a ``Pending``
  the caller waits on (a check's actors are provisioned together);
* ``expect(feed)`` gives the identities later checks are expected to ask for, each with its
  check, in the order they will ask; the pool draws from it in the background, keeping at most
  ``ahead`` identities provisioned and not yet asked for, and ``begin(check)`` drops what was
  expected for the checks before it (still queued: never run). A check the feed does not name
  (one that asks for no identity) draws the feed to its end looking for it, so from the first
  such check everything expected is queued at once: the bound holds only until then. Measured
  on a served run (issue 40), bounding it for real made checks wait more than it saved;
* an identity is handed out only when a check asks for exactly it (the same template values),
  with the token it was provisioned with, fresh from ``secrets``; a wrong expectation costs one
  identity nobody uses, in the namespace of the check it was expected for, never a shared one.

Nothing here knows a protocol. A failure is kept and raised to the check that asks for that
identity, as if it had been provisioned on demand.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from conformance.provisioning import Provisioner

__all__ = ["Identity", "Pending", "ProvisionPool"]

Identity = Mapping[str, str]
_DEMAND: Final = 0  # a check waits for it: before anything expected
_AHEAD: Final = 1


def _key(identity: Identity) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(identity.items()))


class Pending:
    """One identity being provisioned: ``result()`` waits for (token, credential) or raises."""

    __slots__ = ("token", "_done", "_credential", "_error")

    def __init__(self, token: str) -> None:
        self.token = token
        self._done = threading.Event()
        self._credential: str | None = None
        self._error: BaseException | None = None

    def _settle(self, credential: str | None, error: BaseException | None) -> None:
        self._credential, self._error = credential, error
        self._done.set()

    @classmethod
    def now(cls, token: str, provision: Callable[[str], str]) -> Pending:
        """``provision(token)`` run in the caller's thread, settled as a pool's would be (no pool needed)."""
        pending = cls(token)
        try:
            credential = provision(token)
        except Exception as exc:  # kept for whoever asks, as a pool keeps it
            pending._settle(None, exc)
        else:
            pending._settle(credential, None)
        return pending

    def result(self) -> tuple[str, str]:
        """(the token provisioned, the credential to use); the provisioner's exception otherwise."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._credential is not None
        return self.token, self._credential


class ProvisionPool:
    """``workers`` threads running ``provisioner``; at most ``ahead`` expected identities unclaimed."""

    def __init__(self, provisioner: Provisioner, new_token: Callable[[], str], *, workers: int = 3,
                 ahead: int = 8) -> None:
        self._provisioner = provisioner
        self._new_token = new_token
        self._ahead = ahead
        self._lock = threading.Condition()
        self._queue: list[tuple[int, int, Identity, Pending]] = []  # (priority, order, identity, pending)
        self._order = itertools.count()
        self._ready: dict[tuple[tuple[str, str], ...], tuple[int, Pending]] = {}  # expected, not asked for
        self._feed: Iterator[tuple[str, Identity]] = iter(())
        self._groups: dict[str, int] = {}  # check -> its place in the feed, as drawn
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"provision-{n}", daemon=True)
                         for n in range(workers)]
        for thread in self._threads:
            thread.start()

    def expect(self, feed: Iterator[tuple[str, Identity]]) -> None:
        """(check, identity) pairs later checks are expected to ask for, in order (drawn lazily)."""
        with self._lock:
            self._feed = feed
            self._top_up()

    def begin(self, check: str) -> None:
        """``check`` starts: what was expected for the checks before it will not be asked for."""
        with self._lock:
            while check not in self._groups and self._draw():
                pass
            place = self._groups.get(check)
            if place is None:
                return
            stale = {key for key, (group, _) in self._ready.items() if group < place}
            for key in stale:
                del self._ready[key]
            self._queue = [job for job in self._queue if job[0] == _DEMAND or _key(job[2]) not in stale]
            self._top_up()

    def provision(self, identity: Identity) -> Pending:
        """``identity``, provisioned ahead if it was expected, else now, before anything expected."""
        with self._lock:
            ready = self._ready.pop(_key(identity), None)
            if ready is None:
                pending = Pending(self._new_token())
                if self._closed:  # no thread is left to run it: a check running ahead would wait forever
                    pending._settle(None, RuntimeError("the provisioning pool closed"))
                    return pending
                self._put(_DEMAND, identity, pending)
            else:
                pending = ready[1]
                # Still queued: a check waits for it now, so it goes before what is only expected.
                self._queue = [(_DEMAND, *job[1:]) if job[3] is pending else job for job in self._queue]
                self._queue.sort(key=lambda job: job[:2])
            self._top_up()
            return pending

    def close(self) -> None:
        """Stop the threads once the provisioning they run has ended; queued work is dropped."""
        with self._lock:
            self._closed = True
            for _, _, _, pending in self._queue:
                pending._settle(None, RuntimeError("the provisioning pool closed"))
            self._queue.clear()
            self._lock.notify_all()
        for thread in self._threads:
            thread.join()

    def _put(self, priority: int, identity: Identity, pending: Pending) -> None:
        self._queue.append((priority, next(self._order), identity, pending))
        self._queue.sort(key=lambda job: job[:2])
        self._lock.notify()

    def _top_up(self) -> None:
        """Draw expected identities until ``ahead`` are provisioned or on their way (lock held)."""
        while not self._closed and len(self._ready) < self._ahead and self._draw():
            pass

    def _draw(self) -> bool:
        """Queue the next expected identity (lock held); False when the feed is spent."""
        drawn = next(self._feed, None)
        if drawn is None:
            return False
        check, identity = drawn
        place = self._groups.setdefault(check, len(self._groups))
        if _key(identity) not in self._ready:
            pending = Pending(self._new_token())
            self._ready[_key(identity)] = (place, pending)
            self._put(_AHEAD, identity, pending)
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                _, _, identity, pending = self._queue.pop(0)
            try:
                credential = self._provisioner.provision(identity, pending.token)
            except BaseException as exc:  # kept for the check that asks: it blocks only that check
                pending._settle(None, exc)
            else:
                pending._settle(credential, None)
