"""The embedded target of ``diff``, in a process of its own: ``python -m ...diff.child FACTORY BACKEND``.

Starts the embedded reference (or the broken variant ``FACTORY`` names) exactly as ``run`` does,
prints its base URL, then provisions one identity per JSON line on stdin, answering ``ok`` or
one line of error. It exits when stdin closes or on SIGTERM, removing its database either way.
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack

from conformance.errors import ConformanceError
from conformance.profiles.aidememo.settings import AideMemoSettings
from conformance.profiles.aidememo.target import start_embedded
from conformance.provisioning import TokenList
from refkit.args import sigterm_as_interrupt


def main(argv: list[str]) -> int:
    try:
        with sigterm_as_interrupt():
            return _serve(argv)
    except KeyboardInterrupt:  # the ExitStack has removed the database on the way out
        return 130


def _serve(argv: list[str]) -> int:
    factory, backend = argv[0] or None, argv[1]
    settings = AideMemoSettings(url=None, timeout_s=10.0, max_body_bytes=4 << 20, capabilities={},
                                provision_command=None, provision_bound_command=None, fixed_tokens=TokenList(),
                                embedded_factory=factory, provision_hook=False, embedded_backend=backend)
    with ExitStack() as stack:
        try:
            base_url, provisioner, _ = start_embedded(settings, stack)
        except ConformanceError as exc:
            print(f"error: {exc}", flush=True)
            return 2
        print(base_url, flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            try:
                provisioner.provision(request["identity"], request["token"])
            except Exception as exc:  # foreign factories raise anything; the parent reads one line
                print(f"error: {type(exc).__name__}: {exc}".replace(request["token"], "<redacted>"), flush=True)
                continue
            print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
