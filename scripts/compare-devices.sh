#!/usr/bin/env bash
# compare-devices.sh: the same workload on one GPU and on two (issue 26; issue 29 runs it), on the
# GPU machine after `scripts/device-run.sh` staged .device-bundle/ here. Runs
#   phase_breakdown --batch --json $WORKLOAD --devices A      (default A_DEVICES=0)
#   phase_breakdown --batch --json $WORKLOAD --devices B      (default B_DEVICES=0,1)
# interleaved A B A B ... ROUNDS times each (default 2), then compares every candidate's verdict,
# deciding gate and gate statuses across all runs: any difference, or a corpus candidate that is
# not as its expect.json says, fails (exit 1). Prints each run's wall time and candidates per hour
# and the speed-up of B over A (median of the rounds). With OPTIMIZE_BUDGET=N (default 0: skipped)
# it also runs `kloop optimize rmsnorm --budget N --candidates-per-iteration K` (K=$CANDIDATES,
# default 4) with --devices A and B, interleaved, and compares the candidates both runs generated
# (matched by kernel.cu SHA-256: the offline policy may choose differently on other timings) and
# the candidates per hour. Logs and JSON go to $OUT (default ./out/compare-devices).
#   WORKLOAD   phase_breakdown candidate flags (default: the defect corpus, the in-tree baseline
#              and four offline-family variants)
#   KLOOP_THROUGHPUT  passed through (evaluator/throughput.h)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=$root/.device-bundle
out=${OUT:-$root/out}/compare-devices
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib
export PATH=/usr/local/cuda/bin:$PATH
a=${A_DEVICES:-0}
b=${B_DEVICES:-0,1}
rounds=${ROUNDS:-2}
workload=${WORKLOAD:---corpus --candidate kernels/rmsnorm/baseline --family v0-t256-b256-c0-tree-rows-nopeel --family v16-tauto-b512-c4-shfl-pers-peel --family v16-tauto-b256-c2-shfl-pers-peel-wr-bl --family v16-tauto-b256-c2-shfl-pers-peel-ef-wr-bl}
[ -x "$bundle/bin/phase_breakdown" ] || { echo "compare-devices: no $bundle/bin/phase_breakdown; run scripts/device-run.sh first" >&2; exit 2; }

runs=()
for ((r = 1; r <= rounds; r++)); do
  for side in a b; do
    devices=$a; [ "$side" = b ] && devices=$b
    name=$side$r
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${RUN_TIMEOUT:-1500}" "$bundle/bin/phase_breakdown" --batch --json --devices "$devices" \
      $workload >"$out/$name.json" 2>"$out/$name.log"
    echo "$name: --devices $devices exit $? in $(( $(date +%s) - start ))s" | tee -a "$out/runs.txt"
    runs+=("$name")
  done
done

python3 - "$out" "$a" "$b" "${runs[@]}" <<'PY' | tee "$out/summary.txt"
import json, statistics, sys
out, a, b, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
docs = {}
for n in names:
    try:
        docs[n] = json.load(open(f"{out}/{n}.json"))
    except Exception as e:
        print(f"{n}: no result ({e})")
if not docs:
    sys.exit(2)
ref_name = sorted(docs)[0]
def key(c):
    return (c["verdict"], json.dumps(c.get("deciding") and {"gate": c["deciding"]["gate"], "status": c["deciding"]["status"]}),
            json.dumps(c["gates"], sort_keys=True))
ref = {}
for c in docs[ref_name]["candidates"]:
    ref.setdefault(c["name"], key(c))
diffs = unexpected = 0
for n, d in sorted(docs.items()):
    seen = {}
    for c in d["candidates"]:
        if not c.get("as_expected", True):
            unexpected += 1
            print(f"{n}: {c['name']}: {c['verdict']} at {c.get('deciding')} NOT as expect.json {c.get('expect')}")
        k = key(c)
        if c["name"] in ref and ref[c["name"]] != k:
            diffs += 1
            print(f"{n}: {c['name']}: {k} differs from {ref_name}: {ref[c['name']]}")
for side, devices in (("a", a), ("b", b)):
    cph = [d["batch"]["candidates_per_hour"] for n, d in docs.items() if n.startswith(side)]
    wall = [d["batch"]["wall_s"] for n, d in docs.items() if n.startswith(side)]
    if cph:
        print(f"--devices {devices}: wall {', '.join(f'{w:.1f}' for w in wall)} s; "
              f"candidates per hour {', '.join(f'{c:.0f}' for c in cph)} (median {statistics.median(cph):.0f})")
ca = [d["batch"]["candidates_per_hour"] for n, d in docs.items() if n.startswith("a")]
cb = [d["batch"]["candidates_per_hour"] for n, d in docs.items() if n.startswith("b")]
if ca and cb:
    print(f"speed-up --devices {b} over --devices {a}: {statistics.median(cb) / statistics.median(ca):.2f}x "
          f"(target >= 1.8x on two H200s)")
print(f"verdict differences: {diffs}; not as expect.json: {unexpected}")
sys.exit(1 if diffs or unexpected else 0)
PY
rc=${PIPESTATUS[0]}

if [ "${OPTIMIZE_BUDGET:-0}" -gt 0 ]; then
  for ((r = 1; r <= rounds; r++)); do
    for side in a b; do
      devices=$a; [ "$side" = b ] && devices=$b
      store=/tmp/kloop-compare-$side$r
      rm -rf "$store"
      start=$(date +%s)
      timeout "${OPTIMIZE_TIMEOUT:-900}" "$bundle/bin/kloop" optimize rmsnorm --budget "$OPTIMIZE_BUDGET" \
        --candidates-per-iteration "${CANDIDATES:-4}" --devices "$devices" --store "$store" --json \
        >"$out/optimize-$side$r.json" 2>"$out/optimize-$side$r.log"
      echo "optimize $side$r: --devices $devices exit $? in $(( $(date +%s) - start ))s" | tee -a "$out/runs.txt"
      "$bundle/bin/kloop" show 1 --store "$store" --json >"$out/show-$side$r.json" 2>/dev/null
      "$bundle/bin/kloop" show 1 --store "$store" >"$out/show-$side$r.txt" 2>/dev/null
    done
  done
  python3 - "$out" "$rounds" <<'PY' | tee -a "$out/summary.txt" || rc=1
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def cands(name):
    try:
        d = json.load(open(f"{out}/show-{name}.json"))
    except Exception:
        return None, None
    c = {}
    for it in d["iterations"]:
        for x in it["candidates"]:
            c[x["source_sha256"]] = (x["verdict"], tuple((g["name"], g["status"]) for g in x["gates"]))
    wall = sum(it["wall_ms"] for it in d["iterations"]) / 1000
    return c, (len(c), wall)
bad = 0
for r in range(1, rounds + 1):
    ca, sa = cands(f"a{r}")
    cb, sb = cands(f"b{r}")
    if ca is None or cb is None:
        print(f"optimize round {r}: a store is missing"); bad += 1; continue
    both = set(ca) & set(cb)
    diff = [s for s in both if ca[s] != cb[s]]
    bad += len(diff)
    print(f"optimize round {r}: {sa[0]} candidates in {sa[1]:.1f} s (A) vs {sb[0]} in {sb[1]:.1f} s (B): "
          f"{3600 * sa[0] / sa[1]:.0f} vs {3600 * sb[0] / sb[1]:.0f} candidates per hour; "
          f"{len(both)} generated by both, {len(diff)} with a different verdict")
sys.exit(1 if bad else 0)
PY
fi
exit $rc
