#!/usr/bin/env bash
# Builds the four images with the names the chart and the operator default to
# (rmq-rs/rmq-operator, rmq-rs/rmq-nameserver, rmq-rs/rmq-broker, plus the rmq-rs/rmqctl
# toolbox), tagged with the workspace version, for linux/amd64 and/or linux/arm64, then
# loads or pushes them:
#
#   scripts/build-images.sh --check [--kind|--minikube|--push]   # prerequisites only
#   scripts/build-images.sh                       # build for this machine's platform
#   scripts/build-images.sh --kind [cluster]      # ... and kind load docker-image
#   scripts/build-images.sh --minikube            # ... and minikube image load
#   REGISTRY=registry.example:5000 scripts/build-images.sh --platform linux/amd64,linux/arm64 --push
#
# The platform defaults to the Docker daemon's own (arm64 on Apple Silicon, whose kind
# nodes are arm64 too). A platform other than the daemon's builds under QEMU emulation
# (slow; `docker run --privileged --rm tonistiigi/binfmt --install arm64` sets it up).
# Several platforms at once only with --push (a multi-arch manifest list): the local image
# store, and so kind and minikube, take one platform's image.
#
# Needs docker with a reachable daemon and BuildKit's buildx plugin (the Dockerfile uses
# `RUN --mount` caches and TARGETARCH); --kind needs kind, --minikube minikube. Every run
# checks these first and says what is missing and how to get it; `--check` stops there.
#
# With REGISTRY set, images are named $REGISTRY/rmq-rs/...; install the chart with
# --set image.repository=$REGISTRY/rmq-rs/rmq-operator and set the Broker/NameServer
# `image` fields to match.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
PREFIX="${REGISTRY:+$REGISTRY/}rmq-rs"
TARGETS=(operator:rmq-operator nameserver:rmq-nameserver broker:rmq-broker toolbox:rmqctl)

usage() {
  echo "usage: $0 [--check] [--platform linux/amd64|linux/arm64[,...]] [--kind [cluster] | --minikube | --push]" >&2
  exit 2
}

check_only=0 platforms="" action="" kind_cluster=kind
while (( $# > 0 )); do
  case "$1" in
    --check) check_only=1 ;;
    --platform) [[ $# -ge 2 ]] || usage; platforms="$2"; shift ;;
    --platform=*) platforms="${1#--platform=}" ;;
    --kind)
      action=kind
      if [[ $# -ge 2 && "$2" != --* ]]; then kind_cluster="$2"; shift; fi
      ;;
    --minikube) action=minikube ;;
    --push) action=push ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; usage ;;
  esac
  shift
done

# Prerequisites: each problem is one line saying what is missing and how to get it.
problems=()
ok() { echo "  ok   $1"; }
missing() { echo "  MISSING $1" >&2; problems+=("$1"); }

echo "prerequisites:"
if ! command -v docker >/dev/null 2>&1; then
  missing "docker: not installed (https://docs.docker.com/get-docker/; Docker Desktop, Colima or docker-ce)"
else
  # Prints the client's version even when the daemon is down (and then fails).
  ok "docker $(docker version --format '{{.Client.Version}}' 2>/dev/null | head -1 || true)"
  if ! server_arch="$(docker version --format '{{.Server.Arch}}' 2>/dev/null)" || [[ -z "$server_arch" ]]; then
    missing "docker daemon: not reachable ('docker info' fails; start Docker Desktop / colima start / systemctl start docker, or check DOCKER_HOST and that you may use the socket)"
  else
    ok "docker daemon (linux/$server_arch)"
    [[ -n "$platforms" ]] || platforms="linux/$server_arch"
  fi
  if ! buildx="$(docker buildx version 2>/dev/null)"; then
    missing "BuildKit: the docker buildx plugin is not installed (Docker Desktop has it; on Linux install docker-buildx-plugin, or https://github.com/docker/buildx#installing); the Dockerfile needs it for RUN --mount and TARGETARCH"
  else
    ok "buildx ${buildx#github.com/docker/buildx }"
    if [[ -n "${server_arch:-}" ]]; then
      # The builder must offer every platform asked for (a foreign one through QEMU).
      supported="$(docker buildx inspect --bootstrap 2>/dev/null | sed -n 's/^Platforms:[[:space:]]*//p' | tr -d ' ')"
      IFS=, read -r -a wanted <<<"$platforms"
      for p in "${wanted[@]}"; do
        case "$p" in
          linux/amd64|linux/arm64) ;;
          *) missing "platform $p: not supported (linux/amd64 and linux/arm64 are)"; continue ;;
        esac
        if [[ ",$supported," == *",$p,"* || ",$supported," == *",$p/"* ]]; then
          ok "builder platform $p"
        else
          missing "builder platform $p: the buildx builder offers only '${supported:-nothing}' (emulation: docker run --privileged --rm tonistiigi/binfmt --install ${p#linux/})"
        fi
      done
    fi
  fi
fi
if [[ "$platforms" == *,* && "$action" != push ]]; then
  missing "several platforms ($platforms) need --push: the local image store (and kind, minikube) takes one platform's image"
fi
case "$action" in
  kind) command -v kind >/dev/null 2>&1 && ok "kind $(kind version 2>/dev/null | awk '{print $2}')" \
          || missing "kind: not installed (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)" ;;
  minikube) command -v minikube >/dev/null 2>&1 && ok "minikube" \
          || missing "minikube: not installed (https://minikube.sigs.k8s.io/docs/start/)" ;;
esac

if (( ${#problems[@]} > 0 )); then
  echo "build-images: cannot build: ${#problems[@]} prerequisite(s) missing (see MISSING above)" >&2
  exit 1
fi
if (( check_only )); then
  echo "build-images: all prerequisites present (platform ${platforms})"
  exit 0
fi

if [[ "$action" == push ]]; then output=--push; else output=--load; fi
images=()
for t in "${TARGETS[@]}"; do
  target="${t%%:*}" name="${t#*:}"
  image="$PREFIX/$name:$VERSION"
  docker buildx build --platform "$platforms" --target "$target" -t "$image" "$output" "$ROOT"
  images+=("$image")
done

case "$action" in
  kind) for i in "${images[@]}"; do kind load docker-image "$i" --name "$kind_cluster"; done ;;
  minikube) for i in "${images[@]}"; do minikube image load "$i"; done ;;
esac
printf '%s\n' "${images[@]}"
