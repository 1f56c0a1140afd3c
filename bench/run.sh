#!/usr/bin/env bash
# Benchmarks a local standalone cluster (one rmq-nameserver, one rmq-broker, data under a
# fresh temp dir) with rmq-bench and writes a JSON and a Markdown report.
#
#   bench/run.sh                                  # release build, every scenario, 15 s each
#   bench/run.sh --duration 10 --scenarios async-max,batch
#   BIN_DIR=target/release bench/run.sh --no-build
#
# Scenarios (1 KiB bodies):
#   async-max    async sends, maximum throughput, ASYNC_FLUSH
#   fixed-rate   open-loop fixed rate (--rate, default 5000 msg/s), latency from the scheduled send time
#   sync-flush   async sends, maximum throughput, broker restarted with SYNC_FLUSH
#   batch        SEND_BATCH_MESSAGE of 32 messages, maximum throughput
#   catch-up     broker restarted, then one consumer reads everything async-max wrote
#
# Figures depend on the machine and on what else runs on it; keep runs short and compare
# runs made on the same machine.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION=15
WARMUP=3
RATE=5000
SCENARIOS="async-max,fixed-rate,sync-flush,batch,catch-up"
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
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

[[ "$BUILD" == 1 ]] || BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
BINS=(rmq-nameserver rmq-broker rmq-bench rmqctl)
source "$(dirname "$0")/lib.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-bench.XXXXXX")"
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM
start_nameserver "$WORK" ""

# broker_up FLUSH_DISK_TYPE: (re)starts the broker on the same store and waits until the
# nameserver routes to it.
broker_up() {
  start_broker "$WORK" "flushDiskType=$1"
  for _ in $(seq 1 300); do
    "$BIN_DIR/rmqctl" -n "$NS" -o json cluster list 2>/dev/null |
      jq -e --arg addr "127.0.0.1:$BROKER_PORT" 'tojson | contains($addr)' >/dev/null && return 0
    sleep 0.1
  done
  echo "rmq-broker did not register with the nameserver" >&2; exit 1
}

RESULTS="$WORK/results.jsonl"
: > "$RESULTS"

# bench NAME DESCRIPTION rmq-bench-args...: runs one scenario and appends its summary.
bench() {
  local name="$1" desc="$2"; shift 2
  echo "== $name: $desc" >&2
  "$BIN_DIR/rmq-bench" -n "$NS" --json --report-interval-s 5 "$@" > "$WORK/$name.json"
  jq -c --arg name "$name" --arg desc "$desc" '{scenario: $name, description: $desc} + .' "$WORK/$name.json" >> "$RESULTS"
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
