#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the second command of the README, and
# what CI runs (.ci/run). Three builds, each running the whole suite: release (gcc);
# AddressSanitizer + UndefinedBehaviorSanitizer (clang, also instrumented for libFuzzer, so the
# same build then fuzzes every parser for a short while: one build instead of two); and
# ThreadSanitizer (gcc: the MAD engine's receiver thread, the blocking collectors' workers, the
# HTTP server's bcrypt thread). Any sanitizer report fails the run, also one written by a daemon
# that a test started and stopped: reports go to files that are checked after each suite.
#   IBFABRIC_SKIP_SANITIZE=1  skip the sanitizer builds (quicker local runs)
#   IBFABRIC_SKIP_FUZZ=1      skip the fuzzing stage
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
stage_start=$SECONDS

scripts/install-deps.sh
# Every tool is installed now: a test that would skip for a missing one fails instead, naming it
# (tests/lib/ibfabric_testlib.py, require_tools); CTest would count the skip as a pass. Skips
# for other reasons (IBFABRIC_SANITIZED=1 below, a host property) stay skips.
export IBFABRIC_REQUIRE_ALL_TOOLS=1

jobs=$(nproc)
# The suites mostly wait (on simulated fabrics, Prometheus evaluations, deadlines): the release
# suite used a quarter of 2 cores (365 s wall, 184 s of CPU, 2026-11-28), and ran in 203 s with
# twice as many tests at once, each test as long as before. The release suite runs three times
# as many: its three alert-chain tests take minutes each, waiting on Alertmanager's group waits
# (load average 0.6 with two of them running, 2026-12-02), and the others share the rest. Tests
# that must run alone say so (RUN_SERIAL in tests/CMakeLists.txt).
test_jobs=$((jobs * 2))
release_test_jobs=$((jobs * 3))
# Each stage starts by saying what the one before cost (docs/testing.md keeps the figures).
stage() {
  echo "== $* (the stage before took $((SECONDS - stage_start)) s, $SECONDS s in all)"
  stage_start=$SECONDS
}
# Line tables only (-g1): backtraces and sanitizer reports keep functions, files and lines, and
# the builds take less time (on 2 cores, 2026-11-26: release 177 s against 234 s with -g, the
# ASan build 262 s against 292 s).
stage "release build"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  >/dev/null
cmake --build "$root/build" -j "$jobs"
stage "tests (release build)"
ctest --test-dir "$root/build" --output-on-failure -j "$release_test_jobs" --timeout 600

# Tests that run no binary of ours (promtool on the shipped rules, Alertmanager on its shipped
# configuration, the compiler on planted includes, the maintenance tool), or one only as a black
# box beside the rules and routing they test (test_pipeline_health: ibfabric-localize, which
# test_localize_service runs under the sanitizers): the release suite runs them once; a
# sanitizer build has nothing to add to them (74, 43, 10 and 60 s in the release suite).
sanitizer_free='^e2e/(test_alert_rules|test_alertmanager_config|test_layers|test_pipeline_health|test_maintenance_tool)$'
# Runs the suite of build dir $1 with sanitizer reports written under $1/sanitizer-reports.
sanitized_suite() {
  local dir=$1 reports=$1/sanitizer-reports failed=0
  rm -rf "$reports" && mkdir -p "$reports"
  # The ibsim shim is LD_PRELOADed ahead of the ASan runtime in integration tests, and has an
  # over-read of its own (tests/sanitizers/asan.supp) and leaks the MADs still queued in it when
  # a process exits (tests/sanitizers/lsan.supp).
  # Resident memory is not compared in sanitized runs (IBFABRIC_SANITIZED): ASan's quarantine
  # keeps freed memory; LeakSanitizer checks for leaks at every exit instead.
  # TSan symbolizes nothing in-process (symbolize=0; suppressions match module names, which it
  # still knows): symbolizing even a suppressed report stalls the reporting thread for seconds,
  # and the MAD receiver thread stalled like that failed 100 ms timeouts in test_ports.
  # Reports are symbolized after the suite instead (scripts/symbolize_report.py).
  IBFABRIC_SANITIZED=1 \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0:log_path=$reports/asan:suppressions=$root/tests/sanitizers/asan.supp" \
  LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan" \
  TSAN_OPTIONS="symbolize=0:halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan:suppressions=$root/tests/sanitizers/tsan.supp" \
    ctest --test-dir "$dir" --output-on-failure -j "$test_jobs" --timeout 900 -E "$sanitizer_free" ||
    failed=$?
  # Shown also when a test failed: a report written with halt_on_error fails its test with
  # nothing on its output but the exit code, and the report is then the only evidence.
  if compgen -G "$reports/*" >/dev/null; then
    echo "== sanitizer reports in $reports:" >&2
    python3 "$root/scripts/symbolize_report.py" "$dir" "$reports"/* >&2 || cat "$reports"/* >&2
    exit 1
  fi
  return "$failed"
}

if [[ "${IBFABRIC_SKIP_SANITIZE:-0}" != 1 ]]; then
  stage "sanitizer build (ASan + UBSan, clang, libFuzzer-instrumented)"
  # -O1 -g1 without NDEBUG: asserts stay on; the fuzz targets need clang (docs/fuzzing.md).
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-sanitize" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DIBFABRIC_FUZZ=ON >/dev/null
  cmake --build "$root/build-sanitize" -j "$jobs"
  stage "tests (ASan + UBSan build)"
  sanitized_suite "$root/build-sanitize"

  stage "sanitizer build (TSan)"
  # Debug (-O0, asserts on) with line tables only, as above (http_server.cpp 24.9 s against
  # 29.6 s with -g; -O1 gained nothing: 32.4 s).
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-g1" -DCMAKE_C_FLAGS_DEBUG="-g1" -DIBFABRIC_TSAN=ON >/dev/null
  cmake --build "$root/build-tsan" -j "$jobs"
  stage "tests (TSan build)"
  sanitized_suite "$root/build-tsan"
fi
# Fuzzing: every libFuzzer target for a short bounded run (docs/fuzzing.md), on the ASan +
# UBSan build when there is one; a crash fails the run and says how to keep the input as a
# regression test.
if [[ "${IBFABRIC_SKIP_FUZZ:-0}" != 1 ]]; then
  stage "fuzzing (libFuzzer, ${IBFABRIC_FUZZ_SECONDS:-20} s per target)"
  if [[ "${IBFABRIC_SKIP_SANITIZE:-0}" != 1 ]]; then
    export IBFABRIC_FUZZ_BUILD="$root/build-sanitize"
  fi
  scripts/fuzz.sh "${IBFABRIC_FUZZ_SECONDS:-20}"
fi
stage "all tests passed"
