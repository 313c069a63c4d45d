"""A command line for tests/suite/test_forked.py: what it does is told by its first argument."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int | str | None:
    word, *rest = sys.argv[1:]
    if word == "echo":  # what a process of its own would see
        print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "stdin": sys.stdin.read(),
                          "env": {name: os.environ.get(name) for name in rest}}))
        print("to stderr", file=sys.stderr)
        return 0
    if word == "exit":
        return int(rest[0])
    if word == "message":
        raise SystemExit(rest[0])
    if word == "crash":
        raise RuntimeError("planted")
    if word == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    if word == "sleep":
        time.sleep(float(rest[0]))
        return 0
    if word == "flood":
        sys.stdout.write("x" * int(rest[0]))
        return 0
    if word == "meet":  # mark, then wait for the partner's mark: both must run at once
        mine, theirs = Path(rest[0]), Path(rest[1])
        mine.touch()
        deadline = time.monotonic() + 20
        while not theirs.exists():
            if time.monotonic() > deadline:
                return 9
            time.sleep(0.01)
        return 0
    if word == "burn":
        started = time.process_time()
        while time.process_time() - started < float(rest[0]):
            pass
        print(time.process_time() - started)
        return 0
    return None
