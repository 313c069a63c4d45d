#!/usr/bin/env bash
# Token-free AideMemo handoff smoke: two accounts on one machine, then the same round trip over HTTP.
#
# Local half: an embedded store in a temporary directory, no server, no credentials. It runs
# upstream's own demo steps (workflow start, three facts, the packet checks, the resume check)
# and then the full assignment cycle with its fail-closed returns. AIDEMEMO_BIN picks the CLI,
# as in upstream's script: unset, it is this checkout's aidememo-ref; point it at upstream's
# `aidememo` and the same steps judge that binary. Steps that only this kit offers say
# "SKIP (kit only)" under another binary instead of passing silently.
# Remote half (kit only): the reference server on a free loopback port, two writer actors (token
# files mode 0600, never printed), the same core round trip.
# Every step prints "OK: ..."; any deviation prints "FAIL: <step>: ..." and exits non-zero.
#
# Usage: scripts/demo-agent-handoff.sh            (AIDEMEMO_BIN=/path/to/aidememo, PYTHON=...,
#        AIDEMEMO_DEMO_KEEP=1 keeps the temporary directory, AIDEMEMO_DEMO_LOCAL_ONLY=1 skips HTTP)
set -euo pipefail

# REPO, PY, KIT (this checkout's aidememo-ref), demo_tmp, fail, ok, start_server: shared with the other demos.
source "$(dirname "${BASH_SOURCE[0]}")/_demo.sh"
if [[ -n "${AIDEMEMO_BIN:-}" ]]; then
    [[ -x "$AIDEMEMO_BIN" ]] || fail "AIDEMEMO_BIN=$AIDEMEMO_BIN is not executable"
    AM=("$AIDEMEMO_BIN")
else
    AM=("${KIT[@]}")
fi
# Is the CLI under test this kit? (Kit-only steps run only then.)
IS_KIT=0
if [[ -z "${AIDEMEMO_BIN:-}" ]] || "${AM[@]}" shim --help >/dev/null 2>&1; then IS_KIT=1; fi

# Nothing from the caller's environment may leak into the demo's scope or identity.
unset AIDEMEMO_SESSION_ID AIDEMEMO_SOURCE_ID AIDEMEMO_ACTOR_ID AIDEMEMO_NOW_MS AIDEMEMO_SOURCE_FROM_HERMES \
      AIDEMEMO_ACTOR_FROM_HERMES_PROFILE AIDEMEMO_REMOTE_PROFILE AIDEMEMO_STORE HERMES_KANBAN_BOARD \
      HERMES_KANBAN_TASK HERMES_TENANT HERMES_PROFILE

demo_tmp aidememo-demo AIDEMEMO_DEMO_KEEP
STORE="$TMP/team.sqlite"

skip() { echo "SKIP (kit only): $*"; }
am() { "${AM[@]}" --store "$STORE" "$@"; }
amr() { "${KIT[@]}" "$@"; }
# jget PATH: read JSON on stdin, print the value at a dotted path (list indexes are numbers).
jget() {
    "$PY" -c '
import json, sys
value = json.load(sys.stdin)
for part in sys.argv[1].split("."):
    value = value[int(part)] if isinstance(value, list) else value[part]
print(json.dumps(value) if isinstance(value, (dict, list)) or value is None else value)' "$1"
}
contains() { [[ "$1" == *"$2"* ]] || fail "expected to find: $2"; }
# refused EXPECTED CMD...: the command must fail with EXPECTED in its one-line error.
refused() {
    local expected="$1" out
    shift
    if out="$("$@" 2>&1)"; then fail "was accepted but must be refused ($expected)"; fi
    [[ "$out" == *"$expected"* ]] || fail "refused with '$out', expected '$expected'"
    [[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]] || fail "error was not one line: $out"
}

SOURCE="release-team"

# ------------------------------------------------------------------------- upstream's demo steps
STEP="workflow start"
SESSION="$(am --json workflow start "Harden release preflight" \
    --body "The orchestrator assigned Codex to diagnose the flaky package gate." \
    --source "orchestrator:demo/run-01" --source-id "$SOURCE" --bm25-only | jget session_id)"
[[ "$SESSION" == session-* ]] || fail "no session id"
export AIDEMEMO_SESSION_ID="$SESSION"
export AIDEMEMO_ACTOR_ID=codex-one
DECISION="$(am --json fact add "Decision: run the package smoke before the full release preflight." \
    --type decision --entities Release --source-id "$SOURCE" | jget id)"
