"""Servers that misbehave at start and stop, for the ``[serve]`` lifecycle's tests (run as a script).

    python serve_fakes.py MODE PORT PIDFILE

``slow``: says so, waits 1.5 s, then answers ``/health``; ``never``: says it is warming up and
never listens; ``stubborn``: answers ``/health`` but ignores SIGTERM, and starts a child in its
process group that ignores it too. Every mode writes its pid (and a child's) to PIDFILE.
"""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import time


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = b'{"status":"ok","fake":true}'
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main(mode: str, port: int, pidfile: str) -> None:
    pids = [str(__import__("os").getpid())]
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)"])
        pids.append(str(child.pid))
    with open(pidfile, "w") as handle:
        handle.write(" ".join(pids))
    if mode == "slow":
        print("slow server: loading its data for 1.5 s", flush=True)
        time.sleep(1.5)
    if mode == "never":
        print("never server: warming up the cache", flush=True)
        time.sleep(600)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), _Health).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
