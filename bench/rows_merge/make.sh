#!/usr/bin/env bash
# Emits and builds the rows_merge experiment's candidate folders (kernel.cu, manifest.json,
# kernel.cubin) under OUTDIR: one per block size / fewest-vectors-per-thread pair.
#   bench/rows_merge/make.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
for cfg in 512:1:4 256:2:4 128:4:8 256:4:4; do
  IFS=: read -r b v minb <<<"$cfg"
  d=$out/rm-b$b-v$v-m$minb
  mkdir -p "$d"
  sed -e "s/RM_BLOCK/$b/g" -e "s/RM_MINV/$v/g" -e "s/RM_MINB/$minb/g" "$here/kernel.cu.in" >"$d/kernel.cu"
  cat >"$d/manifest.json" <<JSON
{
  "contract": "weighted_rmsnorm/1",
  "entry_points": {"float32": "rms_f32", "float16": "rms_f16", "bfloat16": "rms_bf16"},
  "launch": {"block_threads": $b, "rows_per_block": 1, "grid": "per_rows",
             "dynamic_smem": {"fixed_bytes": 0, "bytes_per_h": 0}},
  "dispatch": {"h_min": 8, "h_max": 65536, "h_multiple_of": 8,
               "x_rows": "any_stride", "alignment_bytes": 16},
  "target": "sm_90",
  "known_limits": "experiment: aligned vector path only"
}
JSON
  nvcc -cubin -arch=sm_90 -lineinfo -Xptxas -v -o "$d/kernel.cubin" "$d/kernel.cu" 2>"$d/ptxas.txt"
  grep -h "registers" "$d/ptxas.txt" | sed "s/^/rm-b$b-v$v: /"
done