am fact add "Lesson: the previous failure came from stale wheel metadata, not Rust compilation." \
    --type lesson --entities Release,Python --source-id "$SOURCE" >/dev/null
am fact add "Error: do not publish until the installed wheel version matches workspace metadata." \
    --type error --entities Release,Python --source-id "$SOURCE" >/dev/null
ok "workflow session $SESSION with a decision, a lesson and an error (as codex-one)"

STEP="packet preview"
PACKET="$TMP/codex-to-hermes.md"
am session handoff --from codex/coding --to hermes/reviewer \
    --focus "Verify package metadata, then run the release preflight if the smoke passes." \
    --done-when "The installed wheel matches workspace metadata and release preflight passes." \
    --source-id "$SOURCE" --output "$PACKET" "$SESSION" >/dev/null
P="$(cat "$PACKET")"
for needle in '# AideMemo Agent Handoff' "session: \`$SESSION\`" 'from_agent: codex' 'from_profile: coding' \
    'to_agent: hermes' 'to_profile: reviewer' '## Resume Contract' '## Definition of Done' \
    'installed wheel matches workspace metadata' "eval \"\$(aidememo session resume --source-id '$SOURCE'" \
    'run the package smoke before the full release preflight' 'stale wheel metadata' 'do not publish until' \
    'aidememo fact get <fact_id>'; do
    contains "$P" "$needle"
done
[[ "$(am --json handoff outbox | jget assignments)" == "[]" ]] || fail "preview dispatched something"
ok "read-only packet ($(wc -c <"$PACKET") bytes) has upstream's headings and lines; nothing dispatched"

STEP="one-command resume"
unset AIDEMEMO_SESSION_ID AIDEMEMO_SOURCE_ID
eval "$(am session resume --source-id "$SOURCE" "$SESSION")"
[[ "${AIDEMEMO_SESSION_ID:-}" == "$SESSION" && "${AIDEMEMO_SOURCE_ID:-}" == "$SOURCE" ]] || fail "resume did not export"
ok "session resume activated session and source scope"

# ------------------------------------------------------------------------- the assignment cycle
STEP="agent profile"
am agent add codex-two --type manual --workspace "$TMP" --source-id "$SOURCE" >/dev/null
[[ "$(am --json agent show codex-two | jget installation.agent)" == manual ]] || fail "profile not stored"
ok "agent profile codex-two (manual; paths and routing only, no credentials)"

STEP="send"
HANDOFF="$(am --json handoff send codex-two --focus 'Review the release preflight' \
    --done-when 'preflight passes and the review is recorded' | jget handoff_id)"
[[ "$HANDOFF" == handoff-* ]] || fail "no handoff id"
[[ "$(am --json handoff show "$HANDOFF" | jget status)" == pending ]] || fail "not pending"
ok "sent $HANDOFF to codex-two (a pointer to the session, no fact copied)"

STEP="receiver inbox"
[[ "$(am --json handoff inbox --actor-id codex-two | jget assignments.0.handoff_id)" == "$HANDOFF" ]] || fail "receiver cannot see it"
[[ "$(am --json handoff inbox --actor-id codex-one | jget assignments)" == "[]" ]] || fail "sender sees it in its inbox"
[[ "$(am --json handoff inbox --actor-id stranger | jget assignments)" == "[]" ]] || fail "a stranger sees it"
ok "only codex-two sees the assignment in its inbox"

STEP="manual profile refused by run"
refused "uses the manual adapter" am handoff run codex-two
ok "handoff run refused the manual profile"

STEP="accept"
export AIDEMEMO_ACTOR_ID=codex-two
ACCEPT="$(am handoff accept "$HANDOFF")"
contains "$ACCEPT" "# Accepted assignment \`$HANDOFF\`"
contains "$ACCEPT" 'run the package smoke before the full release preflight'
contains "$ACCEPT" "Resume: eval \"\$(aidememo session resume --source-id '$SOURCE' '$SESSION')\""
[[ "$(am --json handoff show "$HANDOFF" | jget attempt_count)" == 1 ]] || fail "attempt_count is not 1"
ok "codex-two accepted; the packet was rebuilt from the session's current facts"

STEP="receiver evidence"
RESULT="$(am --json fact add 'Review passed: preflight green' --type note --entities Release --source-id "$SOURCE" \
    --actor-id codex-two | jget id)"
[[ "$(am --json fact get "$RESULT" | jget actor_id)" == codex-two ]] || fail "wrong author"
ok "codex-two recorded result fact $RESULT in the session"

