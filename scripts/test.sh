#!/usr/bin/env bash
# test.sh: the whole test suite (README.md's second command). Installs what is missing, builds,
# checks formatting, runs every CTest tier (gpu tests skip with a reason where there is no device),
# then builds once more with clang-14, ASan+UBSan and libFuzzer's instrumentation (build-asan: the
# CPU tiers and the fuzz targets from one build, a second compiler over the whole tree) and runs
# the CPU tiers (unit, integration) there, then each fuzz target for a bounded time
# (scripts/fuzz.sh ci on that build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/bootstrap.sh" build
echo "== clang-format check"
git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | grep -vE '^kernels/[a-z0-9_]+/(corpus|precision)/|^tests/[a-z]+/fixtures/' |
  xargs clang-format --dry-run --Werror
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j 2
echo "== tests under ASan+UBSan (build-asan: clang-14 with libFuzzer instrumentation, CPU tiers)"
CC=clang-14 CXX=clang++-14 "$root/scripts/bootstrap.sh" build-asan -DKLOOP_SANITIZE=ON \
  -DKLOOP_FUZZ=ON -DKLOOP_WITH_CUDA=OFF
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j 2 -L 'unit|integration'
echo "== fuzzing (build-asan's fuzz targets: checked-in inputs, then 25 s per target)"
BUILD_FUZZ=build-asan "$root/scripts/fuzz.sh" ci
