"""The simulator over a real socket: the reference served by uvicorn on loopback, by URL."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simulations.campaign import run_campaign
from simulations.cli import main
from simulations.plan import READER
from simulations.targets import HttpTarget
from tests.targetfile import token_entry, write_target

def test_a_url_campaign_against_the_reference_is_clean(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    result = run_campaign(seed=3, max_batches=12, budget_s=60, target=HttpTarget(url, "p", tokens))
    assert result.finding is None
    assert len(result.history) > 40
    # Over a socket the clock is the server's own: the plan says so instead of guessing.
    assert all(b.clock_ms is None for b in result.plan.batches)


def test_the_cli_runs_against_a_url(served: tuple[str, dict[str, str]], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    url, tokens = served
    argv = ["run", "--url", url, "--project", "p", "--seed", "11", "--budget", "3", "--out", str(tmp_path)]
    for actor, token in tokens.items():
        argv += ["--token", f"{actor}={token}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "seed 11" in out and "verdict OK" in out
    assert "tok-" not in out  # tokens are never printed


def test_the_cli_takes_a_conformance_target_file(served: tuple[str, dict[str, str]], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url, tokens = served
    entries = [token_entry("p", a, "reader" if a == READER else "writer", token=t) for a, t in tokens.items()]
    config = write_target(tmp_path / "target.toml", url, entries)
    assert main(["run", "--config", str(config), "--seed", "5", "--budget", "3", "--out", str(tmp_path)]) == 0
    assert "verdict OK" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--actors", "1", "--budget", "1"], "at least two actors"),
        (["run", "--url", "http://127.0.0.1:9"], "--url needs --project"),
        (["run", "--token", "a=b"], "need --url"),
        (["run", "--url", "http://127.0.0.1:9", "--project", "p", "--token", "nope"], "reads TOKEN_NOPE, which is not set"),
        (["run", "--budget", "-3"], "must be positive"),
        (["run", "--seed", "x"], "not an integer seed"),
        (["replay", "/nonexistent/replay.json"], "cannot read replay file"),
        (["run", "--ledger", "nofile.py:x"], "cannot load ledger factory"),
        (["frobnicate"], "invalid choice"),
        (["run", "--url", "http://127.0.0.1:9", "--project", "p", "--token", "a=x", "--token", "b=y", "--budget", "2"],
         "did not answer"),
    ],
)
def test_bad_input_is_one_line_on_stderr(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err


def test_a_url_replay_sends_the_plan_again_with_fresh_ids(served: tuple[str, dict[str, str]], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from simulations.replay import export_failure

    url, tokens = served
    result = run_campaign(seed=9, max_batches=6, budget_s=60, target=HttpTarget(url, "p", tokens))
    paths = export_failure(result, tmp_path, target="url", url=url)
    token_args = [arg for actor, token in tokens.items() for arg in ("--token", f"{actor}={token}")]
    assert main(["replay", str(paths["replay file"]), "--times", "2"]) == 2  # tokens are needed again
    assert "give --url" in capsys.readouterr().err
    assert main(["replay", str(paths["replay file"]), "--times", "2", "--url", url, "--project", "p", *token_args]) == 0
    out = capsys.readouterr().out
    assert "reproduced 0/2" in out
    assert "tok-" not in paths["replay file"].read_text()


def test_provisioning_from_a_target_file_leaves_no_token_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from simulations.targets import target_from_config

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = tmp_path / "seen"
    script = tmp_path / "provision.py"
    script.write_text(f"import shutil, sys\nshutil.copy(sys.argv[1], {str(seen)!r})\n")
    config = write_target(tmp_path / "target.toml", "http://127.0.0.1:9",
                          provision={"command": f"{sys.executable} {script} {{token_file}} {{project}} {{actor}}"})
    target = target_from_config(config, actors=2)
    assert target is not None and len(target.tokens) == 3
    assert seen.read_text().strip() in target.tokens.values()  # the command saw a live token file ...
    assert not list(tmp_path.glob("conformance-tokens-*"))  # ... and none is left behind


def test_a_url_campaign_without_a_reader_token_never_reads_as_the_reader(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    writers = {actor: token for actor, token in tokens.items() if actor != READER}
    result = run_campaign(seed=31, max_batches=15, budget_s=60, target=HttpTarget(url, "p", writers))
    assert result.finding is None and len(result.history) > 40
    assert all(op.input["actor"] != READER for op in result.history)


def test_the_help_says_what_the_tool_does_in_whole_sentences(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20: --help once printed the first line of a docstring that went on ("... check a
    history, race the")."""
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    description = " ".join(out.split("positional arguments:")[0].split("\n\n", 1)[1].split())
    assert description.startswith("aidememo-sim finds the races") and description.endswith(".")
    assert "races XMemo captures and recalls." in description
    assert "Exit codes" not in description  # the epilog gives them, once


def test_a_server_gone_before_the_feed_is_read_is_a_setup_error_not_a_traceback() -> None:
    from simulations.errors import SimulationError
    from simulations.feed import FeedFollower
    from simulations.targets import Lost

    class Gone:
        actors, project, has_reader, scheduler = ("a",), "p", False, None

        def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> object:
            raise Lost("connection refused", delivered=False)

    with pytest.raises(SimulationError, match="setup failed: the snapshot got no answer"):
        FeedFollower(Gone())  # type: ignore[arg-type]