STEP="fail-closed return: fact not attached to the session"
unset AIDEMEMO_SESSION_ID
DETACHED="$(am --json fact add 'Review notes outside the session' --source-id "$SOURCE" | jget id)"
export AIDEMEMO_SESSION_ID="$SESSION"
refused "must be attached to handoff session $SESSION" \
    am handoff return --outcome succeeded --result-fact-id "$DETACHED" "$HANDOFF"
ok "return refused: result fact not attached to the delivered session"

STEP="fail-closed return: wrong source_id"
FOREIGN="$(am --json fact add 'Review notes in another scope' --source-id other-team --entities "$SESSION" | jget id)"
refused "must use the handoff source_id" am handoff return --outcome succeeded --result-fact-id "$FOREIGN" "$HANDOFF"
ok "return refused: result fact carries another source_id"

STEP="fail-closed return: not written by the receiver"
refused "must be written by receiving actor codex-two" \
    am handoff return --outcome succeeded --result-fact-id "$DECISION" "$HANDOFF"
ok "return refused: result fact written by codex-one, not the receiving actor"

STEP="fail-closed return: not the receiver"
refused "is assigned to codex-two, not codex-one" \
    am handoff return --outcome succeeded --result-fact-id "$RESULT" --actor-id codex-one "$HANDOFF"
[[ "$(am --json handoff show "$HANDOFF" | jget status)" == accepted ]] || fail "a refused return changed the status"
ok "return refused: codex-one is not the receiver; the assignment is still accepted"

STEP="return"
RETURNED="$(am handoff return --outcome succeeded --result-fact-id "$RESULT" "$HANDOFF")"
contains "$RETURNED" "Returned handoff $HANDOFF outcome=succeeded status=completed result=$RESULT"
ok "returned $HANDOFF succeeded with $RESULT"

STEP="identical return changes nothing"
BEFORE="$(am --json handoff show "$HANDOFF")"
am handoff return --outcome succeeded --result-fact-id "$RESULT" "$HANDOFF" >/dev/null
[[ "$(am --json handoff show "$HANDOFF")" == "$BEFORE" ]] || fail "the repeat changed the record"
ok "an identical return changed nothing"

STEP="sender outbox and show"
export AIDEMEMO_ACTOR_ID=codex-one
OUTBOX="$(am --json handoff outbox)"
[[ "$(jget assignments.0.handoff_id <<<"$OUTBOX")" == "$HANDOFF" && "$(jget assignments.0.result_fact_id <<<"$OUTBOX")" == "$RESULT" ]] \
    || fail "outbox does not link the result"
contains "$(am handoff show "$HANDOFF")" "[completed] codex-one -> codex-two session=$SESSION outcome=succeeded result=$RESULT"
ok "codex-one sees the completed assignment and the linked result fact"

STEP="board"
contains "$(am handoff board --include-completed)" "$HANDOFF [returned] codex-one -> codex-two next=validate_result owner=caller"
ok "board: returned lane, next action validate_result"

STEP="run with the command adapter"
if [[ "$IS_KIT" == 1 ]]; then
    am agent add echo-worker --type command --source-id "$SOURCE" \
        --command "$PY -c 'import sys; sys.stdin.read(); print(\"echo-worker reviewed the packet\")'" >/dev/null
    RUN_ID="$(am --json handoff send echo-worker --focus 'Echo the packet' | jget handoff_id)"
    RUN="$(am handoff run echo-worker --timeout 120 2>/dev/null)"
    [[ "$(jget handoff_id <<<"$RUN")" == "$RUN_ID" && "$(jget assignment_status <<<"$RUN")" == completed ]] || fail "run did not complete"
    ok "handoff run ran echo-worker with the built-in runner to a returned result"
else
    skip "the command adapter and built-in runner are aidememo-ref's; upstream delegates to aidememo-worker-lane"
fi

if [[ "${AIDEMEMO_DEMO_LOCAL_ONLY:-}" == 1 || "$IS_KIT" != 1 ]]; then
    [[ "$IS_KIT" == 1 ]] || skip "the remote half provisions the kit's reference server"
    ok "local protocol smoke passed (remote half skipped)"
    exit 0
fi

# ------------------------------------------------------------------------- remote half
STEP="start the reference server"
DB="$TMP/ledger.sqlite"
start_server serve --database "$DB" --bind 127.0.0.1:0
ok "reference server healthy at $URL"

STEP="provision two actors"
for actor in codex-p1 codex-p2; do
    (umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(32))' >"$TMP/$actor.token")
    amr bootstrap --database "$DB" --tenant-id demo --project-id aidememo --actor-id "$actor" \
        --token-file "$TMP/$actor.token" --role writer >/dev/null
