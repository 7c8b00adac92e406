#!/usr/bin/env bash
# CTest "systemd_localize_unit": the generated ibfabric-localize.service passes
# `systemd-analyze verify` (ExecStart= pointed at the built binary) and names what it must.
#   verify_localize_unit.sh BINARY GENERATED_UNIT
set -euo pipefail
binary=$(realpath -m -- "$1")
unit_in=$2
fail() { printf 'systemd_localize_unit: FAIL: %b\n' "$*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (apt-get install systemd)"
[[ -x $binary ]] || fail "$binary is not executable"
if grep -n '@[A-Za-z_][A-Za-z_0-9]*@' "$unit_in"; then fail "unsubstituted variable in $unit_in"; fi
grep -Eq '^ExecStart=/[^ ]*/ibfabric-localize \$IBFABRIC_LOCALIZE_ARGS$' "$unit_in" ||
  fail "ExecStart= is not '<bindir>/ibfabric-localize \$IBFABRIC_LOCALIZE_ARGS'"
for line in "DynamicUser=yes" "NoNewPrivileges=yes" "ProtectSystem=strict" "PrivateDevices=yes" \
            "Restart=on-failure" "WantedBy=multi-user.target"; do
  grep -qxF -- "$line" "$unit_in" || fail "unit lacks the line '$line'"
done
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*|ExecStart=$binary|" "$unit_in" >"$tmp/ibfabric-localize.service"
out=$(systemd-analyze verify "$tmp/ibfabric-localize.service" 2>&1) || fail "systemd-analyze verify:\n$out"
if grep -F "ibfabric-localize.service" <<<"$out"; then fail "systemd-analyze verify said:\n$out"; fi
# The binary's flags as the unit's EnvironmentFile gives them.
"$binary" --help | grep -q -- "--prometheus.url" || fail "$binary --help names no --prometheus.url"
echo "systemd_localize_unit: ok"
