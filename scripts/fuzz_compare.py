#!/usr/bin/env python3
"""Schemathesis against scripts/fuzz.py: the same seed, the same request budget, the same ledgers.

Each tool fuzzes the reference and a set of planted defects (each one a bug a fuzzer should
find: a 5xx on hostile input, an answer off the document, a hostile input accepted), and the
script prints, per tool: requests sent, distinct failures on the unbroken reference (false
alarms or real findings), planted defects found, and wall time.

    pip install -e '.[fuzz-compare]'
    python scripts/fuzz_compare.py --requests 2000 --seed 7            # in-process (ASGI / handle)
    python scripts/fuzz_compare.py --requests 1000 --seed 7 --http     # over a loopback socket

fuzz.py judges with its own rules plus the OpenAPI contract (tests/hardening/contract.py);
Schemathesis with its default checks. Both are steered to the populated project and its ids
for a share of requests, as fuzz.py always is.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load(relative: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fuzz = _load("scripts/fuzz.py", "fuzz")
contract = _load("tests/hardening/contract.py", "contract")

from aidememo_ref import ManualClock, ReferenceLedger, serve_in_thread  # noqa: E402
from aidememo_ref import _service
from aidememo_wire import canonical as _canonical  # noqa: E402

# -- planted defects: each bends the reference the way a real bug would -------------------------
Bend = Callable[[Callable[..., Any], str, bytes, list[tuple[bytes, bytes]], bytes], Any]


def _json_reply(status: int, value: object) -> Any:
    return _service.Response(status, (("content-type", "application/json"),), json.dumps(value).encode())


def _query(target: bytes) -> dict[bytes, bytes]:
    _, _, query = target.partition(b"?")
    return dict(pair.partition(b"=")[::2] for pair in query.split(b"&") if pair)


def big_integer_500(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """A JSON integer past f64 escapes the parser (the bug fuzz.py once found in _parse_int)."""
    if any(len(token) > 309 and token.isdigit() for token in body.replace(b",", b" ").replace(b":", b" ")
           .replace(b"[", b" ").replace(b"]", b" ").replace(b"}", b" ").split()):
        return _json_reply(500, {"error": {"code": "storage_failure", "message": "internal server error"}})
    return handle(method, target, headers, body)


def cursor_past_i64_500(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """A feed cursor above 2^63-1 reaches SQLite unclamped (the bug d7daf6d fixed)."""
    after = _query(target).get(b"after_seq", b"")
    if b"/changes" in target and after.isdigit() and int(after) > (1 << 63) - 1:
        return _json_reply(500, {"error": {"code": "storage_failure", "message": "internal server error"}})
    return handle(method, target, headers, body)


def empty_mode_is_default(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """`mode=` is taken as absent (the search-mode bug of issue 9)."""
    path, _, query = target.partition(b"?")
    pairs = [p for p in query.split(b"&") if p and p not in (b"mode=", b"mode")]
    return handle(method, path + (b"?" + b"&".join(pairs) if pairs else b""), headers, body)


def unknown_fields_accepted(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """Unknown body fields are dropped instead of refused (deny_unknown_fields missing)."""
    try:
        data = json.loads(body) if method == "POST" and body else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        known = {"command_id", "project_id", "expected_revision", "operation", "payload", "resource", "change"}
        data = {k: v for k, v in data.items() if k in known}
        body = json.dumps(data).encode()
    return handle(method, target, headers, body)


def receipt_without_timestamp(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """Receipts lose committed_at_ms: an answer off the documented shape."""
    answer = handle(method, target, headers, body)
    if method == "POST" and answer.status == 200:
        try:
            data = json.loads(answer.body)
        except ValueError:
            return answer
        if isinstance(data, dict) and "committed_at_ms" in data:
            data.pop("committed_at_ms")
            return dataclasses.replace(answer, body=json.dumps(data).encode())
    return answer


def limit_zero_accepted(handle: Any, method: str, target: bytes, headers: list[Any], body: bytes) -> Any:
    """A mailbox or search limit of 0 is served as the default instead of refused."""
    path, _, query = target.partition(b"?")
    pairs = [p for p in query.split(b"&") if p and p not in (b"limit=0", b"limit=%2B0")]
    return handle(method, path + (b"?" + b"&".join(pairs) if pairs else b""), headers, body)


PLANTED: dict[str, Bend] = {bend.__name__: bend for bend in (
    big_integer_500, cursor_past_i64_500, empty_mode_is_default, unknown_fields_accepted,
    receipt_without_timestamp, limit_zero_accepted)}


def ledger_for(database: Path, planted: str | None) -> ReferenceLedger:
    ledger = ReferenceLedger(database, clock=ManualClock())
    if planted is not None:
        original, bend = ledger.service.handle, PLANTED[planted]

        def handle(method: str, target: Any, headers: Any, body: bytes = b"") -> Any:
            raw = target.encode("latin-1") if isinstance(target, str) else target
            return bend(original, method, raw, list(headers), body)

        ledger.service.handle = handle  # type: ignore[method-assign]
    fuzz.provision_all(ledger)
    return ledger


# -- the two tools ------------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    requests: int = 0
    failures: set[str] = dataclasses.field(default_factory=set)
    seconds: float = 0.0


def _kind(problem: str) -> str:
    """A finding without the request it was found on: what makes two findings the same."""
    head = problem.rsplit(" on ", 1)[0]
    words = head.split(":", 2)[:2]  # "<METHOD template status>: <what>" without the quoted evidence
    return ":".join(words)[:160]


def run_fuzz_py(ledger: ReferenceLedger, url: str | None, requests: int, seed: int) -> Outcome:
    if url is None:
        send = fuzz.in_process_sender(ledger)
    else:
        host, _, port = url.removeprefix("http://").rpartition(":")
        send = fuzz.http_sender(host, int(port))
    fuzz.populate(send)
    found: set[str] = set()

    def extra(request: Any, status: int, headers: dict[str, str], body: bytes) -> list[str]:
        return contract.contract_problems(request.method, request.target.decode("latin-1"), status, headers, body,
                                          malformed=contract.malformed_http(request.target, request.headers))

    started = time.monotonic()
    class Seen(fuzz.Tally):  # type: ignore[misc, name-defined]
        """Keeps every finding's kind, not only the first 20 a Tally shows."""

        def note(self, problem: str) -> None:
            found.add(_kind(problem))
            super().note(problem)

    tally = Seen()
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    @hseed(seed)
    @settings(max_examples=requests, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(fuzz.requests(False))
    def one(request: Any) -> None:
        fuzz.judge(request, send, tally, extra)

    one()
    return Outcome(tally.tried, found, time.monotonic() - started)


def run_schemathesis(ledger: ReferenceLedger, url: str | None, requests: int, seed: int) -> Outcome:
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    counter = [0]
    app = ledger.asgi

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            counter[0] += 1
        await app(scope, receive, send)

    fuzz.populate(fuzz.in_process_sender(ledger))
    with (serve_in_thread(_Counting(counting)) if url is not None else _nothing()) as served:
        schema = (schemathesis.openapi.from_url(f"{served}/openapi.json") if url is not None
                  else schemathesis.openapi.from_asgi("/openapi.json", counting))
        operations = [result.ok() for result in schema.get_all_operations()]
        operations = [op for op in operations if "__test__" not in op.path]
        per = max(1, requests // (2 * len(operations)))
        found: set[str] = set()
        tokens = [token for token, _, _ in fuzz.ACTORS.values()]
        counter[0] = 0
        started = time.monotonic()
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if counter[0] >= requests:
                    break

                @hseed(seed)
                @settings(max_examples=per, database=None, deadline=None, phases=[Phase.generate],
                          suppress_health_check=list(HealthCheck))
                @given(case=operation.as_strategy(generation_mode=mode), steer=st.integers(0, 7),
                       who=st.sampled_from(tokens))
                def one(case: Any, steer: int, who: str) -> None:
                    if counter[0] >= requests:
                        return
                    # Steer into the populated world; never a negative case: it could repair the value it broke.
                    steered = mode is GenerationMode.POSITIVE
                    if steered and steer < 6 and "project_id" in (case.path_parameters or {}):
                        case.path_parameters["project_id"] = fuzz.PROJECT
                    if steered and steer < 4 and "handoff_id" in (case.path_parameters or {}):
                        case.path_parameters["handoff_id"] = ("h-1", "h-2", "h-done")[steer % 3]
                    try:
                        case.call_and_validate(base_url=served if url is not None else None,
                                               headers={"Authorization": f"Bearer {who}"})
                    except (KeyboardInterrupt, SystemExit):
                        raise
                    except BaseException as exc:  # Schemathesis raises a failure (group) per failing case
                        for failure in getattr(exc, "exceptions", [exc]):
                            title = getattr(failure, "title", None) or type(failure).__name__
                            found.add(f"{operation.method.upper()} {operation.path}: {title}")

                try:
                    one()
                except Unsatisfiable:
                    pass  # no negative case exists (e.g. GET /health has no input to break)
        return Outcome(counter[0], found, time.monotonic() - started)


@dataclasses.dataclass
class _Counting:
    asgi: Any


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


# -- the command line ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--http", action="store_true", help="both tools over a loopback socket")
    parser.add_argument("--only", choices=["fuzz.py", "schemathesis"], help="run one tool")
    args = parser.parse_args(argv)
    tools = {"fuzz.py": run_fuzz_py, "schemathesis": run_schemathesis}
    if args.only:
        tools = {args.only: tools[args.only]}
    print(f"seed={args.seed} requests={args.requests} {'http' if args.http else 'in-process'}  "
          f"(replay: python scripts/fuzz_compare.py --requests {args.requests} --seed {args.seed}"
          f"{' --http' if args.http else ''})", flush=True)
    totals: dict[str, list[Any]] = {name: [0, 0.0, 0, []] for name in tools}
    for planted in [None, *PLANTED]:
        for name, tool in tools.items():
            with tempfile.TemporaryDirectory() as tmp:
                ledger = ledger_for(Path(tmp) / "ledger.sqlite", planted)
                try:
                    if args.http and name == "fuzz.py":
                        with serve_in_thread(ledger) as url:
                            outcome = tool(ledger, url, args.requests, args.seed)
                    else:
                        outcome = tool(ledger, "http" if args.http else None, args.requests, args.seed)
                finally:
                    ledger.close()
            label = planted or "reference"
            totals[name][0] += outcome.requests
            totals[name][1] += outcome.seconds
            new = outcome.failures - set(totals[name][3])  # what the reference itself did not show
            if planted is None:
                totals[name][3] = sorted(outcome.failures)
            elif new:
                totals[name][2] += 1
            print(f"{label:<26} {name:<12} requests {outcome.requests:>6}  distinct failures "
                  f"{len(outcome.failures):>3}  new {len(new) if planted else '-':>3}  {outcome.seconds:6.1f} s",
                  flush=True)
            for failure in sorted(new)[:3] if planted else []:
                print(f"    + {failure[:150]}")
            for failure in sorted(outcome.failures)[:12] if planted is None else []:
                print(f"    {failure[:150]}")
    print()
    for name, (sent, seconds, caught, on_reference) in totals.items():
        print(f"{name:<12} requests {sent:>7}  planted defects found {caught}/{len(PLANTED)}  "
              f"distinct failures on the reference {len(on_reference)}  time {seconds:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
