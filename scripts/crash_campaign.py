#!/usr/bin/env python3
"""Crash campaign: kill -9 the reference server under load, restart it, prove nothing was lost.

Several writer clients run compare-and-swap puts and handoff sends/accepts/returns against
``aidememo-ref serve``; the server is killed with SIGKILL at seeded random moments and started
again on the same database. At the end every receipt that was ever answered must replay byte
for byte, the project sequence must have no gap, every answered (resource, revision) must be in
the change feed at its sequence, and no handoff may have had more live claims than attempts.
Two accepts race for each handoff from the same revision, so a second live claim would show.

    python scripts/crash_campaign.py --kills 20 --writers 4 --seed 7
    AIDEMEMO_POSTGRES_URL=postgresql://... python scripts/crash_campaign.py --backend postgres --kills 20

With ``--backend postgres`` two servers share one PostgreSQL database (the URL is read from
``$AIDEMEMO_POSTGRES_URL``); the writers are spread over both and each kill hits one of them.

Exit 0 when no loss was found; every run prints its seed and the command that replays it.
Only loopback is used.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from refkit.process import ReferenceProcess, ServerStartError

TOKENS = {"sender": "crash-sender-token-0123456789", "receiver": "crash-receiver-token-0123456789"}


def start_server(database: Path | None, postgres_url: str | None = None) -> ReferenceProcess:
    try:
        return ReferenceProcess.start(database, postgres_url=postgres_url)
    except ServerStartError as exc:
        raise SystemExit(f"error: {exc}") from None


class Ledger:
    """Everything the writers were told: (path, body, receipt bytes) per answered command."""

    def __init__(self) -> None:
        self.answered: list[tuple[str, dict[str, object], bytes]] = []
        self.lock = threading.Lock()

    def record(self, path: str, body: dict[str, object], content: bytes) -> None:
        with self.lock:
            self.answered.append((path, body, content))


def writer(url: str, wid: int, incarnation: int, rng: random.Random, book: Ledger, stop: threading.Event) -> None:
    headers = {name: {"Authorization": f"Bearer {token}"} for name, token in TOKENS.items()}
    http = httpx.Client(base_url=url, timeout=5)
    step = 0

    def post(actor: str, path: str, body: dict[str, object]) -> httpx.Response | None:
        try:
            r = http.post(path, json=body, headers=headers[actor])
        except httpx.TransportError:
            stop.set()
            return None
        if r.status_code == 200:
            book.record(path, body, r.content)
        return r

    base = "/v1/projects/p"
    while not stop.is_set():
        step += 1
        tag = f"{incarnation}-{wid}-{step}"
        if rng.random() < 0.5:
            try:
                cur = http.get(f"{base}/resources/custom.counter/w{wid}", headers=headers["sender"])
            except httpx.TransportError:
                return
            rev = cur.json()["revision"] if cur.status_code == 200 else None
            post("sender", "/v1/commands", {
                "command_id": f"put-{tag}", "project_id": "p", "expected_revision": rev, "operation": "resource.put",
                "payload": {"step": tag}, "resource": {"kind": "custom.counter", "id": f"w{wid}"}, "change": "upsert"})
            continue
        hid = f"h-{tag}"
        if post("sender", f"{base}/handoffs", {"command_id": f"send-{tag}", "payload": {
                "handoff_id": hid, "session_id": "s", "to_actor": "receiver"}}) is None:
            return
        # Two workers of the receiver race for the pending handoff with the same expected
        # revision: at most one may hold a claim, whatever the kills do.
        answers: dict[str, httpx.Response | None] = {}

        def accept(side: str) -> None:
            answers[side] = post("receiver", f"{base}/handoffs/{hid}/accept", {
                "command_id": f"accept-{tag}-{side}", "expected_revision": 1, "payload": {"claim_id": f"c-{tag}-{side}"}})

        rival = threading.Thread(target=accept, args=("b",))
        rival.start()
        accept("a")
        rival.join()
        won = [side for side, r in answers.items() if r is not None and r.status_code == 200]
        if not won:
            continue
        claim = f"c-{tag}-{won[0]}"
        fid = f"f-{tag}"
        if post("receiver", f"{base}/facts", {"command_id": f"fact-{tag}", "payload": {
                "fact_id": fid, "session_id": "s", "content": f"result {tag}"}}) is None:
            return
        post("receiver", f"{base}/handoffs/{hid}/return", {"command_id": f"return-{tag}", "expected_revision": 2,
             "payload": {"claim_id": claim, "result_fact_id": fid, "outcome": "succeeded"}})


def verify(url: str, book: Ledger) -> tuple[int, list[str]]:
    losses: list[str] = []
    http = httpx.Client(base_url=url, timeout=10)
    auth = {name: {"Authorization": f"Bearer {token}"} for name, token in TOKENS.items()}
    for path, body, content in book.answered:
        actor = "receiver" if any(k in path for k in ("/accept", "/return", "/facts")) else "sender"
        again = http.post(path, json=body, headers=auth[actor])
        if again.content != content:
            losses.append(f"receipt drifted or lost for {body['command_id']}: {content!r} -> {again.content!r}")
    epoch = http.get("/v1/projects/p/identity", headers=auth["sender"]).json()["project_epoch"]
    seqs: dict[int, tuple[str, str, int]] = {}
    after = 0
    while True:
        page = http.get("/v1/projects/p/changes", params={"project_epoch": epoch, "after_seq": after, "limit": 10000},
                        headers=auth["receiver"]).json()
        for e in page["entries"]:
            seqs[e["seq"]] = (e["resource"]["kind"], e["resource"]["id"], e["revision"])
        after = page["next_cursor"]["after_seq"]
        if not page["has_more"]:
            break
    if sorted(seqs) != list(range(1, after + 1)):
        losses.append(f"project sequence has gaps: {len(seqs)} entries up to {after}")
    for _, body, content in book.answered:
        receipt = json.loads(content)
        entry = seqs.get(receipt["project_seq"])
        coordinate = (receipt["resource"]["kind"], receipt["resource"]["id"], receipt["revision"])
        if entry != coordinate:
            losses.append(f"answered {body['command_id']} at seq {receipt['project_seq']} is not in the feed")
    claims: dict[str, set[str]] = {}
    first_grants: dict[str, set[str]] = {}
    for path, body, _ in book.answered:
        if path.endswith("/accept"):
            hid = path.split("/")[5]
            claims.setdefault(hid, set()).add(body["payload"]["claim_id"])  # type: ignore[index]
            if body["expected_revision"] == 1:
                first_grants.setdefault(hid, set()).add(body["payload"]["claim_id"])  # type: ignore[index]
    for hid, granted in first_grants.items():
        if len(granted) > 1:
            losses.append(f"handoff {hid} granted two live claims from revision 1: {sorted(granted)}")
    for hid, held in claims.items():
        record = http.get(f"/v1/projects/p/handoffs/{hid}", headers=auth["receiver"]).json()["record"]
        if len(held) > record["attempt_count"]:
            losses.append(f"handoff {hid} granted {len(held)} claims in {record['attempt_count']} attempts")
    return len(book.answered), losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-uptime", type=float, default=0.8, help="longest seconds between kills")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                        help="postgres: two servers on the database named by $AIDEMEMO_POSTGRES_URL")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.writers < 1 or args.max_uptime <= 0:
        print("error: --kills, --writers and --max-uptime must be positive", file=sys.stderr)
        return 2
    postgres_url = os.environ.get("AIDEMEMO_POSTGRES_URL") if args.backend == "postgres" else None
    if args.backend == "postgres" and not postgres_url:
        print("error: --backend postgres reads the database URL from AIDEMEMO_POSTGRES_URL, which is not set",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    replay = (f"python scripts/crash_campaign.py --kills {args.kills} --writers {args.writers} --seed {seed}"
              + (" --backend postgres" if postgres_url else ""))
    print(f"seed={seed}  (replay: {replay})")
    rng = random.Random(seed)
    book = Ledger()
    with tempfile.TemporaryDirectory() as tmp:
        database = None if postgres_url else Path(tmp) / "crash.sqlite"
        from aidememo_ref import provision

        for actor, token in TOKENS.items():
            provision(database, postgres_url=postgres_url, tenant_id="t", project_id="p", actor_id=actor, token=token,
                      project_epoch="e")
        servers = [start_server(database, postgres_url) for _ in range(2 if postgres_url else 1)]
        httpx.post(f"{servers[0].url}/v1/projects/p/sessions",
                   json={"command_id": "s", "payload": {"session_id": "s", "topic": "t"}},
                   headers={"Authorization": f"Bearer {TOKENS['sender']}"})
        started = time.monotonic()
        for incarnation in range(args.kills):
            stop = threading.Event()
            threads = [threading.Thread(target=writer, args=(servers[w % len(servers)].url, w, incarnation,
                                                             random.Random(rng.random()), book, stop))
                       for w in range(args.writers)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.05, args.max_uptime))
            victim = rng.randrange(len(servers))  # with two servers, the other one keeps running
            servers[victim].kill()
            stop.set()
            for t in threads:
                t.join(timeout=30)
            servers[victim] = start_server(database, postgres_url)
        answered, losses = verify(servers[-1].url, book)
        for server in servers:
            server.stop()
    elapsed = time.monotonic() - started
    print(f"kills survived: {args.kills}  receipts verified: {answered}  losses: {len(losses)}  ({elapsed:.1f} s)")
    for loss in losses[:20]:
        print(f"LOSS: {loss}")
    if losses:
        print(f"replay: {replay}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
