from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import pytest

import aidememo_ref


def test_public_names_are_pinned_and_resolve() -> None:
    assert sorted(aidememo_ref.__all__) == sorted([
        "ReferenceLedger", "provision", "serve_in_thread", "ProvisionError", "SystemClock", "ManualClock",
        "OffsetClock", "ErrorCode", "LedgerError", "Response", "canonical_json", "fingerprint",
        "stable_operation_id", "stable_claim_id", "bearer_digest", "Clock", "Provisioning", "ReferenceProcess",
        "ServerStartError", "AideMemoRefError", "StoreError", "BindingsError",
    ])
    for name in aidememo_ref.__all__:
        assert getattr(aidememo_ref, name) is not None


def test_the_clients_home_is_aidememo_client() -> None:
    import aidememo_client
    from aidememo_client import AideMemoClient

    assert sorted(aidememo_client.__all__) == sorted([
        "AideMemoClient", "AcceptResult", "HeartbeatResult", "ReturnResult", "AideMemoClientError", "ClientRefusal",
        "MalformedAnswer", "AideMemoHTTPError", "OutcomeUnknown"])
    for name in aidememo_client.__all__:
        assert getattr(aidememo_client, name) is not None
    public = [name for name, member in vars(AideMemoClient).items()
              if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))]
    assert len(public) > 20 and [name for name in public if not (getattr(AideMemoClient, name).__doc__ or "").strip()] == []
    shown = repr(AideMemoClient("http://user:secret@127.0.0.1:9/x", "token-0123456789", "p"))
    assert shown == "<AideMemoClient 'http://127.0.0.1:9/x' project_id='p'>"  # no token, no credentials
    assert repr(aidememo_client.OutcomeUnknown) == "<class 'aidememo_client.OutcomeUnknown'>"  # the public path


def test_importing_the_package_loads_no_server_stack() -> None:
    code = "import sys, aidememo_ref; print(sorted(m for m in ('httpx','uvicorn','sqlite3') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("package", ["aidememo_ref", "aidememo_client"])
def test_type_checkers_see_the_same_names_the_lazy_import_serves(package: str) -> None:
    # The TYPE_CHECKING block is what mypy reads; __getattr__ is what runs. They must agree.
    module = importlib.import_module(package)
    tree = ast.parse(inspect.getsource(module))
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {alias.name: node.module.lstrip(".") for node in guarded.body if isinstance(node, ast.ImportFrom)
             for alias in node.names if node.module}
    assert typed == module._WHERE
    assert set(typed) == set(module.__all__)


def test_the_wire_role_literal_is_the_cores_role_list() -> None:
    from typing import get_args

    from aidememo_wire import shapes as wire
    from aidememo_ref._records import WRITABLE_ROLES, Role

    assert get_args(wire.Role) == wire.ROLES == tuple(role.value for role in Role)
    assert wire.WRITER_ROLES == {role.value for role in WRITABLE_ROLES} == {"owner", "admin", "writer"}


def test_the_wire_handoff_shape_is_the_cores_field_list() -> None:
    # wire.HandoffRecord describes the JSON for clients; the core's record is the one field list.
    from aidememo_wire import shapes as wire
    from aidememo_ref._records import HANDOFF_FIELDS, Handoff

    assert tuple(wire.HandoffRecord.__annotations__) == HANDOFF_FIELDS == tuple(Handoff.__dataclass_fields__)
