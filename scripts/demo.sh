#!/usr/bin/env bash
# Installs what is needed, builds, starts a simulated InfiniBand fabric (ibsim + opensm) and
# runs ibfabricd on it in the foreground: the first command of the README. Ctrl-C stops all.
#   IBFABRIC_DEMO_PORT=10916              port of the metrics endpoint
#   IBFABRIC_DEMO_PROMETHEUS_PORT=19090   port of the demo's Prometheus (scrapes the daemon every
#                                         5s with the shipped alert rules); 9090 is left to a
#                                         Prometheus the machine may already run
#   IBFABRIC_DEMO_LOCALIZE_PORT=10920     port of ibfabric-localize (reads that Prometheus every
#                                         10 s, serves its verdicts for the alerts)
#   IBFABRIC_DEMO_ALERTMANAGER_PORT=19093 port of the demo's Alertmanager (the shipped
#                                         deploy/alertmanager/alertmanager.yml, its pager and chat
#                                         receivers pointed at a webhook logger)
#   IBFABRIC_DEMO_WEBHOOK_PORT=19094      port of that logger, which writes every notification
#                                         to notifications.log in the demo's directory
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
port=${IBFABRIC_DEMO_PORT:-10916}
prom_port=${IBFABRIC_DEMO_PROMETHEUS_PORT:-19090}
localize_port=${IBFABRIC_DEMO_LOCALIZE_PORT:-10920}
am_port=${IBFABRIC_DEMO_ALERTMANAGER_PORT:-19093}
webhook_port=${IBFABRIC_DEMO_WEBHOOK_PORT:-19094}

scripts/install-deps.sh
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$(nproc)" --target ibfabricd ibfabric-localize

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
# ignore_other_sm: the daemons' MAD responders attach with SIM_SET_ISSM=1 (below), which sets
# their ports' IsSM bit; without it opensm's MADs to them end them under the shim.
echo "ignore_other_sm TRUE" >opensm.conf
SIM_HOST="sm-node mlx5_0" LD_PRELOAD=$shim setsid opensm -F opensm.conf -f "$scratch/opensm.log" \
  >opensm.out 2>&1 &
pids+=($!)

echo "demo: waiting for the Subnet Manager to bring the simulated fabric up..."
for _ in $(seq 100); do
  if SIM_HOST="gpu-node-01 mlx5_0" LD_PRELOAD=$shim timeout 5 perfquery >/dev/null 2>&1; then
    break
  fi
  sleep 0.2
done

