#!/usr/bin/env bash
# device-run.sh: builds, bundles and runs kloop's GPU tier on the GPU machine (DEVICE.md).
#   scripts/device-run.sh           (here) configure + build BUILD_DIR (default build-device) with
#                                   CUDA, bundle the non-system libraries, stage executables, libs,
#                                   candidate cubins and the gpu test list into .device-bundle/
#                                   (gitignored; carried with the working tree).
#   scripts/device-run.sh --remote  (on the GPU machine, from the repository root) runs every gpu
#                                   test binary and the corpus evaluation, plus a quick bench of the
#                                   baseline; logs go under $OUT (default ./out); a summary table
#                                   is printed last. Exit code: 0 when every test passed or skipped.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=$root/.device-bundle

if [ "${1:-}" != "--remote" ]; then
  set -e
  build=${BUILD_DIR:-build-device}
  export PATH=/usr/local/cuda/bin:$PATH
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKLOOP_WITH_CUDA=ON >/dev/null
  tests=$(ctest --test-dir "$build" -N -L gpu | awk '/Test +#/{print $3}')
  [ -n "$tests" ] || { echo "device-run: no gpu tests registered in $build" >&2; exit 2; }
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target kloop-gpu-worker kloop_corpus_cubins $tests
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  cp "$build/bin/kloop-gpu-worker" "$bundle/bin/"
  for t in $tests; do cp "$build/bin/$t" "$bundle/bin/"; done
  echo "$tests" | tr ' ' '\n' >"$bundle/tests.txt"
  cp -r "$build/corpus" "$bundle/corpus"
  strip --strip-debug "$bundle"/bin/* 2>/dev/null || true
  # Resolve libraries from the build folder's binaries (the staged ones would find $bundle/lib).
  "$root/scripts/bundle-libs.sh" "$bundle/lib" "$build/bin/kloop-gpu-worker" \
    $(for t in $tests; do echo "$build/bin/$t"; done)
  if ldd "$bundle/bin/kloop-gpu-worker" | grep -q 'libcuda\.so'; then
    echo "device-run: kloop-gpu-worker links libcuda; it must link cudart_static only" >&2
    exit 2
  fi
  echo "device-run: staged $(wc -l <"$bundle/tests.txt") gpu tests, $(du -sh "$bundle" | cut -f1) in $bundle"
  exit 0
fi

# --remote: on the GPU machine.
out=${OUT:-$root/out}
mkdir -p "$out"
export KLOOP_CORPUS_BIN=$bundle/corpus
export PATH=/usr/local/cuda/bin:$PATH
{
  nvidia-smi || true
  compute-sanitizer --version || true
  echo "unshare -n: $(unshare -n true 2>&1 && echo works || echo unavailable)"
  echo "ldd kloop-gpu-worker:"; ldd "$bundle/bin/kloop-gpu-worker"
} >"$out/environment.txt" 2>&1
# Quick timing of the baseline first, on an idle GPU (worker bench mode, the real worker binary).
req=$out/bench-req
mkdir -p "$req"
cp "$bundle/corpus/baseline/kernel.cubin" "$req/kernel.cubin"
cp kernels/rmsnorm/baseline/kernel.cu "$req/kernel.cu"
python3 - "$req" <<'PY'
import json, sys
m = json.load(open("kernels/rmsnorm/baseline/manifest.json"))
shapes = [{"dtype": d, "rows": r, "h": h} for d, r, h in [
    ("bfloat16", 65536, 4096), ("bfloat16", 16384, 4096), ("bfloat16", 4096, 8192),
    ("bfloat16", 32768, 1009), ("bfloat16", 65536, 128), ("bfloat16", 4096, 4099),
    ("bfloat16", 2048, 16384), ("float32", 65536, 4096), ("float32", 32768, 1009),
    ("float32", 65536, 128), ("float32", 4096, 4099), ("float16", 65536, 4096)]]
json.dump({"mode": "bench", "cubin": "kernel.cubin", "source": "kernel.cu", "manifest": m,
           "options": {"shapes": shapes, "iters": 20}}, open(sys.argv[1] + "/request.json", "w"))
PY
timeout 40 "$bundle/bin/kloop-gpu-worker" "$req" >"$out/bench.log" 2>&1
cp "$req/result.json" "$out/bench.json" 2>/dev/null
summary=()
fails=0
# Every test binary runs concurrently (the machine has 16 cores and one GPU; each evaluation is its
# own worker process); the corpus test is split into SHARDS gtest shards.
shards=${SHARDS:-4}
jobs=()
for t in $(cat "$bundle/tests.txt"); do
  n=1
  [ "$t" = gpu_corpus_test ] && n=$shards
  for ((i = 0; i < n; i++)); do
    name=$t; [ "$n" -gt 1 ] && name=$t.shard$i
    (
      start=$(date +%s)
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-220}" "$bundle/bin/$t" \
        --gtest_output=json:"$out/$name.json" >"$out/$name.log" 2>&1
      echo "$? $(( $(date +%s) - start ))" >"$out/$name.rc"
    ) &
    jobs+=("$name")
  done
done
wait
for name in "${jobs[@]}"; do
  read -r rc secs <"$out/$name.rc"
  passed=$(grep -c '^\[       OK \]' "$out/$name.log")
  failed=$(grep -c '^\[  FAILED  \] .*(' "$out/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$out/$name.log")
  case $rc in 0) s=pass ;; 77) s=skip ;; 124) s=timeout; fails=$((fails+1)) ;; *) s=fail; fails=$((fails+1)) ;; esac
  summary+=("$(printf '%-28s %-8s ok=%-4s failed=%-3s skipped=%-3s %4ss' "$name" "$s" "$passed" "$failed" "$skipped" "$secs")")
done
{
  echo "== kloop device run $(date -u +%FT%TZ)"
  printf '%s\n' "${summary[@]}"
  grep -h '^\[corpus\]' "$out"/gpu_corpus_test*.log 2>/dev/null | sort
  python3 - "$out/bench.json" <<'PY' || echo "bench: no result"
import json, sys
r = json.load(open(sys.argv[1]))
for s in r["bench"]["shapes"]:
    print(f"bench {s['dtype']:9s} {s['rows']:6d}x{s['h']:<6d} {s['route']:9s} {s['median_ms']*1e3:9.1f} us "
          f"{s['tbps']:5.2f} TB/s (copy {s['copy_tbps']:4.2f})")
PY
} | tee "$out/summary.txt"
exit $(( fails > 0 ? 1 : 0 ))
