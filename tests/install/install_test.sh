#!/usr/bin/env bash
# install_test.sh BUILD: installs BUILD into a temporary prefix and runs the main job with
# the installed kloop from an unrelated folder, with an empty environment (no KLOOP_WORKER_DIR or
# KLOOP_DATA_DIR), budget 1. It must find its workers and data relative to itself: the store's
# tool calls must name the installed worker, never the build tree. Without a GPU the job ends
# pending_device_validation (exit 3); with one, promoted or rejected (exit 0 or 1).
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/kloop-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in bin/kloop bin/kloop-build-worker share/kloop/kernels/rmsnorm/baseline/kernel.cu \
  share/kloop/kernels/rmsnorm/baseline/manifest.json share/kloop/prompts/templates/contract.txt \
  share/kloop/contracts/rmsnorm.json; do
  [ -e "$tmp/prefix/$f" ] || { echo "install_test: $f was not installed"; cat "$tmp/install.log"; exit 1; }
done
if [ -e "$build/bin/kloop-gpu-worker" ] && [ ! -x "$tmp/prefix/bin/kloop-gpu-worker" ]; then
  echo "install_test: kloop-gpu-worker was built but not installed"; exit 1
fi
# The installed contract is the one kloop hashes.
"$tmp/prefix/bin/kloop" contract rmsnorm | cmp - "$tmp/prefix/share/kloop/contracts/rmsnorm.json"
mkdir -p "$tmp/elsewhere"
cd "$tmp/elsewhere"
set +e
env -i PATH=/usr/bin:/bin HOME="$tmp" "$tmp/prefix/bin/kloop" optimize rmsnorm --budget 1 \
  --store "$tmp/elsewhere/store" --json >"$tmp/out.json" 2>"$tmp/err.log"
rc=$?
set -e
decision=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decision"])' "$tmp/out.json")
case "$rc:$decision" in
  3:pending_device_validation | 0:promoted | 1:rejected) ;;
  *) echo "install_test: installed kloop ended $decision (exit $rc)"; cat "$tmp/out.json" "$tmp/err.log"; exit 1 ;;
esac
# It built its candidate with the installed worker, not the build tree's.
if grep -q -- "$build/bin" "$tmp/err.log" "$tmp/out.json"; then
  echo "install_test: the installed kloop used the build tree ($build/bin)"; exit 1
fi
python3 - "$tmp/elsewhere/store/kloop.db" "$tmp/prefix" "$build" <<'PY'
import json, sqlite3, sys
db, prefix, build = sys.argv[1:4]
rows = sqlite3.connect(db).execute("SELECT argv_json FROM tool_calls").fetchall()
workers = [a for (argv,) in rows for a in json.loads(argv) if "kloop-build-worker" in a]
assert workers, "no tool call ran kloop-build-worker"
for w in workers:
    assert w.startswith(prefix + "/bin/"), f"a build ran {w}, not the installed worker"
    assert build not in w, f"a build ran the build tree's worker: {w}"
PY
# The in-tree baseline comes from PREFIX/share/kloop: checker-coverage mutates it (one mutant).
set +e
env -i PATH=/usr/bin:/bin HOME="$tmp" "$tmp/prefix/bin/kloop" checker-coverage rmsnorm \
  --max-mutants 1 --json >"$tmp/cc.json" 2>"$tmp/cc.err"
rc_cc=$?
set -e
if ! grep -q "1 mutants of $tmp/prefix/share/kloop/kernels/rmsnorm/baseline" "$tmp/cc.err" ||
  { [ "$rc_cc" -ne 0 ] && [ "$rc_cc" -ne 3 ]; }; then
  echo "install_test: checker-coverage did not read the installed baseline (exit $rc_cc)"
  cat "$tmp/cc.err"; exit 1
fi
echo "install_test: installed to $tmp/prefix and ran the main job from $tmp/elsewhere: $decision (exit $rc) in $(( $(date +%s) - start )) s"
