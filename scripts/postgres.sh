#!/usr/bin/env bash
# A throwaway PostgreSQL for the kit's tests and benches: Debian's server binaries, one cluster in
# a directory of your choice, listening on a free loopback port only, trust auth, no other state.
#
#   scripts/postgres.sh install           # apt-get install postgresql (needs root; CI runs this)
#   scripts/postgres.sh start DIR [--fast] # prints the cluster's URL on stdout; --fast: fsync off
#   scripts/postgres.sh stop DIR
#
# As root the cluster runs as the 'postgres' user (initdb refuses root). Exit 3 when no server
# binaries are found, with the line that says how to get them.
set -euo pipefail

find_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
  done
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v pg_ctl)"; return 0
  fi
  return 1
}

as_owner() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  install)
    if find_bin >/dev/null; then exit 0; fi
    export DEBIAN_FRONTEND=noninteractive
    sudo=""
    if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq postgresql >/dev/null
    ;;
  start)
    dir="${2:?usage: scripts/postgres.sh start DIR [--fast]}"
    bin="$(find_bin)" || {
      echo "error: PostgreSQL server binaries not found; install them with: sudo scripts/postgres.sh install (Debian/Ubuntu: apt-get install postgresql)" >&2
      exit 3
    }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    home="$dir"
    if [ "$(id -u)" = "0" ]; then
      # The cluster's files must be reachable by 'postgres'; a private parent (pytest's tmp
      # dirs are 0700) would hide them, so the cluster lives in a directory of its own.
      home="$(mktemp -d /tmp/aidememo-pg.XXXXXX)"
      chmod 755 "$home"
      chown postgres "$home"
    fi
    echo "$home" >"$dir/cluster"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    extra=""
    if [ "${3:-}" = "--fast" ]; then extra="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"; fi
    as_owner "$bin/initdb" -D "$home/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync \
      >"$dir/initdb.log" 2>&1 || { echo "error: initdb failed; see $dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$home/data" -l "$home/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$home -c max_connections=200 $extra" \
      start >/dev/null || { echo "error: PostgreSQL did not start; see $home/server.log" >&2; exit 1; }
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    dir="${2:?usage: scripts/postgres.sh stop DIR}"
    bin="$(find_bin)"
    home="$(cat "$dir/cluster" 2>/dev/null || echo "$dir")"
    as_owner "$bin/pg_ctl" -D "$home/data" -m fast -w stop >/dev/null 2>&1 || true
    if [ "$home" != "$dir" ]; then rm -rf "$home"; fi
    ;;
  *)
    echo "usage: scripts/postgres.sh install | start DIR [--fast] | stop DIR" >&2
    exit 2
    ;;
esac
