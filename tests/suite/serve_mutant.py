"""A planted-bug variant of the reference (``mutants.py``), served over HTTP as ``aidememo-ref serve`` would be:

    python serve_mutant.py NAME DATABASE PORT      (NAME ``reference``: the reference unchanged)

For the tests that drive the CI templates against a served target, clean and with a planted bug.
"""

from __future__ import annotations

import sys

import aidememo_ref
import mutants
from refkit.serving import serve


def main(name: str, database: str, port: int) -> None:
    if name == "reference":
        ledger = aidememo_ref.ReferenceLedger(database, clock=aidememo_ref.OffsetClock(), test_clock=True)
    else:
        ledger = getattr(mutants, name)(database)
    serve(ledger.asgi, host="127.0.0.1", port=port, bind=f"127.0.0.1:{port}", name=f"mutant {name}",
          where=f"database={database}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
