"""The CLI as a process: eval-able output, one-line errors, and a light import graph."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, run_cli

# Modules the local path must never load: the server, the HTTP stack, the remote ledger.
HEAVY = ("httpx", "uvicorn", "h11", "anyio", "asyncio", "refkit.asgi", "aidememo_cli._remote._http",
         "aidememo_ref._service", "aidememo_ref._sqlite", "aidememo_ref._ledger", "aidememo_client.client")


def test_every_heavy_module_exists() -> None:
    # A misspelt or moved name would never be loaded, so its entry above could never fail.
    assert [name for name in HEAVY if importlib.util.find_spec(name) is None] == []


def test_a_local_command_through_the_entry_point_loads_nothing_of_the_server_or_http_stack(tmp_path: Path) -> None:
    code = (
        "import sys; from aidememo_cli import main; "
        f"rc = main(['--store', {str(tmp_path / 's.sqlite')!r}, 'handoff', 'inbox', '--actor-id', 'x']); "
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout.split()
    assert "(no" in loaded  # the command really ran
    assert "aidememo_cli._local._rules" in loaded  # the probe really imported the CLI
    assert [name for name in HEAVY if name in loaded] == []
    assert "subprocess" not in loaded  # only `handoff run` needs it


def test_the_seeds_manual_flow_through_a_shell_with_eval(tmp_path: Path) -> None:
    store = tmp_path / "it's a store.sqlite"  # a quote in the path must survive the exports
    cli = f"{shlex.quote(sys.executable)} -m aidememo_cli._commands --store {shlex.quote(str(store))}"
    jget = f"{shlex.quote(sys.executable)} -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])'"
    script = f"""
set -eu
eval "$({cli} session new --source-id 'team a' 'Topic with '"'"'quotes'"'"'')"
export AIDEMEMO_ACTOR_ID=one
{cli} fact add "a decision" --type decision --source-id 'team a' >/dev/null
{cli} agent add cursor-review --type manual --source-id 'team a' >/dev/null
H=$({cli} --json handoff send cursor-review --focus 'review' | {jget} handoff_id)
S=$AIDEMEMO_SESSION_ID
unset AIDEMEMO_SESSION_ID AIDEMEMO_SOURCE_ID
AIDEMEMO_ACTOR_ID=cursor-review {cli} handoff accept "$H" >/dev/null
eval "$({cli} session resume --source-id 'team a' "$S")"
export AIDEMEMO_ACTOR_ID=cursor-review
F=$({cli} --json fact add "review passed" --type note --entities Release --source-id 'team a' --actor-id cursor-review | {jget} id)
{cli} handoff return --outcome succeeded --result-fact-id "$F" "$H" >/dev/null
{cli} --json handoff outbox --actor-id one | {jget} assignments | grep -q "$F"
echo "$AIDEMEMO_SESSION_ID|$AIDEMEMO_SOURCE_ID"
"""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    session_id, source = done.stdout.strip().split("|")
    assert session_id.startswith("session-") and source == "team a"


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["session", "new", "x"], {"AIDEMEMO_NOW_MS": "soon"}, "Error: invalid input: AIDEMEMO_NOW_MS must be an integer number of milliseconds"),
        (["handoff", "bogus"], {}, "Error: aidememo-ref handoff: argument COMMAND: invalid choice: 'bogus'"),
        (["handoff", "show", "handoff-x"], {}, "Error: entity not found: 'handoff-x'"),
        (["nope"], {}, "Error: aidememo-ref: unknown command 'nope'"),
        (["--backend", "redb", "fact", "get", "x"], {}, "Error setting backend override: invalid input: store.backend = redb"),
        (["--backend", "pg", "fact", "get", "x"], {}, "Error setting backend override: invalid input: store.backend must be"),
        (["-P", "proj", "fact", "get", "x"], {}, "Error: project 'proj' not registered. Run `aidememo project list`."),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_non_zero(tmp_path: Path, argv: list[str], env: dict[str, str], message: str) -> None:
    done = run_cli("--store", str(tmp_path / "s.sqlite"), *argv, env=env)
    assert done.returncode == 1 and done.stdout == ""  # upstream exits 1, bad syntax included
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr


def test_store_location_errors_are_one_line(tmp_path: Path) -> None:
    as_dir = run_cli("--store", str(tmp_path), "agent", "list")
    assert as_dir.returncode == 1 and as_dir.stderr == f"Error: invalid input: store {tmp_path} is a directory; pass a file path\n"
    blocker = tmp_path / "file"
    blocker.write_text("")
    under_file = run_cli("--store", str(blocker / "s.sqlite"), "agent", "list")
    assert under_file.returncode == 1 and under_file.stderr.startswith("Error: invalid input: cannot create store directory")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database" * 100)
    broken = run_cli("--store", str(garbage), "--json", "agent", "list")
    assert broken.returncode == 1 and broken.stderr.startswith(f"Error: storage failure: {garbage}: ")
    assert broken.stderr.count("\n") == 1


def test_default_store_comes_from_the_environment_then_home(tmp_path: Path) -> None:
    chosen = tmp_path / "deep" / "dir" / "env.sqlite"
    assert run_cli("agent", "add", "a", "--type", "manual", env={"AIDEMEMO_STORE": str(chosen)}).returncode == 0
    assert chosen.exists()  # parent directories were created
    home = tmp_path / "home"
    home.mkdir()
    assert run_cli("agent", "add", "b", "--type", "manual", env={"HOME": str(home)}).returncode == 0
    assert (home / ".aidememo" / "local.sqlite").exists()
    listed = run_cli("-j", "agent", "list", env={"HOME": str(home)})
    assert list(json.loads(listed.stdout)) == ["b"]


def test_json_flag_is_accepted_after_the_command_words(tmp_path: Path) -> None:
    done = run_cli("--store", str(tmp_path / "s.sqlite"), "handoff", "inbox", "--actor-id", "x", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"actor_id": "x", "source_id": None, "assignments": []}
    short = run_cli("-s", str(tmp_path / "s.sqlite"), "-j", "--backend", "LibSQLite", "handoff", "inbox", "--actor-id", "x")
    assert short.returncode == 0 and json.loads(short.stdout)["assignments"] == []
    late_store = tmp_path / "late.sqlite"
    assert run_cli("agent", "list", "--store", str(late_store)).returncode == 0 and late_store.exists()


def test_undecodable_bytes_are_refused_in_one_line(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    done = subprocess.run(
        [sys.executable, "-m", "aidememo_cli._commands", "--store", store, "fact", "add", b"bad \xff byte"],
        capture_output=True, text=True, cwd=REPO,
    )
    assert done.returncode == 1 and done.stderr == "Error: invalid input: arguments and variables must be valid UTF-8\n"
