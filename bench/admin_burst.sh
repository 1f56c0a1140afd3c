#!/usr/bin/env bash
# Another client's send latency during a burst of admin topic creates: one nameserver and
# one broker; `rmq-bench admin-burst` first lets a victim send alone at a fixed rate
# (baseline), then keeps it sending while CONNECTIONS admin connections create TOPICS
# topics, and prints the victim's p50 / p99 / max in both phases plus the creates' rate.
# The victim's latency counts from each send's scheduled time (a stalled broker shows for
# every send it delayed); its service time (send to answer) is printed beside it. A
# measurement, not a test: nothing is asserted.
#
#   bench/admin_burst.sh                          # release build, 2000 topics, 4 connections
#   TOPICS=5000 RATE=500 BIN_DIR=$CARGO_TARGET_DIR/release bench/admin_burst.sh
#
# To measure another build's broker, put its rmq-broker and rmq-nameserver next to this
# build's rmq-bench (older builds have no admin-burst mode) in one directory and pass that
# directory as BIN_DIR.
set -euo pipefail

TOPICS="${TOPICS:-2000}"
CONNECTIONS="${CONNECTIONS:-4}"
RATE="${RATE:-200}"
BASELINE_S="${BASELINE_S:-10}"
BINS=(rmq-nameserver rmq-broker rmq-bench)
source "$(dirname "$0")/lib.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-adminburst.XXXXXX")"
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM
start_cluster "$WORK" "" ""
# The broker registers with the nameserver every few seconds; wait for the first.
for _ in $(seq 1 100); do
  "$BIN_DIR/rmq-bench" -n "$NS" --timeout-ms 1000 admin-burst --topics 0 --baseline-s 0 \
    >/dev/null 2>&1 && break
  sleep 0.1
done

"$BIN_DIR/rmq-bench" -n "$NS" --json admin-burst --topics "$TOPICS" --connections "$CONNECTIONS" \
  --victim-rate "$RATE" --baseline-s "$BASELINE_S" > "$WORK/result.json"
jq -r '
  def row(name; v): "\(name): \(v.count) sends, p50 \(v.p50Ms) ms, p99 \(v.p99Ms) ms, max \(v.maxMs) ms, \(v.errors) errors";
  row("victim, baseline (\(.config.baselineS) s), from schedule"; .baseline.victim),
  row("                         service time"; .baseline.victimService),
  row("victim, during \(.config.topics) creates (\(.burst.elapsedS * 10 | round / 10) s), from schedule"; .burst.victim),
  row("                         service time"; .burst.victimService),
  "creates: \(.burst.creates.count) ok, \(.burst.creates.errors) errors, \(.burst.createsPerS | round)/s, p50 \(.burst.creates.p50Ms) ms, p99 \(.burst.creates.p99Ms) ms, max \(.burst.creates.maxMs) ms"
' "$WORK/result.json"
echo "topics.json: $(wc -c < "$WORK/store/config/topics.json") bytes"
