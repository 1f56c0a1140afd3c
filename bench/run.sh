#!/usr/bin/env bash
# Benchmarks a local cluster (one rmq-nameserver, one rmq-broker, or a master and a slave for the HA
# scenarios; data under a fresh temp dir) with rmq-bench and writes a JSON and a Markdown report.
#
#   bench/run.sh                                  # release build, the default scenarios, 15 s each
#   bench/run.sh --duration 10 --scenarios async-max,batch
#   BIN_DIR=target/release bench/run.sh --no-build
#
# Scenarios (1 KiB bodies):
#   async-max    async sends, maximum throughput, ASYNC_FLUSH
#   fixed-rate   open-loop fixed rate (--rate, default 5000 msg/s), latency from the scheduled send time
#   sync-flush   async sends (128 in flight), maximum throughput, broker restarted with SYNC_FLUSH
#   sync-flush-1 one sync sender (one in flight) under SYNC_FLUSH: pure durable-send latency
#   batch        SEND_BATCH_MESSAGE of 32 messages, maximum throughput
#   catch-up     broker restarted, then one consumer reads everything async-max wrote
#   async-master-ha  a master (ASYNC_MASTER, ASYNC_FLUSH) with a slave attached on this
#                machine, 64 in flight (8 senders x 8): the baseline of sync-master
#   sync-master  the same pair with the master SYNC_MASTER: a send is acked once the slave
#                acked its offset
#   e2e-latency  open loop at --rate msg/s of 1 KiB while a consumer long-polls every queue;
#                latency from each message's scheduled send time (stamped in its body) to
#                its receipt, one host's clock
#   e2e-latency-filter      the same, the broker filtering: SQL92 (`a = 3`, 10% match; that
#                consumer's row) and a tag consumer (row e2e-latency-filter-tag) at once
#   e2e-latency-idle-groups the same with 100 idle groups parked in long polls on another topic
#   e2e-latency-secure      the same with ACL (every request signed) and TLS on, on a
#                nameserver and broker of their own
#   grpc-produce the remoting baseline and the 5.x gRPC endpoint in one run: 64 sync senders
#                of 1 KiB each way (rows remoting-produce-64 and grpc-produce), ASYNC_FLUSH
#   grpc-receive everything grpc-produce wrote received and acked through the gRPC endpoint
#                (POP: ReceiveMessage of 32 + AckMessage, 8 receivers)
#
# LATENCY=1 adds rmq-bench's --latency histogram of every scenario to its log (stderr).
#
# Figures depend on the machine and on what else runs on it; keep runs short and compare
# runs made on the same machine.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION=15
WARMUP=3
RATE=5000
SCENARIOS="async-max,fixed-rate,sync-flush,sync-flush-1,batch,catch-up"
# Also available: async-master-ha,sync-master,e2e-latency,e2e-latency-filter,
# e2e-latency-idle-groups,e2e-latency-secure,grpc-produce,grpc-receive
OUT_DIR="$ROOT/bench/results"
BUILD=1

while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --scenarios) SCENARIOS="$2"; shift 2 ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

[[ "$BUILD" == 1 ]] || BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
BINS=(rmq-nameserver rmq-broker rmq-bench rmqctl)
source "$(dirname "$0")/lib.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-bench.XXXXXX")"
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM
start_nameserver "$WORK" ""

# broker_up FLUSH_DISK_TYPE [EXTRA]: (re)starts the broker on the same store (EXTRA config
# lines added) and waits until the nameserver routes to it.
broker_up() {
  start_broker "$WORK" "flushDiskType=$1
${2:-}"
  registered
}

# registered [RMQCTL_ARGS...]: waits until the nameserver lists the broker started last.
registered() {
  for _ in $(seq 1 300); do
    "$BIN_DIR/rmqctl" -n "$NS" "$@" -o json cluster list 2>/dev/null |
      jq -e --arg addr "127.0.0.1:$BROKER_PORT" 'tojson | contains($addr)' >/dev/null && return 0
    sleep 0.1
  done
  echo "rmq-broker did not register with the nameserver" >&2; exit 1
}

RESULTS="$WORK/results.jsonl"
: > "$RESULTS"
HIST=()
[[ "${LATENCY:-0}" == 1 ]] && HIST=(--latency)
# Extra rmq-bench arguments (TLS, for e2e-latency-secure).
BENCH_EXTRA=()

# bench NAME DESCRIPTION rmq-bench-args...: runs one scenario and appends its summary.
bench() {
  local name="$1" desc="$2"; shift 2
  echo "== $name: $desc" >&2
  "$BIN_DIR/rmq-bench" -n "$NS" --json "${HIST[@]}" "${BENCH_EXTRA[@]}" --report-interval-s 5 "$@" > "$WORK/$name.json"
  record "$name" "$desc"
}

