"""What the import contracts (tests/test_layers.py) cannot see: imports made at run time.

The contracts read import statements; ``importlib.import_module`` with a computed name is no
statement. Importing the model, its checker adapter and the linearizability library must still
load no module of a reference, of the wire definitions, or of the kit's serving pieces, so the
model and the reference cannot share a bug.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("refkit", "aidememo_wire", "aidememo_client", "aidememo_cli", "aidememo_ref", "xmemo_ref")
PROBE = ("import sys, simulations.model, simulations.ledger, simulations.linearizability.checker, "
         "simulations.linearizability.register, simulations.linearizability.kv, "
         "simulations.linearizability.porcupine, simulations.linearizability.timeline; "
         f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}); "
         "print(bad); sys.exit(1 if bad else 0)")


def test_the_model_loads_nothing_from_the_reference() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_probe_sees_a_reference_when_one_is_loaded() -> None:
    planted = "import importlib; importlib.import_module('aidememo_' + 'ref'); " + PROBE
    proc = subprocess.run([sys.executable, "-c", planted], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1 and "'aidememo_ref'" in proc.stdout