done
ok "provisioned codex-p1 and codex-p2 (token files mode 0600, never printed)"

STEP="remote round trip"
"$PY" - "$URL" "$TMP" "$SESSION" "$PACKET" <<'PYEOF'
import sys
from pathlib import Path

from aidememo_cli._local._ids import new_ulid
from aidememo_client.client import AideMemoClient, AideMemoHTTPError, ClientRefusal

url, tmp, session_id, packet = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]).read_text()
step = "remote setup"


def fail(message: str) -> None:
    print(f"FAIL: {step}: {message}", file=sys.stderr)
    sys.exit(1)


def ok(message: str) -> None:
    print(f"OK: {message}", flush=True)


def client(actor: str) -> AideMemoClient:
    token = (tmp / f"{actor}.token").read_text().strip()
    return AideMemoClient(url, token, "aidememo")


try:
    p1, p2 = client("codex-p1"), client("codex-p2")
    step = "remote identity"
    if (p1.actor_id, p2.actor_id) != ("codex-p1", "codex-p2"):
        fail(f"tokens resolve to {p1.actor_id}, {p2.actor_id}")
    ok("each token resolves to its own actor (identity comes from the server, not a flag)")

    step = "remote session and context"
    now = int(__import__("time").time() * 1000)
    handoff_id, context_id = f"handoff_{new_ulid(now)}", f"context_{new_ulid(now)}"
    p1.create_session(session_id, "Redis timeout patch review", "project:aidememo")
    p1.create_context(context_id, handoff_id, session_id, "codex-p2", packet)
    ok(f"codex-p1 routed session {session_id} and its packet ({len(packet)} bytes) to the server")

    step = "remote send"
    p1.send(handoff_id, session_id, "codex-p2", focus="Review the remote boundary", done_when="review recorded",
            context_id=context_id)
    if p1.status(handoff_id)["record"]["status"] != "pending":
        fail("not pending after send")
    ok(f"codex-p1 sent {handoff_id}")

    step = "remote receiver inbox"
    if [a["record"]["handoff_id"] for a in p2.inbox()["assignments"]] != [handoff_id]:
        fail("receiver inbox does not hold exactly the handoff")
    if p1.inbox()["assignments"]:
        fail("sender inbox is not empty")
    ok("only codex-p2 sees it in its inbox")

    step = "remote accept"
    first = p2.accept(handoff_id)
    again = p2.accept(handoff_id)
    if first["recovered"] or not again["recovered"] or again["claim_id"] != first["claim_id"]:
        fail(f"accept recovery wrong: {first['recovered']}, {again['recovered']}")
    ok(f"codex-p2 accepted with derived claim {first['claim_id'][:16]}...; a repeat recovered without a POST")

    step = "remote evidence"
    fact_id = new_ulid(now)
    p2.create_fact(fact_id, session_id, "Remote review passed")
    try:
        p1.transition(handoff_id, "return", expected_revision=p1.status(handoff_id)["revision"],
                      payload={"claim_id": first["claim_id"], "result_fact_id": fact_id, "outcome": "succeeded"},
                      command_id=f"command_demo_{new_ulid(now)}")
        fail("the sender returned the receiver's assignment")
    except AideMemoHTTPError as exc:
        if (exc.status, exc.code) != (403, "handoff_actor_mismatch"):
            fail(f"sender return answered {exc.status} {exc.code}")
    ok(f"codex-p2 wrote fact {fact_id}; a return by codex-p1 was refused 403 handoff_actor_mismatch")

    step = "remote return"
    returned = p2.return_result(handoff_id, fact_id, "succeeded")
    if returned["recovered"]:
        fail("first return reported recovered")
    current = p1.status(handoff_id)
    record = current["record"]
    if (record["status"], record["result_fact_id"], record["outcome"]) != ("completed", fact_id, "succeeded"):
        fail(f"sender status shows {record['status']} {record['result_fact_id']}")
    ok("codex-p2 returned; codex-p1's status shows completed with the linked fact")

    step = "remote replayed return"
    replay = p2.return_result(handoff_id, fact_id, "succeeded")
    if not replay["recovered"] or replay["receipt"] is not None:
        fail("replayed return was sent again")
    if p1.status(handoff_id)["revision"] != current["revision"]:
        fail("replayed return moved the revision")
    ok("a replayed return recovered and left the revision unchanged")
except (AideMemoHTTPError, ClientRefusal, OSError) as exc:
    fail(str(exc))
PYEOF
ok "remote protocol smoke passed"
ok "all steps passed"
