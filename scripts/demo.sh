#!/bin/bash
# One command from a fresh Debian 12 machine (as root): install, build, and
# run podprof on the bundled demo workload, then print how to look at it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-k8s
[[ -d build-demo ]] || meson setup build-demo --buildtype=release >/dev/null
ninja -C build-demo >/dev/null

PORT=${PP_DEMO_PORT:-6060}
build-demo/tests/workloads/demo/podprof-demo &
DEMO=$!
trap 'kill $DEMO 2>/dev/null || true' EXIT
sleep 0.5
cat <<MSG

podprof is profiling the demo workload (pid $DEMO) on http://127.0.0.1:$PORT/debug/pprof/
Flame graphs in a browser on this machine (podprof's own page, nothing else to install):

  http://127.0.0.1:$PORT/debug/pprof/ui/?profile=profile&seconds=10&view=flame
  http://127.0.0.1:$PORT/debug/pprof/ui/?profile=heap&view=diff&seconds=30&sort=cum   (the leak)

Try, in another shell:

  go tool pprof -top 'http://127.0.0.1:$PORT/debug/pprof/profile?seconds=5'
  go tool pprof -top -sample_index=inuse_space http://127.0.0.1:$PORT/debug/pprof/heap
  curl -s 'http://127.0.0.1:$PORT/debug/pprof/goroutine?debug=2' | head -40
  curl -s 'http://127.0.0.1:$PORT/debug/pprof/heap?debug=1' | head -30
  curl -s http://127.0.0.1:$PORT/metrics
  go tool pprof -http=:8080 http://127.0.0.1:$PORT/debug/pprof/allocs

Press Ctrl-C to stop.

MSG
build-demo/cmd/podprof/podprof --listen "127.0.0.1:$PORT" --pid "$DEMO"
