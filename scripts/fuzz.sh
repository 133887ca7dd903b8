#!/usr/bin/env bash
# fuzz.sh ci | bench [SECONDS] [--merge] | build: the libFuzzer targets of fuzz/ (fuzz/README.md).
#   build  configures BUILD_FUZZ (default build-fuzz; scripts/test.sh passes build-asan) with
#          clang-14, ASan+UBSan and libFuzzer instrumentation (-DKLOOP_FUZZ=ON -DKLOOP_SANITIZE=ON
#          -DKLOOP_WITH_CUDA=OFF) and builds the fuzz targets and the libraries they link (fuzz_all).
#   ci     build, then per target: every checked-in input (fuzz/corpus/NAME, fuzz/regressions/NAME)
#          once, then FUZZ_SECONDS (default 25) of fuzzing from them with libFuzzer's -seed=FUZZ_SEED
#          (default 1: the same mutations on every run); FUZZ_JOBS (default 2) targets
#          at a time. Any crash, sanitizer report, leak or timeout fails the step; the input is
#          kept in BUILD_FUZZ/findings/NAME/ (copy it into fuzz/regressions/NAME/ with the fix).
#   bench  the same with SECONDS (default 600) per target, printing each target's executions per
#          second, coverage and corpus growth; --merge adds the inputs that reach new coverage to
#          fuzz/corpus/NAME (libFuzzer -merge=1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-ci}
build=${BUILD_FUZZ:-build-fuzz}
jobs=${FUZZ_JOBS:-2}

configure_and_build() {
  local t0=$SECONDS
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKLOOP_FUZZ=ON -DKLOOP_SANITIZE=ON -DKLOOP_WITH_CUDA=OFF >/dev/null
  cmake --build "$build" -j "$(nproc)" --target fuzz_all
  echo "fuzz: built the targets in $((SECONDS - t0)) s"
}

targets() { ls "$build"/bin | sed -n 's/^fuzz_\(.*\)$/\1/p' | sort; }

# run_target NAME SECONDS: replays the checked-in inputs, then fuzzes; prints one summary line.
run_target() {
  local name=$1 seconds=$2 # one `local` expands every word before it assigns any
  local bin="$root/$build/bin/fuzz_$name"
  local work="$root/$build/corpus/$name" findings="$root/$build/findings/$name"
  local log="$root/$build/logs/$name.log"
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  local inputs=()
  for d in fuzz/corpus/"$name" fuzz/regressions/"$name"; do
    [ -d "$d" ] && inputs+=("$root/$d")
  done
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  # 1. Every checked-in input once (a regression input must stay fixed).
  local files
  mapfile -t files < <(find "${inputs[@]}" -type f | sort)
  if ! "$bin" -rss_limit_mb=2048 -timeout=20 "${files[@]}" >"$log.replay" 2>&1; then
    echo "fuzz: $name: a checked-in input fails; see $log.replay"
    tail -n 40 "$log.replay"
    return 1
  fi
  # 2. Fuzzing from them; new inputs go to the work corpus.
  local status=0
  # ci: a fixed seed (FUZZ_SEED, default 1) so that CI explores the same mutations on every run
  # and a finding is the commit's, not the luck of the draw; bench draws a fresh seed.
  local seed_arg=()
  [ "${FUZZ_MODE:-ci}" = ci ] && seed_arg=(-seed="${FUZZ_SEED:-1}")
  (cd "$findings" && "$bin" "${seed_arg[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "${inputs[@]}" \
    >"$log" 2>&1) || status=$?
  local execs cov units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  units=$(find "$work" -type f | wc -l)
  echo "fuzz: $name: ${execs:-0} executions in $seconds s ($(( ${execs:-0} / seconds ))/s), coverage ${cov:-?} edges, $units work-corpus inputs, exit $status"
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $name found a failure; the input is in $findings:"
    ls -l "$findings"
    grep -m1 -A30 'ERROR\|==ABORTING\|runtime error\|deadly signal\|uncaught' "$log" || tail -n 40 "$log"
    return 1
  fi
}
export -f run_target
export root build FUZZ_MODE="$mode"

case "$mode" in
build)
  configure_and_build
  ;;
ci | bench)
  seconds=${FUZZ_SECONDS:-25}
  [ "$mode" = bench ] && seconds=${2:-600}
  configure_and_build
  t0=$SECONDS
  if ! targets | xargs -P "$jobs" -I{} bash -c 'run_target "$1" "$2"' _ {} "$seconds"; then
    echo "fuzz: FAILED ($((SECONDS - t0)) s)"
    exit 1
  fi
  echo "fuzz: $(targets | wc -l) targets, ${seconds} s each, $jobs at a time: $((SECONDS - t0)) s"
  if [ "$mode" = bench ] && [ "${3:-}" = --merge ]; then
    for name in $(targets); do
      "$build/bin/fuzz_$name" -merge=1 "fuzz/corpus/$name" "$build/corpus/$name" >/dev/null 2>&1
      echo "fuzz: $name: $(find "fuzz/corpus/$name" -type f | wc -l) seed inputs after merge"
    done
  fi
  ;;
*)
  echo "usage: $0 ci | bench [SECONDS] [--merge] | build" >&2
  exit 2
  ;;
esac
