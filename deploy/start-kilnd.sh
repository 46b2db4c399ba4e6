#!/usr/bin/env bash
# Installs the dependencies, builds kilnd (only what it needs) into build/,
# and runs it in the foreground with its defaults: a unix socket at
# $XDG_RUNTIME_DIR/kiln/kilnd.sock (or /tmp/kiln-$UID/kilnd.sock) and the
# cache in $XDG_CACHE_HOME/kiln (or ~/.cache/kiln). Stop it with Ctrl-C.
# Arguments are passed to kilnd: deploy/start-kilnd.sh --log-level debug
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/build.sh kilnd
exec build/server/kilnd "$@"
