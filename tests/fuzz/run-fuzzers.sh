#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Run every libFuzzer target for SECONDS each.
#
#   tests/fuzz/run-fuzzers.sh SECONDS [TARGET...]
#
# Configures (once) a clang build in build-fuzz with -Dfuzz=true, ASan and
# UBSan, and the libraries instrumented for coverage
# (-fsanitize=fuzzer-no-link); builds the fuzz-* binaries and runs each one
# over a scratch corpus in build-fuzz/fuzz-work/<target>/corpus seeded from
# tests/fuzz/corpus/<target> (the seed corpus is never written to).
# Crashes, leaks, timeouts and OOMs land in build-fuzz/fuzz-work/<target>/
# artifacts/; minimize one with
#   build-fuzz/tests/fuzz/fuzz-<target> -minimize_crash=1 -runs=10000 FILE
# and add it to tests/fuzz/corpus/<target>/ as a regression seed.
#
# Environment: PODPROF_SRC (source tree, default: this script's repo),
# PODPROF_FUZZ_BUILD (default: $PODPROF_SRC/build-fuzz), FUZZ_JOBS
# (parallel fuzzers, default 1), FUZZ_ARGS (extra libFuzzer flags).
# Prints "N passed, N failed"; exits 1 if any target failed or did not build.

set -u

ALL_TARGETS="config http maps proc buildid pprof cpurec symipc"

if [ $# -lt 1 ] || ! [ "$1" -gt 0 ] 2>/dev/null; then
	echo "usage: $0 SECONDS [TARGET...]   (targets: $ALL_TARGETS)" >&2
	exit 2
fi
secs=$1
shift
targets=${*:-$ALL_TARGETS}

src=${PODPROF_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${PODPROF_FUZZ_BUILD:-$src/build-fuzz}
jobs=${FUZZ_JOBS:-1}

if [ -f "$build/build.ninja" ]; then
	if ! grep -q '^ command = clang.* -c \$in' "$build/build.ninja"; then
		echo "$build is not a clang build; remove it first" >&2
		exit 2
	fi
else
	CC=clang meson setup "$build" "$src" \
		-Dfuzz=true -Dtests=true \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" \
		>"$build.setup.log" 2>&1 || {
		cat "$build.setup.log" >&2
		echo "meson setup failed" >&2
		exit 2
	}
	mv "$build.setup.log" "$build/fuzz-setup.log"
fi

ninja_targets=
for t in $targets; do
	ninja_targets="$ninja_targets tests/fuzz/fuzz-$t"
done
# shellcheck disable=SC2086
if ! ninja -C "$build" $ninja_targets >"$build/fuzz-build.log" 2>&1; then
	tail -n 40 "$build/fuzz-build.log" >&2
	echo "build failed" >&2
	exit 2
fi

passed=0
failed=0
failed_names=
for t in $targets; do
	work="$build/fuzz-work/$t"
	mkdir -p "$work/corpus" "$work/artifacts"
	echo "== fuzz-$t for ${secs}s"
	par=
	[ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"
	# in $work: with -jobs libFuzzer writes fuzz-N.log into the current directory
	# shellcheck disable=SC2086
	(cd "$work" && exec "$build/tests/fuzz/fuzz-$t" \
		-max_total_time="$secs" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 $par \
		-artifact_prefix="$work/artifacts/" ${FUZZ_ARGS:-} \
		"$work/corpus" "$src/tests/fuzz/corpus/$t") >"$work/log" 2>&1
	rc=$?
	[ -n "$par" ] && cat "$work"/fuzz-*.log >>"$work/log" 2>/dev/null
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		grep -E '^#[0-9]+.*DONE' "$work/log" | tail -n 1
	else
		failed=$((failed + 1))
		failed_names="$failed_names $t"
		echo "fuzz-$t FAILED (exit $rc), log: $work/log" >&2
		grep -E 'ERROR: |SUMMARY: |invariant failed|Test unit written|^artifact_prefix' \
			"$work/log" | head -n 10 >&2
	fi
done

echo "$passed passed, $failed failed${failed_names:+ (failed:$failed_names)}"
[ $failed -eq 0 ]
