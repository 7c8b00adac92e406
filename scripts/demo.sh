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

# Three GPU nodes of the simulated fabric run ibfabricd and probe each other. The probes are
# UDP on loopback (ibsim carries MADs, not IP; MAD probes between daemons are tested in
# tests/integration/test_probe_mad.py). Each daemon answers on its own UDP port.
nodes=(gpu-node-01 gpu-node-02 gpu-node-03)
udp_port() { echo $((port + 1000 + $1)); }
targets() {  # every GPU node but number $1
  for j in "${!nodes[@]}"; do
    ((j == $1)) || printf '      - {address: "127.0.0.1:%s", name: %s}\n' "$(udp_port "$j")" "${nodes[$j]}"
  done
}
daemon_pids=()
scrape_targets=""
for i in "${!nodes[@]}"; do
  node=${nodes[$i]}
  node_port=$((port + i))
  config=$scratch/$node.yaml
  args=()
  # Link memory survives a restart of the daemon (docs/design.md); each node its own directory.
  mkdir -p "$scratch/state-$node"
  printf 'state_directory: %s\n' "$scratch/state-$node" >"$config"
  if ((i == 0)); then
    # The first node also sweeps the fabric and reads the ConnectX-7 fixture tree.
    cat "$root/config/demo/ibfabricd.yaml" >>"$config"
    args=(--sysfs-root "$root/tests/fixtures/sysfs/cx7-ndr")
  else
    printf 'collectors:\n  sysfs: {enabled: false}\n  sriov: {enabled: false}\n' >>"$config"
  fi
  printf '  probe:\n    enabled: true\n    interval: 5s\n    udp_listen: "127.0.0.1:%s"\n    probe_interval: 100ms\n    targets:\n%s\n' \
    "$(udp_port "$i")" "$(targets "$i")" >>"$config"
  SIM_HOST="$node mlx5_0" LD_PRELOAD=$shim setsid "$root/build/daemon/ibfabricd" \
    --config "$config" --node-name-map "$root/config/demo/ib-node-name-map" \
    --web.listen-address ":$node_port" "${args[@]}" >"$node.log" 2>&1 &
  daemon_pids+=($!)
  pids+=($!)
  scrape_targets+="${scrape_targets:+, }\"localhost:$node_port\""
done

cat >prometheus.yml <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: ["$root/dashboards/alerts/ibfabric.rules.yml"]
scrape_configs:
  - job_name: ibfabric
    static_configs: [{targets: [$scrape_targets]}]
EOF
setsid prometheus --config.file=prometheus.yml --storage.tsdb.path="$scratch/prometheus" \
  --web.listen-address=":$prom_port" >prometheus.log 2>&1 &
pids+=($!)

cat <<EOF
demo: ibfabricd on ${nodes[*]} of the simulated fabric:
        http://localhost:$port/metrics (gpu-node-01, which also sweeps the fabric),
        http://localhost:$((port + 1))/metrics, http://localhost:$((port + 2))/metrics
demo: names come from config/demo/ib-node-name-map (leaf-1 is "leaf-a01 (rack A1)")
demo: Prometheus with the shipped alert rules: http://localhost:$prom_port/alerts
demo: faults, written into ibsim's console (alerts fire within a few minutes):
        echo 'Unlink "leaf-1"[5]' > $scratch/ibsim.cmd    # an uplink: IbfabricSwitchPortDown, IbfabricLeafUplinksLost
        echo 'ReLink "leaf-1"' > $scratch/ibsim.cmd
        echo 'PerformanceSet "leaf-1"[5] PortCounters.SymbolErrorCounter=1000' > $scratch/ibsim.cmd
        echo 'Unlink "gpu-node-02 mlx5_0"[1]' > $scratch/ibsim.cmd    # a host's cable: IbfabricPortDown
demo: an RTT spike: pause gpu-node-02's daemon for a moment, and the others' probes to it wait:
        kill -STOP ${daemon_pids[1]}; sleep 0.3; kill -CONT ${daemon_pids[1]}
demo: logs in $scratch; Ctrl-C stops the demo
EOF
wait "${daemon_pids[0]}"
