#!/usr/bin/env bash
# Starts a local rmq-nameserver and rmq-broker with all data under ./data (or $DATA_DIR),
# prints the nameserver address clients should use, and stops both on Ctrl-C / SIGTERM.
#
#   scripts/run-local.sh            # builds release binaries first
#   BIN_DIR=target/debug scripts/run-local.sh   # use already-built binaries
#
# Exits non-zero, saying why on the terminal, when one of its ports is already in use
# (another instance, or anything else) or when a process fails to start (the end of its
# log, where the cause is, is printed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA_DIR="${DATA_DIR:-$ROOT/data}"
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
NAMESRV_METRICS_PORT="${NAMESRV_METRICS_PORT:-9877}"
BROKER_PORT="${BROKER_PORT:-10911}"
BROKER_METRICS_PORT="${BROKER_METRICS_PORT:-5557}"
BROKER_GRPC_PORT="${BROKER_GRPC_PORT:-8081}"

if [[ -z "${BIN_DIR:-}" ]]; then
  (cd "$ROOT" && cargo build --release --bin rmq-nameserver --bin rmq-broker)
  BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
fi

# True when something accepts TCP connections on 127.0.0.1:$1.
listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Refuse to start over another instance: its readiness answers would look like ours.
busy=()
for spec in "nameserver:NAMESRV_PORT:$NAMESRV_PORT" "nameserver metrics:NAMESRV_METRICS_PORT:$NAMESRV_METRICS_PORT" \
            "broker:BROKER_PORT:$BROKER_PORT" "broker HA:BROKER_PORT + 1:$((BROKER_PORT + 1))" \
            "broker metrics:BROKER_METRICS_PORT:$BROKER_METRICS_PORT" \
            "broker gRPC (5.x clients):BROKER_GRPC_PORT:$BROKER_GRPC_PORT"; do
  IFS=: read -r what var port <<<"$spec"
  if listening "$port"; then
    busy+=("  port $port ($what, $var) is already in use")
  fi
done
if (( ${#busy[@]} > 0 )); then
  {
    echo "run-local: cannot start: another process is listening on a port this instance needs:"
    printf '%s\n' "${busy[@]}"
    echo "Is rmq-rs already running (scripts/run-local.sh in another terminal)? Stop it, or choose"
    echo "other ports: NAMESRV_PORT, NAMESRV_METRICS_PORT, BROKER_PORT, BROKER_METRICS_PORT, BROKER_GRPC_PORT."
  } >&2
  exit 1
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
grpcServerPort=$BROKER_GRPC_PORT
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
  set_key "$DATA_DIR/broker/broker.conf" grpcServerPort "$BROKER_GRPC_PORT"
  set_key "$DATA_DIR/broker/broker.conf" namesrvAddr "127.0.0.1:$NAMESRV_PORT"
fi

# Where this run's lines start in each (appended) log.
log_start() {
  echo $(( $(stat -c %s "$1" 2>/dev/null || echo 0) + 1 ))
}
NAMESRV_LOG_START=$(log_start "$DATA_DIR/namesrv/namesrv.log")
BROKER_LOG_START=$(log_start "$DATA_DIR/broker/broker.log")

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

# Which of our processes has exited, if any: prints its name and the end of its log
# (where the cause is) and returns 0.
exited() {
  local pid name dir start log
  for spec in "$BROKER_PID:rmq-broker:broker:$BROKER_LOG_START" "$NAMESRV_PID:rmq-nameserver:namesrv:$NAMESRV_LOG_START"; do
    IFS=: read -r pid name dir start <<<"$spec"
    if ! kill -0 "$pid" 2>/dev/null; then
      log="$DATA_DIR/$dir/$dir.log"
      {
        echo "run-local: $name failed to start. Last lines of $log:"
        tail -c "+$start" "$log" | tail -n 15 | sed 's/^/  | /'
      } >&2
      return 0
    fi
  done
  return 1
}

for _ in $(seq 1 300); do
  if exited; then
    exit 1
  fi
  if curl -fs "http://127.0.0.1:$BROKER_METRICS_PORT/readyz" >/dev/null 2>&1 && registered; then
    # The answers must come from our processes, not from one that took a port meanwhile.
    if exited; then
      exit 1
    fi
    # Start-up warnings (a misspelt config key, say) belong on the terminal, not only in
    # the logs.
    for spec in "namesrv:$NAMESRV_LOG_START" "broker:$BROKER_LOG_START"; do
      IFS=: read -r dir start <<<"$spec"
      warnings=$(tail -c "+$start" "$DATA_DIR/$dir/$dir.log" | grep -E ' (WARN|ERROR) ' | head -n 20 || true)
      if [[ -n "$warnings" ]]; then
        echo "run-local: warnings from $dir at start-up ($DATA_DIR/$dir/$dir.log):" >&2
        sed 's/^/  | /' <<<"$warnings" >&2
      fi
    done
    echo "rmq-rs is up. Nameserver address for clients: 127.0.0.1:$NAMESRV_PORT"
    echo "  (broker 127.0.0.1:$BROKER_PORT registered, metrics http://127.0.0.1:$BROKER_METRICS_PORT/metrics, data $DATA_DIR)"
    wait "$BROKER_PID"
    exit $?
  fi
  sleep 0.1
done
{
  echo "run-local: rmq-broker did not become ready and registered within 30 s. Last lines of $DATA_DIR/broker/broker.log:"
  tail -c "+$BROKER_LOG_START" "$DATA_DIR/broker/broker.log" | tail -n 15 | sed 's/^/  | /'
} >&2
exit 1
