#!/usr/bin/env bash
# CTest "systemd_units": checks the generated systemd unit, the udev rule and the sysusers file
# with systemd's own tools.
#
#   verify_units.sh BINARY GENERATED_UNIT
#
# BINARY is the built ibfabricd (ExecStart= is pointed at it, because `systemd-analyze verify`
# checks that the command exists), GENERATED_UNIT is build/systemd/ibfabricd.service. The udev
# rule and sysusers file are read from systemd/ next to this tests/ directory.
#
# Needs neither root nor a running systemd: `systemd-analyze verify` and `systemd-analyze
# security --offline=true` load the unit file themselves (checked with systemd 252 in a
# container whose PID 1 is not systemd), and systemd-sysusers works on a scratch --root.
# The udev part runs the real udev rules engine (`udevadm test`) on fake umad/issm/uverbs
# devices inside a private mount namespace when udevadm and unshare are usable, and says
# "skipped" otherwise (a missing udevadm fails under IBFABRIC_REQUIRE_ALL_TOOLS=1, which
# scripts/test.sh sets; a host that allows no namespace is still a skip); the static checks of
# the rule always run.
#
# Exits non-zero on the first failure; prints "systemd_units: ok" at the end.
set -euo pipefail

fail() {
  printf 'systemd_units: FAIL: %b\n' "$*" >&2
  exit 1
}

