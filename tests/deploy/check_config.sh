#!/usr/bin/env bash
# deploy.config: kilnd accepts deploy/kilnd.toml.example (and its commented-out
# keys), starts with it and answers `kiln status`; so does the config embedded
# in the Kubernetes ConfigMap; a key kilnd does not know is refused (so that
# the checks above mean something).
# Usage: check_config.sh KILND KILN REPO_ROOT
set -euo pipefail
kilnd=$1 kiln=$2 root=$3
example="$root/deploy/kilnd.toml.example"

# shellcheck source=../support/kilnd_test_lib.sh
source "$(dirname "$0")/../support/kilnd_test_lib.sh"
kiln_test_setup deploy

# start_and_query NAME CONFIG: kilnd with CONFIG (socket and cache moved into
# $tmp on the command line, which wins over the file), `kiln status`, SIGTERM.
start_and_query() {
  local name=$1 config=$2
  local sock="$tmp/$name/run/kilnd.sock" log="$tmp/$name.log"
  mkdir -p "$tmp/$name"
  start_kilnd "$log" "$kilnd" --config "$config" --socket "$sock" \
    --cache-dir "$tmp/$name/cache"
  local out
  out=$("$kiln" status --address "unix:$sock") ||
    { cat "$log" >&2; fail "$name: kiln status failed"; }
  grep -q ": serving" <<<"$out" || fail "$name: unexpected status: $out"
  stop_kilnd "$log"
  echo "ok: $name: $(head -1 <<<"$out")"
}

# 1. The example as shipped.
start_and_query example "$example"

# 2. The example with its commented-out keys enabled (TCP on a free loopback
#    port, which needs insecure-loopback).
sed -e 's|^# *listen-tcp = .*|listen-tcp = "127.0.0.1:0"|' \
    -e 's|^# *metrics-address = .*|metrics-address = "127.0.0.1:0"|' \
    -e 's|^insecure-loopback = false|insecure-loopback = true|' \
    "$example" >"$tmp/all-keys.toml"
grep -q '^listen-tcp = "127.0.0.1:0"' "$tmp/all-keys.toml" ||
  fail "no commented-out listen-tcp line in $example"
start_and_query all-keys "$tmp/all-keys.toml"
grep -q "listening on 127.0.0.1:" "$tmp/all-keys.log" ||
  { cat "$tmp/all-keys.log" >&2; fail "all-keys: no TCP listener"; }
grep -q "metrics on http://127.0.0.1:" "$tmp/all-keys.log" ||
  { cat "$tmp/all-keys.log" >&2; fail "all-keys: no metrics endpoint"; }

# 3. Every key kilnd documents in --help is in the example (so the example
#    stays complete when a flag is added).
for key in $("$kilnd" --help | grep -o -- '--[a-z][a-z-]*' | sed 's/^--//' |
             sort -u); do
  case $key in help | version | config) continue ;; esac
  grep -Eq "^#? *$key = " "$example" || fail "key '$key' missing from $example"
done
echo "ok: every kilnd flag is a key of the example"

# 4. The ConfigMap's kilnd.toml of the DaemonSet. Extracted with Debian's
#    python3, which deploy/install-deps.sh gives PyYAML (python3-yaml).
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
"$py" -c 'import yaml' 2>/dev/null ||
  fail "PyYAML is missing for $py (deploy/install-deps.sh installs python3-yaml)"
"$py" - "$root/deploy/k8s/kilnd-daemonset.yaml" >"$tmp/configmap.toml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
(cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
sys.stdout.write(cm["data"]["kilnd.toml"])
PY
# Its Redis tier is pointed at a redis-server started here, with a secret
# file here (the Secret's mount path does not exist on this machine).
grep -q '^redis-url = ' "$tmp/configmap.toml" || fail "the ConfigMap sets no redis-url"
redis-server --port 0 --unixsocket "$tmp/redis.sock" --save '' \
  --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -S "$tmp/redis.sock" ] && break; sleep 0.1; done
[ -S "$tmp/redis.sock" ] || { cat "$tmp/redis.log" >&2; fail "redis-server did not start"; }
printf 'configmap-test-secret-0123456789\n' >"$tmp/secret"
sed -i -e "s|^redis-url = .*|redis-url = \"redis+unix://$tmp/redis.sock\"|" \
  -e "s|^redis-secret-file = .*|redis-secret-file = \"$tmp/secret\"|" \
  -e 's|^metrics-address = .*|metrics-address = "127.0.0.1:0"|' \
  "$tmp/configmap.toml"
start_and_query configmap "$tmp/configmap.toml"
grep -q "with a shared Redis tier" "$tmp/configmap.log" ||
  { cat "$tmp/configmap.log" >&2; fail "configmap: no Redis tier"; }
grep -q "metrics on http://127.0.0.1:" "$tmp/configmap.log" ||
  { cat "$tmp/configmap.log" >&2; fail "configmap: no metrics endpoint"; }

# 5. An unknown key is refused (exit 2, naming it).
{ cat "$example"; echo 'no-such-key = "redis://localhost:6379"'; } >"$tmp/bad.toml"
set +e
"$kilnd" --config "$tmp/bad.toml" --socket "$tmp/bad/kilnd.sock" \
  --cache-dir "$tmp/bad/cache" >"$tmp/bad.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$tmp/bad.out" >&2; fail "unknown key: kilnd exited $rc, not 2"; }
grep -q "no-such-key" "$tmp/bad.out" || { cat "$tmp/bad.out" >&2; fail "unknown key not named"; }
echo "ok: an unknown key is refused"
