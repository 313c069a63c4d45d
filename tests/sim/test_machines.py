"""The state machines against the embedded reference, over a socket, and against a broken ledger."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from aidememo_ref import ReferenceLedger
from aidememo_ref._commands import Op
from aidememo_ref._ledger import Write, decide
from aidememo_ref._records import Handoff, Status
from simulations.machines import READER, HandoffLifecycle, Wire, lifecycle_against

from .served import served

TestHandoffLifecycle = HandoffLifecycle.TestCase


def _broken_wire() -> Wire:
    """The reference with one sequential bug: an accept counts two attempts."""

    def double_count(command: Any, actor: str, view: Any, now_ms: int) -> Write:
        write = decide(command, actor, view, now_ms)
        record = write.record
        if command.op is Op.ACCEPT and isinstance(record, Handoff) and record.status is Status.ACCEPTED:
            return Write.of(write.kind, write.resource_id, replace(record, attempt_count=record.attempt_count + 1))
        return write

    return Wire.embedded(decide=double_count)


def test_the_machine_catches_a_ledger_that_breaks_a_rule() -> None:
    with pytest.raises(AssertionError, match="model"):
        run_state_machine_as_test(lifecycle_against(_broken_wire),
                                  # Finding is the point here; shrinking would only cost minutes.
                                  settings=settings(max_examples=200, database=None, phases=[Phase.generate]))


def test_the_machine_runs_against_a_server_by_url(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    run_state_machine_as_test(lifecycle_against(lambda: Wire.over_http(url, "p", tokens)),
                              settings=settings(max_examples=5, stateful_step_count=15, database=None))


def test_the_machine_renames_actors_of_a_server_that_has_its_own(tmp_path: Path) -> None:
    with served(ReferenceLedger(tmp_path / "ledger.sqlite"), ("alice", "bob", "carol", READER)) as (url, tokens):
        run_state_machine_as_test(lifecycle_against(lambda: Wire.over_http(url, "p", tokens)),
                                  settings=settings(max_examples=3, stateful_step_count=12, database=None))


@pytest.mark.skipif(not os.environ.get("AIDEMEMO_SIM_CONFIG"),
                    reason="set AIDEMEMO_SIM_CONFIG=target.toml to run the state machine against your server")
def test_the_machine_against_the_configured_target() -> None:
    from simulations.targets import target_from_config

    target = target_from_config(Path(os.environ["AIDEMEMO_SIM_CONFIG"]), actors=3)
    machine = HandoffLifecycle if target is None else lifecycle_against(
        lambda: Wire.over_http(target.url, target.project, target.tokens))
    run_state_machine_as_test(machine)
