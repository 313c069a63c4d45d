"""A kill-matrix variant (or the reference) served over HTTP on a data file it keeps, for
``test_reproductions.py``:

    python repro_serve.py NAME DATABASE PORT SOCKET      (NAME ``reference``: the reference unchanged)

It prints its base URL, then serves until its standard input closes. Identities are made on a
Unix socket beside it (``SOCKET``): one form POST per identity (tenant, project, actor, role,
token, and bind_source / bind_actor for a token bound to a source), which the test's target file
sends with ``curl`` as its provisioning command template. A curl start costs about 10 ms where an
``aidememo-ref bootstrap`` process costs 0.1 to 0.6 s (more under load), and every script and
replay of the test provisions every identity it needs anew.
"""

from __future__ import annotations

import http.server
import socketserver
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[2]))  # the checkout: race variants import tests.sim.mutants

import aidememo_ref  # noqa: E402
import mutants  # noqa: E402


def _handler(ledger: Any) -> type[http.server.BaseHTTPRequestHandler]:
    class Provision(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8"), keep_blank_values=True))
            try:
                ledger.provision(tenant_id=form["tenant"], project_id=form["project"], actor_id=form["actor"],
                                 token=form["token"].strip(), role=form.get("role", "writer"))
                if form.get("bind_source"):
                    ledger.bind_token(form["token"].strip(), form["bind_source"], form["bind_actor"])
                status, text = 200, "provisioned\n"
            except Exception as exc:  # the template's command prints why and exits non-zero
                status, text = 400, f"refused: {exc}\n"
            self.send_response(status)
            self.send_header("Content-Length", str(len(text.encode())))
            self.end_headers()
            self.wfile.write(text.encode())

        def address_string(self) -> str:  # a Unix socket's peer has no address
            return "provision"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            pass

    return Provision


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main(name: str, database: str, port: int, socket_path: str) -> None:
    if name == "reference":
        ledger = aidememo_ref.ReferenceLedger(database, clock=aidememo_ref.OffsetClock(), test_clock=True)
    else:
        ledger = mutants.MUTANTS[name][0](database)
    Path(socket_path).unlink(missing_ok=True)
    provisioning = _UnixServer(socket_path, _handler(ledger))
    threading.Thread(target=provisioning.serve_forever, daemon=True).start()
    with aidememo_ref.serve_in_thread(ledger, port=port) as url:
        print(url, flush=True)
        sys.stdin.read()
    provisioning.shutdown()
    provisioning.server_close()
    Path(socket_path).unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