if (($# != 2)); then
  echo "usage: $0 BINARY GENERATED_UNIT" >&2
  exit 2
fi
binary=$(realpath -m -- "$1")
unit_in=$2
src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../systemd" && pwd)
rules=$src/90-ibfabric-umad.rules
sysusers=$src/ibfabric.sysusers

# Highest accepted `systemd-analyze security` overall exposure (0.0 best, 10.0 worst).
# Measured 1.5 with systemd 252 (Debian 12). The overall number is coarse (dropping
# NoNewPrivileges= moves it by 0.2, dropping MemoryDenyWriteExecute= not at all), so the
# per-setting check below is the real gate; this catches the big regressions (no
# SystemCallFilter= gives 3.1, no CapabilityBoundingSet= 3.5, no RestrictNamespaces= 2.2).
max_exposure=2.0

# `systemd-analyze security` settings that may stay exposed (✗), each for a reason. Any other
# exposed setting fails the test (on a newer systemd that scores new settings: review the unit
# against the new setting, then add it here or set it in the unit).
declare -A accepted_exposure=(
  ["RootDirectory=/RootImage="]="reads the host's /sys and /dev/infiniband"
  ["SupplementaryGroups="]="group rdma gives umad access (udev rule)"
  ["PrivateDevices="]="would hide /dev/infiniband/umad*; DevicePolicy=closed limits devices instead"
  ["RestrictAddressFamilies=~AF_NETLINK"]="rtnetlink for SR-IOV VF counters"
  ["RestrictAddressFamilies=~AF_UNIX"]="sd_notify"
  ["RestrictAddressFamilies=~AF_(INET|INET6)"]="HTTP endpoint and UDP probes"
  ["ProcSubset="]="reads /proc/stat (btime) for process_start_time_seconds"
  ["PrivateNetwork="]="serves HTTP and probes the fabric on the host network"
  ["PrivateUsers="]="fails to start where user namespaces are disabled (see the unit)"
  ["DeviceAllow="]="umad devices (char-infiniband_mad rw); checked exactly below"
  ["IPAddressDeny="]="scrapers and probe targets are site-specific"
)

# `systemd-analyze verify` output lines that name the unit but are harmless. None are known with
# systemd 252 (run as root and as nobody); add a pattern here, with a comment saying why it is
# harmless, if a systemd version prints one.
verify_whitelist=()

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

for tool in systemd-analyze systemd-sysusers python3; do
  command -v "$tool" >/dev/null || fail "$tool not found (Debian: apt-get install systemd python3)"
done
[[ -x $binary && -f $binary ]] || fail "$binary is not an executable file"
[[ -f $unit_in ]] || fail "$unit_in does not exist (configure with CMake first)"
[[ -f $rules && -f $sysusers ]] || fail "udev rule or sysusers file missing in $src"
echo "systemd: $(systemd-analyze --version | head -n1)"

# Value of the last KEY= line of the unit (later assignments win for these keys).
unit_value() { sed -n "s/^$1=//p" "$unit_in" | tail -n1; }

# ---------------------------------------------------------------------------------------------
# 1. The generated unit: substituted, and what the daemon needs.
if grep -n '@[A-Za-z_][A-Za-z_0-9]*@' "$unit_in"; then
  fail "unsubstituted configure_file variable in $unit_in"
fi
grep -Eq '^ExecStart=/[^ ]*/ibfabricd --config /[^ ]*/ibfabric/ibfabricd\.yaml$' "$unit_in" ||
  fail "ExecStart= is not '<bindir>/ibfabricd --config <sysconfdir>/ibfabric/ibfabricd.yaml'"
required=(
  "Type=notify"                       # READY=1, RELOADING=1, STOPPING=1
  "NotifyAccess=main"
  "WatchdogSec=30s"                   # the daemon pings WATCHDOG=1 at half of WATCHDOG_USEC
  "Restart=on-failure"
  "ExecReload=/bin/kill -HUP \$MAINPID"
  "User=ibfabric"
  "Group=ibfabric"
  "SupplementaryGroups=rdma"
  "DevicePolicy=closed"
  "DeviceAllow=char-infiniband_mad rw"
  "CapabilityBoundingSet="
  "NoNewPrivileges=yes"
  "ProtectSystem=strict"
  "StateDirectory=ibfabric"           # the link memory across restarts ($STATE_DIRECTORY)
  "ProcSubset=all"
  "WantedBy=multi-user.target"
)
for line in "${required[@]}"; do
  grep -qxF -- "$line" "$unit_in" || fail "unit lacks the line '$line'"
done
[[ $(grep -c '^DeviceAllow=' "$unit_in") == 1 ]] ||
  fail "unit must grant exactly one device class (char-infiniband_mad):\n$(grep '^DeviceAllow=' "$unit_in")"
# Settings that would break the daemon: hide /dev/infiniband, the host network, /proc/stat, or
# replace the sysusers user (whose rdma membership the udev rule relies on).
for bad in '^PrivateDevices=(yes|true|1|on)' '^PrivateNetwork=(yes|true|1|on)' \
           '^ProcSubset=pid' '^DynamicUser=(yes|true|1|on)' '^RestrictAddressFamilies=~'; do
  if grep -Eq "$bad" "$unit_in"; then fail "unit sets $(grep -E "$bad" "$unit_in")"; fi
done
echo "unit lines: ok"

# ---------------------------------------------------------------------------------------------
# 2. systemd-analyze verify on a copy whose ExecStart= is the built binary.
unit=$tmp/ibfabricd.service
sed "s|^ExecStart=[^ ]*|ExecStart=$binary|" "$unit_in" >"$unit"
grep -q "^ExecStart=$binary " "$unit" || fail "could not point ExecStart= at $binary"
# It exits 0 even for unknown keys or unparsable values and only prints them, so every
# printed line naming the unit counts as a failure.
if ! out=$(cd "$tmp" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$unit" 2>&1); then
  fail "systemd-analyze verify failed:\n$out"
fi
bad_lines=$(grep -F "ibfabricd.service" <<<"$out" || true)
for pattern in "${verify_whitelist[@]}"; do
  bad_lines=$(grep -Ev -- "$pattern" <<<"$bad_lines" || true)
done
[[ -z $bad_lines ]] || fail "systemd-analyze verify complained about the unit:\n$bad_lines"
[[ -z $out ]] && echo "systemd-analyze verify: ok (no output)" ||
  printf 'systemd-analyze verify: ok (output not about the unit:)\n%s\n' "$out"

# ---------------------------------------------------------------------------------------------
# 3. systemd-analyze security, offline: the score, printed, and every exposed setting reviewed.
if ! report=$(cd "$tmp" && systemd-analyze security --offline=true --no-pager "$unit" 2>&1); then
  fail "systemd-analyze security failed:\n$report"
fi
score=$(sed -n 's/.*Overall exposure level for ibfabricd\.service: \([0-9.]*\).*/\1/p' <<<"$report")
[[ $score =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "no exposure score in:\n$report"
echo "systemd-analyze security exposure: $score (threshold $max_exposure)"
echo "still exposed (each accepted for a reason listed in this script):"
{ grep '✗' <<<"$report" || true; } | sed 's/^/  /'
awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s <= m) }' ||
  fail "exposure $score is above $max_exposure:\n$report"

json=$(cd "$tmp" && systemd-analyze security --offline=true --json=short --no-pager "$unit") ||
  fail "systemd-analyze security --json failed"
exposed=$(python3 -c '
import json, sys
items = json.loads(sys.stdin.read())
assert len(items) > 50, "too few settings in the report"
for item in items:
    if not item["set"]:
        print(item["name"] + "\t" + item["description"])
' <<<"$json") || fail "could not read the JSON security report"
while IFS=$'\t' read -r name description; do
  [[ -n $name ]] || continue
  [[ -n ${accepted_exposure[$name]+x} ]] ||
    fail "setting $name is exposed ($description) and not reviewed; harden the unit or add it to accepted_exposure"
  if [[ $name == "DeviceAllow=" ]]; then
    # systemd's own reading of the device ACL. ProtectClock=yes adds char-rtc:r.
    acl=$(tr ' ' '\n' <<<"${description##*: }" | sort | tr '\n' ' ')
    [[ $acl == "char-infiniband_mad:rw char-rtc:r " ]] ||
      fail "device ACL is '$acl', expected only char-infiniband_mad:rw and char-rtc:r"
  fi
done <<<"$exposed"
echo "systemd-analyze security: every exposed setting is reviewed; device ACL: char-infiniband_mad:rw char-rtc:r"

# ---------------------------------------------------------------------------------------------
# 4. udev rule: static checks. Every rule line that assigns GROUP/MODE/OWNER must be the umad
# grant: SUBSYSTEM=="infiniband_mad", a KERNEL== pattern that matches umad* and (checked with
# glob matching, udev's "|" alternatives included) not issm* or uverbs*, group rdma, mode 0660.
rule_lines=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$rules" | grep -Ev '^[[:space:]]*(#|$)' || true)
[[ -n $rule_lines ]] || fail "no rule in $rules"
if grep -Eiq 'issm' <<<"$rule_lines"; then
  fail "udev rule mentions issm outside comments:\n$(grep -Ei issm <<<"$rule_lines")"
fi
matches() { # name: does $pattern (udev glob, "|" alternatives) match it?
  local alt alts
  IFS='|' read -ra alts <<<"$pattern"
  for alt in "${alts[@]}"; do
    # shellcheck disable=SC2053  # unquoted on purpose: glob match
    [[ $1 == $alt ]] && return 0
  done
  return 1
}
grants=0
while IFS= read -r line; do
  grep -Eq '(^|[ ,])(GROUP|MODE|OWNER)[+:]?=[^=]' <<<"$line" || continue
  grep -q 'SUBSYSTEM=="infiniband_mad"' <<<"$line" ||
    fail "udev rule line assigns permissions outside SUBSYSTEM==\"infiniband_mad\": $line"
  pattern=$(sed -n 's/.*KERNEL=="\([^"]*\)".*/\1/p' <<<"$line")
  [[ -n $pattern ]] || fail "udev rule line has no KERNEL==\"...\" match (would cover issm too): $line"
  for name in umad0 umad1 umad63 umad64 umad200; do
    matches "$name" || fail "KERNEL==\"$pattern\" does not match $name: $line"
  done
  for name in issm0 issm1 issm63 issm64 uverbs0 uverbs1 ucma rdma_cm; do
    if matches "$name"; then fail "KERNEL==\"$pattern\" also matches $name: $line"; fi
  done
  grep -q 'GROUP="rdma"' <<<"$line" || fail "udev rule line does not set GROUP=\"rdma\": $line"
  grep -q 'MODE="0660"' <<<"$line" || fail "udev rule line does not set MODE=\"0660\": $line"
  if grep -q 'OWNER=' <<<"$line"; then fail "udev rule line changes the owner: $line"; fi
  grants=$((grants + 1))
done <<<"$rule_lines"
((grants >= 1)) || fail "udev rule grants nothing on umad*"
echo "udev rule (static): $grants line(s), umad* only, group rdma, mode 0660; issm*/uverbs* untouched"

# ---------------------------------------------------------------------------------------------
# 5. udev rule through the real rules engine, when possible: `udevadm test` on fake sysfs
# devices umad0 (231:0), issm0 (231:64) and uverbs0 (231:192), in a private mount namespace
# with only this rule installed and a group rdma in a copy of /etc/group.
udev_simulation() {
  local inner=$tmp/udev-inner.sh
  cat >"$inner" <<'EOF'
set -eu
tmp=$1 rules=$2
mount -t tmpfs tmpfs /sys
mount -t tmpfs tmpfs /dev
mkdir -p /run/udev 2>/dev/null && mount -t tmpfs tmpfs /run/udev || mount -t tmpfs tmpfs /run
mkdir -p "$tmp/rules.d" "$tmp/no-rules.d" /sys/class/infiniband_mad /sys/class/infiniband_verbs
cp "$rules" "$tmp/rules.d/"
for d in /run/udev/rules.d /usr/local/lib/udev/rules.d /usr/lib/udev/rules.d /lib/udev/rules.d; do
  if [ -d "$d" ]; then mount --bind "$tmp/no-rules.d" "$d"; fi
done
mkdir -p /etc/udev/rules.d 2>/dev/null || true
mount --bind "$tmp/rules.d" /etc/udev/rules.d
cp /etc/group "$tmp/group"
grep -q '^rdma:' "$tmp/group" || echo 'rdma:x:4242:' >>"$tmp/group"
mount --bind "$tmp/group" /etc/group
fake() { # subsystem name major minor
  local d=/sys/devices/virtual/$1/$2
  mkdir -p "$d"
  printf 'MAJOR=%s\nMINOR=%s\nDEVNAME=infiniband/%s\n' "$3" "$4" "$2" >"$d/uevent"
  echo "$3:$4" >"$d/dev"
  ln -s "../../../../class/$1" "$d/subsystem"
  ln -s "../../devices/virtual/$1/$2" "/sys/class/$1/$2"
}
fake infiniband_mad umad0 231 0
fake infiniband_mad issm0 231 64
fake infiniband_verbs uverbs0 231 192
echo "@@@ namespace ready"
for dev in infiniband_mad/umad0 infiniband_mad/issm0 infiniband_verbs/uverbs0; do
  echo "@@@ udevadm test $dev"
  SYSTEMD_DEVICE_VERIFY_SYSFS=0 SYSTEMD_LOG_COLOR=0 udevadm test --action=add "/sys/devices/virtual/$dev" 2>&1
done
EOF
  local ns=()
  if [[ $EUID == 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
    ns=(unshare --mount --propagation private)
  elif unshare --map-root-user --mount true 2>/dev/null; then
    ns=(unshare --map-root-user --mount)  # unprivileged: user + mount namespace
  else
    return 2
  fi
  "${ns[@]}" sh "$inner" "$tmp" "$rules" >"$tmp/udev.log" 2>&1
}
rule_name=$(basename "$rules")
if ! command -v udevadm >/dev/null; then
  # scripts/test.sh installed every tool: a missing one is a failure there, not a skip.
  [[ ${IBFABRIC_REQUIRE_ALL_TOOLS:-0} != 1 ]] ||
    fail "udevadm not installed (Debian: apt-get install udev); IBFABRIC_REQUIRE_ALL_TOOLS=1 makes that a failure"
  echo "udev rule (udevadm test): skipped, udevadm not installed (Debian: apt-get install udev)"
else
  set +e
  udev_simulation
  rc=$?
  set -e
  if ((rc == 2)); then
    echo "udev rule (udevadm test): skipped, cannot create a private mount namespace here"
  elif ((rc != 0)) && ! grep -qx '@@@ namespace ready' "$tmp/udev.log"; then
    # The sandbox itself could not be built (mounts refused in this container): not the rule.
    echo "udev rule (udevadm test): skipped, could not set up the private mount namespace:"
    tail -n 3 "$tmp/udev.log" | sed 's/^/  /'
  elif ((rc != 0)); then
    fail "udevadm test simulation failed:\n$(cat "$tmp/udev.log")"
  else
    log=$tmp/udev.log
    section() { awk -v d="@@@ udevadm test $1" '$0 == d { on = 1; next } /^@@@ udevadm test / { on = 0 } on' "$log"; }
    # Parse problems are reported as "<file>:<line> <message>" while loading the rules.
    if problems=$(grep -F "$rule_name" "$log" | grep -Eiv ' (GROUP|MODE) [0-9]+$|Reading rules file' ); then
      fail "udevadm reports on $rule_name:\n$problems"
    fi
    umad=$(section infiniband_mad/umad0)
    grep -Eq "$rule_name:[0-9]+ GROUP [0-9]+\$" <<<"$umad" ||
      fail "udevadm test: the rule sets no group on umad0:\n$umad"
    grep -Eq "$rule_name:[0-9]+ MODE 0660\$" <<<"$umad" ||
      fail "udevadm test: the rule sets no mode 0660 on umad0:\n$umad"
    for dev in infiniband_mad/issm0 infiniband_verbs/uverbs0; do
      if section "$dev" | grep -E "$rule_name:[0-9]+ "; then
        fail "udevadm test: the rule applies to ${dev#*/}"
      fi
    done
    echo "udev rule (udevadm test): umad0 gets group rdma mode 0660; issm0 and uverbs0 untouched"
  fi
fi

# ---------------------------------------------------------------------------------------------
# 6. sysusers: parse (dry run), then apply to scratch roots and read the result.
mkdir -p "$tmp/dry/etc"
if ! out=$(systemd-sysusers --root="$tmp/dry" --dry-run "$sysusers" 2>&1); then
  fail "systemd-sysusers --dry-run failed:\n$out"
fi
if grep -F "$(basename "$sysusers")" <<<"$out"; then fail "systemd-sysusers warns about the file"; fi
[[ -z $(ls -A "$tmp/dry/etc") ]] || fail "systemd-sysusers --dry-run wrote files"

apply_sysusers() { # root; prints nothing, fails on error
  if ! out=$(systemd-sysusers --root="$1" "$sysusers" 2>&1); then
    fail "systemd-sysusers --root=$1 failed:\n$out"
  fi
}
# a) an empty root: creates rdma, ibfabric (user and group) and the membership.
mkdir -p "$tmp/empty/etc"
apply_sysusers "$tmp/empty"
pw=$(grep '^ibfabric:' "$tmp/empty/etc/passwd") || fail "sysusers created no user ibfabric"
IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
((uid > 0 && uid < 1000)) || fail "ibfabric is not a system user: $pw"
[[ $home == / && $shell == */nologin ]] || fail "ibfabric should have home / and a nologin shell: $pw"
grep -q "^ibfabric:x:$gid:" "$tmp/empty/etc/group" || fail "no group ibfabric with gid $gid"
grep -Eq '^rdma:x:[0-9]+:(.*,)?ibfabric(,.*)?$' "$tmp/empty/etc/group" ||
  fail "ibfabric is not a member of rdma:\n$(cat "$tmp/empty/etc/group")"
# b) a root where rdma already exists (rdma-core or the site made it): reused, member added.
mkdir -p "$tmp/existing/etc"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$tmp/existing/etc/passwd"
printf 'root:x:0:\nrdma:x:4242:alice\n' >"$tmp/existing/etc/group"
apply_sysusers "$tmp/existing"
grep -Eq '^rdma:x:4242:(alice,ibfabric|ibfabric,alice)$' "$tmp/existing/etc/group" ||
  fail "existing group rdma not reused with ibfabric added:\n$(cat "$tmp/existing/etc/group")"
[[ $(grep -c '^rdma:' "$tmp/existing/etc/group") == 1 ]] || fail "a second rdma group was created"
echo "sysusers: system user ibfabric (uid $uid), group ibfabric, member of rdma (new or existing)"

# ---------------------------------------------------------------------------------------------
# 7. The three files agree on the names.
sys_user=$(awk '$1 == "u" { print $2 }' "$sysusers")
sys_member_group=$(awk '$1 == "m" && $2 == "'"$sys_user"'" { print $3 }' "$sysusers")
udev_group=$(sed -n 's/.*GROUP="\([^"]*\)".*/\1/p' <<<"$rule_lines" | sort -u)
[[ $(unit_value User) == "$sys_user" && $(unit_value Group) == "$sys_user" ]] ||
  fail "unit User=/Group= ($(unit_value User)/$(unit_value Group)) is not the sysusers user $sys_user"
[[ $(unit_value SupplementaryGroups) == "$udev_group" && $sys_member_group == "$udev_group" ]] ||
  fail "group mismatch: unit SupplementaryGroups=$(unit_value SupplementaryGroups), udev GROUP=$udev_group, sysusers m $sys_user $sys_member_group"
echo "names: user $sys_user, device group $udev_group (unit, udev rule and sysusers agree)"

echo "systemd_units: ok"
