#!/usr/bin/env bash
# The localizer over many seeds of random scenarios (bench/localize_scale.cpp), summed:
#   bench/localize_scale.sh FIRST LAST [localize_scale arguments...]
#   bench/localize_scale.sh 1 40 --hosts 1024              # 4,000 scenarios
#   bench/localize_scale.sh 1 3 --hosts 10000 --probes 600
# Runs `localize_scale --seed S --scenarios 100 ARGS` for S in FIRST..LAST and prints the
# culprits named alone / in an equally-suspect set / missed, the distinguishable ones named, and
# the bystanders with the seeds whose scenarios named them (each replays alone with
# `--seed S --only I --verbose`). $LOCALIZE_SCALE: the binary (default build/bench/localize_scale).
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)); then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
first=$1 last=$2
shift 2
binary=${LOCALIZE_SCALE:-build/bench/localize_scale}
alone=0 in_set=0 missed=0 named=0 distinguishable=0 bystanders=0 with_bystanders=0 settled=0 early=0
seeds_with_bystanders=()
for seed in $(seq "$first" "$last"); do
  # Exit status 1 means a target was missed in this seed: the totals say which.
  out=$("$binary" --seed "$seed" --scenarios 100 "$@" 2>&1) || true
  counts=$(sed -n 's/^culprits the probes can see: [0-9]*: named alone \([0-9]*\), in an equally-suspect set \([0-9]*\), missed \([0-9]*\).*/\1 \2 \3/p' <<<"$out")
  named_of=$(sed -n 's/^distinguishable culprits named: \([0-9]*\) of \([0-9]*\).*/\1 \2/p' <<<"$out")
  by=$(sed -n 's/^bystanders: \([0-9]*\) in \([0-9]*\) scenarios.*/\1 \2/p' <<<"$out")
  # (a binary older than the count of settled ones prints none: 0)
  w=$(sed -n 's/^named in a settled verdict[^:]*: \([0-9]*\) of.*/\1/p' <<<"$out")
  z=$(sed -n 's/^bystanders: .*, \([0-9]*\) of them settled.*/\1/p' <<<"$out")
  if [[ -z "$counts" || -z "$named_of" || -z "$by" ]]; then
    echo "localize_scale --seed $seed printed no totals:" >&2
    tail -5 <<<"$out" >&2
    exit 1
  fi
  read -r a b c <<<"$counts"
  read -r n d <<<"$named_of"
  read -r x y <<<"$by"
  alone=$((alone + a)) in_set=$((in_set + b)) missed=$((missed + c))
  named=$((named + n)) distinguishable=$((distinguishable + d))
  bystanders=$((bystanders + x)) with_bystanders=$((with_bystanders + y)) settled=$((settled + ${z:-0})) early=$((early + ${w:-0}))
  ((x == 0)) || seeds_with_bystanders+=("$seed")
done
echo "seeds $first-$last $*: culprits named alone $alone, in a set $in_set, missed $missed;" \
  "distinguishable named $named of $distinguishable; bystanders $bystanders in" \
  "$with_bystanders scenarios${seeds_with_bystanders:+ (seeds ${seeds_with_bystanders[*]})}," \
  "$settled of them in settled verdicts; culprits named in a settled verdict $early"
