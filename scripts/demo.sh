#!/usr/bin/env bash
# Installs what is needed, builds, starts a simulated InfiniBand fabric (ibsim + opensm) and
# runs ibfabricd on it in the foreground: the first command of the README. Ctrl-C stops all.
#   IBFABRIC_DEMO_PORT=10916              port of the metrics endpoint
#   IBFABRIC_DEMO_PROMETHEUS_PORT=19090   port of the demo's Prometheus (scrapes the daemon every
#                                         5s with the shipped alert rules); 9090 is left to a
#                                         Prometheus the machine may already run
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
port=${IBFABRIC_DEMO_PORT:-10916}
prom_port=${IBFABRIC_DEMO_PROMETHEUS_PORT:-19090}

scripts/install-deps.sh
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target ibfabricd

shim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
scratch=$(mktemp -d /tmp/ibfabric-demo.XXXXXX)
export IBSIM_SOCKNAME="ibfabric-demo-$$"
pids=()
cleanup() {
  # Each helper leads its own process group (setsid): end the group, tail and all.
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  sleep 0.2
  rm -rf "$scratch"
}
trap cleanup EXIT INT TERM

# The shim writes a fake sysfs into the working directory: keep it out of the repository.
cd "$scratch"
mkfifo ibsim.cmd
setsid bash -c "exec ibsim -s '$root/config/demo/fabric.topo' < <(tail -f ibsim.cmd) > ibsim.log 2>&1" &
pids+=($!)
sleep 0.5
SIM_HOST="sm-node mlx5_0" LD_PRELOAD=$shim setsid opensm -f "$scratch/opensm.log" >opensm.out 2>&1 &
pids+=($!)

echo "demo: waiting for the Subnet Manager to bring the simulated fabric up..."
for _ in $(seq 100); do
  if SIM_HOST="gpu-node-01 mlx5_0" LD_PRELOAD=$shim timeout 5 perfquery >/dev/null 2>&1; then
    break
  fi
  sleep 0.2
done

cat >prometheus.yml <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: ["$root/dashboards/alerts/ibfabric.rules.yml"]
scrape_configs:
  - job_name: ibfabric
    static_configs: [{targets: ["localhost:$port"]}]
EOF
setsid prometheus --config.file=prometheus.yml --storage.tsdb.path="$scratch/prometheus" \
  --web.listen-address=":$prom_port" >prometheus.log 2>&1 &
pids+=($!)

echo "demo: fabric up (ibsim console: echo 'Unlink \"gpu-node-02 mlx5_0\"[1]' > $scratch/ibsim.cmd)"
echo "demo: metrics at http://localhost:$port/metrics"
echo "demo: Prometheus at http://localhost:$prom_port/alerts (rules loaded) and"
echo "      http://localhost:$prom_port/graph?g0.expr=ibfabric_ports_state  (Ctrl-C stops the demo)"
SIM_HOST="gpu-node-01 mlx5_0" LD_PRELOAD=$shim "$root/build/daemon/ibfabricd" \
  --config "$root/config/demo/ibfabricd.yaml" \
  --sysfs-root "$root/tests/fixtures/sysfs/cx7-ndr" \
  --web.listen-address ":$port"
