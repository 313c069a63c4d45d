"""The provisioning pool: ahead, bounded, in order, exact, and failures kept for the check that asks;
and the identities a check is expected to ask for, read from its code, are those it asks for."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping

import pytest

from conformance.errors import Untestable
from conformance.pool import ProvisionPool
from conformance.profile import Upcoming
from conformance.profiles.aidememo.ahead import expected_identities, first_project, project_identities
from conformance.profiles.aidememo.isolation import shared_tag

WRITERS = ("alpha", "beta")


class Recording:
    """A provisioner that records what it provisioned, and may hold or refuse identities."""

    def __init__(self, refuse: str = "", hold: threading.Event | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refuse = refuse
        self.hold = hold
        self.lock = threading.Lock()

    def provision(self, identity: Mapping[str, str], token: str) -> str:
        if self.hold is not None:
            self.hold.wait(10)
        with self.lock:
            self.calls.append((identity["actor"], token))
        if identity["actor"] == self.refuse:
            raise Untestable(f"bootstrap refused {identity['actor']}")
        return token

    def close(self) -> None:
        pass


def _tokens() -> itertools.count[int]:
    return itertools.count(1)


def _pool(provisioner: Recording, **kwargs: int) -> ProvisionPool:
    counter = _tokens()
    return ProvisionPool(provisioner, lambda: f"tok-{next(counter)}", **kwargs)


def _ident(actor: str) -> dict[str, str]:
    return {"tenant": "t", "project": "p", "actor": actor, "role": "writer"}


def test_an_expected_identity_is_provisioned_ahead_and_handed_out_with_its_token() -> None:
    provisioner = Recording()
    pool = _pool(provisioner, workers=2, ahead=4)
    try:
        pool.expect(iter([("c1", _ident("a")), ("c1", _ident("b"))]))
        token, credential = pool.provision(_ident("b")).result()
        assert (token, credential) == (dict(provisioner.calls)["b"], dict(provisioner.calls)["b"])
        pool.provision(_ident("a")).result()
    finally:
        pool.close()
    assert sorted(actor for actor, _ in provisioner.calls) == ["a", "b"]  # once each, never again on demand


def test_an_identity_asked_for_after_the_pool_closed_fails_at_once() -> None:
    """A check still running ahead when an interrupted run closed the pool asks for an identity:
    no worker is left to provision it, so it must fail, not wait (the process hung at exit,
    joining that check's thread)."""
    pool = _pool(Recording(), workers=1, ahead=2)
    pool.close()
    got: list[BaseException] = []
    asker = threading.Thread(target=lambda: got.append(pytest.raises(RuntimeError, pool.provision(_ident("a")).result)
                                                       .value), daemon=True)
    asker.start()
    asker.join(5)
    assert not asker.is_alive(), "the asker still waits for an identity nobody will provision"
    assert "closed" in str(got[0])


def test_an_unexpected_identity_is_provisioned_on_demand_with_a_fresh_token() -> None:
    provisioner = Recording()
    pool = _pool(provisioner, workers=1, ahead=4)
    try:
        pool.expect(iter([("c1", _ident("a"))]))
        token, _ = pool.provision({**_ident("a"), "role": "reader"}).result()  # not exactly what was expected
    finally:
        pool.close()
    assert [t for actor, t in provisioner.calls].count(token) == 1
    assert len(provisioner.calls) == 2 and len({t for _, t in provisioner.calls}) == 2


def test_what_a_check_waits_for_goes_before_what_is_only_expected() -> None:
    hold = threading.Event()
    provisioner = Recording(hold=hold)
    pool = _pool(provisioner, workers=1, ahead=8)
    try:
        pool.expect(iter([("c2", _ident(f"later-{n}")) for n in range(5)]))
        pending = pool.provision(_ident("now"))
        hold.set()
        pending.result()
    finally:
        pool.close()
    # The one worker had already taken the first expected identity; the demand came next.
    assert [actor for actor, _ in provisioner.calls].index("now") <= 1


def test_the_pool_keeps_at_most_ahead_identities_unclaimed() -> None:
    provisioner = Recording()
    pool = _pool(provisioner, workers=2, ahead=3)
    feed = ((f"c{n}", _ident(f"a{n}")) for n in range(100))
    pool.expect(feed)
    undrawn = list(feed)  # drawn lazily: exactly `ahead` of them, and nothing is drawn from here on
    deadline = time.monotonic() + 10
    while len(provisioner.calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.close()
    assert len(undrawn) == 97
    assert sorted(actor for actor, _ in provisioner.calls) == ["a0", "a1", "a2"]  # each drawn one provisioned, once


def test_begin_drops_what_was_expected_for_earlier_checks() -> None:
    hold = threading.Event()
    provisioner = Recording(hold=hold)
    pool = _pool(provisioner, workers=1, ahead=8)
    try:
        pool.expect(iter([("c1", _ident("x1")), ("c1", _ident("x2")), ("c1", _ident("x3")), ("c2", _ident("y"))]))
        pool.begin("c2")  # c1 asked for something else: its queued identities never run
        hold.set()
        pool.provision(_ident("y")).result()
    finally:
        pool.close()
    actors = [actor for actor, _ in provisioner.calls]
    assert "y" in actors and "x3" not in actors and len(actors) <= 2  # at most the one already running


def test_a_failure_is_raised_to_the_check_that_asks_for_that_identity() -> None:
    provisioner = Recording(refuse="bad")
    pool = _pool(provisioner, workers=2, ahead=4)
    try:
        pool.expect(iter([("c1", _ident("bad")), ("c1", _ident("good"))]))
        pool.provision(_ident("good")).result()
        with pytest.raises(Untestable, match="bootstrap refused bad"):
            pool.provision(_ident("bad")).result()
    finally:
        pool.close()


# -- what a check will ask for, read from its code ------------------------------------------------
def _helper(w: object) -> object:
    return w.project(writers=("sender", "receiver"), readers=("watcher",))  # type: ignore[attr-defined]


def check_direct(world: object) -> None:
    world.require("core")  # type: ignore[attr-defined]
    world.project(writers=WRITERS)  # type: ignore[attr-defined]


def check_through_a_helper(world: object) -> None:
    _helper(world)


def check_default(world: object) -> None:
    world.project()  # type: ignore[attr-defined]


def check_minting_first(world: object) -> None:
    world.new_id("x")  # type: ignore[attr-defined]
    world.project()  # type: ignore[attr-defined]


def check_computed(world: object, names: tuple[str, ...] = ("a",)) -> None:
    world.project(writers=names)  # type: ignore[attr-defined]


def test_the_first_project_is_read_from_the_check_or_its_helper() -> None:
    assert first_project(check_direct) == (WRITERS, ())
    assert first_project(check_through_a_helper) == (("sender", "receiver"), ("watcher",))
    assert first_project(check_default) == (("writer",), ())
    assert first_project(check_minting_first) is None  # the project would not be the first id
    assert first_project(check_computed) is None  # not a literal: left to demand


def test_expected_identities_are_those_the_world_derives() -> None:
    upcoming = [Upcoming(check="m.py::check_through_a_helper", check_tag="0badf00d", function=check_through_a_helper,
                         markers={}),
                Upcoming(check="m.py::check_minting_first", check_tag="cafecafe", function=check_minting_first,
                         markers={})]
    expected = list(expected_identities(upcoming, "RUN"))
    assert [check for check, _ in expected] == ["m.py::check_through_a_helper"] * 3
    assert [dict(identity) for _, identity in expected] == [
        {"tenant": "t-RUN", "project": "p-RUN-0badf00d-1", "actor": "sender-RUN-0badf00d-2", "role": "writer"},
        {"tenant": "t-RUN", "project": "p-RUN-0badf00d-1", "actor": "receiver-RUN-0badf00d-3", "role": "writer"},
        {"tenant": "t-RUN", "project": "p-RUN-0badf00d-1", "actor": "watcher-RUN-0badf00d-4", "role": "reader"},
    ]
    assert project_identities("RUN", "0badf00d", 1, ("sender", "receiver"), ("watcher",))[1] == [
        dict(identity) for _, identity in expected]


def test_an_actors_check_expects_its_own_actors_fresh_and_the_others_shared_once() -> None:
    own = {"isolation": ("actors", "sender")}
    upcoming = [Upcoming(check=f"m.py::check_{tag}", check_tag=tag, function=check_through_a_helper, markers=own)
                for tag in ("0badf00d", "cafecafe")]
    expected = [dict(identity) for _, identity in expected_identities(upcoming, "RUN")]
    shared = shared_tag()  # the process's: an xdist worker's own
    assert expected == [
        {"tenant": "t-RUN", "project": f"p-RUN-{shared}-1", "actor": "sender-RUN-0badf00d-2", "role": "writer"},
        {"tenant": "t-RUN", "project": f"p-RUN-{shared}-1", "actor": f"receiver-RUN-{shared}-1", "role": "writer"},
        {"tenant": "t-RUN", "project": f"p-RUN-{shared}-1", "actor": f"watcher-RUN-{shared}-2", "role": "reader"},
        {"tenant": "t-RUN", "project": f"p-RUN-{shared}-1", "actor": "sender-RUN-cafecafe-2", "role": "writer"},
    ]
    # --fresh-identities: every actor fresh, in a fresh project, as before checks declared their isolation.
    fresh = [dict(identity) for _, identity in expected_identities(upcoming[:1], "RUN", fresh=True)]
    assert [identity["actor"] for identity in fresh] == [
        "sender-RUN-0badf00d-2", "receiver-RUN-0badf00d-3", "watcher-RUN-0badf00d-4"]


def test_a_function_not_at_a_module_s_top_is_read_from_its_own_source() -> None:
    def check_nested(world: object) -> None:
        world.project(writers=("solo",))  # type: ignore[attr-defined]

    def check_default(world: object) -> None:  # the module's check_default's name, another definition
        world.project(readers=("watcher",))  # type: ignore[attr-defined]

    assert first_project(check_nested) == (("solo",), ())
    assert first_project(check_default) == (("writer",), ("watcher",))
