"""The console script leaves without the interpreter's module teardown: it still keeps the exit
code and every byte of output, runs the exit handlers, waits for a thread that is not a daemon,
and a run leaves no file open for writing that such an exit could cut short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _console(prelude: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (f"import sys\n{prelude}\nimport conformance.cli as cli\n"
            f"sys.argv = ['aidememo-conformance', *{args!r}]\ncli.console_main()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output waits in buffers, as it can
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_a_run_keeps_its_code_its_output_and_its_exit_handlers(tmp_path: Path) -> None:
    done = _console("import atexit\natexit.register(lambda: print('exit handler ran'))",
                    ["run", "--seed", "1", "test_auth.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "RESULT: every scored MUST holds" in done.stdout and done.stdout.endswith("exit handler ran\n")
    results = json.loads((tmp_path / "aidememo-report" / "results.json").read_text())
    assert results["ok"] and results["records"]
    assert (tmp_path / "aidememo-report" / "junit.xml").read_text().rstrip().endswith("</testsuites>")


def test_refusals_keep_their_exit_code(tmp_path: Path) -> None:
    done = _console("", ["run", "--seed", "x1"], tmp_path)
    assert done.returncode == 2 and "--seed: expected a non-negative integer" in done.stderr
    done = _console("", ["run", "-k", "no_check_is_called_this"], tmp_path)
    assert done.returncode == 2 and "no check matched the selection" in done.stderr


def test_a_thread_still_working_is_waited_for(tmp_path: Path) -> None:
    marker = tmp_path / "written-late"
    prelude = ("import threading, time\n"
               f"threading.Thread(target=lambda: (time.sleep(0.5), open({str(marker)!r}, 'w').write('done'))).start()")
    done = _console(prelude, ["run", "--seed", "x1"], tmp_path)
    assert done.returncode == 2
    assert marker.read_text() == "done"


def test_a_run_leaves_no_file_open_for_writing(tmp_path: Path) -> None:
    code = ("import gc, io, sys\nimport conformance.cli as cli\n"
            "code = cli.main(['run', '--seed', '1', 'test_auth.py', 'test_wire.py'])\ngc.unfreeze()\n"
            "kinds = (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper, io.FileIO)\n"
            "left = [repr(o) for o in gc.get_objects() if isinstance(o, kinds) and not o.closed\n"
            "        and o.writable() and getattr(o, 'name', None) not in ('<stdout>', '<stderr>', 1, 2)]\n"
            "print('OPEN', left)\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == "OPEN []"