# record NAME DESCRIPTION: appends $WORK/NAME.json to the results.
record() {
  jq -c --arg name "$1" --arg desc "$2" '{scenario: $name, description: $desc} + .' "$WORK/$1.json" >> "$RESULTS"
}

# ha_pair MASTER_ROLE: stops the standalone broker and starts a master (MASTER_ROLE,
# ASYNC_FLUSH) and a slave on fresh stores under $WORK/ha, then waits until the master
# counts the slave in sync. Sets MASTER_PID and SLAVE_PID.
ha_pair() {
  stop_broker
  rm -rf "$WORK/ha"
  local ha_port; ha_port="$(free_port)"
  local common="flushDiskType=ASYNC_FLUSH
haSecret=bench-ha-secret"
  start_broker "$WORK/ha/master" "$common
brokerRole=$1
haListenPort=$ha_port"
  MASTER_PID=$BROKER_PID
  local master_http=$BROKER_HTTP
  registered
  BROKER_NAME_ID="broker-bench 1" start_broker "$WORK/ha/slave" "$common
brokerRole=SLAVE
haListenPort=$(free_port)
haMasterAddress=127.0.0.1:$ha_port"
  SLAVE_PID=$BROKER_PID
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$master_http/metrics" | grep -Eq '^rocketmq_ha_in_sync_slaves(\{[^}]*\})? 1$' && return 0
    sleep 0.1
  done
  echo "the slave did not get in sync with the master" >&2; exit 1
}

# ha_down: stops the pair and brings the standalone broker back.
ha_down() {
  for p in "$SLAVE_PID" "$MASTER_PID"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK/ha"
  broker_up ASYNC_FLUSH
}

