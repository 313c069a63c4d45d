#!/usr/bin/env bash
# Two accounts on one server: the handoff guide's remote example, end to end, against a reference
# server this script starts and provisions itself.
#
# It starts `aidememo-ref serve` on a free loopback port, provisions codex-p1 and codex-p2 with
# tokens it generates into 0600 files (no token is typed, printed or logged), logs both in as named
# profiles in a throwaway HOME, and then runs the guide's commands: send an existing tracked session,
# read the receiver's inbox, `eval` the accept into the receiver's own store, write receiver-owned
# evidence there, return it, read the sender's outbox. Between the guide's steps it checks what the
# guide promises: identity only from the token, retries that recover instead of repeating, a send
# rerun that makes no second handoff, a replica that answers with the server gone.
#
# AIDEMEMO_BIN picks the CLI under test (default: this checkout's aidememo-ref); the server, its
# provisioning and token generation are always the kit's. Every step prints "OK: ..."; any
# deviation prints "FAIL: <step>: ..." and exits non-zero.
#
# Usage: scripts/demo-remote-handoff.sh     (AIDEMEMO_BIN=..., PYTHON=..., AIDEMEMO_DEMO_KEEP=1 keeps the files)
set -euo pipefail

# REPO, PY, KIT, demo_tmp, fail, ok, start_server, stop_server: shared with the other demos.
source "$(dirname "${BASH_SOURCE[0]}")/_demo.sh"
if [[ -n "${AIDEMEMO_BIN:-}" ]]; then
    [[ -x "$AIDEMEMO_BIN" ]] || fail "AIDEMEMO_BIN=$AIDEMEMO_BIN is not executable"
    AM=("$AIDEMEMO_BIN")
else
    AM=("${KIT[@]}")
fi

unset AIDEMEMO_SESSION_ID AIDEMEMO_SOURCE_ID AIDEMEMO_ACTOR_ID AIDEMEMO_NOW_MS AIDEMEMO_REMOTE_PROFILE \
      AIDEMEMO_STORE AIDEMEMO_SOURCE_FROM_HERMES AIDEMEMO_ACTOR_FROM_HERMES_PROFILE HERMES_KANBAN_BOARD \
      HERMES_KANBAN_TASK HERMES_TENANT HERMES_PROFILE

demo_tmp aidememo-remote-demo AIDEMEMO_DEMO_KEEP
export HOME="$TMP/home"  # auth.json and the send outbox live here, never in the caller's home
mkdir -p "$HOME/.config/aidememo"
P1_STORE="$HOME/.aidememo/local.sqlite"  # the sender runs the guide's commands as written: the default store
P2_STORE="$TMP/codex-p2.sqlite"
SOURCE="project:aidememo"

am() { "${AM[@]}" "$@"; }
jget() {
    "$PY" -c '
import json, sys
value = json.load(sys.stdin)
for part in sys.argv[1].split("."):
    value = value[int(part)] if isinstance(value, list) else value[part]
print(json.dumps(value) if isinstance(value, (dict, list)) or value is None else value)' "$1"
}
refused() {
    local expected="$1" out
    shift
    if out="$("$@" 2>&1)"; then fail "was accepted but must be refused ($expected)"; fi
    [[ "$out" == *"$expected"* ]] || fail "refused with '$out', expected '$expected'"
}

# ---------------------------------------------------------------------- the server and two actors
STEP="start the reference server"
DB="$TMP/ssot.sqlite"
start_server serve --database "$DB" --bind 127.0.0.1:0
ok "reference server listening at $URL"

STEP="provision two accounts"
for actor in codex-p1 codex-p2; do
    token="$HOME/.config/aidememo/$actor.token"
    "${KIT[@]}" auth generate --output "$token" >/dev/null
    "${KIT[@]}" bootstrap --database "$DB" --tenant-id demo --project-id aidememo --actor-id "$actor" \
        --token-file "$token" >/dev/null
done
ok "provisioned codex-p1 and codex-p2 on project aidememo (generated tokens in 0600 files, never shown)"

# ------------------------------------------------------------------------- the guide's commands
STEP="auth login"
am auth login "$URL" --profile codex-p1 --project-id aidememo --token-file "$HOME/.config/aidememo/codex-p1.token" >/dev/null
am auth login "$URL" --profile codex-p2 --project-id aidememo --token-file "$HOME/.config/aidememo/codex-p2.token" >/dev/null
listed="$(am auth list)"
[[ "$listed" == *"profile=codex-p1"* && "$listed" == *"profile=codex-p2"* ]] || fail "auth list: $listed"
ok "two named profiles share one URL, each with its own token and project"

STEP="sender's tracked session"
eval "$(am session new --source-id "$SOURCE" 'Redis timeout 패치 검토')"
am fact add "Keep the client timeout at 2 s; retry once" --type decision --entities Redis \
    --source-id "$SOURCE" --actor-id codex-p1 >/dev/null
[[ -f "$P1_STORE" ]] || fail "the sender's default store ~/.aidememo/local.sqlite was not created"
ok "codex-p1 tracks session $AIDEMEMO_SESSION_ID in its own (default) store"

