"""Tokens stay out of ``ps``: ``--token ACTOR=@FILE`` reads a 0600 file, ``--token ACTOR`` its
``TOKEN_<ACTOR>`` variable, and the commands the simulator prints name tokens that way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aidememo_ref import OffsetClock, ReferenceLedger
from simulations.cli import main
from tests.sim.served import served


def _file(tmp_path: Path, name: str, secret: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(secret + "\n")
    path.chmod(mode)
    return path


def test_a_run_takes_its_tokens_from_files_and_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = ReferenceLedger(tmp_path / "ref.sqlite", clock=OffsetClock(), test_clock=True)
    with served(ledger) as (url, tokens):
        files = [f"{actor}=@{_file(tmp_path, actor, tokens[actor])}" for actor in ("agent-a", "agent-b")]
        monkeypatch.setenv("TOKEN_AGENT_C", tokens["agent-c"])
        code = main(["run", "--url", url, "--project", "p", "--token", files[0], "--token", files[1],
                     "--token", "agent-c", "--actors", "3", "--batches", "2", "--seed", "4", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, out[-2000:] + err
    rerun = next(line for line in out.splitlines() if line.startswith("replay this run with: "))
    assert "--token agent-a --token agent-b --token agent-c" in rerun
    assert not any(token in out + err for token in tokens.values())


@pytest.mark.parametrize(("mode", "message"), [(0o644, "must not be readable by group or others"),
                                               (0o600, "reads TOKEN_AGENT_B, which is not set")])
def test_a_token_that_cannot_be_read_is_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, mode: int,
                                                              message: str) -> None:
    monkeypatch.delenv("TOKEN_AGENT_B", raising=False)
    shared = _file(tmp_path, "token", "tok-secret-0123456789", mode)
    assert main(["run", "--url", "http://127.0.0.1:9", "--project", "p", "--token", f"agent-a=@{shared}",
                 "--token", "agent-b"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1 and "tok-secret" not in err, err
    assert os.environ.get("TOKEN_AGENT_B") is None
