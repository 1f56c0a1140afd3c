#!/usr/bin/env bash
# Same-run A/B of the store's criterion benches (append, sync_flush, recovery) between two
# revisions: each revision is exported (git archive) into its own directory under
# $HOME/.cache/store-ab and built there with its own target dir, then the benches run
# interleaved A, B, A, B, ... so that drift of a shared machine hits both sides alike.
# Prints, per benchmark, the median of A's and of B's per-run medians and the ratio B/A
# (a time: above 1 means B is slower).
#
#   bench/store_ab.sh                          # A = main, B = HEAD, 2 rounds
#   bench/store_ab.sh --a ec5f17e --b HEAD --rounds 3 --benches append,sync_flush
#   A_TARGET=/tmp/a-target B_TARGET=/tmp/b-target bench/store_ab.sh
#
# Bench files go to $STORE_BENCH_DIR as the benches document (default /dev/shm).
# Options after `--` go to every criterion run (default: --warm-up-time 2 --measurement-time 5).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REV_A=main
REV_B=HEAD
ROUNDS=2
BENCHES="append,sync_flush,recovery"
CRITERION_ARGS=(--warm-up-time 2 --measurement-time 5)
WORK="${STORE_AB_DIR:-$HOME/.cache/store-ab}"
A_TARGET="${A_TARGET:-$HOME/.cache/store-ab-a-target}"
B_TARGET="${B_TARGET:-$HOME/.cache/store-ab-b-target}"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --a) REV_A="$2"; shift 2 ;;
    --b) REV_B="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --benches) BENCHES="$2"; shift 2 ;;
    --) shift; CRITERION_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

command -v python3 >/dev/null || { echo "python3 is required to parse the outputs" >&2; exit 1; }
# Criterion prints "µs".
export PYTHONIOENCODING=utf-8

# Exports revision $1 into $WORK/$2 (fresh) and prints the resolved commit.
export_rev() {
  local commit
  commit="$(git -C "$ROOT" rev-parse --verify "$1^{commit}")"
  # An unchanged export is kept, so a re-run does not rebuild the workspace crates.
  if [[ "$(cat "$WORK/$2.commit" 2>/dev/null)" != "$commit" ]]; then
    rm -rf "${WORK:?}/$2"
    mkdir -p "$WORK/$2"
    git -C "$ROOT" archive "$commit" | tar -x -C "$WORK/$2"
    echo "$commit" >"$WORK/$2.commit"
  fi
  echo "$commit"
}

# Builds the release benches of side $1 (dir name) with target dir $2, copies the
# executables to $WORK/bin-$1 and prints "name<TAB>executable" lines. Cargo names a
# workspace crate's artifacts the same whatever directory the workspace sits in, so with
# one target dir for both sides the second build would reuse the first one's binaries:
# the store crate is cleaned first to force its rebuild from this side's sources.
build_side() {
  if [[ "$(cat "$WORK/bin-$1/.commit" 2>/dev/null)" == "$3" ]]; then
    for name in ${BENCHES//,/ }; do printf '%s\t%s\n' "$name" "$WORK/bin-$1/$name"; done
    return
  fi
  (cd "$WORK/$1" && CARGO_TARGET_DIR="$2" cargo clean --release -p rmq-store >&2)
  rm -rf "${WORK:?}/bin-$1"
  mkdir -p "$WORK/bin-$1"
  (cd "$WORK/$1" && CARGO_TARGET_DIR="$2" cargo bench -p rmq-store --no-run --message-format=json \
      $(printf -- '--bench %s ' ${BENCHES//,/ })) |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])
' | while IFS=$'\t' read -r name exe; do
      cp "$exe" "$WORK/bin-$1/$name"
      printf '%s\t%s\n' "$name" "$WORK/bin-$1/$name"
    done
  echo "$3" >"$WORK/bin-$1/.commit"
}

COMMIT_A="$(export_rev "$REV_A" a)"
COMMIT_B="$(export_rev "$REV_B" b)"
echo "A = $REV_A ($COMMIT_A), B = $REV_B ($COMMIT_B)" >&2
echo "building A (target $A_TARGET) ..." >&2
EXES_A="$(build_side a "$A_TARGET" "$COMMIT_A")"
echo "building B (target $B_TARGET) ..." >&2
EXES_B="$(build_side b "$B_TARGET" "$COMMIT_B")"

exe_of() { awk -F'\t' -v n="$2" '$1 == n { print $2 }' <<<"$1"; }

LOG="$WORK/runs.log"
: >"$LOG"
for round in $(seq 1 "$ROUNDS"); do
  for bench in ${BENCHES//,/ }; do
    for side in A B; do
      if [[ $side == A ]]; then exes="$EXES_A"; else exes="$EXES_B"; fi
      exe="$(exe_of "$exes" "$bench")"
      [[ -x "$exe" ]] || { echo "no $bench bench executable for $side" >&2; exit 1; }
      echo "round $round: $bench $side" >&2
      # Criterion's own history is per side, so its "change" lines compare like with like.
      out="$(cd "$WORK/$(tr AB ab <<<"$side")/store" &&
        CRITERION_HOME="$WORK/criterion-$side" "$exe" --bench --noplot "${CRITERION_ARGS[@]}" 2>&1)"
      printf '%s\n' "$out" | sed "s/^/[$bench $side] /" >>"$LOG"
      # "<id>  time:   [low median high]" (the id may sit on the line before).
      printf '%s\n' "$out" | python3 -c '
import re, sys
side, prev = sys.argv[1], ""
unit = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
for line in sys.stdin:
    m = re.match(r"^(\S*)\s*time:\s*\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
    if m:
        name = m.group(1) or prev
        print(f"{name}\t{side}\t{float(m.group(2)) * unit[m.group(3)]}")
    elif line.strip() and not line.startswith(" "):
        prev = line.strip()
' "$side" >>"$WORK/medians.tsv.$round"
    done
  done
done

cat "$WORK"/medians.tsv.* | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    name, side, ns = line.rstrip("\n").split("\t")
    runs.setdefault(name, {"A": [], "B": []})[side].append(float(ns))
def fmt(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.1f} ns"
print("| bench | A median | B median | B/A | runs |")
print("|---|---|---|---|---|")
for name, s in sorted(runs.items()):
    if not s["A"] or not s["B"]:
        continue
    a, b = statistics.median(s["A"]), statistics.median(s["B"])
    runs_ab = "%d+%d" % (len(s["A"]), len(s["B"]))
    print(f"| `{name}` | {fmt(a)} | {fmt(b)} | {b / a:.3f} | {runs_ab} |")
'
rm -f "$WORK"/medians.tsv.*
echo "full criterion output: $LOG" >&2
