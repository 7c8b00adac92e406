#!/usr/bin/env bash
# Checks the shipped systemd unit, udev rule and sysusers file with systemd's own tools.
#   verify_units.sh BINARY GENERATED_UNIT SYSTEMD_SOURCE_DIR
set -euo pipefail
binary=$1 unit=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "systemd_units: FAIL: $*" >&2; exit 1; }

# verify checks that ExecStart exists: point it at the built binary.
sed "s|^ExecStart=[^ ]*|ExecStart=$binary|" "$unit" > "$tmp/ibfabricd.service"
out=$(cd "$tmp" && systemd-analyze verify --man=no ./ibfabricd.service 2>&1) || fail "verify: $out"
if grep -q "ibfabricd.service" <<<"$out"; then fail "verify warned: $out"; fi
echo "systemd-analyze verify: ok"

# The unit must be what the daemon needs: notify with watchdog, non-root, umad only.
for line in "Type=notify" "WatchdogSec=" "Restart=on-failure" "User=ibfabric" \
            "SupplementaryGroups=rdma" "DevicePolicy=closed" "DeviceAllow=char-infiniband_mad rw" \
            "NoNewPrivileges=yes" "CapabilityBoundingSet="; do
  grep -q "^$line" "$unit" || fail "unit lacks $line"
done

score=$(systemd-analyze security --offline=true --no-pager "$tmp/ibfabricd.service" 2>&1 |
        sed -n 's/.*Overall exposure level for ibfabricd.service: \([0-9.]*\).*/\1/p')
[[ -n "$score" ]] || fail "systemd-analyze security gave no score"
echo "systemd-analyze security exposure: $score"
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || fail "exposure $score is above 2.5"

rules="$src/90-ibfabric-umad.rules"
grep -v '^#' "$rules" | grep -q 'KERNEL=="umad\*".*GROUP="rdma"' || fail "udev rule does not grant umad*"
if grep -v '^#' "$rules" | grep -qi 'issm'; then fail "udev rule mentions issm outside comments"; fi
echo "udev rule: umad only"

mkdir -p "$tmp/root/etc"
out=$(systemd-sysusers --root="$tmp/root" --dry-run "$src/ibfabric.sysusers" 2>&1) ||
  fail "sysusers: $out"
grep -q "ibfabric" <<<"$out" || fail "sysusers would not create ibfabric: $out"
echo "sysusers: ok"
echo "systemd_units: ok"
