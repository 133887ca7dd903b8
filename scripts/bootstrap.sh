#!/usr/bin/env bash
# bootstrap.sh [BUILD_DIR] [extra cmake args...]: installs the Debian 12 packages kloop needs (only
# those missing; needs root), then configures and builds kloop into BUILD_DIR (default: build).
# The CUDA 13.0 toolkit is expected at /usr/local/cuda (it is not a Debian package). slurm-wlm and
# munge are for `kloop sweep --backend slurm` and its test (a one-node cluster the test starts on
# localhost); their own services are not used.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
packages=(build-essential cmake ninja-build pkg-config git clang-format
  libcurl4-openssl-dev nlohmann-json3-dev libfmt-dev libsqlite3-dev libsodium-dev libseccomp-dev
  libcli11-dev libgtest-dev libgmock-dev libcpp-httplib-dev libdlpack-dev bubblewrap zlib1g-dev
  chromium python3 libtomlplusplus-dev slurm-wlm munge clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing packages and not root; run as root or install: ${missing[*]}" >&2
    exit 2
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "bootstrap: the CUDA 13.0 toolkit is expected at /usr/local/cuda (nvcc not found)" >&2
  exit 2
fi
export PATH=/usr/local/cuda/bin:$PATH
cd "$root"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
jobs=$(nproc)
cmake --build "$build" -j "$jobs"
