#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: the second command of the README, and
# what CI runs (.ci/run). Two builds: the release build runs the whole suite; a second build
# with AddressSanitizer and UndefinedBehaviorSanitizer runs it again and fails on any report.
#   IBFABRIC_SKIP_SANITIZE=1  skip the sanitizer build (quicker local runs)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

scripts/install-deps.sh

jobs=$(nproc)
echo "== release build"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$jobs"
echo "== tests (release build)"
ctest --test-dir "$root/build" --output-on-failure -j "$jobs" --timeout 600

if [[ "${IBFABRIC_SKIP_SANITIZE:-0}" != 1 ]]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake -S "$root" -B "$root/build-sanitize" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DIBFABRIC_SANITIZE=ON >/dev/null
  cmake --build "$root/build-sanitize" -j "$jobs"
  echo "== tests (sanitizer build)"
  # The ibsim shim is LD_PRELOADed ahead of the ASan runtime in integration tests.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest --test-dir "$root/build-sanitize" --output-on-failure -j "$jobs" --timeout 900
fi
echo "== all tests passed"
