#!/usr/bin/env bash
# test.sh: the whole test suite (README.md's second command). Installs what is missing, builds,
# checks formatting, runs every CTest tier (gpu tests skip with a reason where there is no device),
# then rebuilds with ASan+UBSan and runs the CPU tiers (unit, integration) again, then builds the
# libFuzzer targets with clang and runs each for a bounded time (scripts/fuzz.sh ci).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/bootstrap.sh" build
echo "== clang-format check"
git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | grep -vE '^kernels/rmsnorm/(corpus|precision)/|^tests/[a-z]+/fixtures/' |
  xargs clang-format --dry-run --Werror
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j 2
echo "== tests under ASan+UBSan (build-asan, CPU tiers)"
"$root/scripts/bootstrap.sh" build-asan -DKLOOP_SANITIZE=ON -DKLOOP_WITH_CUDA=OFF
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j 2 -L 'unit|integration'
echo "== fuzzing (build-fuzz: clang-14, libFuzzer, ASan+UBSan; checked-in inputs, then 25 s per target)"
"$root/scripts/fuzz.sh" ci
