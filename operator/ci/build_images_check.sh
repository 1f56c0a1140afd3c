#!/usr/bin/env bash
# Tests scripts/build-images.sh's prerequisite check (`--check`) without Docker: a stub
# `docker` plays a machine without docker, one without a daemon or buildx, one whose
# builder lacks a platform, and a complete one; each case asserts the exit code and the
# line that tells the user what is missing. Called by operator/ci.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
script="$root/scripts/build-images.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Only the tools the script uses, so a real docker, kind or minikube on this machine
# cannot answer instead of the stub.
tools="$work/tools"
mkdir -p "$tools"
for t in bash sed head tr awk cat dirname env; do
  ln -s "$(command -v "$t")" "$tools/$t"
done
stub="$work/stub"
mkdir -p "$stub"
cat > "$stub/docker" <<'EOF'
#!/usr/bin/env bash
# STUB_DAEMON, STUB_BUILDX: 1 or 0; STUB_ARCH: the daemon's arch; STUB_PLATFORMS: the
# builder's platform list as `buildx inspect` prints it.
case "$1" in
  version)
    if [[ "$*" == *Server* ]]; then
      [[ "$STUB_DAEMON" == 1 ]] || { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
      echo "${STUB_ARCH:-amd64}"
    else
      echo 28.0.0
      [[ "$STUB_DAEMON" == 1 ]]
    fi
    ;;
  buildx)
    [[ "$STUB_BUILDX" == 1 ]] || { echo "docker: unknown command: docker buildx" >&2; exit 1; }
    case "$2" in
      version) echo "github.com/docker/buildx v0.20.0 0000000" ;;
      inspect) printf 'Name:   default\nPlatforms: %s\n' "$STUB_PLATFORMS" ;;
      *) echo "stub docker: nothing is built in this test" >&2; exit 1 ;;
    esac
    ;;
  *) echo "stub docker: unexpected $*" >&2; exit 1 ;;
esac
EOF
cat > "$stub/kind" <<'EOF'
#!/usr/bin/env bash
echo "kind v0.27.0 go1.23 linux/amd64"
EOF
chmod +x "$stub/docker" "$stub/kind"

failed=0
# expect <name> <exit code> <text the output must hold> <PATH> <env...> -- <args...>
expect() {
  local name="$1" code="$2" want="$3" path="$4"
  shift 4
  local envs=()
  while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
  shift
  local out rc=0
  out="$(env -i PATH="$path" "${envs[@]}" "$tools/bash" "$script" "$@" 2>&1)" || rc=$?
  if [[ "$rc" != "$code" || "$out" != *"$want"* ]]; then
    echo "FAIL build-images --check, $name: exit $rc (want $code), output lacks '$want':"
    sed 's/^/  | /' <<<"$out"
    failed=1
  else
    echo "  ok   $name"
  fi
}

echo "== build-images.sh --check"
expect "no docker" 1 "MISSING docker: not installed" "$tools" -- --check
expect "no daemon, no buildx" 1 "MISSING docker daemon: not reachable" "$stub:$tools" \
  STUB_DAEMON=0 STUB_BUILDX=0 -- --check
expect "no buildx" 1 "the docker buildx plugin is not installed" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=0 -- --check
expect "complete, native platform" 0 "all prerequisites present (platform linux/arm64)" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=1 STUB_ARCH=arm64 "STUB_PLATFORMS=linux/arm64, linux/amd64" -- --check
expect "builder without arm64" 1 "tonistiigi/binfmt --install arm64" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=1 STUB_ARCH=amd64 "STUB_PLATFORMS=linux/amd64, linux/amd64/v2, linux/386" \
  -- --check --platform linux/arm64
expect "two platforms into kind" 1 "need --push" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=1 "STUB_PLATFORMS=linux/amd64, linux/arm64" \
  -- --check --platform linux/amd64,linux/arm64 --kind
expect "two platforms pushed" 0 "all prerequisites present (platform linux/amd64,linux/arm64)" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=1 "STUB_PLATFORMS=linux/amd64, linux/arm64" \
  -- --check --platform linux/amd64,linux/arm64 --push
expect "kind asked for, not installed" 1 "MISSING kind: not installed" "$tools" -- --check --kind
expect "unknown platform" 1 "platform linux/s390x: not supported" "$stub:$tools" \
  STUB_DAEMON=1 STUB_BUILDX=1 "STUB_PLATFORMS=linux/amd64" -- --check --platform linux/s390x

exit "$failed"
