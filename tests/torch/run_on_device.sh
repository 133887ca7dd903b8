#!/usr/bin/env bash
# run_on_device.sh KLOOP STORE OUTDIR: the GPU part of issue #10, run after `kloop optimize`.
# Exports the newest session of STORE as a torch package (with a rollout file) of the session's
# operator (`kloop sessions --json`: kloop_rmsnorm for weighted_rmsnorm, kloop_softmax for
# row_softmax), runs the package checks (tests/torch/test_export.py: opcheck, reference match on
# the operator's case families, routing counters, kill switch, torch.compile), for RMSNorm
# generates LLM-like activations (tests/torch/make_activations.py) and runs `kloop shadow` on them
# (softmax has no shadow module), then signs and verifies the receipt. A session that was not
# promoted is exported with --allow-unpromoted (said loudly).
# Everything lands in OUTDIR (logs, package, shadow.json). Exit 0 when every step passed.
set -uo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 KLOOP STORE OUTDIR" >&2
  exit 2
fi
KLOOP=$(realpath "$1")
STORE=$(realpath "$2")
OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
status=0
start=$(date +%s)
# kloop may need LD_LIBRARY_PATH (a bundle of Debian libraries); python3 and torch must not see it.
PYCLEAN=$OUT/python3-clean
printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH python3 "$@"\n' > "$PYCLEAN"
chmod +x "$PYCLEAN"

read -r ID OPERATOR < <("$KLOOP" sessions --store "$STORE" --json | "$PYCLEAN" -c 'import json,sys; s=json.load(sys.stdin); print(s[0]["id"], s[0]["operator"]) if s else print("")')
if [[ -z "${ID:-}" ]]; then
  echo "run_on_device: no session in $STORE" >&2
  exit 2
fi
case "$OPERATOR" in
  weighted_rmsnorm) PACKAGE=kloop_rmsnorm ;;
  row_softmax) PACKAGE=kloop_softmax ;;
  *) echo "run_on_device: session $ID is of operator $OPERATOR, which the torch export does not serve" >&2
     exit 2 ;;
esac
KILL_SWITCH="KLOOP_$(echo "${PACKAGE#kloop_}" | tr '[:lower:]' '[:upper:]')_DISABLE"
echo "== session $ID: operator $OPERATOR, package $PACKAGE"
cat > "$OUT/rollout.json" <<JSON
{"feature_flag_and_scope": "$KILL_SWITCH kill switch; canary 1% -> 5% of decode traffic on H200 (sm_90) workers only",
 "healthy_worker_recovery_and_reference_target": "on a CUDA fault: stop routing, drain, replace the worker process; the torch reference path serves retries",
 "revalidation_policy": "re-run kloop evaluate and shadow on any driver, toolkit, torch or GPU change, and monthly"}
JSON

echo "== export session $ID"
UNPROMOTED=()
"$KLOOP" export "$ID" --torch "$OUT/pkg" --store "$STORE" --rollout "$OUT/rollout.json" 2>&1 | tee "$OUT/export.log"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 2 ]] && grep -q "is not promoted" "$OUT/export.log"; then
  echo "NOTE: session $ID is NOT promoted; exporting its frozen candidate with --allow-unpromoted"
  UNPROMOTED=(--allow-unpromoted)
  "$KLOOP" export "$ID" --torch "$OUT/pkg" --store "$STORE" --rollout "$OUT/rollout.json" \
    --allow-unpromoted 2>&1 | tee -a "$OUT/export.log"
  rc=${PIPESTATUS[0]}
fi
if [[ $rc -ne 0 ]]; then
  echo "run_on_device: export failed (exit $rc)" >&2
  exit 1
fi

echo "== package checks"
"$PYCLEAN" "$HERE/test_export.py" "$OUT/pkg" --package "$PACKAGE" --require-candidate 2>&1 \
  | tee "$OUT/test_export.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

if [[ $PACKAGE != kloop_rmsnorm ]]; then
  echo "== shadow run: skipped ($PACKAGE has no shadow module; kloop shadow reads RMSNorm inputs)"
else
echo "== activations and shadow run"
"$PYCLEAN" "$HERE/make_activations.py" "$OUT/activations" --scale device || status=1
"$KLOOP" shadow "$ID" --inputs "$OUT/activations" --store "$STORE" "${UNPROMOTED[@]}" --json \
  --python "$PYCLEAN" \
  > "$OUT/shadow.json" 2> "$OUT/shadow.err"
src=$?
"$PYCLEAN" - "$OUT/shadow.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rep = r.get("report") or {}
for f in rep.get("files", []):
    print(f"{f['file']:34s} {f['dtype']:9s} {str(f['shape']):18s} {f['route']:10s} "
          f"max_abs {f['max_abs_error']:.3g} max_rel {f['max_rel_error']:.3g} "
          f"rows_bad {f['row_failures']} nonfinite {f['non_finite_mismatches']} "
          f"peak+{f['device_memory']['peak_over_before'] / 2**20:.1f}MiB {'PASS' if f['pass'] else 'FAIL'}")
print(f"shadow {r['status']}: {r.get('reason', '')}; specialisations {rep.get('specialisations')} "
      f"{rep.get('specialisation_keys')}; report blob {r.get('report_sha256')}")
PY
cat "$OUT/shadow.err"
[[ $src -eq 0 ]] || status=1
fi

echo "== receipt (rollout recorded by the export)"
rm -f "$OUT/key.json"
"$KLOOP" keys generate --out "$OUT/key.json" | tail -1 | sed 's/^registry entry: //' > "$OUT/registry.json"
if "$KLOOP" receipt sign "$ID" --store "$STORE" --key "$OUT/key.json" --reviewer run_on_device \
  --out "$OUT/receipt.signed.json"; then
  "$KLOOP" receipt verify "$OUT/receipt.signed.json" --keys "$OUT/registry.json" || status=1
else
  echo "WARNING: receipt not signable (the message above names the missing evidence)"
fi
echo "run_on_device: done in $(( $(date +%s) - start )) s, status $status${UNPROMOTED:+ (session NOT promoted)}"
exit $status
