#!/usr/bin/env bash
# Where the CPU of a produce run goes: the broker's and the load generator's CPU per message,
# for the 4.x remoting path and the 5.x gRPC endpoint (1 KiB, 64 sync senders, ASYNC_FLUSH),
# read from /proc over a window in the middle of each run. On a machine where the load
# generator shares the cores with the broker, throughput is bounded by
# cores / (broker µs + client µs per message). A third row sends the same gRPC calls to a
# topic whose message.type (FIFO) refuses them before the store: the cost of the gRPC stack,
# decoding, ACL and session lookup alone (calls/s counts the refused calls).
#
#   BIN_DIR=target/release bench/cpu_split.sh [SECONDS]
set -euo pipefail
BINS=(rmq-nameserver rmq-broker rmq-bench rmqctl)
source "$(dirname "$0")/lib.sh"
WINDOW="${1:-6}"
WORK="$(mktemp -d)"
trap 'stop_all; rm -rf "$WORK"' EXIT
start_cluster "$WORK" "" "flushDiskType=ASYNC_FLUSH"
for t in CpuRemoting CpuGrpc; do
  "$BIN_DIR/rmq-bench" -n "$NS" -d 0 producer -t "$t" --create-topic-queues 8 -s 1024 --messages 1 >/dev/null
done
"$BIN_DIR/rmqctl" topic create -n "$NS" -t CpuGrpcRefused -c BenchCluster --message-type FIFO >/dev/null

# CPU seconds (user + system) a process has used.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

measure() {
  local name="$1"; shift
  "$BIN_DIR/rmq-bench" -n "$NS" -d $((WINDOW + 6)) --warmup-s 2 producer -s 1024 -c 64 --mode sync "$@" \
    >"$WORK/$name.out" 2>&1 &
  local bench=$!
  sleep 4
  local b0 c0 b1 c1
  b0=$(cpu_s "$BROKER_PID"); c0=$(cpu_s "$bench")
  sleep "$WINDOW"
  b1=$(cpu_s "$BROKER_PID"); c1=$(cpu_s "$bench")
  wait "$bench" || true  # a run whose calls are all refused exits non-zero
  local rate
  rate=$(grep -o 'measured: [0-9]* msgs, [0-9.]* msg/s' "$WORK/$name.out" | awk '{print $4}')
  if [[ "$rate" == "0.0" || -z "$rate" ]]; then
    # Every call refused: the calls per second, warm-up included.
    rate=$(awk '/^producer:/ {print ($2 + $4) / $7}' "$WORK/$name.out")
  fi
  awk -v n="$name" -v r="$rate" -v b0="$b0" -v b1="$b1" -v c0="$c0" -v c1="$c1" -v w="$WINDOW" \
    'BEGIN { b = b1 - b0; c = c1 - c0; m = r * w; printf "| %s | %.0f | %.2f | %.2f | %.1f | %.1f |\n", n, r, b / w, c / w, b / m * 1e6, c / m * 1e6 }'
}

echo "| path | calls/s | broker cores | client cores | broker µs/msg | client µs/msg |"
echo "|---|---|---|---|---|---|"
measure remoting -t CpuRemoting
measure grpc -t CpuGrpc --grpc "127.0.0.1:$BROKER_GRPC"
measure grpc-refused-before-store -t CpuGrpcRefused --grpc "127.0.0.1:$BROKER_GRPC"
