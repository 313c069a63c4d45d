#!/usr/bin/env bash
# XMemo agent-to-agent handoff (the seed's six steps) between Claude and Codex, against an XMemo
# reference this script starts on a free loopback port and provisions itself.
#
#   1. Claude: task_start          2. Codex: recall_context (SDK, POST /v1/recall/context)
#   3. Claude: record_decision     4. Codex: record_bug_fix
#   5. Codex: task_end             6. Claude: recall_context (MCP tool, "### XMemo Context")
#
# Both agents use keys of the same owner (mode 0600 files made here, never printed) and assert
# their agent ids with the attribution headers, as in the seed. Every recalled item's boundary
# object is printed ("  boundary [n] <type> <id>: {...}"); every step prints "OK: ..."; any deviation prints
# "FAIL: <step>: ..." and exits non-zero.
#
# Usage: scripts/demo-xmemo-handoff.sh   (PYTHON=... picks the interpreter, XMEMO_DEMO_KEEP=1 keeps the temp dir)
set -euo pipefail

# REPO, PY, KIT, demo_tmp, fail, ok, start_server: shared with the other demos.
source "$(dirname "${BASH_SOURCE[0]}")/_demo.sh"
demo_tmp xmemo-demo XMEMO_DEMO_KEEP

STEP="provision two keys of one owner"
DB="$TMP/xmemo.sqlite"
for agent in claude codex; do
    (umask 077 && "$PY" -c 'import secrets; print("xmemo-demo-" + secrets.token_hex(24))' >"$TMP/$agent.key")
    "${KIT[@]}" xmemo bootstrap --database "$DB" --owner-id acme --project-id memory-os \
        --key-file "$TMP/$agent.key" >/dev/null || fail "bootstrap of $agent's key was refused"
done
ok "two keys bound to owner acme, project memory-os (scopes memory:read,memory:write)"

STEP="start the XMemo reference"
start_server xmemo serve --database "$DB" --bind 127.0.0.1:0
ok "XMemo reference healthy at $URL"

"$PY" - "$URL" "$TMP" <<'PYEOF' || exit 1  # it printed its own FAIL line
import json
import sys
from pathlib import Path

from xmemo_ref.client import XMemoClient

url, tmp = sys.argv[1], Path(sys.argv[2])
step = "setup"


def fail(message: str) -> None:
    print(f"FAIL: {step}: {message}", file=sys.stderr)
    sys.exit(1)


def ok(message: str) -> None:
    print(f"OK: {message}", flush=True)


def show(items: list[dict]) -> None:
    for item in items:
        print(f"  boundary [{item['rank']}] {item['memory_type']} {item['id']}: "
              f"{json.dumps(item['agent_boundary'], ensure_ascii=False)}")


scope, options = "memory-os", {"session_id": "handoff-session-1", "task_id": "handoff-1", "scope": "memory-os"}
claude = XMemoClient(url, (tmp / "claude.key").read_text().strip(), agent_id="claude", agent_instance_id="claude-desk-1")
codex = XMemoClient(url, (tmp / "codex.key").read_text().strip(), agent_id="codex", agent_instance_id="codex-cloud-1",
                    auth="bearer")

step = "1 Claude task_start"
start = claude.task_start("Review the deployment adapter", source="claude", **options)
if not start.should_capture:
    fail(f"task start was not captured: {start.reason}")
stored = claude.get_memory(start.memory_id)
if (stored["memory_type"], stored["status"]) != ("working", "started"):
    fail(f"task start reads back as {stored['memory_type']}/{stored['status']}")
ok(f"1 Claude task_start: working memory {start.memory_id} status started")

step = "2 Codex recall_context"
first = codex.recall_context("deployment adapter decision and current bug", scope=scope, max_items=6, max_tokens=1200,
                             prefer_working=True)
ids = [item["id"] for item in first.items]
if start.memory_id not in ids:
    fail("Codex does not see Claude's task start")
if len(first.items) > 6 or first.budget.get("used_tokens", 0) > 1200:
    fail(f"packet breaks its bounds: {len(first.items)} items, {first.budget}")
if any(item["agent_boundary"]["relation"] != "other_agent" for item in first.items):
    fail("an item written by Claude is not other_agent for Codex")
ok(f"2 Codex recall_context: version {first.version}, {len(first.items)} item(s), "
   f"{first.budget['used_tokens']} of 1200 tokens")
show(list(first.items))

step = "3 Claude record_decision"
decision = claude.record_decision("Use the hosted network MCP transport for remote agents.", source="claude", **options)
if not decision.should_capture:
    fail(f"decision was not captured: {decision.reason}")
ok(f"3 Claude record_decision: semantic memory {decision.memory_id}")

step = "4 Codex record_bug_fix"
fix = codex.record_bug_fix("Fixed streamable-http token identity fallback.", source="codex", **options)
if not fix.should_capture or fix.memory_type != "semantic":
    fail(f"bug fix was not captured as semantic: {fix.reason}")
ok(f"4 Codex record_bug_fix: semantic memory {fix.memory_id}")

step = "5 Codex task_end"
end = codex.task_end("Deployment adapter fix completed for handoff.", source="codex", **options)
if not end.should_capture or (end.memory_type, end.status) != ("working", "completed"):
    fail(f"task end was not captured as working/completed: {end.reason}")
ok(f"5 Codex task_end: working memory {end.memory_id} status completed")

step = "6 Claude recall_context"
query = "deployment adapter decision, Codex fix, and handoff status"
headers = {"accept": "application/json, text/event-stream"}
begun = claude.request("POST", "/mcp", headers=headers, json_body={
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "demo", "version": "1"}}})
headers["mcp-session-id"] = begun.headers["mcp-session-id"]


def call(arguments: dict) -> str:
    answer = claude.request("POST", "/mcp", headers=headers, json_body={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall_context", "arguments": arguments}})
    result = answer.json()["result"]
    if result.get("isError"):
        fail(result["content"][0]["text"])
    return result["content"][0]["text"]


text = call({"query": query, "max_items": 6, "max_tokens": 1200})
if not text.startswith("### XMemo Context"):
    fail("the MCP text answer does not begin with ### XMemo Context")
packet = json.loads(call({"query": query, "max_items": 6, "max_tokens": 1200, "output_json": True}))
relations = {item["id"]: item["agent_boundary"]["relation"] for item in packet["items"]}
if relations.get(decision.memory_id) != "self":
    fail(f"Claude's own decision is {relations.get(decision.memory_id)!r}, not self")
if relations.get(fix.memory_id) != "other_agent":
    fail(f"Codex's fix is {relations.get(fix.memory_id)!r} for Claude, not other_agent")
if len(packet["items"]) > 6 or packet["budget"]["used_tokens"] > 1200:
    fail(f"packet breaks its bounds: {packet['budget']}")
if "Use the hosted network MCP transport" not in text or "Fixed streamable-http" not in text:
    fail("the context text does not carry the decision and the fix")
ok(f"6 Claude recall_context (MCP): decision and fix both recalled, {len(packet['items'])} item(s), "
   f"{packet['budget']['used_tokens']} of 1200 tokens")
show(packet["items"])
summary = packet["agent_boundary"]
ok(f"boundary summary: caller {summary['current_agent_id']} ({summary['current_agent_trust']}), "
   f"authority {summary['boundary_authority']}, relations {json.dumps(summary['relations'])}")
claude.close()
codex.close()
PYEOF
ok "all steps passed"
