#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) in build-fuzz and fuzzes
# each for a bounded time, starting from a copy of its seed corpus (the repository is never
# written). Fails on the first crash, leak, timeout or sanitizer report. docs/fuzzing.md.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
#   IBFABRIC_FUZZ_TARGETS="config mad_decode"  fuzz only these
#   IBFABRIC_FUZZ_BUILD=DIR  an existing IBFABRIC_FUZZ=ON build to use (scripts/test.sh passes
#                            its ASan + UBSan build); otherwise build-fuzz is configured here
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-20}
# Every target tests/fuzz/CMakeLists.txt builds, unless told otherwise: a target added there is
# fuzzed without a second list to keep.
all_targets=$(sed -n 's/^set(fuzz_targets \(.*\))$/\1/p' "$root/tests/fuzz/CMakeLists.txt")
if [[ -z "$all_targets" ]]; then
  echo "!! no 'set(fuzz_targets ...)' line in tests/fuzz/CMakeLists.txt" >&2
  exit 2
fi
targets=${IBFABRIC_FUZZ_TARGETS:-$all_targets}
build=${IBFABRIC_FUZZ_BUILD:-$root/build-fuzz}

echo "== fuzz build (clang, libFuzzer + ASan + UBSan) in $build"
if [[ -z "${IBFABRIC_FUZZ_BUILD:-}" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DIBFABRIC_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
elif ! grep -q '^IBFABRIC_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "!! $build is not an IBFABRIC_FUZZ=ON build (IBFABRIC_FUZZ_BUILD)" >&2
  exit 2
fi
cmake --build "$build" -j "$(nproc)" --target fuzzers

work=$(mktemp -d "${TMPDIR:-/tmp}/ibfabric-fuzz.XXXXXX")
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target per core at a time (each is one process): on 2 cores, 7 targets of 20 s run in 4
# rounds instead of 7.
fuzz_one() {
  local t=$1
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  cp "$root/tests/fuzz/corpus/$t/"* "$work/$t/corpus/"
  if [[ -d "$root/tests/fuzz/regressions/$t" ]]; then
    cp "$root/tests/fuzz/regressions/$t/"* "$work/$t/corpus/" 2>/dev/null || true
  fi
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" \
      >"$work/$t/log" 2>&1; then
    {
      tail -n 60 "$work/$t/log"
      echo "!! fuzz_$t failed; log: $work/$t/log"
      for a in "$work/$t/artifacts/"*; do
        [[ -e "$a" ]] || continue
        echo "!! crash input: $a"
        echo "   reproduce:  $build/tests/fuzz/fuzz_$t $a"
        echo "   after fixing the bug, keep it as a regression test (replayed by ctest -L fuzz-replay):"
        echo "     mkdir -p tests/fuzz/regressions/$t && cp $a tests/fuzz/regressions/$t/"
      done
    } >"$work/$t/report"
    touch "$work/$t/failed"
  else
    {
      echo "== fuzz $t for ${seconds}s"
      grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' \
        "$work/$t/log" || true
    } >"$work/$t/report"
  fi
}
running=0
for t in $targets; do
  if [[ ! -x "$build/tests/fuzz/fuzz_$t" ]]; then
    echo "!! no fuzz target $t in $build/tests/fuzz" >&2
    exit 2
  fi
  fuzz_one "$t" &
  if ((++running >= $(nproc))); then
    wait -n
    ((running--))
  fi
done
wait
failed=()
for t in $targets; do
  cat "$work/$t/report"
  [[ -e "$work/$t/failed" ]] && failed+=("$t")
done
if ((${#failed[@]})); then
  echo "== fuzzing found problems in: ${failed[*]} (inputs and logs kept in $work)"
  exit 1
fi
rm -rf "$work"
echo "== fuzzing passed"
