# Shared by the bench scripts: binaries, free ports, and one nameserver plus one broker on
# 127.0.0.1. Source it after `set -euo pipefail`; it sets ROOT and BIN_DIR and keeps the
# started processes in PIDS for stop_all.
#
#   BINS=(rmq-nameserver rmq-broker rmq-bench); source "$(dirname "$0")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${BIN_DIR:-}" ]]; then
  (cd "$ROOT" && cargo build --release "${BINS[@]/#/--bin=}")
fi
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
for b in "${BINS[@]}"; do
  [[ -x "$BIN_DIR/$b" ]] || { echo "missing $BIN_DIR/$b" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }

PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_ready PORT TRIES: polls http://127.0.0.1:PORT/readyz every 0.1 s.
wait_ready() {
  for _ in $(seq 1 "$2"); do
    curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# start_cluster DIR NS_EXTRA BROKER_EXTRA [BROKER_WRAPPER...]: a nameserver and a broker
# (1 GiB CommitLog files) with data and logs in DIR, each config with its extra lines;
# the broker command runs under BROKER_WRAPPER (e.g. taskset -c 0). Sets NS; fails
# showing the broker's log if it does not become ready within 30 s.
start_cluster() {
  local dir="$1" ns_extra="$2" broker_extra="$3"
  shift 3
  local ns_port ns_http port http
  ns_port="$(free_port)"; ns_http="$(free_port)"; port="$(free_port)"; http="$(free_port)"
  mkdir -p "$dir"
  printf 'listenPort=%s\nmetricsPort=%s\nbindAddress=127.0.0.1\nkvConfigPath=%s/kv.json\n%s\n' \
    "$ns_port" "$ns_http" "$dir" "$ns_extra" > "$dir/namesrv.conf"
  "$BIN_DIR/rmq-nameserver" -c "$dir/namesrv.conf" >>"$dir/ns.log" 2>&1 &
  PIDS+=($!)
  NS="127.0.0.1:$ns_port"
  wait_ready "$ns_http" 100 || true
  cat > "$dir/broker.conf" <<CONF
brokerClusterName=BenchCluster
brokerName=broker-bench
brokerId=0
listenPort=$port
metricsPort=$http
bindAddress=127.0.0.1
brokerIP1=127.0.0.1
namesrvAddr=$NS
storePathRootDir=$dir/store
mappedFileSizeCommitLog=1073741824
$broker_extra
CONF
  "$@" "$BIN_DIR/rmq-broker" -c "$dir/broker.conf" >>"$dir/broker.log" 2>&1 &
  PIDS+=($!)
  wait_ready "$http" 300 || {
    echo "broker did not become ready:" >&2; tail -20 "$dir/broker.log" >&2; exit 1
  }
}
