#!/usr/bin/env bash
# bench/fuzz.sh [SECONDS] [--merge]: the long fuzzing run (default 600 s per target, two at a
# time), printing each target's executions per second, coverage and corpus growth; --merge adds the
# inputs that reach new coverage to the checked-in seeds. The CI runs the short one
# (scripts/fuzz.sh ci, 25 s per target). Needs clang-14 and libclang-rt-14-dev (scripts/bootstrap.sh).
exec "$(dirname "$0")/../scripts/fuzz.sh" bench "${1:-600}" "${2:-}"
