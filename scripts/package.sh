#!/usr/bin/env bash
# Builds the Debian package dist/ibfabricd_<version>_<arch>.deb (docs/deployment.md).
#   scripts/package.sh [BUILD_DIR]     BUILD_DIR: default $IBFABRIC_BUILD_DIR or build/
#   IBFABRIC_DIST_DIR=DIR              where the .deb goes (default dist/)
# Packs the ibfabricd of the release build dir (scripts/test.sh builds build/ first; if it is
# missing, this configures and builds it) through CPack's DEB generator, in a packaging-only
# CMake configure of the same sources with the prefix /usr (BUILD_DIR/deb): the layout comes
# from the project's install() rules and nothing is compiled a second time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath -m -- "${1:-${IBFABRIC_BUILD_DIR:-$root/build}}")
dist=$(realpath -m -- "${IBFABRIC_DIST_DIR:-$root/dist}")
binary=$build/daemon/ibfabricd

fail() { echo "package.sh: $*" >&2; exit 1; }

if [[ ! -x $binary || ! -x $build/daemon/ibfabric-localize ]]; then
  echo "== no $binary or ibfabric-localize beside it: building them"
  scripts/install-deps.sh
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target ibfabricd ibfabric-localize
fi
for tool in cmake cpack dpkg-shlibdeps dpkg-deb strip gzip; do
  command -v "$tool" >/dev/null || fail "$tool not found: run scripts/install-deps.sh"
done
# A sanitized or fuzzing binary needs its runtime and is slow: never ship one.
for opt in IBFABRIC_SANITIZE IBFABRIC_TSAN IBFABRIC_FUZZ; do
  if grep -Eq "^$opt:BOOL=(ON|1|TRUE|YES)$" "$build/CMakeCache.txt" 2>/dev/null; then
    fail "$build is a $opt build; package a release build (scripts/test.sh builds build/)"
  fi
done
# The binary must be the sources' version (a stale build dir of another checkout is not).
version=$(sed -n 's/^project(ibfabric VERSION \([0-9.]*\) .*/\1/p' "$root/CMakeLists.txt")
[[ -n $version ]] || fail "no project(ibfabric VERSION ...) in CMakeLists.txt"
"$binary" --version | grep -q "^ibfabricd $version " ||
  fail "$binary reports '$("$binary" --version)', not version $version: rebuild $build"
"$build/daemon/ibfabric-localize" --version | grep -q "^ibfabric-localize $version " ||
  fail "$build/daemon/ibfabric-localize is not version $version: rebuild $build"

pkgdir=$build/deb
echo "== packaging $binary (version $version) in $pkgdir"
cmake -S "$root" -B "$pkgdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_DOCDIR=share/doc/ibfabricd -DBUILD_TESTING=OFF \
  -DIBFABRIC_PREBUILT_IBFABRICD="$binary" >"$pkgdir.configure.log" 2>&1 ||
  { cat "$pkgdir.configure.log" >&2; fail "configuring $pkgdir failed"; }
# Only the generated files the package installs; ibfabric_core is never built here.
cmake --build "$pkgdir" --target ibfabricd_stripped ibfabric_man ibfabric_deb_changelog >/dev/null
rm -rf "$pkgdir/package-out"
(cd "$pkgdir" && cpack -G DEB) >"$pkgdir.cpack.log" 2>&1 ||
  { cat "$pkgdir.cpack.log" >&2; fail "cpack failed"; }
shopt -s nullglob
debs=("$pkgdir"/package-out/ibfabricd_"$version"_*.deb)
((${#debs[@]} == 1)) || fail "expected one ibfabricd_${version}_*.deb in $pkgdir/package-out"
mkdir -p "$dist"
cp -- "${debs[0]}" "$dist/"
echo "$dist/$(basename "${debs[0]}")"
