"""What a finding prints to be seen again: a replay that fails when the case fails every rerun,
else the history's check beside a replay given enough runs (``replay.reproduce_lines``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulations.replay import reproduce_lines

PATHS = {"replay file": Path("out/race-seed-7.json"), "history (aidememo-sim check --model ledger)":
         Path("out/race-seed-7.jsonl")}


@pytest.mark.parametrize("reproduction", [None, (10, 10)])
def test_a_case_that_always_fails_prints_its_replay_alone(reproduction: tuple[int, int] | None) -> None:
    assert reproduce_lines(PATHS, reproduction, ["--url", "http://h"]) == [
        "reproduce with: aidememo-sim replay out/race-seed-7.json --url http://h"]


@pytest.mark.parametrize("reproduced", [1, 3, 9])
def test_a_race_the_network_interleaves_prints_its_check_and_a_replay_that_rarely_misses(reproduced: int) -> None:
    lines = reproduce_lines(PATHS, (reproduced, 10))
    assert lines[0] == ("check what was seen (the same verdict every time): "
                        "aidememo-sim check out/race-seed-7.jsonl --model ledger")
    times = re.fullmatch(r"reproduce with: aidememo-sim replay out/race-seed-7\.json --times (\d+) "
                         rf"\(over the URL it failed {reproduced} of 10 reruns; exit 1 when any run fails\)", lines[1])
    assert times is not None, lines
    # Every run misses with probability 1 - k/n: all of them miss about once in a thousand.
    assert (1 - reproduced / 10) ** int(times[1]) <= 0.001


def test_a_case_that_failed_no_rerun_is_not_offered_as_reproducing() -> None:
    lines = reproduce_lines(PATHS, (0, 10))
    assert not any(line.startswith("reproduce with") for line in lines)
    assert lines[0].endswith("aidememo-sim check out/race-seed-7.jsonl --model ledger")
    assert "failed none of 10 reruns" in lines[1] and "--times 200" in lines[1]