# e2e NAME DESCRIPTION PRODUCER_ARGS [-- CONSUMER ROW ARGS...]: creates topic BenchE2E-NAME,
# starts each consumer (one per "--"-separated group of consumer args; the first one's row
# is NAME, the others' rows NAME-<their --row>), waits a second so their pulls are parked,
# then runs an open-loop producer at $RATE msg/s. The producer's own summary is not a row.
e2e() {
  local name="$1" desc="$2" topic="BenchE2E-$1"; shift 2
  local producer=() consumers=() c
  while [[ $# -gt 0 && "$1" != -- ]]; do producer+=("$1"); shift; done
  echo "== $name: $desc" >&2
  "$BIN_DIR/rmq-bench" -n "$NS" "${BENCH_EXTRA[@]}" --json -d 0 producer -t "$topic" \
    --create-topic-queues 8 -s 1024 --messages 1 > /dev/null
  local pids=() rows=()
  while [[ $# -gt 0 ]]; do
    shift
    local row="$name" args=()
    while [[ $# -gt 0 && "$1" != -- ]]; do
      if [[ "$1" == --row ]]; then row="$name-$2"; shift 2; else args+=("$1"); shift; fi
    done
    "$BIN_DIR/rmq-bench" -n "$NS" --json "${HIST[@]}" "${BENCH_EXTRA[@]}" --report-interval-s 5 \
      -d $((DURATION + 1)) --warmup-s $((WARMUP + 1)) consumer -t "$topic" -g "bench_$row" \
      --from latest "${args[@]}" > "$WORK/$row.json" 2> "$WORK/$row.log" &
    pids+=($!); rows+=("$row")
  done
  sleep 1
  "$BIN_DIR/rmq-bench" -n "$NS" --json "${BENCH_EXTRA[@]}" --report-interval-s 5 -d "$DURATION" --warmup-s "$WARMUP" \
    producer -t "$topic" -s 1024 -c 64 --mode sync --rate "$RATE" "${producer[@]}" > "$WORK/$name-producer.json"
  jq -c '.summary | {producerTps: .tps, sendP50Ms: .latencyMs.p50, sendP99Ms: .latencyMs.p99, errors: .errorsByCode}' "$WORK/$name-producer.json" >&2
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    cat "$WORK/${rows[$i]}.log" >&2
    record "${rows[$i]}" "$desc (consumer ${rows[$i]})"
  done
}

# idle_groups_up N: N groups long-polling (15 s holds) every queue of an idle topic of 2
# queues, in the background until idle_groups_down. Returns once all are parked.
idle_groups_up() {
  "$BIN_DIR/rmq-bench" -n "$NS" --json -d 0 producer -t BenchIdle --create-topic-queues 2 \
    -s 1024 --messages 1 > /dev/null
  "$BIN_DIR/rmq-bench" -n "$NS" --json -d 3600 consumer -t BenchIdle -g bench_idle --groups "$1" \
    --from latest --hold-ms 15000 > /dev/null 2>&1 &
  IDLE_PID=$!
  sleep 2
}

idle_groups_down() { kill -TERM "$IDLE_PID" 2>/dev/null || true; wait "$IDLE_PID" 2>/dev/null || true; }

# secure_up: a nameserver and a broker with TLS enforcing and ACL on, rmq-bench set up to
# use both. secure_down goes back to the plain pair.
secure_up() {
  command -v openssl >/dev/null || { echo "openssl is required for e2e-latency-secure" >&2; exit 1; }
  local d="$WORK/sec"
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' > "$d/san.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/san.ext" -out "$d/server.crt" 2>/dev/null
  openssl pkcs8 -topk8 -nocrypt -in "$d/server.key" -out "$d/server.pk8"
  printf 'accounts:\n  - accessKey: benchAdmin\n    secretKey: benchAdminSecret\n    admin: true\n' > "$d/acl.yml"
  local tls="tls.server.mode=enforcing
tls.server.certPath=$d/server.crt
tls.server.keyPath=$d/server.pk8"
  stop_broker
  PLAIN_NS="$NS"
  start_nameserver "$d" "$tls"
  SECURE_NS_PID="${PIDS[-1]}"
  start_broker "$d" "flushDiskType=ASYNC_FLUSH
$tls
tls.enable=true
tls.client.trustCertPath=$d/ca.crt
aclEnable=true
aclFile=$d/acl.yml"
  export ROCKETMQ_ACCESS_KEY=benchAdmin ROCKETMQ_SECRET_KEY=benchAdminSecret
  BENCH_EXTRA=(--tls --tls-ca "$d/ca.crt")
  registered "${BENCH_EXTRA[@]}"
}

secure_down() {
  stop_broker
  kill -TERM "$SECURE_NS_PID" 2>/dev/null || true; wait "$SECURE_NS_PID" 2>/dev/null || true
  unset ROCKETMQ_ACCESS_KEY ROCKETMQ_SECRET_KEY
  BENCH_EXTRA=()
  NS="$PLAIN_NS"
  rm -rf "$WORK/sec"
  broker_up ASYNC_FLUSH
}

run_scenario() {
  local common=(-d "$DURATION" --warmup-s "$WARMUP")
  case "$1" in
    async-max)
      bench async-max "1 KiB, async (16 senders x 8 in flight), max throughput, ASYNC_FLUSH" \
        "${common[@]}" producer -t BenchAsync --create-topic-queues 8 -s 1024 -c 16 --mode async --inflight 8 ;;
    fixed-rate)
      bench fixed-rate "1 KiB, open loop at $RATE msg/s (64 sync senders), ASYNC_FLUSH" \
        "${common[@]}" producer -t BenchRate --create-topic-queues 8 -s 1024 -c 64 --mode sync --rate "$RATE" ;;
    sync-flush)
      stop_broker; broker_up SYNC_FLUSH
      bench sync-flush "1 KiB, async (16 senders x 8 in flight), max throughput, SYNC_FLUSH (group commit)" \
        "${common[@]}" producer -t BenchSyncFlush --create-topic-queues 8 -s 1024 -c 16 --mode async --inflight 8
      stop_broker; broker_up ASYNC_FLUSH ;;
    sync-flush-1)
      stop_broker; broker_up SYNC_FLUSH
      bench sync-flush-1 "1 KiB, one sync sender (one in flight), SYNC_FLUSH: durable-send latency" \
        "${common[@]}" producer -t BenchSyncFlush1 --create-topic-queues 8 -s 1024 -c 1 --mode sync
      stop_broker; broker_up ASYNC_FLUSH ;;
    async-master-ha|sync-master)
      local role=ASYNC_MASTER
      [[ "$1" == sync-master ]] && role=SYNC_MASTER
      ha_pair "$role"
      bench "$1" "1 KiB, async (8 senders x 8 in flight), max throughput, $role + slave on this host, ASYNC_FLUSH" \
        "${common[@]}" producer -t BenchHa --create-topic-queues 8 -s 1024 -c 8 --mode async --inflight 8
      ha_down ;;
    e2e-latency)
      e2e e2e-latency "1 KiB at $RATE msg/s (64 sync senders), one consumer long-polling 8 queues, ASYNC_FLUSH" -- ;;
    e2e-latency-filter)
      stop_broker; broker_up ASYNC_FLUSH "enablePropertyFilter=true"
      e2e e2e-latency-filter "1 KiB at $RATE msg/s tagged TagA with a=i%10; SQL92 'a = 3' consumer (10% delivered) and a tag 'TagA || TagB' consumer" \
        --tags TagA --property 'a=%10' -- --sql "a = 3" -- --row tag --tags "TagA || TagB"
      stop_broker; broker_up ASYNC_FLUSH ;;
    e2e-latency-idle-groups)
      idle_groups_up 100
      e2e e2e-latency-idle-groups "1 KiB at $RATE msg/s, one consumer, 100 idle groups parked on another topic" --
      idle_groups_down ;;
    e2e-latency-secure)
      secure_up
      e2e e2e-latency-secure "1 KiB at $RATE msg/s, one consumer, ACL (signed requests) and TLS on" --
      secure_down ;;
    grpc-produce)
      "$BIN_DIR/rmq-bench" -n "$NS" --json -d 0 producer -t BenchGrpc --create-topic-queues 8 \
        -s 1024 --messages 1 > /dev/null
      bench remoting-produce-64 "1 KiB, 64 sync senders over the 4.x remoting protocol, ASYNC_FLUSH (baseline of grpc-produce)" \
        "${common[@]}" producer -t BenchGrpc -s 1024 -c 64 --mode sync
      bench grpc-produce "1 KiB, 64 sync senders over the broker's 5.x gRPC endpoint (SendMessage, 4 HTTP/2 connections), ASYNC_FLUSH" \
        "${common[@]}" producer -t BenchGrpc -s 1024 -c 64 --mode sync --grpc "127.0.0.1:$BROKER_GRPC" ;;
    grpc-receive)
      bench grpc-receive "receive + ack everything BenchGrpc holds through the gRPC endpoint (POP, 8 receivers x 32 per call)" \
        -d 600 consumer -t BenchGrpc -g bench_grpc_receive --until-caught-up --pull-batch 32 \
        --grpc "127.0.0.1:$BROKER_GRPC" --grpc-receivers 8 --hold-ms 0 ;;
    batch)
      bench batch "1 KiB, batches of 32 (8 senders x 4 in flight), max throughput, ASYNC_FLUSH" \
        "${common[@]}" producer -t BenchBatch --create-topic-queues 8 -s 1024 -c 8 --mode async --inflight 4 --batch 32 ;;
    catch-up)
      if ! "$BIN_DIR/rmqctl" -n "$NS" topic route -t BenchAsync >/dev/null 2>&1; then
        bench catch-up-fill "fill for catch-up: 1 KiB async, max throughput" \
          -d "$DURATION" producer -t BenchAsync --create-topic-queues 8 -s 1024 -c 16 --mode async --inflight 8
      fi
      stop_broker; broker_up ASYNC_FLUSH
      bench catch-up "consume everything BenchAsync holds from offset 0 after a broker restart (32 per pull, one puller per queue)" \
        -d 600 consumer -t BenchAsync -g bench_catch_up --from earliest --until-caught-up --pull-batch 32 ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
  esac
}

