#!/usr/bin/env bash
# Installs everything ibfabric needs to build, run the demo and run every test, from Debian's
# packages only. Idempotent: a second run installs nothing new.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build clang clang-format libclang-rt-14-dev
  libboost-dev libboost-system-dev prometheus-cpp-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libsystemd-dev libssl-dev libcrypt-dev libibumad-dev libibmad-dev libnl-3-dev libnl-route-3-dev
  zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  ibsim-utils opensm infiniband-diags
  prometheus prometheus-node-exporter prometheus-alertmanager victoria-metrics systemd udev curl openssl apache2-utils wrk python3 procps iproute2
  dpkg-dev lintian man-db python3-yaml   # scripts/package.sh (dpkg-shlibdeps), its test, manifest checks
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}; run this script as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Debian's prometheus packages (prometheus-alertmanager too: binary prometheus-alertmanager,
  # and amtool) start services on install where systemd runs; nothing here relies on them.
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
