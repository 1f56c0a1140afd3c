#!/usr/bin/env bash
# Runs every ```sh block of the README and the docs verbatim, in order, the way a newcomer
# would on a fresh clone, and fails on the first command that fails.
#
# A fresh clone: the tracked files (as they are in the working tree) are copied into a
# temporary directory, without ./data or target/, and every block runs there, so
# `scripts/run-local.sh` keeps its data under that temporary folder. The binaries are the
# debug ones the README's test command builds (`$CARGO_TARGET_DIR/debug` or target/debug):
# nothing is built here. The README puts them on PATH itself (that line is checked like
# any other); the other pages start from that PATH.
#
# Each page runs as one `bash -e` script (its blocks in order, so what one block exports
# the next one sees). The fence's info string says how a block is treated
# (CONTRIBUTING.md, "Command blocks in the docs"):
#   ```sh             run
#   ```sh background  started in the background; the next block runs once it printed a
#                     line containing "is up"; stopped (SIGTERM) when the page is done
#   ```sh k8s         needs a Kubernetes cluster (kind): not run here
#   ```sh no-check    run by hand only (the test suite, benchmarks, long-running commands)
# Any other word after `sh` is an error, so a typo cannot silently skip a block.
#
#   scripts/check-doc-commands.sh                 # README.md, CONTRIBUTING.md, docs/**/*.md, charts/*/README.md
#   scripts/check-doc-commands.sh docs/foo.md     # only these pages
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN_DIR="${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/debug}"
READY_WITHIN_S="${READY_WITHIN_S:-60}"

missing=()
for bin in rmq-nameserver rmq-broker rmqctl rmq-bench; do
  [[ -x "$BIN_DIR/$bin" ]] || missing+=("$bin")
done
if (( ${#missing[@]} > 0 )); then
  echo "check-doc-commands: ${missing[*]} not found in $BIN_DIR; build them first:" >&2
  echo "  cargo build --workspace --bins   (or set BIN_DIR / CARGO_TARGET_DIR)" >&2
  exit 2
fi

cd "$ROOT"
if (( $# > 0 )); then
  pages=("$@")
else
  pages=(README.md CONTRIBUTING.md)
  while IFS= read -r page; do pages+=("$page"); done < <(
    git ls-files 'docs/*.md' 'docs/**/*.md' 'charts/*/README.md' | sort -u
  )
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rmq-doc-check.XXXXXX")"
BACKGROUND=()
# Stops what `background` blocks started (their whole process group), then removes the
# temporary clone.
stop_background() {
  local pgid
  for pgid in "${BACKGROUND[@]}"; do
    kill -TERM -- "-$pgid" 2>/dev/null || true
  done
  for pgid in "${BACKGROUND[@]}"; do
    for _ in $(seq 1 100); do
      kill -0 -- "-$pgid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null || true
  done
  BACKGROUND=()
}
cleanup() {
  stop_background
  rm -rf "$WORK"
}
trap cleanup EXIT

CLONE="$WORK/rmq-rs"
mkdir -p "$CLONE"
git ls-files -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$CLONE" -xf -
# Without CARGO_TARGET_DIR the README finds the binaries in ./target/debug, where the test
# command built them: the clone's target/ is that build.
if [[ -z "${CARGO_TARGET_DIR:-}" ]]; then
  ln -s "$(cd "$BIN_DIR/.." && pwd)" "$CLONE/target"
fi

# Splits a page into its blocks: one file per ```sh block, named NNN.<mode>, with the
# page's line number on the first line (a comment), and prints "<file> <mode> <line>".
split_blocks() {
  local page="$1" out="$2"
  awk -v out="$out" '
    /^[[:space:]]*```/ {
      if (inside) { inside = 0; close(file); next }
      if (other) { other = 0; next }
      info = $0; sub(/^[[:space:]]*```/, "", info)
      n = split(info, words, /[[:space:]]+/)
      if (words[1] != "sh") { other = 1; next }
      mode = (n >= 2 && words[2] != "") ? words[2] : "run"
      count++; file = sprintf("%s/%03d.%s", out, count, mode)
      printf ": %s line %d\n", FILENAME, NR > file
      print file, mode, NR
      inside = 1; next
    }
    inside { print > file }
  ' "$page"
}

failures=0
ran=0
skipped_k8s=0
skipped_manual=0
for page in "${pages[@]}"; do
  [[ -f "$page" ]] || { echo "check-doc-commands: no such page: $page" >&2; exit 2; }
  blocks="$WORK/blocks/$page"
  mkdir -p "$blocks"
  script="$WORK/run.sh"
  : > "$script"
  page_runs=0
  while read -r file mode line; do
    case "$mode" in
      run)
        { cat "$file"; echo; } >> "$script"
        page_runs=$((page_runs + 1))
        ;;
      background)
        # Started in its own process group so the whole tree stops with it.
        echo "setsid bash -e '$file' > '$file.log' 2>&1 < /dev/null &" >> "$script"
        echo "wait_up \$! '$file.log' '$page:$line'" >> "$script"
        page_runs=$((page_runs + 1))
        ;;
      k8s) skipped_k8s=$((skipped_k8s + 1)) ;;
      no-check) skipped_manual=$((skipped_manual + 1)) ;;
      *)
        echo "FAIL $page:$line: unknown block marker '$mode' (sh, sh background, sh k8s, sh no-check)" >&2
        failures=$((failures + 1))
        ;;
    esac
  done < <(split_blocks "$page" "$blocks")
  (( page_runs > 0 )) || continue

  echo "== $page ($page_runs block(s))"
  : > "$WORK/background.pids"
  # What a page's script starts with: waiting for a background block to be up.
  cat - "$script" > "$script.tmp" <<EOF
wait_up() {
  { set +x; } 2>/dev/null
  echo "\$1" >> "$WORK/background.pids"
  for _ in \$(seq 1 $((READY_WITHIN_S * 10))); do
    grep -q 'is up' "\$2" && { set -x; return 0; }
    if ! kill -0 "\$1" 2>/dev/null; then
      echo "\$3: the background block exited before it was up:" >&2; sed 's/^/  | /' "\$2" >&2; return 1
    fi
    sleep 0.1
  done
  echo "\$3: the background block was not up within ${READY_WITHIN_S} s:" >&2; sed 's/^/  | /' "\$2" >&2
  return 1
}
EOF
  mv "$script.tmp" "$script"
  # The README says how to get the binaries onto PATH; other pages start from there.
  path="$PATH"
  [[ "$page" == README.md ]] || path="$BIN_DIR:$PATH"
  # Each command is echoed (set -x) so a failure shows which one it was.
  if ! (cd "$CLONE" && PATH="$path" BIN_DIR="$BIN_DIR" PS4='+ ' bash -ex "$script"); then
    echo "FAIL $page: a command above failed (blocks extracted under $blocks)" >&2
    failures=$((failures + 1))
  fi
  ran=$((ran + page_runs))
  while read -r pid; do BACKGROUND+=("$pid"); done < "$WORK/background.pids"
  stop_background
done

echo "doc commands: $ran block(s) run, $skipped_k8s need a cluster (k8s), $skipped_manual run by hand (no-check)"
if (( failures > 0 )); then
  echo "doc command check failed: $failures problem(s)" >&2
  # Keep the extracted blocks and logs to look at.
  trap - EXIT
  stop_background
  echo "blocks and logs kept in $WORK" >&2
  exit 1
fi
echo "doc commands OK"
