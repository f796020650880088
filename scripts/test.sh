#!/bin/bash
# One command from a fresh Debian 12 machine (as root): install, build and
# run the whole test suite: the -Werror build's unit, integration and
# Kubernetes tests, the format check, then the unit and integration tests
# again under ASan+UBSan. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }

PASSED=0
FAILED=0
SKIPPED=0
count_log() { # testlog.json -> adds to the totals
  local counts
  counts=$(python3 - "$1" <<'PY'
import json, sys
p = f = s = 0
try:
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif r == "SKIP":
            s += 1
        else:
            f += 1
except FileNotFoundError:
    f += 1
print(p, f, s)
PY
)
  read -r p f s <<<"$counts"
  PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
}

step() { echo; echo "==== $*"; }

# 1. The -Werror build and every suite.
step "build (werror)"
if [[ ! -d build-test ]]; then
  meson setup build-test -Dwerror=true --buildtype=debugoptimized >/dev/null || { FAILED=$((FAILED+1)); }
fi
if ninja -C build-test >build-test.log 2>&1; then
  step "tests"
  meson test -C build-test --print-errorlogs --num-processes 2 ${PP_TEST_ARGS:-}
  count_log build-test/meson-logs/testlog.json
else
  tail -50 build-test.log
  echo "build failed"
  FAILED=$((FAILED + 1))
fi

# 2. Format check (one test).
step "clang-format check"
mapfile -t SRCS < <(git ls-files 'cmd/*.c' 'lib/*.c' 'lib/*.h' 'bpf/*.c' 'bpf/*.h' 'tests/*.c' 2>/dev/null)
if ((${#SRCS[@]})) && clang-format --dry-run --Werror "${SRCS[@]}" 2>clang-format.log; then
  echo "clang-format: ${#SRCS[@]} files ok"
  PASSED=$((PASSED + 1))
else
  head -40 clang-format.log
  echo "clang-format: FAILED"
  FAILED=$((FAILED + 1))
fi

# 3. ASan+UBSan build: unit and integration suites again.
if [[ "${PP_SKIP_ASAN:-0}" != 1 ]]; then
  step "build (asan+ubsan)"
  if [[ ! -d build-asan ]]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug >/dev/null
  fi
  if ninja -C build-asan >build-asan.log 2>&1; then
    step "tests under asan+ubsan"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:use_sigaltstack=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      LSAN_OPTIONS=suppressions=$ROOT/tests/hostile/lsan.supp:print_suppressions=0 \
      meson test -C build-asan --print-errorlogs --num-processes 2 --suite unit --suite integration \
      --timeout-multiplier 3
    count_log build-asan/meson-logs/testlog.json
  else
    tail -50 build-asan.log
    echo "asan build failed"
    FAILED=$((FAILED + 1))
  fi
fi

# 4. The fuzzers (clang, libFuzzer, ASan+UBSan), a bounded time each.
if [[ "${PP_SKIP_FUZZ:-0}" != 1 ]]; then
  step "fuzzers (${PP_FUZZ_SECONDS:-20} s each)"
  tests/fuzz/run-fuzzers.sh "${PP_FUZZ_SECONDS:-20}" 2>&1 | tee fuzz.log | tail -15
  # a failure's lines (invariant, artifact) can be above the tail: show them
  if grep -q ' FAILED (exit' fuzz.log; then
    echo "fuzzer failures:"
    grep -A10 ' FAILED (exit' fuzz.log | grep -v '^== fuzz-'
    for a in build-fuzz/fuzz-work/*/artifacts/*; do
      [[ -f $a ]] || continue
      echo "-- $a (base64; add a minimized copy to tests/fuzz/corpus/):"
      head -c 4096 "$a" | base64 -w 100
    done
  fi
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' fuzz.log | tail -1)
  if [[ -n "$line" ]]; then
    PASSED=$((PASSED + $(echo "$line" | awk '{print $1}')))
    FAILED=$((FAILED + $(echo "$line" | awk '{print $3}')))
  else
    echo "fuzzers: no summary"
    FAILED=$((FAILED + 1))
  fi
fi

echo
echo "${PASSED} passed, ${FAILED} failed, ${SKIPPED} skipped"
[[ $FAILED -eq 0 ]]
