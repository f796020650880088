#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# test-go-pprof.sh PPROF_MKPROFILE PPROF_DUMP
#
# Cross-checks lib/pprof against Go's implementation of the format:
#  1. profiles written by lib/pprof (pprof-mkprofile, contents listed in
#     tests/tools/pprof-mkprofile.c) are read by `go tool pprof`, and its
#     -raw / -top / -traces output shows the exact values, function names,
#     inline frames, labels and mapping flags;
#  2. a heap profile written by Go's runtime/pprof decodes with pprof-dump
#     and passes pp_pprof_check (no false alarms on the reference encoder).
# Exit 77 (skip) only when `go` is not installed.
set -eu

MK=$1
DUMP=$2
command -v go >/dev/null 2>&1 || { echo "go not installed, skipping"; exit 77; }

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export HOME="$T" GOCACHE="$T/cache" GOPATH="$T/gopath" GOFLAGS=-mod=mod GOTOOLCHAIN=local
export PPROF_TMPDIR="$T" PPROF_BINARY_PATH="$T"

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect FILE PATTERN...: every extended regex must match some line of FILE
expect() {
	f=$1; shift
	for pat in "$@"; do
		grep -Eq -- "$pat" "$f" || { cat "$f" >&2; fail "no line matching '$pat' in $f"; }
	done
}

for k in cpu heap empty; do
	"$MK" "$k" "$T/$k.pb.gz" || fail "pprof-mkprofile $k"
	go tool pprof -raw "$T/$k.pb.gz" >"$T/$k.raw" 2>"$T/$k.err" ||
		{ cat "$T/$k.err" >&2; fail "go tool pprof -raw $k"; }
	# pprof-dump agrees and the checker accepts what the builder made
	"$DUMP" "$T/$k.pb.gz" >"$T/$k.json" || fail "pprof-dump $k"
	expect "$T/$k.json" '^\{"check":"ok",'
done

expect "$T/cpu.raw" \
	'^PeriodType: cpu nanoseconds$' \
	'^Period: 10000000$' \
	'^Duration: 10s$' \
	'^samples/count cpu/nanoseconds$' \
	'^ +7 +70000000: 1 2 $' \
	'^ +3 +30000000: 3 2 $' \
	'comm:\[app\]' \
	'pid:\[4242\]' \
	'^ +1: 0x401234 M=1 podprof_leaf podprof_test.c:12 s=10$' \
	'^ +podprof_work podprof_test.c:30 s=25$' \
	'^ +2: 0x401100 M=1 main podprof_test.c:50 s=45$' \
	'^ +3: 0x401300 M=1 podprof_other podprof_test.c:40 s=38$' \
	'^1: 0x400000/0x500000/0x0 /usr/bin/podprof-test-app 0123456789abcdef \[FN\]\[FL\]\[LN\]\[IN\]$'

expect "$T/heap.raw" \
	'^PeriodType: space bytes$' \
	'^Period: 524288$' \
	'^alloc_objects/count alloc_space/bytes\[dflt\] inuse_objects/count inuse_space/bytes$' \
	'^ +11 +45056 +5 +20480: 1 2 $' \
	'bytes:\[4096 bytes\]' \
	'^ +1: 0x401400 M=1 podprof_alloc_site podprof_test.c:60 s=58$'

expect "$T/empty.raw" '^PeriodType: goroutine count$' '^goroutine/count$'

# the default sample type drives -top; -sample_index picks the others
go tool pprof -top "$T/heap.pb.gz" >"$T/heap.top" 2>&1 || fail "go tool pprof -top heap"
expect "$T/heap.top" '^Type: alloc_space$' '44kB +100% +100% +44kB +100% +podprof_alloc_site$'
go tool pprof -top -sample_index=inuse_objects "$T/heap.pb.gz" >"$T/heap.top2" 2>&1 ||
	fail "go tool pprof -top -sample_index heap"
expect "$T/heap.top2" '^Type: inuse_objects$' '^ +5 +100% +100% +5 +100% +podprof_alloc_site$'
go tool pprof -traces "$T/cpu.pb.gz" >"$T/cpu.traces" 2>&1 || fail "go tool pprof -traces cpu"
expect "$T/cpu.traces" '^ +70ms +podprof_leaf \(inline\)$' '^ +30ms +podprof_other$'

# Go's own encoder -> our decoder and checker
cat >"$T/main.go" <<'GO'
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

var sink [][]byte

func podprofAlloc() { sink = append(sink, make([]byte, 4096)) }

func main() {
	runtime.MemProfileRate = 1
	for i := 0; i < 1000; i++ {
		podprofAlloc()
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		panic(err)
	}
	f.Close()
}
GO
(cd "$T" && go run main.go "$T/go-allocs.pb.gz") >"$T/go.err" 2>&1 ||
	{ cat "$T/go.err" >&2; fail "go run"; }
"$DUMP" "$T/go-allocs.pb.gz" >"$T/go.json" || fail "pprof-dump on Go's profile"
python3 - "$T/go.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["check"] == "ok", d["check"]
assert d["sample_types"] == [["alloc_objects", "count"], ["alloc_space", "bytes"],
                             ["inuse_objects", "count"], ["inuse_space", "bytes"]], d["sample_types"]
assert d["default_sample_type"] == "alloc_space"
fn = {l["id"]: [x["function"] for x in l["lines"]] for l in d["locations"]}
# MemProfileRate=1: every allocation is recorded, 1000 objects of 4096 bytes
# (the append's own slice growth is also in podprofAlloc: count 4096-byte objects)
objs = sum(s["values"][0] for s in d["samples"]
           if any("podprofAlloc" in f for i in s["locations"] for f in fn[i])
           and s["num_labels"].get("bytes", [0])[0] == 4096)
assert objs == 1000, objs
PY
echo "ok"
