#!/usr/bin/env bash
# deploy.config: kilnd accepts deploy/kilnd.toml.example (and its commented-out
# keys), starts with it and answers `kiln status`; the config embedded in the
# Kubernetes ConfigMap too (when PyYAML is there to extract it); a key kilnd
# does not know is refused (so that the checks above mean something).
# Usage: check_config.sh KILND KILN REPO_ROOT
set -euo pipefail
kilnd=$1 kiln=$2 root=$3
example="$root/deploy/kilnd.toml.example"

tmp=$(mktemp -d /tmp/kiln-deploy.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=100

fail() { echo "FAIL: $*" >&2; exit 1; }

# start_and_query NAME CONFIG: kilnd with CONFIG (socket and cache moved into
# $tmp on the command line, which wins over the file), `kiln status`, SIGTERM.
start_and_query() {
  local name=$1 config=$2
  local sock="$tmp/$name/run/kilnd.sock" log="$tmp/$name.log"
  mkdir -p "$tmp/$name"
  "$kilnd" --config "$config" --socket "$sock" --cache-dir "$tmp/$name/cache" \
    2>"$log" &
  pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "$name: kilnd exited"; }
    sleep 0.1
  done
  grep -q "listening on" "$log" || { cat "$log" >&2; fail "$name: kilnd did not start"; }
  local out
  out=$("$kiln" status --address "unix:$sock") ||
    { cat "$log" >&2; fail "$name: kiln status failed"; }
  grep -q ": serving" <<<"$out" || fail "$name: unexpected status: $out"
  kill -TERM "$pid"
  wait "$pid" || { cat "$log" >&2; fail "$name: kilnd exited $? on SIGTERM"; }
  pid=""
  echo "ok: $name: $(head -1 <<<"$out")"
}

# 1. The example as shipped.
start_and_query example "$example"

# 2. The example with its commented-out keys enabled (TCP on a free loopback
#    port, which needs insecure-loopback).
sed -e 's|^# *listen-tcp = .*|listen-tcp = "127.0.0.1:0"|' \
    -e 's|^insecure-loopback = false|insecure-loopback = true|' \
    "$example" >"$tmp/all-keys.toml"
grep -q '^listen-tcp = "127.0.0.1:0"' "$tmp/all-keys.toml" ||
  fail "no commented-out listen-tcp line in $example"
start_and_query all-keys "$tmp/all-keys.toml"
grep -q "listening on 127.0.0.1:" "$tmp/all-keys.log" ||
  { cat "$tmp/all-keys.log" >&2; fail "all-keys: no TCP listener"; }

# 3. Every key kilnd documents in --help is in the example (so the example
#    stays complete when a flag is added).
for key in $("$kilnd" --help | grep -o -- '--[a-z][a-z-]*' | sed 's/^--//' |
             sort -u); do
  case $key in help | version | config) continue ;; esac
  grep -Eq "^#? *$key = " "$example" || fail "key '$key' missing from $example"
done
echo "ok: every kilnd flag is a key of the example"

# 4. The ConfigMap's kilnd.toml of the DaemonSet.
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$root/deploy/k8s/kilnd-daemonset.yaml" >"$tmp/configmap.toml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
(cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
sys.stdout.write(cm["data"]["kilnd.toml"])
PY
  start_and_query configmap "$tmp/configmap.toml"
else
  echo "skipped: the DaemonSet's ConfigMap (no PyYAML to extract it)"
fi

# 5. An unknown key is refused (exit 2, naming it).
{ cat "$example"; echo 'redis-url = "redis://localhost:6379"'; } >"$tmp/bad.toml"
set +e
"$kilnd" --config "$tmp/bad.toml" --socket "$tmp/bad/kilnd.sock" \
  --cache-dir "$tmp/bad/cache" >"$tmp/bad.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$tmp/bad.out" >&2; fail "unknown key: kilnd exited $rc, not 2"; }
grep -q "redis-url" "$tmp/bad.out" || { cat "$tmp/bad.out" >&2; fail "unknown key not named"; }
echo "ok: an unknown key is refused"
