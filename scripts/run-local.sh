#!/usr/bin/env bash
# Starts a local rmq-nameserver and rmq-broker with all data under ./data (or $DATA_DIR),
# prints the nameserver address clients should use, and stops both on Ctrl-C / SIGTERM.
#
#   scripts/run-local.sh            # builds release binaries first
#   BIN_DIR=target/debug scripts/run-local.sh   # use already-built binaries
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA_DIR="${DATA_DIR:-$ROOT/data}"
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
BROKER_METRICS_PORT="${BROKER_METRICS_PORT:-5557}"

if [[ -z "${BIN_DIR:-}" ]]; then
  (cd "$ROOT" && cargo build --release --bin rmq-nameserver --bin rmq-broker)
  BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
fi

mkdir -p "$DATA_DIR/namesrv" "$DATA_DIR/broker"

cat > "$DATA_DIR/namesrv/namesrv.conf" <<CONF
listenPort=$NAMESRV_PORT
kvConfigPath=$DATA_DIR/namesrv/kvConfig.json
CONF

if [[ ! -f "$DATA_DIR/broker/broker.conf" ]]; then
  cat > "$DATA_DIR/broker/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
listenPort=$BROKER_PORT
metricsPort=$BROKER_METRICS_PORT
brokerIP1=127.0.0.1
namesrvAddr=127.0.0.1:$NAMESRV_PORT
storePathRootDir=$DATA_DIR/broker/store
mappedFileSizeCommitLog=134217728
flushDiskType=ASYNC_FLUSH
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
CONF
fi

"$BIN_DIR/rmq-nameserver" -c "$DATA_DIR/namesrv/namesrv.conf" 2>>"$DATA_DIR/namesrv/namesrv.log" &
NAMESRV_PID=$!
"$BIN_DIR/rmq-broker" -c "$DATA_DIR/broker/broker.conf" 2>>"$DATA_DIR/broker/broker.log" &
BROKER_PID=$!

stop() {
  kill -TERM "$BROKER_PID" 2>/dev/null || true
  wait "$BROKER_PID" 2>/dev/null || true
  kill -TERM "$NAMESRV_PID" 2>/dev/null || true
  wait "$NAMESRV_PID" 2>/dev/null || true
}
trap stop INT TERM EXIT

for _ in $(seq 1 200); do
  if curl -fs "http://127.0.0.1:$BROKER_METRICS_PORT/readyz" >/dev/null 2>&1; then
    echo "rmq-rs is up. Nameserver address for clients: 127.0.0.1:$NAMESRV_PORT"
    echo "  (broker 127.0.0.1:$BROKER_PORT, metrics http://127.0.0.1:$BROKER_METRICS_PORT/metrics, data $DATA_DIR)"
    wait "$BROKER_PID"
    exit $?
  fi
  if ! kill -0 "$BROKER_PID" 2>/dev/null; then
    echo "rmq-broker exited; see $DATA_DIR/broker/broker.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "rmq-broker did not become ready; see $DATA_DIR/broker/broker.log" >&2
exit 1