broker_up ASYNC_FLUSH
IFS=',' read -r -a LIST <<< "$SCENARIOS"
for s in "${LIST[@]}"; do run_scenario "$s"; done

mkdir -p "$OUT_DIR"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
JSON="$OUT_DIR/bench-$STAMP.json"
MD="$OUT_DIR/bench-$STAMP.md"
jq -s --arg when "$STAMP" --arg host "$(uname -srm)" --arg cpus "$(nproc)" \
  '{generated: $when, host: $host, cpus: ($cpus|tonumber), scenarios: .}' "$RESULTS" > "$JSON"
{
  echo "# rmq-bench report $STAMP"
  echo
  echo "Host: $(uname -srm), $(nproc) CPUs. Duration ${DURATION}s per scenario (${WARMUP}s warm-up)."
  echo
  echo "| scenario | messages | msg/s | MB/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  # A catch-up read measures how old messages are when read, not a latency: left out.
  jq -r '.scenarios[] | (if .config.untilCaughtUp then {} else (.summary.latencyMs // {}) end) as $l
      | [.scenario, .summary.measuredOk, (.summary.tps|floor),
      ((.summary.mbPerS*100|floor)/100),
      ($l.p50 // "-"), ($l.p90 // "-"), ($l.p99 // "-"), ($l.p999 // "-"), ($l.max // "-"),
      ((.summary.errorsByCode | to_entries | map("\(.key): \(.value)") | join(", ")) | if . == "" then "0" else . end)]
      | "| " + (map(tostring) | join(" | ")) + " |"' "$JSON"
  echo
  jq -r '.scenarios[] | "- **\(.scenario)**: \(.description)"' "$JSON"
} > "$MD"
echo "report: $JSON" >&2
echo "report: $MD" >&2
cat "$MD"
