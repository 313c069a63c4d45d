from __future__ import annotations

import subprocess
import sys

import aidememo_ref


def test_public_names_are_pinned_and_resolve() -> None:
    assert sorted(aidememo_ref.__all__) == sorted([
        "ReferenceLedger", "provision", "serve_in_thread", "ProvisionError", "SystemClock", "ManualClock",
        "OffsetClock", "ErrorCode", "LedgerError", "Response", "canonical_json", "fingerprint",
        "stable_operation_id", "stable_claim_id", "bearer_digest", "AideMemoClient", "AideMemoHTTPError",
    ])
    for name in aidememo_ref.__all__:
        assert getattr(aidememo_ref, name) is not None


def test_importing_the_package_loads_no_server_stack() -> None:
    code = "import sys, aidememo_ref; print(sorted(m for m in ('httpx','uvicorn','sqlite3') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
