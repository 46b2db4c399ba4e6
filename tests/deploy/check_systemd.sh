#!/usr/bin/env bash
# deploy.systemd: `systemd-analyze verify` accepts deploy/kilnd.service (its
# ExecStart pointed at the built kilnd). Exits 77 (skipped) where
# systemd-analyze is not installed.
# Usage: check_systemd.sh KILND REPO_ROOT
set -euo pipefail
kilnd=$1 root=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "skipped: systemd-analyze is not installed"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=/usr/local/bin/kilnd |ExecStart=$kilnd |" \
  "$root/deploy/kilnd.service" >"$tmp/kilnd.service"
grep -q "^ExecStart=$kilnd --config /etc/kiln/kilnd.toml$" "$tmp/kilnd.service" ||
  { echo "FAIL: unexpected ExecStart in deploy/kilnd.service"; exit 1; }
out=$(systemd-analyze verify "$tmp/kilnd.service" 2>&1) || true
# Only complaints about our unit count (not about the host's other units).
ours=$(grep 'kilnd.service' <<<"$out" || true)
if [ -n "$ours" ]; then
  echo "FAIL: systemd-analyze verify:"
  echo "$out"
  exit 1
fi
echo "ok: systemd-analyze verify accepts deploy/kilnd.service"
