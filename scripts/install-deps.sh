#!/bin/bash
# Installs everything podprof needs to build, run and test on Debian 12,
# from Debian's packages and the npm registry. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  # build
  meson ninja-build pkg-config gcc clang llvm bpftool libbpf-dev libelf-dev libdw-dev
  libprotobuf-c-dev protobuf-c-compiler zlib1g-dev libyaml-dev libmicrohttpd-dev
  # tests
  libcmocka-dev python3 golang-go elfutils binutils linux-perf musl-tools libjemalloc-dev
  libcap2-bin util-linux procps libclang-rt-14-dev clang-format yamllint unzip
  curl libc6-dbg dwz g++ redis-server
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (for the manifest checks): Debian's, unless a node is already there.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ "${1:-}" != "--no-k8s" && -x tests/k8s/setup-tools.sh ]]; then
  tests/k8s/setup-tools.sh
fi
