#!/bin/bash
# Installs everything podprof needs to build, run and test on Debian 12,
# from Debian's packages and the npm registry. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  # build
  meson ninja-build pkg-config gcc clang llvm bpftool libbpf-dev libelf-dev libdw-dev libiberty-dev
  libprotobuf-c-dev protobuf-c-compiler zlib1g-dev libyaml-dev libmicrohttpd-dev
  # tests
  libcmocka-dev python3 golang-go elfutils binutils linux-perf musl-tools libjemalloc-dev
  libcap2-bin util-linux procps libclang-rt-14-dev clang-format yamllint unzip
  curl libc6-dbg dwz g++
  # tests/integration/test_daemons.py: real forking daemons run with the preloaded heap
  # agent (each on a unix socket in a temporary directory; the services the packages
  # install are not started, see policy-rc.d below)
  redis-server nginx postgresql-15
  # bench/run_stops.py: podprof attached and ended in cycles on these daemons and
  # on memcached (not started by the package either, see policy-rc.d below)
  memcached
  # the browser test of /debug/pprof/ui/ (tests/browser)
  chromium fonts-dejavu-core
  # tests/podman: the image built and the manifests played (rootful podman 4.3, runc,
  # CNI bridge, catatonit as the pod's PID 1; the base image made with debootstrap)
  podman runc catatonit containernetworking-plugins debootstrap python3-yaml
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
  # Daemons' postinst scripts start their system service (redis on 6379, nginx on
  # 80, a PostgreSQL cluster on 5432): refused while installing, as in a container
  # image, unless a policy is already in place.
  policy=/usr/sbin/policy-rc.d
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# web/'s node modules (pinned by web/package-lock.json): esbuild for
# web/refresh.sh, playwright-core to drive chromium in tests/browser. The C
# build does not need them (the built page is committed in web/dist).
web_stamp=web/node_modules/.lock.sha256
web_want=$(cat web/package.json web/package-lock.json | sha256sum | cut -d' ' -f1)
if [[ ! -f $web_stamp || $(cat "$web_stamp") != "$web_want" ]]; then
  echo "install-deps: npm ci in web/"
  (cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$web_want" >"$web_stamp"
fi
if [[ "${1:-}" != "--no-k8s" && -x tests/k8s/setup-tools.sh ]]; then
  tests/k8s/setup-tools.sh
fi
