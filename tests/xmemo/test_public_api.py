"""xmemo_ref's public names are pinned, resolve, and load nothing heavy until asked for."""

from __future__ import annotations

import subprocess
import sys

import xmemo_ref as xmemo


def test_public_names_are_pinned_and_resolve() -> None:
    assert sorted(xmemo.__all__) == sorted([
        "XMemoReference", "provision_key", "default_tenant", "Rules", "SQLiteXMemoStore", "XMemoError",
        "ProvisionError", "RequestError", "Relation", "Trust", "MemoryType", "estimate_tokens", "XMemoClient",
        "CaptureResult", "XMemoClientError", "XMemoHTTPError", "XMemoTransportError",
    ])
    for name in xmemo.__all__:
        assert getattr(xmemo, name) is not None
    assert issubclass(xmemo.XMemoHTTPError, xmemo.XMemoClientError) and issubclass(xmemo.XMemoClientError,
                                                                                    xmemo.XMemoError)
    assert issubclass(xmemo.ProvisionError, xmemo.XMemoError) and issubclass(xmemo.RequestError, xmemo.XMemoError)


def test_importing_the_package_or_bootstrapping_loads_no_server_stack() -> None:
    code = ("import sys, xmemo_ref, xmemo_ref._provision; "
            "print(sorted(m for m in ('httpx', 'uvicorn', 'jsonschema', 'aidememo_ref._service') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