# Three GPU nodes of the simulated fabric run ibfabricd; they probe each other over MAD
# (ibping's class, through the simulated switches' forwarding tables) and answer each other's
# probes, and the paths collector traces where the probes go. sm-node runs one too (opensm has
# its IsSM slot, so it probes and does not answer): four probers are enough for the faulty
# cable below to be named alone. Targets by node description, looked up in the SA.
nodes=(gpu-node-01 gpu-node-02 gpu-node-03 sm-node)
targets() {  # every GPU node but number $1
  for j in 0 1 2; do
    ((j == $1)) || printf '      - {name: "%s mlx5_0"}\n' "${nodes[$j]}"
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
  responder=true env=(SIM_SET_ISSM=1)
  if [[ $node == sm-node ]]; then responder=false env=(); fi
  printf '  probe:\n    enabled: true\n    interval: 5s\n    udp_listen: ""\n    mad_responder: %s\n    probe_interval: 100ms\n    spike_floor: 20ms\n    targets:\n%s\n  paths:\n    enabled: true\n    interval: 10s\n' \
    "$responder" "$(targets "$i")" >>"$config"
  # Started together, while the others already probe: a daemon registers its responder in the
  # same call as its port's open, and takes requests only then (docs/design.md).
  env "${env[@]}" SIM_HOST="$node mlx5_0" LD_PRELOAD=$shim setsid "$root/build/daemon/ibfabricd" \
    --config "$config" --node-name-map "$root/config/demo/ib-node-name-map" \
    --web.listen-address ":$node_port" "${args[@]}" >"$node.log" 2>&1 &
  pid=$!
  daemon_pids+=("$pid")
  pids+=("$pid")
  scrape_targets+="${scrape_targets:+, }\"localhost:$node_port\""
done

# Notifications: the shipped Alertmanager configuration, unchanged but for its two placeholder
# receivers (the pager and the chat), which go to a logger writing notifications.log. The
# heartbeat (IbfabricWatchdog, every minute) keeps its placeholder: nothing watches the demo.
setsid python3 "$root/deploy/alertmanager/webhook_logger.py" --listen "127.0.0.1:$webhook_port" \
  --file "$scratch/notifications.log" >webhook_logger.log 2>&1 &
pids+=($!)
touch "$scratch/notifications.log"
sed -e "s|https://pager.invalid/ibfabric|http://127.0.0.1:$webhook_port/pager|" \
    -e "s|https://chat.invalid/ibfabric|http://127.0.0.1:$webhook_port/chat|" \
    "$root/deploy/alertmanager/alertmanager.yml" >alertmanager.yml
setsid prometheus-alertmanager --config.file=alertmanager.yml --storage.path="$scratch/alertmanager" \
  --web.listen-address=":$am_port" --cluster.listen-address= >alertmanager.log 2>&1 &
pids+=($!)

# Maintenance windows (scripts/ibfabric-maintenance writes them): the shipped, empty file.
cp "$root/deploy/maintenance/ibfabric-maintenance.rules.yml" maintenance.rules.yml
cat >prometheus.yml <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: ["$root/dashboards/alerts/ibfabric.rules.yml", "$scratch/maintenance.rules.yml"]
alerting:
  alertmanagers: [{static_configs: [{targets: ["localhost:$am_port"]}]}]
scrape_configs:
  - job_name: ibfabric
    static_configs: [{targets: [$scrape_targets]}]
  - job_name: ibfabric-localize
    static_configs: [{targets: ["localhost:$localize_port"]}]
EOF
setsid prometheus --config.file=prometheus.yml --storage.tsdb.path="$scratch/prometheus" \
  --web.listen-address=":$prom_port" --web.enable-lifecycle >prometheus.log 2>&1 &
pids+=($!)
# The localizer: one per cluster, reading the evidence from the store the daemons are scraped
# into; the alerts fire on its verdicts (docs/design.md, "Who is to blame").
setsid "$root/build/daemon/ibfabric-localize" --prometheus.url="http://localhost:$prom_port" \
  --web.listen-address=":$localize_port" >localize.log 2>&1 &
pids+=($!)

cat <<EOF
demo: ibfabricd on ${nodes[*]} of the simulated fabric:
        http://localhost:$port/metrics (gpu-node-01, which also sweeps the fabric),
        http://localhost:$((port + 1))/metrics ... http://localhost:$((port + 3))/metrics
demo: names come from config/demo/ib-node-name-map (leaf-1 is "leaf-a01 (rack A1)")
demo: Prometheus with the shipped alert rules: http://localhost:$prom_port/alerts
demo: ibfabric-localize names the culprit of probe loss and late probes from what that
      Prometheus holds, every 10 s: http://localhost:$localize_port/metrics (ibfabric_localize_suspect)
demo: Alertmanager with the shipped deploy/alertmanager/alertmanager.yml: http://localhost:$am_port
      (critical pages the "pager" receiver, warning goes to "chat", info notifies no one; a named
      culprit silences the symptoms it explains). Both receivers write to a file; read it with
        tail -f $scratch/notifications.log
      (warnings wait 2 minutes in their group before they are sent, pages 30 s: the shipped
      group_wait, which gives the localizer time to name the culprit first)
demo: faults, written into ibsim's console (alerts fire within a few minutes), and the
      notification each gives:
        echo 'Unlink "leaf-1"[5]' > $scratch/ibsim.cmd    # an uplink: IbfabricSwitchPortDown, IbfabricLeafUplinksLost
            # -> chat: IbfabricLeafUplinksLost (its uplinks' port-down pages are silenced)
        echo 'ReLink "leaf-1"' > $scratch/ibsim.cmd
        echo 'PerformanceSet "leaf-1"[5] PortCounters.SymbolErrorCounter=1000' > $scratch/ibsim.cmd
            # -> chat: IbfabricSwitchPortErrors (one group for the cable)
        echo 'Unlink "gpu-node-02 mlx5_0"[1]' > $scratch/ibsim.cmd    # a host's cable: IbfabricPortDown
            # -> pager: IbfabricPortDown (the sweep's IbfabricSwitchPortDown of that cable silenced)
        echo 'Error "gpu-node-03 mlx5_0"[1] 2' > $scratch/ibsim.cmd   # 2 % of the packets into gpu-node-03 lost:
            # within a minute IbfabricSuspectLink names the cable "leaf-a02 (rack A2) port 1 <->
            # gpu-node-03 port 1", with both ends' counters (probe dashboard, "Where is it?")
            # -> chat: IbfabricSuspectLink only (the port's error alerts silenced, its pairs'
            #    IbfabricProbeLoss not fired)
        echo 'Error "gpu-node-03 mlx5_0"[1] 0' > $scratch/ibsim.cmd   # clears it (the alert stays 10 minutes)
        echo 'Unlink "leaf-1"' > $scratch/ibsim.cmd    # the whole leaf goes away: IbfabricSwitchDown
            # -> pager: IbfabricSwitchDown only, naming leaf-a01, gpu-node-01 and -02 behind it
            #    and the uplinks lost (not their ports, cables, probes, nor a "hung SM")
        echo 'ReLink "leaf-1"' > $scratch/ibsim.cmd    # resolves it, and everything with it
        echo 'Unlink "spine-1"' > $scratch/ibsim.cmd   # a spine goes away -> pager: IbfabricSwitchDown
        echo 'ReLink "spine-1"' > $scratch/ibsim.cmd
demo: a host goes away (powered off): its daemon ends and its cable goes down
        kill -KILL ${daemon_pids[2]}; echo 'Unlink "gpu-node-03 mlx5_0"[1]' > $scratch/ibsim.cmd
            # -> pager: IbfabricHostDown only, naming gpu-node-03 (not its daemon, cable, probes);
            #    the demo's gpu-node-03 daemon does not come back (restart the demo)
demo: planned maintenance: declare the leaf, then take it away: nothing is notified
        $root/scripts/ibfabric-maintenance --file $scratch/maintenance.rules.yml --reload http://localhost:$prom_port add switch "leaf-a01 (rack A1)" --for 30m
demo: a stalled host: pause gpu-node-02's daemon six times; the others' probes to it are answered
      late, and IbfabricSuspectHost names gpu-node-02 (no cable; -> chat: IbfabricSuspectHost,
      not the RTT spikes of its pairs):
        for i in 1 2 3 4 5 6; do kill -STOP ${daemon_pids[1]}; sleep 0.4; kill -CONT ${daemon_pids[1]}; sleep 0.6; done
demo: congestion: spine-1's port to leaf-2 waits 40 % of the time (ibsim has no traffic: its
      PortXmitWait is set to 5e7 ticks a second since the loop began, from the clock, so a busy
      machine's slow loop changes nothing: 40 % at SDR 4x with a Quantum-2's 8-byte tick; set back
      before the 32-bit field pegs, which costs the rate a part); the fabric dashboard's
      "Congestion hot spots" row shows it within two minutes, at about a third,
      IbfabricCongestionHotSpot fires after ten more:
        t0=\$(date +%s%N); for i in \$(seq 2400); do echo "PerformanceSet \"spine-1\"[2] PortCounters.PortXmitWait=\$(( (\$(date +%s%N) - t0) / 20 % 4000000000 ))" > $scratch/ibsim.cmd; sleep 0.5; done
      (-> chat: IbfabricCongestionHotSpot)
      a stuck receiver: echo 'PerformanceSet "leaf-2"[1] PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards=40' > $scratch/ibsim.cmd
            # -> chat: IbfabricStuckReceiver, once (the sweep's; gpu-node-03's daemon sees the
            #    same port and does not fire)
demo: RTT spikes no culprit explains (this machine busy with something else) are one info alert,
      IbfabricProbeRttSpikes, on http://localhost:$prom_port/alerts: no notification
demo: logs in $scratch; Ctrl-C stops the demo
EOF
wait "${daemon_pids[0]}"
