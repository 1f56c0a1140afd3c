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

# wait_ready PORT TRIES [PID]: polls http://127.0.0.1:PORT/readyz every 0.1 s; gives up
# early when PID has exited.
wait_ready() {
  for _ in $(seq 1 "$2"); do
    curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    [[ -z "${3:-}" ]] || kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# start_nameserver DIR EXTRA: a nameserver with its config (plus EXTRA lines), data and log
# in DIR. Sets NS.
start_nameserver() {
  local dir="$1" port http
  port="$(free_port)"; http="$(free_port)"
  mkdir -p "$dir"
  printf 'listenPort=%s\nmetricsPort=%s\nbindAddress=127.0.0.1\nkvConfigPath=%s/kv.json\n%s\n' \
    "$port" "$http" "$dir" "$2" > "$dir/namesrv.conf"
  "$BIN_DIR/rmq-nameserver" -c "$dir/namesrv.conf" >>"$dir/ns.log" 2>&1 &
  PIDS+=($!)
  NS="127.0.0.1:$port"
  wait_ready "$http" 100 "$!" || true
}

# start_broker DIR EXTRA [WRAPPER...]: a broker of NS's cluster (1 GiB CommitLog files) with
# its config (plus EXTRA lines), store and log in DIR, run under WRAPPER (e.g. taskset -c
# 0). A second call on the same DIR restarts it on the same store (on new ports). Sets
# BROKER_PID, BROKER_PORT, BROKER_HTTP (its metrics port) and BROKER_GRPC (its 5.x gRPC
# port); fails showing the log if it
# does not become ready within 30 s. BROKER_NAME_ID (default "broker-bench 0") sets
# brokerName and brokerId, e.g. "broker-bench 1" for a slave.
start_broker() {
  local dir="$1" extra="$2" port http grpc
  shift 2
  local name id
  read -r name id <<<"${BROKER_NAME_ID:-broker-bench 0}"
  port="$(free_port)"; http="$(free_port)"; grpc="$(free_port)"
  mkdir -p "$dir"
  cat > "$dir/broker.conf" <<CONF
brokerClusterName=BenchCluster
brokerName=$name
brokerId=$id
listenPort=$port
metricsPort=$http
grpcServerPort=$grpc
bindAddress=127.0.0.1
brokerIP1=127.0.0.1
namesrvAddr=$NS
storePathRootDir=$dir/store
mappedFileSizeCommitLog=1073741824
$extra
CONF
  "$@" "$BIN_DIR/rmq-broker" -c "$dir/broker.conf" >>"$dir/broker.log" 2>&1 &
  BROKER_PID=$! BROKER_PORT=$port BROKER_HTTP=$http BROKER_GRPC=$grpc
  PIDS+=("$BROKER_PID")
  wait_ready "$http" 300 "$BROKER_PID" || {
    echo "broker did not become ready:" >&2; tail -20 "$dir/broker.log" >&2; exit 1
  }
}

# stop_broker: stops the broker start_broker started last.
stop_broker() {
  kill -TERM "$BROKER_PID" 2>/dev/null || true
  wait "$BROKER_PID" 2>/dev/null || true
}

# start_cluster DIR NS_EXTRA BROKER_EXTRA [BROKER_WRAPPER...]: start_nameserver, then
# start_broker, both in DIR.
start_cluster() {
  local dir="$1" ns_extra="$2" broker_extra="$3"
  shift 3
  start_nameserver "$dir" "$ns_extra"
  start_broker "$dir" "$broker_extra" "$@"
}
