#!/usr/bin/env bash
# Checks every command in the runbooks' shell blocks (docs/runbooks/*.md) against what we
# ship: each `rmqctl` command is parsed by the real rmqctl (placeholders filled in, `--help`
# appended, so an unknown subcommand or flag fails); programs must be ones an operator has
# (rmqctl, kubectl, curl, jq, grep, helm; never mqadmin); nothing runs `df`, `curl` or a
# shell in the broker image, which is scratch. Every runbook (not README.md) has the
# sections Symptom, Check, Action, Verify and Escalate in that order, its Check shows a
# command and the expected output, and every `$VAR` its commands use is set in the page.
#
#   scripts/check-runbooks.sh                 # builds and uses target/debug/rmqctl
#   RMQCTL=/path/to/rmqctl scripts/check-runbooks.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${RMQCTL:-}" ]]; then
  (cd "$ROOT" && cargo build --quiet --bin rmqctl)
  RMQCTL="${CARGO_TARGET_DIR:-$ROOT/target}/debug/rmqctl"
fi

ALLOWED=" rmqctl kubectl curl jq grep helm for do done then fi if echo export "
FAILED="$(mktemp)"
trap 'rm -f "$FAILED"' EXIT

fail() {
  echo "FAIL $1: $2" | tee -a "$FAILED" >&2
}

# Lines inside ```sh fences: comments dropped, continuation lines joined, and each line
# split into the commands of its pipelines and lists (outside quotes).
commands_of() {
  awk '/^[[:space:]]*```sh/{inside=1; next} /^[[:space:]]*```/{inside=0} inside' "$1" \
    | awk '{ if (sub(/\\$/, "")) { buf = buf $0 " " } else { print buf $0; buf = "" } }' \
    | awk '{
        out = ""; q = "";
        for (i = 1; i <= length($0); i++) {
          c = substr($0, i, 1);
          if (q == "" && c == "#" && (i == 1 || substr($0, i - 1, 1) ~ /[[:space:]]/)) break;
          if (q == "" && (c == "\047" || c == "\"")) { q = c }
          else if (q != "" && c == q) { q = "" }
          if (q == "" && (c == "|" || c == ";")) { print out; out = ""; continue }
          if (q == "" && c == "&" && substr($0, i + 1, 1) == "&") { print out; out = ""; i++; continue }
          out = out c;
        }
        print out;
      }' \
    | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' || true
}

for doc in "$ROOT"/docs/runbooks/*.md; do
  name="${doc#"$ROOT"/}"
  while IFS= read -r cmd; do
    # `VAR=$(command ...)`: check the command.
    if [[ "$cmd" =~ ^[A-Za-z_][A-Za-z_0-9]*=\$\((.*)\)$ ]]; then
      cmd="${BASH_REMATCH[1]}"
    fi
    prog="${cmd%% *}"
    if [[ "$prog" == mqadmin ]]; then
      fail "$name" "uses mqadmin, not rmqctl: $cmd"
    elif [[ "$ALLOWED" != *" $prog "* ]]; then
      fail "$name" "program '$prog' is not one we ship or document: $cmd"
    fi
    # A `kubectl debug --image=...` container brings its own shell; only exec into the
    # broker container itself is limited to what the scratch image holds.
    if [[ ! "$cmd" =~ kubectl.*\ debug\ .*--image= && "$cmd" =~ --\ +(df|sh|bash|ls|du|curl|wget|cat)( |$) ]]; then
      fail "$name" "the broker image is scratch (no ${BASH_REMATCH[1]}): $cmd"
    fi
    if [[ "$prog" == rmqctl ]]; then
      # Placeholders (<x>, $VARS) become "1", which every argument accepts; quotes go.
      args="$(sed -e 's/<[^>]*>/1/g' -e 's/\$[A-Za-z_][A-Za-z_0-9]*/1/g' -e "s/['\"]//g" <<<"${cmd#rmqctl}")"
      # shellcheck disable=SC2086
      if ! out="$("$RMQCTL" $args --help 2>&1)"; then
        fail "$name" "rmqctl does not accept: rmqctl$args"$'\n'"$out"
      fi
    fi
  done < <(commands_of "$doc")
done

# The raw text of a page's ```sh blocks.
sh_blocks() {
  awk '/^[[:space:]]*```sh/{inside=1; next} /^[[:space:]]*```/{inside=0} inside' "$1"
}

SECTIONS=(Symptom Check Action Verify Escalate)
for doc in "$ROOT"/docs/runbooks/*.md; do
  name="${doc#"$ROOT"/}"
  [[ "$(basename "$doc")" == README.md ]] && continue
  previous=0
  for section in "${SECTIONS[@]}"; do
    line="$(grep -n -m1 -E "^## $section\b" "$doc" | cut -d: -f1 || true)"
    if [[ -z "$line" ]]; then
      fail "$name" "has no '## $section' section (runbooks: ${SECTIONS[*]})"
    elif (( line < previous )); then
      fail "$name" "'## $section' comes before a section that should precede it (${SECTIONS[*]})"
    else
      previous=$line
    fi
  done
  # The Check section: from its heading to the next one.
  check="$(awk '/^## /{inside = ($0 ~ /^## Check/)} inside' "$doc")"
  if ! grep -q '```sh' <<<"$check" || ! grep -q 'Expected' <<<"$check"; then
    fail "$name" "'## Check' needs a command (a sh block) and the expected output ('Expected ...')"
  fi
  # Variables: set with NAME=..., export NAME=..., or a for loop, somewhere in the page.
  blocks="$(sh_blocks "$doc")"
  for var in $(grep -oE '\$\{?[A-Z][A-Z_0-9]*' <<<"$blocks" | tr -d '${' | sort -u); do
    if ! grep -qE "(^|[[:space:];(])$var=|for $var in" <<<"$blocks"; then
      fail "$name" "uses \$$var but never sets it (define it at the top of the page)"
    fi
  done
done

if [[ -s "$FAILED" ]]; then
  echo "runbook check failed: $(grep -c "^FAIL" "$FAILED") problem(s)" >&2
  exit 1
fi
echo "runbook commands OK"
