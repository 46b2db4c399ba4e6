# Shared by the shell tests that run a real kilnd (tests/deploy,
# tests/install). Source it after `set -euo pipefail`:
#   kiln_test_setup NAME   a private temp dir in $tmp, removed on exit along
#                          with the kilnd in $pid (if any)
#   fail MESSAGE           print FAIL: MESSAGE and exit 1
#   start_kilnd LOG KILND ARGS...
#                          start KILND ARGS in the background (stderr to LOG),
#                          wait until it logs "listening on"; $pid is its pid
#   stop_kilnd LOG         SIGTERM, and fail unless it exits 0

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

kiln_test_setup() {
  tmp=$(mktemp -d "/tmp/kiln-$1.XXXXXX")
  pid=""
  trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
  # Idle gRPC clients notice a shutting-down server quickly.
  export GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=100
}

start_kilnd() {
  local log=$1
  shift
  "$@" 2>"$log" &
  pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "kilnd exited"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "kilnd did not start"
}

stop_kilnd() {
  local log=$1 status=0
  kill -TERM "$pid"
  wait "$pid" || status=$?
  pid=""
  [ "$status" -eq 0 ] || { cat "$log" >&2; fail "kilnd exited $status on SIGTERM"; }
}
