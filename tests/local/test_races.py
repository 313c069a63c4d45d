"""Races between processes on one store: exactly one claim wins, nothing is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import REPO, RECEIVER, _CLI_ENV, Cli, Handoff


def test_concurrent_accepts_with_different_claims_have_exactly_one_winner(cli: Cli, sent: Handoff) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "aidememo_cli._commands", "--store", str(cli.store), "--json", "handoff", "accept",
             "--actor-id", RECEIVER, "--claim-id", f"worker-{index}", sent.handoff_id],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for index in range(4)
    ]
    outcomes = [(w.wait(timeout=120), w.stdout.read(), w.stderr.read()) for w in workers]  # type: ignore[union-attr]
    winners = [json.loads(out)["assignment"]["claim_id"] for rc, out, _ in outcomes if rc == 0]
    assert len(winners) == 1, outcomes
    for rc, _, err in outcomes:
        if rc != 0:
            # Serialised by the write lock the loser sees the winner's claim; a loser that read
            # before the winner committed would get transaction_conflict. Either way: refused.
            assert err.strip() in (f"Error: invalid input: handoff {sent.handoff_id} is already claimed by another worker",
                                   "Error: transaction conflict (concurrent write): retry needed"), err
    record = cli.j("handoff", "show", sent.handoff_id)
    assert (record["claim_id"], record["attempt_count"], record["revision"]) == (winners[0], 1, 1)


def test_board_filters_by_the_actor_flag_only(cli: Cli, sent: Handoff) -> None:
    assert len(cli.j("handoff", "board", "--actor-id", RECEIVER)["assignments"]) == 1
    assert cli.j("handoff", "board", "--actor-id", "stranger")["assignments"] == []
    # As upstream's, the board ignores AIDEMEMO_ACTOR_ID: without --actor-id it is the shared board.
    assert len(cli.j("handoff", "board", env={"AIDEMEMO_ACTOR_ID": "stranger"})["assignments"]) == 1