STEP="remote send"
sent="$(am --json handoff --remote-profile codex-p1 send codex-p2 --source-id "$SOURCE" \
    --focus "원격 경계 검토" "$AIDEMEMO_SESSION_ID")"
HANDOFF="$(jget handoff_id <<<"$sent")"
[[ "$(jget dispatched <<<"$sent")" == True && "$(jget actor_id <<<"$sent")" == codex-p1 ]] || fail "$sent"
ok "codex-p1 routed the session to the server as $HANDOFF (typed session, context packet, pointer)"

STEP="send rerun"
again="$(am --json handoff --remote-profile codex-p1 send codex-p2 --source-id "$SOURCE" \
    --focus "원격 경계 검토" "$AIDEMEMO_SESSION_ID")"
[[ "$(jget handoff_id <<<"$again")" == "$HANDOFF" && "$(jget recovered <<<"$again")" == True ]] || fail "$again"
count="$(am --json handoff --remote-profile codex-p1 outbox | jget assignments | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')"
[[ "$count" == 1 ]] || fail "$count handoffs in the outbox"
ok "the same send run again recovered $HANDOFF; still one handoff (the durable send outbox)"
unset AIDEMEMO_SESSION_ID AIDEMEMO_SOURCE_ID

STEP="receiver inbox"
inbox="$(am handoff --remote-profile codex-p2 inbox --source-id "$SOURCE")"
[[ "$inbox" == *"$HANDOFF [pending] codex-p1 -> codex-p2"* ]] || fail "$inbox"
[[ "$(am handoff --remote-profile codex-p1 inbox)" == "(no remote handoff assignments)" ]] || fail "sender inbox not empty"
refused "cannot override actor identity" am handoff --remote-profile codex-p2 inbox --actor-id codex-p1
ok "only codex-p2's token sees it; --actor-id is refused, identity comes from the token"

STEP="accept into the receiver's store"
accepted="$(am --store "$P2_STORE" handoff --remote-profile codex-p2 accept "$HANDOFF")"
eval "$accepted"  # the guide's eval "$(... accept ...)", kept to read the comment line below
[[ "$AIDEMEMO_ACTOR_ID" == codex-p2 && "$AIDEMEMO_SOURCE_ID" == "$SOURCE" && -n "$AIDEMEMO_SESSION_ID" ]] \
    || fail "accept exports: $AIDEMEMO_ACTOR_ID $AIDEMEMO_SOURCE_ID"
context_fact="$(sed -n 's/^# local context fact: //p' <<<"$accepted")"
packet="$(am --store "$P2_STORE" --json fact get "$context_fact" --source-id "$SOURCE" | jget content)"
[[ "$packet" == *"Keep the client timeout at 2 s"* ]] || fail "the packet did not reach codex-p2's store"
ok "codex-p2 claimed $HANDOFF; session and packet now live in ./codex-p2.sqlite (exports evaluated)"

STEP="accept rerun"
recovered="$(am --store "$P2_STORE" --json handoff --remote-profile codex-p2 accept "$HANDOFF" | jget recovered)"
[[ "$recovered" == True ]] || fail "a rerun accept was sent again"
ok "a rerun accept found the same derived claim applied: recovered: true, no new transition"

STEP="receiver-owned evidence"
FACT="$(am --store "$P2_STORE" --json fact add "원격 리뷰 통과" --type note --entities Release --source-id "$SOURCE" \
    --actor-id codex-p2 | jget id)"
ok "codex-p2 recorded result fact $FACT in its own store"

STEP="remote return"
returned="$(am --store "$P2_STORE" --json handoff --remote-profile codex-p2 return --outcome succeeded \
    --result-fact-id "$FACT" "$HANDOFF")"
[[ "$(jget recovered <<<"$returned")" == False && "$(jget outcome <<<"$returned")" == succeeded ]] || fail "$returned"
replay="$(am --store "$P2_STORE" --json handoff --remote-profile codex-p2 return --outcome succeeded \
    --result-fact-id "$FACT" "$HANDOFF" | jget recovered)"
[[ "$replay" == True ]] || fail "a replayed return was sent again"
ok "codex-p2 returned the evidence; the replay recovered without a second transition"

STEP="sender outbox"
outbox="$(am --json handoff --remote-profile codex-p1 outbox)"
[[ "$(jget assignments.0.record.status <<<"$outbox")" == completed ]] || fail "$outbox"
[[ "$(jget assignments.0.record.result_fact_id <<<"$outbox")" == "$FACT" ]] || fail "$outbox"
ok "codex-p1's outbox shows $HANDOFF completed with result fact $FACT"

STEP="replica"
am --store "$P1_STORE" replica pull --remote-profile codex-p1 >/dev/null
refused "replica actor mismatch" am --store "$P1_STORE" replica pull --remote-profile codex-p2
stop_server
status="$(am --store "$P1_STORE" --json replica get handoff "$HANDOFF" | jget state.body.status)"
[[ "$status" == completed ]] || fail "offline replica read: $status"
ok "codex-p1's actor-pinned replica refuses codex-p2 and answers with the server stopped: $HANDOFF completed"

ok "all steps passed"
