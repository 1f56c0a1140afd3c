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
NAMESRV_METRICS_PORT="${NAMESRV_METRICS_PORT:-9877}"
BROKER_PORT="${BROKER_PORT:-10911}"
BROKER_METRICS_PORT="${BROKER_METRICS_PORT:-5557}"

if [[ -z "${BIN_DIR:-}" ]]; then
  (cd "$ROOT" && cargo build --release --bin rmq-nameserver --bin rmq-broker)
  BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
fi

mkdir -p "$DATA_DIR/namesrv" "$DATA_DIR/broker"

cat > "$DATA_DIR/namesrv/namesrv.conf" <<CONF
listenPort=$NAMESRV_PORT
metricsPort=$NAMESRV_METRICS_PORT
kvConfigPath=$DATA_DIR/namesrv/kvConfig.json
CONF

# Sets `key=value` in a properties file: replaces the key's line, or appends one.
set_key() {
  local file="$1" key="$2" value="$3"
  if grep -q "^${key}=" "$file"; then
    sed -i "s|^${key}=.*|${key}=${value}|" "$file"
  else
    echo "${key}=${value}" >> "$file"
  fi
}

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
else
  # Keep the user's edits, but follow port changes made through the environment.
  set_key "$DATA_DIR/broker/broker.conf" listenPort "$BROKER_PORT"
  set_key "$DATA_DIR/broker/broker.conf" metricsPort "$BROKER_METRICS_PORT"
  set_key "$DATA_DIR/broker/broker.conf" namesrvAddr "127.0.0.1:$NAMESRV_PORT"
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

# "Up" means clients can use it: the broker is ready AND the nameserver lists it, so a
# producer started right after this line gets a route.
registered() {
  curl -fs "http://127.0.0.1:$NAMESRV_METRICS_PORT/metrics" 2>/dev/null \
    | grep -Eq '^rmq_namesrv_live_brokers [1-9]'
}

for _ in $(seq 1 300); do
  if curl -fs "http://127.0.0.1:$BROKER_METRICS_PORT/readyz" >/dev/null 2>&1 && registered; then
    echo "rmq-rs is up. Nameserver address for clients: 127.0.0.1:$NAMESRV_PORT"
    echo "  (broker 127.0.0.1:$BROKER_PORT registered, metrics http://127.0.0.1:$BROKER_METRICS_PORT/metrics, data $DATA_DIR)"
    wait "$BROKER_PID"
    exit $?
  fi
  for pid_name in "$BROKER_PID:rmq-broker:broker" "$NAMESRV_PID:rmq-nameserver:namesrv"; do
    IFS=: read -r pid name dir <<<"$pid_name"
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited; see $DATA_DIR/$dir/$dir.log" >&2
      exit 1
    fi
  done
  sleep 0.1
done
echo "rmq-broker did not become ready and registered within 30 s; see $DATA_DIR/broker/broker.log" >&2
exit 1
