#!/usr/bin/env bash
# SQL92 pull throughput end to end: one nameserver and one broker
# (enablePropertyFilter=true) hold a backlog of N messages whose property `a` is i mod 10;
# rounds then alternate two catch-up consumers that read every queue from offset 0 through
# PULL_MESSAGE, one unfiltered and one with `a = 3 AND region IS NOT NULL` (10% match).
# Both scan all N messages, so N / elapsed is each one's rate in messages *scanned* per
# second; the script prints each round and the ratio of the means (target: filtered at
# least 50% of unfiltered).
#
#   bench/sql92.sh                                   # release build, N = 200000, 3 rounds
#   MESSAGES=500000 ROUNDS=5 BIN_DIR=$CARGO_TARGET_DIR/release bench/sql92.sh
set -euo pipefail

ROUNDS="${ROUNDS:-3}"
MESSAGES="${MESSAGES:-200000}"
SIZE="${SIZE:-1024}"
QUEUES="${QUEUES:-4}"
SELECTOR="a = 3 AND region IS NOT NULL"
BINS=(rmq-nameserver rmq-broker rmq-bench)
source "$(dirname "$0")/lib.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-sql92bench.XXXXXX")"
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM
start_cluster "$WORK" "" "enablePropertyFilter=true"
sleep 1

echo "filling: $MESSAGES messages of $SIZE B over $QUEUES queues" >&2
"$BIN_DIR/rmq-bench" -n "$NS" --json --warmup-s 0 producer -t BenchSql --create-topic-queues "$QUEUES" \
  -s "$SIZE" -c 32 --mode async --messages "$MESSAGES" --property 'a=%10' --property region=eu \
  > "$WORK/fill.json"
echo "fill: $(jq -c '.summary | {tps, measuredErrors}' "$WORK/fill.json")" >&2

# consume GROUP [SQL]: one catch-up read of the whole backlog; prints "received elapsed_s".
consume() {
  local group="$1"; shift
  local sql=()
  [[ $# -gt 0 ]] && sql=(--sql "$1")
  "$BIN_DIR/rmq-bench" -n "$NS" --json --warmup-s 0 -d 600 consumer -t BenchSql -g "$group" \
    --from earliest --until-caught-up --pull-batch 32 "${sql[@]}" > "$WORK/consume.json"
  jq -r '"\(.summary.totalOk) \(.summary.elapsedS)"' \
    "$WORK/consume.json"
}

declare -a ALL SQL
for r in $(seq 1 "$ROUNDS"); do
  read -r got_all t_all < <(consume "all-$r")
  read -r got_sql t_sql < <(consume "sql-$r" "$SELECTOR")
  [[ "$got_all" == "$MESSAGES" ]] || { echo "unfiltered read $got_all of $MESSAGES" >&2; exit 1; }
  want=$((MESSAGES / 10))
  [[ "$got_sql" == "$want" ]] || { echo "SQL92 read $got_sql, expected $want" >&2; exit 1; }
  a="$(python3 -c "print($MESSAGES / $t_all)")"; s="$(python3 -c "print($MESSAGES / $t_sql)")"
  ALL+=("$a"); SQL+=("$s")
  printf 'round %d: unfiltered %.0f scanned/s (%.2f s), SQL92 10%% %.0f scanned/s (%.2f s, %d delivered)\n' \
    "$r" "$a" "$t_all" "$s" "$t_sql" "$got_sql"
done
python3 - "${ALL[*]}" "${SQL[*]}" <<'PY'
import sys
a = [float(x) for x in sys.argv[1].split()]
s = [float(x) for x in sys.argv[2].split()]
ma, ms = sum(a) / len(a), sum(s) / len(s)
print(f"mean: unfiltered {ma:.0f} scanned/s, SQL92 10% {ms:.0f} scanned/s, ratio {ms / ma:.2f}")
PY
