# Sourced by the demo scripts, never run: what each of them needs around its own steps.
#
#   REPO, PY, KIT      the checkout, the interpreter ($PYTHON, default python3) and this checkout's
#                      aidememo-ref as a command array (whether or not the package is installed)
#   demo_tmp NAME VAR  TMP=a new temporary directory NAME.XXXXXX, removed on exit (kept and named on
#                      stderr when $VAR is 1); the server is stopped on exit; a failing command prints
#                      "FAIL: <step>: command failed (line N)"
#   fail MSG, ok MSG   "FAIL: $STEP: MSG" on stderr and exit 1; "OK: MSG"
#   start_server ARGS  "${KIT[@]}" ARGS in the background (output in $TMP/server.out, .err), then wait
#                      for its "... serving URL" line and a 200 from URL/health; sets URL, SERVER_PID
#   stop_server        stop it (SIGTERM) and wait for it

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
KIT=("$PY" -c 'import sys; from aidememo_cli import main; sys.exit(main(sys.argv[1:]))')
SERVER_PID=""
URL=""
STEP="setup"

fail() { echo "FAIL: $STEP: $*" >&2; exit 1; }
ok() { echo "OK: $*"; }

stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}

_demo_cleanup() {
    stop_server
    if [[ "${!_DEMO_KEEP:-}" == 1 ]]; then
        echo "kept $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}

demo_tmp() {
    TMP="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
    _DEMO_KEEP="$2"
    trap _demo_cleanup EXIT
    trap 'echo "FAIL: $STEP: command failed (line $LINENO)" >&2' ERR
}

start_server() {
    # Created before the background job: its redirections may run after the first sed below.
    : >"$TMP/server.out"; : >"$TMP/server.err"
    "${KIT[@]}" "$@" >"$TMP/server.out" 2>"$TMP/server.err" &
    SERVER_PID=$!
    URL=""
    for _ in $(seq 1 400); do
        URL="$(sed -n 's/^aidememo-ref[a-z ]* serving \(http:[^ ]*\).*/\1/p' "$TMP/server.out")"
        [[ -n "$URL" ]] && break
        kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited: $(cat "$TMP/server.err")"
        sleep 0.05
    done
    [[ -n "$URL" ]] || fail "server did not report its address"
    "$PY" - "$URL" <<'PYEOF' || fail "no /health answer"
import sys, time, urllib.request
for _ in range(200):
    try:
        with urllib.request.urlopen(sys.argv[1] + "/health", timeout=1) as answer:
            if answer.status == 200:
                sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}
