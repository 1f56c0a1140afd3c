#!/usr/bin/env bash
# ACL + TLS cost on the produce path: the same release build, one nameserver and
# one broker per configuration, 1 KiB sync sends from 64 senders, rounds alternating
#   plain   no ACL, no TLS
#   acl     aclEnable=true only (every send signed and checked)
#   tls     tls.server.mode=enforcing only
#   secure  both
# so that drift on a noisy machine hits all alike. MODES picks them (default "plain
# secure"; plain always runs first in a round). Prints each round and each mode's mean
# against plain's, with the CPU each message cost the broker and the client (their CPU
# time over the messages sent, warm-up included; the client's needs /usr/bin/time), the
# figure that noise disturbs least.
#
#   bench/security.sh                      # release build, 3 rounds of 10 s each
#   ROUNDS=5 DURATION=15 BIN_DIR=$CARGO_TARGET_DIR/release bench/security.sh
#   MODES="plain acl tls secure" bench/security.sh      # the two costs apart
#   BROKER_CPUS=0 BENCH_CPUS=1 bench/security.sh        # broker and client on separate
#                                                       # cores (taskset), as if the
#                                                       # client ran on another machine
set -euo pipefail

ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-10}"
SENDERS="${SENDERS:-64}"
BINS=(rmq-nameserver rmq-broker rmq-bench)
source "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || { echo "openssl is required to make the test certificates" >&2; exit 1; }

MODES="${MODES:-plain secure}"
pin() { [[ -n "$1" ]] && echo taskset -c "$1" || echo env; }
read -r -a BROKER_PIN <<<"$(pin "${BROKER_CPUS:-}")"
read -r -a BENCH_PIN <<<"$(pin "${BENCH_CPUS:-}")"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-secbench.XXXXXX")"
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM

# A CA and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
  -keyout "$WORK/ca.key" -out "$WORK/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$WORK/san.ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -CAcreateserial \
  -days 2 -extfile "$WORK/san.ext" -out "$WORK/server.crt" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$WORK/server.key" -out "$WORK/server.pk8"

cat > "$WORK/plain_acl.yml" <<ACL
accounts:
  - accessKey: benchAdmin
    secretKey: benchAdminSecret
    admin: true
ACL

# start MODE: a fresh nameserver and broker configured for MODE, with data in ROUND_DIR;
# sets NS.
start() {
  local tls_ns="" tls_broker="" acl=""
  if [[ "$1" == secure || "$1" == tls ]]; then
    tls_ns="tls.server.mode=enforcing
tls.server.certPath=$WORK/server.crt
tls.server.keyPath=$WORK/server.pk8"
    tls_broker="$tls_ns
tls.enable=true
tls.client.trustCertPath=$WORK/ca.crt"
  fi
  if [[ "$1" == secure || "$1" == acl ]]; then
    acl="aclEnable=true
aclFile=$WORK/plain_acl.yml"
  fi
  ROUND_DIR="$WORK/$1-$RANDOM"
  start_cluster "$ROUND_DIR" "$tls_ns" "$acl
$tls_broker" "${BROKER_PIN[@]}"
}

# cpu_ticks PID: user + system clock ticks the process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK="$(getconf CLK_TCK)"

# run MODE: one round; prints "msg/s broker-µs-per-message client-µs-per-message" (the
# last is "-" without /usr/bin/time).
run() {
  start "$1"
  local broker_pid="$BROKER_PID" timer=() t0 t1
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -o "$WORK/cpu" -f "%U %S")
  rm -f "$WORK/cpu"
  local extra=()
  if [[ "$1" == secure || "$1" == tls ]]; then
    extra=(--tls --tls-ca "$WORK/ca.crt")
  fi
  if [[ "$1" == secure || "$1" == acl ]]; then
    export ROCKETMQ_ACCESS_KEY=benchAdmin ROCKETMQ_SECRET_KEY=benchAdminSecret
  else
    unset ROCKETMQ_ACCESS_KEY ROCKETMQ_SECRET_KEY
  fi
  sleep 1
  t0="$(cpu_ticks "$broker_pid")"
  "${timer[@]}" "${BENCH_PIN[@]}" "$BIN_DIR/rmq-bench" -n "$NS" --json "${extra[@]}" \
    -d "$DURATION" --warmup-s 2 \
    producer -t BenchSec --create-topic-queues 8 -s 1024 -c "$SENDERS" --mode sync \
    > "$WORK/out.json"
  t1="$(cpu_ticks "$broker_pid")"
  stop_all
  local errors
  errors="$(jq -r '.summary.measuredErrors' "$WORK/out.json")"
  [[ "$errors" == 0 ]] || {
    echo "round ($1) had $errors errors: $(jq -c .summary.errorsByCode "$WORK/out.json")" >&2
    tail -5 "$ROUND_DIR/broker.log" >&2
    exit 1
  }
  # Each round's store holds gigabytes: kept, a long run fills the disk until the broker
  # refuses writes (SERVICE_NOT_AVAILABLE above diskMaxUsedSpaceRatio).
  rm -rf "$ROUND_DIR"
  local sent client="-"
  sent="$(jq -r '.summary.totalOk' "$WORK/out.json")"
  if [[ -s "$WORK/cpu" ]]; then
    client="$(awk -v n="$sent" '{printf "%.2f", ($1 + $2) * 1e6 / n}' "$WORK/cpu")"
  fi
  printf '%s %s %s\n' "$(jq -r '.summary.tps' "$WORK/out.json")" \
    "$(awk -v t=$((t1 - t0)) -v hz="$TICK" -v n="$sent" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')" \
    "$client"
}

# plain first, then the other modes asked for, each once.
ORDER=(plain)
for m in $MODES; do
  [[ " ${ORDER[*]} " == *" $m "* ]] || ORDER+=("$m")
done
declare -A RESULTS
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for m in "${ORDER[@]}"; do
    out="$(run "$m")"
    read -r tps broker_us client_us <<<"$out"
    RESULTS[$m]="${RESULTS[$m]:-} $tps/$broker_us/$client_us"
    line="$line $(printf '%s %.0f msg/s (CPU/msg: broker %s µs, client %s µs);' \
      "$m" "$tps" "$broker_us" "$client_us")"
  done
  echo "$line"
done
args=()
for m in "${ORDER[@]}"; do args+=("$m=${RESULTS[$m]}"); done
python3 - "${args[@]}" <<'PY'
import sys
def mean(xs):
    xs = [float(x) for x in xs if x != "-"]
    return sum(xs) / len(xs) if xs else None
def us(x):
    return "-" if x is None else f"{x:.2f}"
means = {}
for arg in sys.argv[1:]:
    mode, values = arg.split("=", 1)
    rounds = [v.split("/") for v in values.split()]
    means[mode] = [mean(column) for column in zip(*rounds)]
base = means["plain"][0]
for mode, (tps, broker, client) in means.items():
    line = f"mean {mode}: {tps:.0f} msg/s"
    if mode != "plain":
        line += f", ratio {tps / base:.3f} ({(1 - tps / base) * 100:.1f}% lower)"
    print(f"{line}; CPU per message: broker {us(broker)} µs, client {us(client)} µs")
PY
