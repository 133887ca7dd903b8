#!/usr/bin/env bash
# kloop.sh ARGS...: installs what is missing, builds, then runs `kloop ARGS...` from build/.
# README.md's first command: scripts/kloop.sh optimize rmsnorm --budget 5
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh" build >&2
exec "$root/build/bin/kloop" "$@"
