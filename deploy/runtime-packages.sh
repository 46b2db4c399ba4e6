#!/usr/bin/env bash
# Prints, one a line, the Debian packages that hold the shared libraries the
# given binaries load (as ldd resolves them). The container build uses it to
# install only those in its final stage. Libraries loaded later with dlopen
# (the CUDA driver, NVRTC, HIP) are not listed: they come from the host.
# Usage: deploy/runtime-packages.sh BINARY...
set -euo pipefail

for bin in "$@"; do
  if ! out=$(ldd "$bin"); then
    echo "runtime-packages: ldd $bin failed" >&2
    exit 1
  fi
  if grep -q 'not found' <<<"$out"; then
    echo "runtime-packages: $bin: unresolved libraries:" >&2
    grep 'not found' <<<"$out" >&2
    exit 1
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$out"
done | sort -u | while read -r lib; do
  # Debian 12 is merged-/usr: a package may own the /lib or the /usr/lib
  # spelling of the path, or only the file a symlink points to.
  real=$(readlink -f "$lib")
  owner=""
  for candidate in "$real" "/usr$real" "${real#/usr}" "$lib" "/usr$lib" "${lib#/usr}"; do
    if owner=$(dpkg-query -S "$candidate" 2>/dev/null); then break; fi
    owner=""
  done
  if [ -z "$owner" ]; then
    echo "runtime-packages: no package owns $lib" >&2
    exit 1
  fi
  # "libfoo1:amd64: /path" -> "libfoo1:amd64"
  echo "${owner%%: *}"
done | sort -u
